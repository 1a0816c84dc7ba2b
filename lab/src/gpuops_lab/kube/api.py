"""The lab's own calls to its Kubernetes API (the official client): bulk creation of nodes
and pods, and waiting for nodes to be Ready.

Bulk paths post pre-built JSON concurrently through the official client's connection pool:
the client's per-call model handling would cost more CPU than the API server spends.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from gpuops.errors import OperationFailed, Unreachable
from gpuops_lab.kube.objects import NodeSpec


def api_client(kubeconfig: Path, *, pool: int = 8) -> Any:
    """An official-client ``ApiClient`` for ``kubeconfig`` with ``pool`` HTTP connections."""
    cfg = k8s.Configuration()
    k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig), client_configuration=cfg
    )
    cfg.connection_pool_maxsize = pool
    return k8s.ApiClient(cfg)


def _as_api_client(api: Any) -> Any:
    return api.api_client if hasattr(api, "api_client") else api


class _Poster:
    """POSTs pre-encoded JSON through the official client's own connection pool and
    credentials. For bulk creation the client's per-call model handling costs more CPU than
    the apiserver spends on the request; this keeps the lab's 2 cores for the cluster."""

    def __init__(self, api: Any) -> None:
        client = _as_api_client(api)
        cfg = client.configuration
        self._pool = client.rest_client.pool_manager
        self._host = str(cfg.host).rstrip("/")
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        for auth in cfg.auth_settings().values():
            if auth.get("in") == "header" and auth.get("value"):
                self._headers[str(auth["key"])] = str(auth["value"])

    def create(self, path: str, body: Mapping[str, Any]) -> bool:
        """True if created, False if it already existed."""
        try:
            resp = self._pool.request(
                "POST",
                self._host + path,
                body=json.dumps(body, separators=(",", ":")).encode(),
                headers=self._headers,
                preload_content=True,
                timeout=60,
            )
        except urllib3.exceptions.HTTPError as exc:
            raise Unreachable(f"Kubernetes API {self._host} did not answer: {exc}") from exc
        if resp.status == 409:
            return False
        if not 200 <= resp.status < 300:
            raise OperationFailed(
                f"creating {body.get('kind', 'object')} {body['metadata']['name']} failed: "
                f"HTTP {resp.status}: {resp.data[:300].decode(errors='replace')}"
            )
        return True


def _fan_out(fn: Callable[[Any], bool], items: Sequence[Any], concurrency: int) -> int:
    if not items:
        return 0
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(items)))) as pool:
        return sum(1 for created in pool.map(fn, items) if created)


def bulk_create_nodes(api: Any, nodes: Sequence[NodeSpec], *, concurrency: int = 16) -> int:
    """Create ``nodes`` concurrently (existing ones are kept); returns how many were new."""
    poster = _Poster(api)
    return _fan_out(lambda n: poster.create("/api/v1/nodes", n.to_body()), nodes, concurrency)


def bulk_create_pods(api: Any, pods: Sequence[Mapping[str, Any]], *, concurrency: int = 16) -> int:
    """Create pod bodies (see :func:`pod_body`) concurrently; returns how many were new.
    Give ``api`` a connection pool of at least ``concurrency`` (:func:`api_client`)."""
    poster = _Poster(api)

    def one(body: Mapping[str, Any]) -> bool:
        ns = body["metadata"].get("namespace", "default")
        return poster.create(f"/api/v1/namespaces/{ns}/pods", body)

    return _fan_out(one, pods, concurrency)


def wait_nodes_ready(api: Any, names: Iterable[str], *, timeout: float = 120.0) -> None:
    """Wait until every named node is Ready and has no ``not-ready`` taint left.

    Lists are read from the apiserver's watch cache and decoded as plain JSON: with thousands
    of nodes, the official client's model objects would cost more CPU than kwok itself."""
    core = k8s.CoreV1Api(_as_api_client(api))
    pending = set(names)
    interval = 0.2 if len(pending) <= 50 else 1.0
    deadline = time.monotonic() + timeout
    while pending:
        cont = None
        while True:
            resp: Any = core.list_node(
                limit=1000, _continue=cont, resource_version="0", _preload_content=False
            )
            page = json.loads(resp.data)
            for node in page.get("items") or []:
                name = node["metadata"]["name"]
                if name in pending and _node_ready(node):
                    pending.discard(name)
            cont = (page.get("metadata") or {}).get("continue")
            if not cont:
                break
        if not pending:
            return
        if time.monotonic() > deadline:
            some = ", ".join(sorted(pending)[:5])
            raise OperationFailed(
                f"{len(pending)} kwok node(s) not Ready after {timeout:.0f}s (e.g. {some})",
                hint="see <lab dir>/logs/kube-kwok.log",
            )
        time.sleep(interval)


def _node_ready(node: Mapping[str, Any]) -> bool:
    conds = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)
    taints = (node.get("spec") or {}).get("taints") or []
    return ready and not any(t.get("key") == "node.kubernetes.io/not-ready" for t in taints)


def create_gpu_nodes(
    api: Any,
    nodes: Sequence[NodeSpec],
    *,
    wait: bool = True,
    timeout: float = 120.0,
    concurrency: int = 16,
) -> int:
    """Create kwok GPU nodes (idempotent) and, by default, wait until they are Ready."""
    created = bulk_create_nodes(api, nodes, concurrency=concurrency)
    if wait:
        wait_nodes_ready(api, [n.name for n in nodes if n.kwok_managed], timeout=timeout)
    return created
