"""The Kubernetes API as the headroom logic needs it: fast LISTs, quotas, one workload.

Uses the official client for kubeconfig / in-cluster credentials and its HTTP layer, but not
its generated API classes or models: requests go out as plain paths with ``limit`` paging and
field selectors, and the JSON comes back undecoded (the ``_preload_content=False`` path),
to be picked apart by :mod:`gpuops.adapters.kubedecode`. Every client or transport exception
becomes a :mod:`gpuops.errors` exception naming the server or object.
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
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import orjson

from gpuops.adapters.kubeconfig import load_credentials
from gpuops.adapters.kubedecode import (
    created_at,
    node_from_api,
    pod_from_api,
    quota_limits_from_api,
    scheduled_condition,
    workload_selector,
)
from gpuops.adapters.kubeshape import page_items
from gpuops.core.headroom import QuotaLimit
from gpuops.core.kubeinput import dns_label, dns_subdomain
from gpuops.core.kubemodel import Node, Pod
from gpuops.errors import InvalidInput, OperationFailed, Unreachable

log = logging.getLogger(__name__)
T = TypeVar("T")

PAGE_SIZE_ENV = "GPUOPS_KUBE_PAGE_SIZE"
_PAGE_SIZE_DEFAULT, _PAGE_SIZE_MAX = 500, 100_000


def _page_size(value: str | None) -> tuple[int, str | None]:
    """``$GPUOPS_KUBE_PAGE_SIZE`` (unset or empty: the default) and what is wrong with it."""
    if value is None or value == "":
        return _PAGE_SIZE_DEFAULT, None
    if re.fullmatch(r"[0-9]{1,6}", value) and 1 <= int(value) <= _PAGE_SIZE_MAX:
        return int(value), None
    shown = repr(value[:20])
    return _PAGE_SIZE_DEFAULT, (
        f"{PAGE_SIZE_ENV}={shown} is not a page size: a whole number from 1 to {_PAGE_SIZE_MAX}"
    )


#: Objects per LIST page: big enough to keep round trips few, small enough to stream. A
#: malformed value is reported by :meth:`KubeClient.connect` (exit 2), not at import.
PAGE_SIZE, _PAGE_SIZE_PROBLEM = _page_size(os.environ.get(PAGE_SIZE_ENV))
#: Pods that hold resources on a node: bound and not terminal.
BOUND_PODS = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
WORKLOAD_KINDS = {"pod": "pods", "deployment": "deployments", "job": "jobs"}
_CONNECT_TIMEOUT_S = 5.0
_READ_TIMEOUT_S = 60.0


@dataclass
class PodObject:
    """A pod for ``explain``: the model plus its scheduling condition."""

    pod: Pod
    scheduled_reason: str
    scheduled_message: str


class KubeClient:
    """A thin client bound to one API server."""

    def __init__(self, api_client: Any) -> None:
        self._api = api_client
        self.server: str = _safe_url(str(api_client.configuration.host))

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> KubeClient:
        """Load credentials from ``kubeconfig`` (else $KUBECONFIG, ~/.kube/config, in-cluster)."""
        import urllib3  # noqa: PLC0415 - the client is heavy; import only when used
        from kubernetes.client import ApiClient, Configuration  # noqa: PLC0415

        if _PAGE_SIZE_PROBLEM:
            raise InvalidInput(_PAGE_SIZE_PROBLEM, hint=f"unset {PAGE_SIZE_ENV} or fix it")
        cfg = Configuration()
        load_credentials(cfg, kubeconfig, context)
        cfg.retries = urllib3.Retry(total=2, connect=2, read=0, status=0, backoff_factor=0.2)
        return cls(ApiClient(cfg))

    def close(self) -> None:
        self._api.close()

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
        import urllib3  # noqa: PLC0415
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

        url = path + ("?" + urlencode(query) if query else "")
        headers_in = {"Accept": "application/json"}
        if payload is not None:
            headers_in["Content-Type"] = content_type
        try:
            method, full, headers, body, post = self._api.param_serialize(
                verb,
                url,
                header_params=headers_in,
                body=payload,
                auth_settings=["BearerToken"],
            )
            resp = self._api.call_api(
                method,
                full,
                headers,
                body,
                post,
                _request_timeout=(_CONNECT_TIMEOUT_S, _READ_TIMEOUT_S),
            )
            data: bytes = resp.read()
            status: int = resp.status
        except ApiException as exc:  # TLS failures surface as status 0
            # only the first line, the exception's class: the rest can carry URLs (proxies)
            kind = str(exc.reason or "").split("\n", 1)[0][:60] or f"HTTP {exc.status}"
            raise Unreachable(
                f"cannot reach the Kubernetes API at {self.server} ({what}): {kind}",
                hint="check the kubeconfig's server and certificate authority",
            ) from None
        except urllib3.exceptions.HTTPError as exc:
            raise Unreachable(
                f"cannot reach the Kubernetes API at {self.server} ({what}): {type(exc).__name__}",
                hint="is the cluster up? check the kubeconfig's server address",
            ) from None
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
        return data

    def _pages(self, path: str, what: str, query: Mapping[str, str]) -> Generator[bytes]:
        """Raw pages of a LIST. A thread fetches page n+1 (its ``continue`` token is read from
        the head of page n without parsing it) while the caller decodes page n."""
        pages: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=2)
        stop = threading.Event()

        def fetch() -> None:
            token = ""
            try:
                while not stop.is_set():
                    q = {**query, "limit": str(PAGE_SIZE)}
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
        """Every item of a paged LIST, decoded page by page; an expired list starts over once.

        The cyclic garbage collector is paused meanwhile: decoding makes millions of short-lived
        containers and no cycles, and the collector's passes would cost more than the parse.
        """
        for attempt in (1, 2):
            out: list[T] = []
            try:
                with _gc_paused(), contextlib.closing(self._pages(path, what, query)) as pages:
                    for raw in pages:
                        items = self._items(self._parse(raw, what), raw, what)
                        out.extend(decode(o) for o in items)
            except NotFound:
                raise OperationFailed(
                    f"{what}: the API at {self.server} answered 404 Not Found for {path}: "
                    "this server does not serve that list",
                    hint="check the kubeconfig's server and that it is a Kubernetes API server",
                ) from None
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

    def _items(self, doc: Any, raw: bytes, what: str) -> list[Mapping[str, Any]]:
        """The items of one LIST page, checked: never a verdict from a list that could not be
        read (a page without ``items`` is a failure, not an empty cluster)."""
        items = page_items(doc, f"{what} on {self.server}")
        if (doc.get("metadata") or {}).get("continue", "") != _continue_token(raw):
            raise OperationFailed(f"cannot page {what} on {self.server}: unexpected list layout")
        return items

    # -- queries --------------------------------------------------------------------------
    def list_nodes(self, resources: frozenset[str] | None = None) -> list[Node]:
        """Every node; with ``resources``, only those names in allocatable and capacity."""
        return self._list(
            "/api/v1/nodes", "list nodes", partial(node_from_api, resources=resources)
        )

    def list_bound_pods(self, resources: frozenset[str] | None = None) -> list[Pod]:
        """Non-terminal pods bound to a node, in all namespaces; with ``resources``, their
        requests of only those names (no placement either way)."""
        return self._list(
            "/api/v1/pods",
            "list pods",
            partial(pod_from_api, resources=resources),
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
    """410 Gone: a paged list's continue token expired (``_list`` starts over once)."""


_CONTINUE = re.compile(rb'"continue":"([^"\\]*)"')


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


def _status_reason(data: bytes) -> str:
    """The ``reason`` of a Kubernetes Status answer, "" when the body is not one."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return ""
    if isinstance(doc, dict) and doc.get("kind") == "Status":
        return str(doc.get("reason", ""))
    return ""


def _safe_url(url: str) -> str:
    """A server URL for messages: without user:password@ (a kubeconfig may carry one)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    netloc += f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def _status_message(data: bytes) -> str:
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return ""
    return str(doc.get("message", "")) if isinstance(doc, dict) else ""
