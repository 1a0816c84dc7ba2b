"""Kubernetes node operations for ``gpuops nodes``: cordon and uncordon (with ownership),
the pods on a node, eviction, labels and taints. Built on :meth:`KubeClient.request` (single
calls; the LIST hot path is :mod:`.pager`).

Ownership: a node gpuops cordons carries the annotation :data:`CORDONED_BY`; only such a node
is uncordoned by gpuops, so a node an administrator cordoned stays cordoned, also after a
failed run is resumed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from gpuops.adapters.kube.client import Conflict, KubeClient, NotFound
from gpuops.adapters.kube.decode import pod_from_api
from gpuops.core import taintclaims
from gpuops.core.kubemodel import Taint
from gpuops.core.nodelabels import OWNED, NodeChange
from gpuops.errors import OperationFailed

CORDONED_BY = "gpuops.io/cordoned-by"
MERGE = "application/merge-patch+json"


@dataclass
class NodeInfo:
    name: str
    exists: bool
    unschedulable: bool = False
    ready: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    resource_version: str = ""
    #: (key, value, effect) -> the taint's ``timeAdded`` (the API sets it on NoExecute taints);
    #: kept when gpuops writes the taint list again
    taint_times: dict[tuple[str, str, str], str] = field(default_factory=dict)

    @property
    def cordoned_by_us(self) -> bool:
        return self.unschedulable and CORDONED_BY in self.annotations


@dataclass
class PodInfo:
    namespace: str
    name: str
    phase: str
    gpus: int
    daemonset: bool
    mirror: bool

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _path(node: str) -> str:
    return f"/api/v1/nodes/{quote(node, safe='')}"


def get_node(kube: KubeClient, name: str) -> NodeInfo:
    try:
        obj = kube.request("GET", _path(name), what=f"get node {name}")
    except NotFound:
        return NodeInfo(name, exists=False)
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    taints = [
        Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect", "")))
        for t in spec.get("taints") or ()
    ]
    times = {
        (t.key, t.value, t.effect): str(raw["timeAdded"])
        for t, raw in zip(taints, spec.get("taints") or (), strict=True)
        if raw.get("timeAdded")
    }
    return NodeInfo(
        name=name,
        exists=True,
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        labels=_strings(meta.get("labels"), name, "labels"),
        annotations=_strings(meta.get("annotations"), name, "annotations"),
        taints=taints,
        resource_version=str(meta.get("resourceVersion", "")),
        taint_times=times,
    )


def _strings(value: Any, node: str, what: str) -> dict[str, str]:
    """A node's labels or annotations as the API holds them: a map of strings, else an
    operation failure naming the node (never a value made into a string)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise OperationFailed(f"node {node}: metadata.{what} is not a map of strings")
    return dict(value)


def cordon(kube: KubeClient, name: str, by: str) -> None:
    body = {"spec": {"unschedulable": True}, "metadata": {"annotations": {CORDONED_BY: by}}}
    kube.request("PATCH", _path(name), what=f"cordon node {name}", body=body, content_type=MERGE)


def uncordon(kube: KubeClient, name: str) -> None:
    body = {"spec": {"unschedulable": None}, "metadata": {"annotations": {CORDONED_BY: None}}}
    kube.request("PATCH", _path(name), what=f"uncordon node {name}", body=body, content_type=MERGE)


def pods_on(kube: KubeClient, node: str, resource: str) -> list[PodInfo]:
    """Non-terminal pods bound to ``node``, with the GPUs (``resource``) each requests."""
    doc = kube.request(
        "GET",
        "/api/v1/pods",
        what=f"list pods on node {node}",
        query={
            "fieldSelector": f"spec.nodeName={node},status.phase!=Succeeded,status.phase!=Failed"
        },
    )
    out = []
    for obj in doc.get("items") or ():
        meta = obj.get("metadata") or {}
        pod = pod_from_api(obj, resources=frozenset({resource}))
        owners = meta.get("ownerReferences") or ()
        out.append(
            PodInfo(
                namespace=str(meta.get("namespace", "")),
                name=str(meta.get("name", "")),
                phase=str((obj.get("status") or {}).get("phase", "")),
                gpus=int(pod.requests.get(resource, 0)),
                daemonset=any(o.get("kind") == "DaemonSet" for o in owners),
                mirror="kubernetes.io/config.mirror" in (meta.get("annotations") or {}),
            )
        )
    return out


def evict(kube: KubeClient, pod: PodInfo) -> bool:
    """Ask the API to evict ``pod`` (PodDisruptionBudgets apply); False when it refused for
    now (a budget, 429) so the caller retries, True when accepted or the pod is gone."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod.name, "namespace": pod.namespace},
    }
    path = f"/api/v1/namespaces/{quote(pod.namespace)}/pods/{quote(pod.name)}/eviction"
    try:
        kube.request("POST", path, what=f"evict pod {pod.key}", body=body)
    except NotFound:
        return True
    except Conflict:
        return False
    except OperationFailed:  # 429 Too Many Requests: a disruption budget says not now
        return False
    return True


def wait_for(
    kube: KubeClient,
    node: str,
    resource: str,
    *,
    which: str,
    timeout_s: float,
    evict_after: bool = False,
    poll_s: float = 1.0,
) -> list[PodInfo]:
    """Wait until the ``which`` pods (``gpu``: those holding GPUs; ``drain``: all but
    DaemonSet and mirror pods) are gone from ``node``; evicting them when ``evict_after``
    (right away for a drain). Returns the pods still there when ``timeout_s`` ran out."""
    deadline = time.monotonic() + timeout_s
    while True:
        pods = [
            p
            for p in pods_on(kube, node, resource)
            if not p.daemonset and not p.mirror and (which == "drain" or p.gpus > 0)
        ]
        if not pods or time.monotonic() >= deadline:
            return pods
        if evict_after:
            for pod in pods:
                evict(kube, pod)
        time.sleep(poll_s)


def apply(
    kube: KubeClient,
    change: NodeChange,
    resource_version: str,
    times: Mapping[tuple[str, str, str], str] | None = None,
) -> None:
    """Labels, the ownership and claims annotations and taints (the whole list, other taints'
    ``timeAdded`` from ``times`` kept) in one merge patch, conditional on the node's
    ``resource_version``: :class:`Conflict` when the node changed since it was read."""
    labels: dict[str, Any] = dict(change.set_labels)
    labels.update(dict.fromkeys(change.remove_labels))
    meta: dict[str, Any] = {}
    if labels:
        meta["labels"] = labels
    if change.owned_changed:
        meta["annotations"] = {OWNED: ",".join(change.owned) or None}
    if change.unhealthy_by is not None:
        meta.setdefault("annotations", {})[taintclaims.ANNOTATION] = change.unhealthy_annotation
    body: dict[str, Any] = {}
    if change.taints is not None:
        body["spec"] = {"taints": [_taint(t, times) for t in change.taints] or None}
    if meta or body:
        body["metadata"] = {**meta, "resourceVersion": resource_version}
        kube.request(
            "PATCH",
            _path(change.node),
            what=f"label node {change.node}",
            body=body,
            content_type=MERGE,
        )


def set_taints(
    kube: KubeClient,
    name: str,
    taints: Sequence[Taint],
    annotations: Mapping[str, str | None],
    resource_version: str,
    times: Mapping[tuple[str, str, str], str] | None = None,
) -> None:
    """The node's full taint list (``timeAdded`` from ``times`` kept) and ``annotations``
    (None: removed) in one merge patch, conditional on ``resource_version``:
    :class:`Conflict` when the node changed since."""
    body = {
        "metadata": {"annotations": dict(annotations), "resourceVersion": resource_version},
        "spec": {"taints": [_taint(t, times) for t in taints] or None},
    }
    kube.request("PATCH", _path(name), what=f"taint node {name}", body=body, content_type=MERGE)


def _taint(t: Taint, times: Mapping[tuple[str, str, str], str] | None) -> Mapping[str, str]:
    doc = {"key": t.key, "effect": t.effect}
    if t.value:
        doc["value"] = t.value
    if added := (times or {}).get((t.key, t.value, t.effect)):
        doc["timeAdded"] = added  # a merge patch replaces the list: else it would be lost
    return doc


def names(pods: Sequence[PodInfo]) -> list[str]:
    return [p.key for p in pods]


@dataclass(frozen=True)
class NodeBrief:
    """A node as the disruption budget sees it: schedulable and Ready, or not."""

    name: str
    unschedulable: bool
    ready: bool


def list_brief(kube: KubeClient, selector: str) -> list[NodeBrief]:
    """The nodes a label selector matches (one LIST; a class of GPU nodes is small)."""
    obj = kube.request(
        "GET", "/api/v1/nodes", what=f"list nodes {selector}", query={"labelSelector": selector}
    )
    out = []
    for item in obj.get("items") or ():
        meta, spec, status = (
            item.get("metadata") or {},
            item.get("spec") or {},
            item.get("status") or {},
        )
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        )
        out.append(NodeBrief(str(meta.get("name", "")), bool(spec.get("unschedulable")), ready))
    return out
