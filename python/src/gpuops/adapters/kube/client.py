"""The Kubernetes API as gpuops needs it: fast LISTs, quotas, one workload, single calls.

:class:`KubeClient` is bound to one API server. Credentials come from a plain kubeconfig read
directly (:mod:`.creds`), else from the official client's loaders (exec plugins, auth
providers, in-cluster; :mod:`.config`); requests go out over a lean HTTPS transport
(:mod:`.transport`) as plain paths, their answers' statuses mapped to errors by
:mod:`.calls`. LISTs are paged by :mod:`.pager` (node and pod pages decoded by shape:
:mod:`.pages`, :mod:`.proto`), other answers read as JSON and picked apart by
:mod:`.decode`. Every client or transport exception becomes a :mod:`gpuops.errors` exception
naming the server or object.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from gpuops.adapters.kube import calls
from gpuops.adapters.kube.calls import Conflict, NotFound
from gpuops.adapters.kube.config import find_source, load_credentials
from gpuops.adapters.kube.creds import Credentials, from_configuration, plain_kubeconfig
from gpuops.adapters.kube.decode import (
    created_at,
    node_from_api_checked,
    pod_from_api,
    pod_from_api_checked,
    quota_limits_from_api,
    scheduled_condition,
    workload_selector,
)
from gpuops.adapters.kube.pager import Pager, node_reader, pod_reader
from gpuops.adapters.kube.paths import (
    BOUND_PODS,
    NODES,
    PAGE_SIZE_ENV,
    PAGE_SIZE_PROBLEM,
    POD_LIST,
    namespace_path,
    quotas_path,
)
from gpuops.adapters.kube.transport import Transport
from gpuops.core.headroom import QuotaLimit
from gpuops.core.kubeinput import dns_label, dns_subdomain
from gpuops.core.kubemodel import Node, Pod
from gpuops.core.urls import remember_userinfo, without_userinfo
from gpuops.errors import InvalidInput, OperationFailed

__all__ = ["BOUND_PODS", "WORKLOAD_KINDS", "Conflict", "KubeClient", "NotFound", "PodObject"]

T = TypeVar("T")

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
        self._pager = Pager(self._http, self.server)

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> KubeClient:
        """Load credentials from ``kubeconfig`` (else $KUBECONFIG, ~/.kube/config, in-cluster).

        The kubeconfig is checked by gpuops first (:mod:`.config`: defects in our words,
        its secrets remembered for redaction); a plain one is then read without the official
        client (:mod:`.creds`), anything else goes through the client's loaders.
        """
        if PAGE_SIZE_PROBLEM:
            raise InvalidInput(PAGE_SIZE_PROBLEM, hint=f"unset {PAGE_SIZE_ENV} or fix it")
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
        data = calls.call(
            self._http, self.server, "GET", path, query, None, "application/json", what=what
        )
        doc = calls.parse_json(self.server, data, what)
        if not isinstance(doc, dict):
            raise OperationFailed(
                f"the Kubernetes API at {self.server} answered {what} with JSON that is not "
                "a JSON object"
            )
        return doc

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
        data = calls.call(
            self._http, self.server, method, path, query, _body(body), content_type, what=what
        )
        return calls.parse_json(self.server, data, what) if data.strip() else {}

    def request_raw(
        self,
        method: str,
        path: str,
        *,
        what: str,
        query: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        limit: int | None = None,
    ) -> tuple[int, bytes]:
        """One call whose answer is the caller's to judge, whatever its status (a pod proxy's
        answer is the pod's): (status, body). Transport failures raise
        :class:`~gpuops.errors.Unreachable`; ``timeout``: seconds for the whole answer;
        ``limit``: at most ``limit + 1`` bytes of the body are read."""
        target = path + ("?" + urlencode(query) if query else "")
        return self._http.request(method, target, None, "", what=what, timeout=timeout, limit=limit)

    def _check_status(self, status: int, data: bytes, what: str, path: str) -> None:
        """Raise the error an HTTP status means; nothing for 2xx (:func:`.calls.check_status`)."""
        calls.check_status(self.server, status, data, what, path)

    # -- queries --------------------------------------------------------------------------
    def list_nodes(self, resources: frozenset[str] | None = None) -> list[Node]:
        """Every node; with ``resources``, only those names in allocatable and capacity."""
        path, query = NODES
        return self._pager.list_streamed(
            path,
            "list nodes",
            partial(node_reader, resources),
            partial(node_from_api_checked, resources=resources),
            query,
        )

    def list_bound_pods(self, resources: frozenset[str] | None = None) -> list[Pod]:
        """Non-terminal pods bound to a node, in all namespaces; with ``resources``, their
        requests of only those names (no placement either way)."""
        path, query = POD_LIST
        return self._pager.list_streamed(
            path,
            "list pods",
            partial(pod_reader, resources),
            partial(pod_from_api_checked, resources=resources),
            query,
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
            self._get(namespace_path(namespace), what=f"get namespace {namespace}")
        except NotFound:
            raise InvalidInput(
                f"namespace {namespace!r} does not exist on {self.server}",
                hint="check --namespace (kubectl get namespaces)",
            ) from None

    def quota_limits(self, namespace: str, resource: str) -> list[QuotaLimit]:
        """``requests.<resource>`` and ``pods`` limits of the namespace's ResourceQuotas."""
        dns_label(namespace, "namespace")
        doc = self._get(quotas_path(namespace), what=f"list resourcequotas in {namespace}")
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
        items = self._pager.list_json(
            f"/api/v1/namespaces/{namespace}/pods",
            f"list pods of {kind} {name}",
            lambda o: (created_at(o), _pod_object(o)),
            {"labelSelector": selector},
        )
        return [obj for _, obj in sorted(items, key=lambda item: item[0])]


def _pod_object(obj: Mapping[str, Any]) -> PodObject:
    reason, message = scheduled_condition(obj)
    return PodObject(pod_from_api(obj, with_placement=True), reason, message)


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
