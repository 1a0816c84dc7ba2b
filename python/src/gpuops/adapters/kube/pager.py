"""Paged LISTs: every item of a list, page by page, with one retry when the list expires.

A LIST is asked for in pages of :data:`PAGE_SIZE` objects (``limit``); each page's head
carries the ``continue`` token of the next one. Two ways to read the pages:

- :meth:`Pager.list_streamed` (node and pod LISTs, the hot path): each page is decoded by
  shape while it arrives (:mod:`.pages` for JSON, :mod:`.proto` for protobuf), and up to
  ``_AHEAD`` pages are asked for at once;
- :meth:`Pager.list_json` (small lists): each page parsed as JSON, then decoded item by item.

Both go through :meth:`Pager._restarting`, the one retry: a list whose continue token expired
while paging (HTTP 410) starts over once; a 404 means the server does not serve that list.
A page that cannot be read is never read as fewer items: the list fails.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import queue
import re
import threading
from collections.abc import Callable, Generator, Iterator, Mapping
from functools import partial
from typing import Any, TypeVar

from gpuops.adapters.kube import items, paths
from gpuops.adapters.kube.calls import ExpiredError, NotFound, call, check_status, parse_json
from gpuops.adapters.kube.paths import PROTOBUF_MEDIA
from gpuops.adapters.kube.shape import page_items
from gpuops.adapters.kube.transport import Transport
from gpuops.core.kubemodel import Node, Pod
from gpuops.errors import OperationFailed

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Objects per LIST page (0: no paging; :mod:`.paths`): a name of this module, which
#: :func:`_page_query` reads, so that a test can page a small list.
PAGE_SIZE = paths.PAGE_SIZE
_AHEAD, _READ_SIZE, _HEAD_READ = paths.PAGES_AHEAD, paths.READ_SIZE, paths.HEAD_READ
#: What a node or pod LIST accepts (:data:`.paths.LIST_ACCEPT`; a test may ask for JSON only).
LIST_ACCEPT = paths.LIST_ACCEPT
#: A page's reader for the media type of its answer.
Readers = Callable[[str], items.PageReader[T]]


def node_reader(resources: frozenset[str] | None, media: str) -> items.PageReader[Node]:
    """The reader of a node LIST page answered as ``media``; each decoder is loaded only
    when an answer needs it (protobuf: upb; JSON: msgspec)."""
    if media == PROTOBUF_MEDIA:
        from gpuops.adapters.kube import proto  # noqa: PLC0415

        return proto.node_reader(resources)
    from gpuops.adapters.kube import pages  # noqa: PLC0415

    return pages.node_reader(resources)


def pod_reader(resources: frozenset[str] | None, media: str) -> items.PageReader[Pod]:
    """The reader of a pod LIST page answered as ``media`` (as :func:`node_reader`)."""
    if media == PROTOBUF_MEDIA:
        from gpuops.adapters.kube import proto  # noqa: PLC0415

        return proto.pod_reader(resources)
    from gpuops.adapters.kube import pages  # noqa: PLC0415

    return pages.pod_reader(resources)


class Pager:
    """Reads the paged LISTs of one API server over its transport."""

    def __init__(self, http: Transport, server: str) -> None:
        self._http = http
        self.server = server

    def list_json(
        self,
        path: str,
        what: str,
        decode: Callable[[Mapping[str, Any]], T],
        query: Mapping[str, str],
    ) -> list[T]:
        """Every item of a paged LIST, each page parsed as JSON and each item decoded with
        ``decode``."""

        def read(raw: bytes) -> tuple[str, list[T]]:
            doc = parse_json(self.server, raw, what)
            # never a verdict from a list that could not be read: no ``items`` is a failure
            items = page_items(doc, f"{what} on {self.server}")
            token = (doc.get("metadata") or {}).get("continue", "")
            return token, [decode(o) for o in items]

        return self._restarting(path, what, partial(self._walk, path, what, read, query))

    def list_streamed(
        self,
        path: str,
        what: str,
        reader: Readers[T],
        checked: Callable[[Mapping[str, Any]], T],
        query: Mapping[str, str],
    ) -> list[T]:
        """Every item of a LIST, decoded while each answer arrives (:mod:`.pages`).

        A page of an unexpected shape is never read as fewer items: the list is read once
        more with ``checked`` (a decoder checking every field it reads), so that the error
        names the item and field; should that read succeed, the list still fails."""
        try:
            return self._restarting(path, what, partial(self._read_list, path, what, reader, query))
        except items.PageError as exc:
            if exc.invalid:
                raise OperationFailed(
                    f"the Kubernetes API at {self.server} sent invalid {exc.encoding} for {what}"
                ) from None
            with _gc_paused():
                self.list_json(path, what, checked, query)  # raises, naming the field
            raise OperationFailed(  # never a verdict from a list we could not read
                f"cannot read {what} on {self.server}: unexpected list layout",
                hint="the answer is not what Kubernetes sends; is the server a Kubernetes API?",
            ) from None

    def _restarting(self, path: str, what: str, read: Callable[[], list[T]]) -> list[T]:
        """``read()``, the whole list; started over once if the list expired while paging
        (HTTP 410). A 404 means this server does not serve the list.

        The cyclic garbage collector is paused meanwhile: decoding makes millions of
        short-lived containers and no cycles, and the collector's passes would cost more
        than the parse."""
        for attempt in (1, 2):
            try:
                with _gc_paused():
                    return read()
            except NotFound:
                raise _list_not_served(what, self.server, path) from None
            except ExpiredError:
                if attempt == 2:
                    raise OperationFailed(
                        f"{what} on {self.server}: the list kept expiring while paging",
                        hint="retry; lower GPUOPS_KUBE_PAGE_SIZE if it persists",
                    ) from None
                log.info("list of %s expired while paging; starting over", what)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- JSON pages, parsed whole -----------------------------------------------------------
    def _walk(
        self,
        path: str,
        what: str,
        read: Callable[[bytes], tuple[str, list[T]]],
        query: Mapping[str, str],
    ) -> list[T]:
        """Every item of a paged LIST, decoded page by page by ``read`` (a page's continue
        token and items)."""
        out: list[T] = []
        with contextlib.closing(self._pages(path, what, query)) as pages:
            for raw in pages:
                token, items = read(raw)
                if token != _continue_token(raw):
                    raise OperationFailed(  # never a verdict from a partial list
                        f"cannot page {what} on {self.server}: unexpected list layout"
                    )
                out.extend(items)
        return out

    def _pages(self, path: str, what: str, query: Mapping[str, str]) -> Generator[bytes]:
        """Raw pages of a LIST. A thread fetches page n+1 (its ``continue`` token is read from
        the head of page n without parsing it) while the caller decodes page n."""
        pages: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=2)
        stop = threading.Event()

        def fetch() -> None:
            token = ""
            try:
                while not stop.is_set():
                    raw = call(
                        self._http,
                        self.server,
                        "GET",
                        path,
                        _page_query(query, token),
                        None,
                        "application/json",
                        what=what,
                    )
                    pages.put(raw)
                    token = _continue_token(raw)
                    if not token:
                        break
            except BaseException as exc:  # handed to the consumer, which re-raises it
                pages.put(exc)
            pages.put(None)

        worker = threading.Thread(target=fetch, name=f"gpuops-list-{what}", daemon=True)
        worker.start()
        try:
            while (item := pages.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            while worker.is_alive():  # unblock a producer waiting on a full queue
                with contextlib.suppress(queue.Empty):
                    pages.get_nowait()
                worker.join(0.05)

    # -- pages decoded while they arrive ----------------------------------------------------
    def _read_list(
        self,
        path: str,
        what: str,
        reader: Readers[T],
        query: Mapping[str, str],
    ) -> list[T]:
        """The pages of a LIST, each decoded while it arrives. Page n+1 is asked for as soon
        as page n's head (which carries the continue token) has arrived, so that the API
        server prepares up to ``_AHEAD`` pages at once instead of idling between them."""
        slots = threading.BoundedSemaphore(_AHEAD)
        lock = threading.Lock()
        stop = threading.Event()
        pages: list[list[T]] = []
        threads: list[threading.Thread] = []
        failures: list[BaseException] = []

        def fetch(index: int, token: str) -> None:
            with slots:
                if stop.is_set():
                    return
                try:
                    pages[index] = self._read_page(
                        path, what, reader, query, token, partial(follow, index + 1)
                    )
                except BaseException as exc:  # handed to the caller, which raises the first
                    with lock:
                        failures.append(exc)
                    stop.set()

        def follow(index: int, token: str) -> None:
            with lock:
                pages.append([])
                threads.append(
                    threading.Thread(
                        target=fetch, args=(index, token), name=f"gpuops-{what}-{index}"
                    )
                )
                thread = threads[-1]
            thread.start()

        follow(0, "")
        # load the protobuf decoder (tens of ms) while the server prepares the answer, not
        # after its head has arrived; should it fail, a protobuf answer's reader says so
        with contextlib.suppress(ImportError):
            from gpuops.adapters.kube import proto  # noqa: F401, PLC0415
        joined = 0
        while True:  # a page starts its successor before it ends: join in order
            with lock:
                if joined == len(threads):
                    break
                thread = threads[joined]
            thread.join()
            joined += 1
        if failures:
            raise failures[0]
        return [item for page in pages for item in page]

    def _read_page(
        self,
        path: str,
        what: str,
        reader: Readers[T],
        query: Mapping[str, str],
        token: str,
        follow: Callable[[str], None],
    ) -> list[T]:
        """One page, decoded while it arrives; ``follow`` gets the next page's continue token
        as soon as the head has brought it."""
        q = _page_query(query, token)
        out: list[T] = []
        followed = False
        target = paths.target(path, q)
        with self._http.stream(target, what=what, accept=LIST_ACCEPT) as (status, media, read):
            page = reader(media)
            if not 200 <= status < 300:
                body = b"".join(iter(partial(read, _READ_SIZE), b""))
                check_status(self.server, status, body, what, path)
            while chunk := read(_READ_SIZE if followed else _HEAD_READ):
                out.extend(page.feed(chunk))
                if not followed and page.head_read:
                    followed = True
                    if page.token:
                        follow(page.token)
            out.extend(page.end())
        if not followed and page.token:  # a layout whose head was only read at its end
            follow(page.token)
        return out


def _page_query(query: Mapping[str, str], token: str) -> dict[str, str]:
    """The query of one page (:func:`.paths.page_query`) in pages of :data:`PAGE_SIZE`."""
    return paths.page_query(query, token, PAGE_SIZE)


_CONTINUE = re.compile(rb'"continue":"([^"\\]*)"')


def _continue_token(raw: bytes) -> str:
    """The ``metadata.continue`` of a raw list page, read from its head (the API server writes
    metadata before items); the consumer double-checks it against the parsed page."""
    end = raw.find(b'"items":')
    m = _CONTINUE.search(raw, 0, end if end >= 0 else len(raw))
    return m.group(1).decode() if m else ""


def _list_not_served(what: str, server: str, path: str) -> OperationFailed:
    return OperationFailed(
        f"{what}: the API at {server} answered 404 Not Found for {path}: "
        "this server does not serve that list",
        hint="check the kubeconfig's server and that it is a Kubernetes API server",
    )


_gc_lock = threading.Lock()
_gc_pausers = 0
_gc_was_enabled = False


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while any thread decodes a LIST."""
    global _gc_pausers, _gc_was_enabled  # noqa: PLW0603 - one collector per process
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()
