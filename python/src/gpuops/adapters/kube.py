"""The Kubernetes API as the headroom logic needs it: fast LISTs, quotas, one workload.

Credentials come from a plain kubeconfig read directly (:mod:`.kubecreds`), else from the
official client's loaders (exec plugins, auth providers, in-cluster); requests go out over a
lean HTTPS transport (:mod:`.kubehttp`) as plain paths with ``limit`` paging and field
selectors. Node and pod LIST pages are decoded by shape (:mod:`.kubepages`: the fields
gpuops reads, nothing else), other answers as JSON picked apart by
:mod:`gpuops.adapters.kubedecode`. Every client or transport exception becomes a
:mod:`gpuops.errors` exception naming the server or object.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import orjson

from gpuops.adapters import kubepages
from gpuops.adapters.kubeconfig import find_source, load_credentials
from gpuops.adapters.kubecreds import Credentials, from_configuration, plain_kubeconfig
from gpuops.adapters.kubedecode import (
    created_at,
    node_from_api_checked,
    pod_from_api,
    pod_from_api_checked,
    quota_limits_from_api,
    scheduled_condition,
    workload_selector,
)
from gpuops.adapters.kubehttp import Transport
from gpuops.adapters.kubepages import PROTOBUF_MAGIC, PROTOBUF_MEDIA
from gpuops.adapters.kubeshape import page_items
from gpuops.core.headroom import QuotaLimit
from gpuops.core.kubeinput import dns_label, dns_subdomain
from gpuops.core.kubemodel import Node, Pod
from gpuops.core.urls import remember_userinfo, without_userinfo
from gpuops.errors import InvalidInput, OperationFailed, Unreachable

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Objects per LIST page (0: no paging). Node and pod pages are asked for ahead (``_AHEAD``
#: at once), so that the API server prepares several pages in parallel: measured in the lab
#: (50,000 pods, the server busy), pages of 500 one at a time 126 s, 3 ahead 70 s, pages of
#: 1,000 3 ahead 34 s (medians of 3). An unpaged LIST must be served within the server's
#: request timeout (60 s by default): on that busy server one was cut off mid-answer.
PAGE_SIZE_ENV = "GPUOPS_KUBE_PAGE_SIZE"
_PAGE_SIZE_DEFAULT, _PAGE_SIZE_MAX = 1000, 100_000


def _page_size(value: str | None) -> tuple[int, str | None]:
    """``$GPUOPS_KUBE_PAGE_SIZE`` (unset or empty: the default; 0: no paging) and what is
    wrong with it."""
    if value is None or value == "":
        return _PAGE_SIZE_DEFAULT, None
    if re.fullmatch(r"[0-9]{1,6}", value) and int(value) <= _PAGE_SIZE_MAX:
        return int(value), None
    shown = repr(value[:20])
    return _PAGE_SIZE_DEFAULT, (
        f"{PAGE_SIZE_ENV}={shown} is not a page size: a whole number from 0 (no paging) to "
        f"{_PAGE_SIZE_MAX}"
    )


#: A malformed value is reported by :meth:`KubeClient.connect` (exit 2), not at import.
PAGE_SIZE, _PAGE_SIZE_PROBLEM = _page_size(os.environ.get(PAGE_SIZE_ENV))
#: Node and pod LIST pages in flight at once (each on its own connection).
_AHEAD = 3
#: Bytes read from a LIST answer at a time (then decoded); the first read is small, so that
#: the head, with the next page's continue token, is seen early.
_READ_SIZE, _HEAD_READ = 1 << 20, 1 << 14
#: Node and pod LISTs are asked for in Kubernetes' protobuf encoding first (the API server
#: encodes it several times faster than JSON: :mod:`.kubeproto`), JSON where a server or a
#: proxy in front of it does not offer it.
LIST_ACCEPT = f"{PROTOBUF_MEDIA}, application/json"
#: A page's reader for the media type of its answer.
_Readers = Callable[[str], kubepages.PageReader[T]]
#: Pods that hold resources on a node: bound and not terminal.
BOUND_PODS = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
WORKLOAD_KINDS = {"pod": "pods", "deployment": "deployments", "job": "jobs"}


@dataclass
class PodObject:
    """A pod for ``explain``: the model plus its scheduling condition."""

    pod: Pod
    scheduled_reason: str
    scheduled_message: str


class KubeClient:
    """A thin client bound to one API server."""

    def __init__(self, creds: Credentials) -> None:
        self._http = Transport(creds)
        self.server: str = _safe_url(creds.server)

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> KubeClient:
        """Load credentials from ``kubeconfig`` (else $KUBECONFIG, ~/.kube/config, in-cluster).

        The kubeconfig is checked by gpuops first (:mod:`.kubeconfig`: defects in our words,
        its secrets remembered for redaction); a plain one is then read without the official
        client (:mod:`.kubecreds`), anything else goes through the client's loaders.
        """
        if _PAGE_SIZE_PROBLEM:
            raise InvalidInput(_PAGE_SIZE_PROBLEM, hint=f"unset {PAGE_SIZE_ENV} or fix it")
        source = find_source(kubeconfig, context)
        if not source.in_cluster and (creds := plain_kubeconfig(kubeconfig, context)) is not None:
            return cls(creds)  # no need to import the official client at all
        # the official client's loaders: exec plugins, auth providers, in-cluster, merging
        from kubernetes.client import Configuration  # noqa: PLC0415 - heavy; only when used

        cfg = Configuration()
        load_credentials(cfg, source)
        return cls(from_configuration(cfg))

    def close(self) -> None:
        self._http.close()

    # -- HTTP -----------------------------------------------------------------------------
    def _get(self, path: str, query: Mapping[str, Any] | None = None, *, what: str) -> Any:
        """GET ``path`` and return the decoded JSON object; errors name ``what`` and the server."""
        doc = self._parse(self._get_raw(path, query, what=what), what)
        if not isinstance(doc, dict):
            raise OperationFailed(
                f"the Kubernetes API at {self.server} answered {what} with JSON that is not "
                "a JSON object"
            )
        return doc

    def _parse(self, data: bytes, what: str) -> Any:
        try:
            # orjson: LIST pages of a large cluster are tens of MB; it parses them ~3x faster
            return orjson.loads(data)
        except (ValueError, UnicodeDecodeError):
            raise OperationFailed(
                f"the Kubernetes API at {self.server} sent invalid JSON for {what}"
            ) from None

    def request(
        self,
        method: str,
        path: str,
        *,
        what: str,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        """One API call (GET, POST, PUT, PATCH, DELETE) with a JSON body; the decoded answer.

        Errors name ``what`` and the server: :class:`NotFound` (404), :class:`Conflict` (409,
        e.g. a stale resourceVersion or an object that exists), :class:`Unreachable`
        (transport, 5xx), :class:`~gpuops.errors.OperationFailed` (401/403 and the rest).
        """
        data = self._call(method, path, query, body, content_type, what=what)
        return self._parse(data, what) if data.strip() else {}

    def _get_raw(self, path: str, query: Mapping[str, Any] | None = None, *, what: str) -> bytes:
        """GET ``path``; the body, undecoded. Errors name ``what`` and the server."""
        return self._call("GET", path, query, None, "application/json", what=what)

    def _call(
        self,
        verb: str,
        path: str,
        query: Mapping[str, Any] | None,
        payload: Any,
        content_type: str,
        *,
        what: str,
    ) -> bytes:
        target = path + ("?" + urlencode(query) if query else "")
        # transport failures (refused, reset, timed out, TLS) raise Unreachable there
        status, data = self._http.request(verb, target, _body(payload), content_type, what=what)
        self._check_status(status, data, what, path)
        return data

    def _check_status(self, status: int, data: bytes, what: str, path: str) -> None:
        """Raise the error an HTTP status means; nothing for 2xx."""
        if status == 404:
            if _status_reason(data) != "NotFound":  # no Kubernetes Status: not an API path
                raise OperationFailed(
                    f"{what}: {self.server} answered HTTP 404 without a Kubernetes Status: "
                    f"{path} is not a Kubernetes API path there",
                    hint="check the kubeconfig's server URL (a proxy's path prefix?)",
                )
            raise NotFound(f"{what}: not found on {self.server}")
        if status == 409:
            raise Conflict(f"{what}: conflict on {self.server}: {_status_message(data)}")
        if status == 410:
            raise _ExpiredError(
                f"{what}: the Kubernetes API at {self.server} answered HTTP 410 (Gone: the "
                "list's continue token or resourceVersion expired)",
                hint="retry; lower GPUOPS_KUBE_PAGE_SIZE if it persists",
            )
        if status in (401, 403):
            raise OperationFailed(
                f"the Kubernetes API at {self.server} refused {what}: HTTP {status} "
                f"{_status_message(data)}",
                hint="check the kubeconfig's credentials and RBAC (needs get/list on nodes, "
                "pods, resourcequotas, namespaces, deployments, jobs)",
            )
        if status >= 500:
            raise Unreachable(
                f"the Kubernetes API at {self.server} failed {what}: HTTP {status} "
                f"{_status_message(data)}"
            )
        if not 200 <= status < 300:
            raise OperationFailed(
                f"the Kubernetes API at {self.server} answered {what} with HTTP {status}: "
                f"{_status_message(data)}"
            )

    def _pages(self, path: str, what: str, query: Mapping[str, str]) -> Generator[bytes]:
        """Raw pages of a LIST. A thread fetches page n+1 (its ``continue`` token is read from
        the head of page n without parsing it) while the caller decodes page n."""
        pages: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=2)
        stop = threading.Event()

        def fetch() -> None:
            token = ""
            try:
                while not stop.is_set():
                    q = {**query, "limit": str(PAGE_SIZE)} if PAGE_SIZE else dict(query)
                    if token:
                        q["continue"] = token
                    raw = self._get_raw(path, q, what=what)
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

    def _list(
        self, path: str, what: str, decode: Callable[[Mapping[str, Any]], T], **query: str
    ) -> list[T]:
        """Every item of a paged LIST, each parsed as JSON and decoded with ``decode``."""

        def read(raw: bytes) -> tuple[str, list[T]]:
            doc = self._parse(raw, what)
            # never a verdict from a list that could not be read: no ``items`` is a failure
            items = page_items(doc, f"{what} on {self.server}")
            token = (doc.get("metadata") or {}).get("continue", "")
            return token, [decode(o) for o in items]

        return self._walk(path, what, read, query)

    def _list_streamed(
        self,
        path: str,
        what: str,
        reader: _Readers[T],
        checked: Callable[[Mapping[str, Any]], T],
        **query: str,
    ) -> list[T]:
        """Every item of a LIST, decoded while each answer arrives (:mod:`.kubepages`); pages
        only with ``GPUOPS_KUBE_PAGE_SIZE``, and an expired paged list starts over once.

        A page of an unexpected shape is never read as fewer items: the list is read once
        more with ``checked`` (a decoder checking every field it reads), so that the error
        names the item and field; should that read succeed, the list still fails."""
        for attempt in (1, 2):
            try:
                with _gc_paused():
                    return self._read_list(path, what, reader, query)
            except NotFound:
                raise _list_not_served(what, self.server, path) from None
            except _ExpiredError:
                if attempt == 2:
                    raise OperationFailed(
                        f"{what} on {self.server}: the list kept expiring while paging",
                        hint="retry; lower GPUOPS_KUBE_PAGE_SIZE if it persists",
                    ) from None
                log.info("list of %s expired while paging; starting over", what)
            except kubepages.PageError as exc:
                if exc.invalid:
                    raise OperationFailed(
                        f"the Kubernetes API at {self.server} sent invalid {exc.encoding} "
                        f"for {what}"
                    ) from None
                with _gc_paused():
                    self._list(path, what, checked, **query)  # raises, naming the field
                raise OperationFailed(  # never a verdict from a list we could not read
                    f"cannot read {what} on {self.server}: unexpected list layout",
                    hint="the answer is not what Kubernetes sends; is the server a Kubernetes API?",
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _read_list(
        self,
        path: str,
        what: str,
        reader: _Readers[T],
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
        reader: _Readers[T],
        query: Mapping[str, str],
        token: str,
        follow: Callable[[str], None],
    ) -> list[T]:
        """One page, decoded while it arrives; ``follow`` gets the next page's continue token
        as soon as the head has brought it."""
        q = {**query, "limit": str(PAGE_SIZE)} if PAGE_SIZE else dict(query)
        if token:
            q["continue"] = token
        out: list[T] = []
        followed = False
        target = f"{path}?{urlencode(q)}" if q else path
        with self._http.stream(target, what=what, accept=LIST_ACCEPT) as (status, media, read):
            page = reader(media)
            if not 200 <= status < 300:
                body = b"".join(iter(partial(read, _READ_SIZE), b""))
                self._check_status(status, body, what, path)
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

    def _walk(
        self,
        path: str,
        what: str,
        read: Callable[[bytes], tuple[str, list[T]]],
        query: Mapping[str, str],
    ) -> list[T]:
        """Every item of a paged LIST, decoded page by page by ``read`` (a page's continue
        token and items); an expired list starts over once.

        The cyclic garbage collector is paused meanwhile: decoding makes millions of short-lived
        containers and no cycles, and the collector's passes would cost more than the parse.
        """
        for attempt in (1, 2):
            out: list[T] = []
            try:
                with _gc_paused(), contextlib.closing(self._pages(path, what, query)) as pages:
                    for raw in pages:
                        token, items = read(raw)
                        if token != _continue_token(raw):
                            raise OperationFailed(  # never a verdict from a partial list
                                f"cannot page {what} on {self.server}: unexpected list layout"
                            )
                        out.extend(items)
            except NotFound:
                raise _list_not_served(what, self.server, path) from None
            except _ExpiredError:
                if attempt == 2:
                    raise OperationFailed(
                        f"{what} on {self.server}: the list kept expiring while paging",
                        hint="retry; lower GPUOPS_KUBE_PAGE_SIZE if it persists",
                    ) from None
                log.info("list of %s expired while paging; starting over", what)
            else:
                return out
        raise AssertionError("unreachable")  # pragma: no cover

    # -- queries --------------------------------------------------------------------------
    def list_nodes(self, resources: frozenset[str] | None = None) -> list[Node]:
        """Every node; with ``resources``, only those names in allocatable and capacity."""
        return self._list_streamed(
            "/api/v1/nodes",
            "list nodes",
            partial(_node_reader, resources),
            partial(node_from_api_checked, resources=resources),
        )

    def list_bound_pods(self, resources: frozenset[str] | None = None) -> list[Pod]:
        """Non-terminal pods bound to a node, in all namespaces; with ``resources``, their
        requests of only those names (no placement either way)."""
        return self._list_streamed(
            "/api/v1/pods",
            "list pods",
            partial(_pod_reader, resources),
            partial(pod_from_api_checked, resources=resources),
            fieldSelector=BOUND_PODS,
        )

    def list_nodes_and_bound_pods(
        self, resources: frozenset[str] | None = None
    ) -> tuple[list[Node], list[Pod], dict[str, float]]:
        """Nodes and bound pods, listed concurrently; with the seconds each list took."""
        timings: dict[str, float] = {}

        def timed(name: str, fn: Callable[[], list[T]]) -> list[T]:
            t0 = time.perf_counter()
            try:
                return fn()
            finally:
                timings[name] = round(time.perf_counter() - t0, 3)

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpuops-nodes") as pool:
            nodes_future = pool.submit(timed, "list_nodes", partial(self.list_nodes, resources))
            pods = timed("list_pods", partial(self.list_bound_pods, resources))
            nodes = nodes_future.result()
        return nodes, pods, timings

    def ensure_namespace(self, namespace: str) -> None:
        dns_label(namespace, "namespace")
        try:
            self._get(f"/api/v1/namespaces/{namespace}", what=f"get namespace {namespace}")
        except NotFound:
            raise InvalidInput(
                f"namespace {namespace!r} does not exist on {self.server}",
                hint="check --namespace (kubectl get namespaces)",
            ) from None

    def quota_limits(self, namespace: str, resource: str) -> list[QuotaLimit]:
        """``requests.<resource>`` and ``pods`` limits of the namespace's ResourceQuotas."""
        dns_label(namespace, "namespace")
        doc = self._get(
            f"/api/v1/namespaces/{namespace}/resourcequotas",
            what=f"list resourcequotas in {namespace}",
        )
        return quota_limits_from_api(doc, namespace, resource)

    def read_pod(self, namespace: str, name: str) -> PodObject:
        dns_label(namespace, "namespace")
        dns_subdomain(name, "pod name")
        obj = self._get_object(
            namespace, "pod", name, f"/api/v1/namespaces/{namespace}/pods/{quote(name)}"
        )
        return _pod_object(obj)

    def _get_object(self, namespace: str, kind: str, name: str, path: str) -> Any:
        """GET one named object; a 404 names the missing namespace, else the object."""
        try:
            return self._get(path, what=f"get {kind} {namespace}/{name}")
        except NotFound:
            self.ensure_namespace(namespace)
            raise InvalidInput(f"{kind} {name!r} not found in namespace {namespace!r}") from None

    def workload_pods(self, namespace: str, kind: str, name: str) -> list[PodObject]:
        """The pods a Deployment or Job selects (all phases), oldest first."""
        dns_label(namespace, "namespace")
        dns_subdomain(name, f"{kind} name")
        group = "apps/v1" if kind == "deployment" else "batch/v1"
        obj = self._get_object(
            namespace,
            kind,
            name,
            f"/apis/{group}/namespaces/{namespace}/{WORKLOAD_KINDS[kind]}/{quote(name)}",
        )
        selector = workload_selector(obj, f"{kind} {namespace}/{name}")
        if not selector:
            raise OperationFailed(f"{kind} {namespace}/{name} has no pod selector")
        items = self._list(
            f"/api/v1/namespaces/{namespace}/pods",
            f"list pods of {kind} {name}",
            lambda o: (created_at(o), _pod_object(o)),
            labelSelector=selector,
        )
        return [obj for _, obj in sorted(items, key=lambda item: item[0])]


class NotFound(OperationFailed):
    """404: the object (or its namespace) does not exist; callers that know which input
    named it turn it into an :class:`~gpuops.errors.InvalidInput`."""


class Conflict(OperationFailed):
    """409: the object exists already, or changed since it was read (resourceVersion)."""


class _ExpiredError(OperationFailed):
    """Internal: 410 Gone, a paged list's continue token expired."""


_CONTINUE = re.compile(rb'"continue":"([^"\\]*)"')


def _node_reader(resources: frozenset[str] | None, media: str) -> kubepages.PageReader[Node]:
    if media == PROTOBUF_MEDIA:
        from gpuops.adapters import kubeproto  # noqa: PLC0415 - protobuf only when answered

        return kubeproto.node_reader(resources)
    return kubepages.node_reader(resources)


def _pod_reader(resources: frozenset[str] | None, media: str) -> kubepages.PageReader[Pod]:
    if media == PROTOBUF_MEDIA:
        from gpuops.adapters import kubeproto  # noqa: PLC0415 - protobuf only when answered

        return kubeproto.pod_reader(resources)
    return kubepages.pod_reader(resources)


def _continue_token(raw: bytes) -> str:
    """The ``metadata.continue`` of a raw list page, read from its head (the API server writes
    metadata before items); the consumer double-checks it against the parsed page."""
    end = raw.find(b'"items":')
    m = _CONTINUE.search(raw, 0, end if end >= 0 else len(raw))
    return m.group(1).decode() if m else ""


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


def _pod_object(obj: Mapping[str, Any]) -> PodObject:
    reason, message = scheduled_condition(obj)
    return PodObject(pod_from_api(obj, with_placement=True), reason, message)


def _list_not_served(what: str, server: str, path: str) -> OperationFailed:
    return OperationFailed(
        f"{what}: the API at {server} answered 404 Not Found for {path}: "
        "this server does not serve that list",
        hint="check the kubeconfig's server and that it is a Kubernetes API server",
    )


def _status_doc(data: bytes) -> Any:
    """A Status answer (or any JSON answer) as JSON; ``None`` when it is neither."""
    if data.startswith(PROTOBUF_MAGIC):  # protobuf, to a LIST that asked for it first
        from gpuops.adapters import kubeproto  # noqa: PLC0415 - protobuf only when answered

        return kubeproto.status(data)
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _status_reason(data: bytes) -> str:
    """The ``reason`` of a Kubernetes Status answer, "" when the body is not one."""
    doc = _status_doc(data)
    if isinstance(doc, dict) and doc.get("kind") == "Status":
        return str(doc.get("reason", ""))
    return ""


def _safe_url(url: str) -> str:
    """A server URL for messages: without user:password@ (a kubeconfig may carry one), whose
    password is a secret from now on."""
    remember_userinfo(url)
    return without_userinfo(url)


def _body(payload: Any) -> bytes | None:
    """A request body: bytes and text as they are, anything else as JSON."""
    if payload is None or isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):
        return payload.encode()
    return json.dumps(payload).encode()


def _status_message(data: bytes) -> str:
    doc = _status_doc(data)
    return str(doc.get("message", "")) if isinstance(doc, dict) else ""
