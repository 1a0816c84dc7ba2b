"""Use cases of ``gpuops headroom``: the GPU headroom gate and the scheduling explanation.

A use case takes typed input, talks to the cluster through the Kubernetes adapter, asks the
pure core for the verdict, and returns a typed result. It neither parses options nor renders.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuops.adapters import webhook
from gpuops.adapters.kube import KubeClient, PodObject
from gpuops.core import explain as explain_core
from gpuops.core import headroom as core
from gpuops.core.explain import ExplainResult
from gpuops.core.headroom import HeadroomResult
from gpuops.usecases.cluster import Cluster


@dataclass(frozen=True)
class Notify:
    """Where a refusal is announced: the environment variable holding a webhook URL (a
    secret), and a link to put in the message (e.g. the CI build that asked)."""

    url_env: str = webhook.DEFAULT_ENV
    link: str | None = None


@dataclass(frozen=True)
class CheckRequest:
    shape: core.Shape
    policy: core.Policy
    cluster: Cluster = field(default_factory=Cluster)
    notify: Notify = field(default_factory=Notify)


@dataclass
class CheckOutcome:
    result: HeadroomResult
    server: str
    timings_s: dict[str, float]
    notification: webhook.Delivery | None = None

    def to_dict(self, *, with_nodes: bool = False) -> dict[str, Any]:
        data = self.result.to_dict(with_nodes=with_nodes)
        data["server"] = self.server
        data["timings_s"] = dict(self.timings_s)
        if self.notification is not None:
            data["notification"] = self.notification.to_dict()
        return data


def check(
    request: CheckRequest, connect: Callable[[Cluster], KubeClient] | None = None
) -> CheckOutcome:
    """Does the shape fit now? A shortage is announced to the webhook, if one is set; a
    failed announcement is reported beside the verdict and never changes it."""
    webhook.webhook_url(request.notify.url_env)  # a malformed URL is an input error, up front
    shape = request.shape
    t0 = time.perf_counter()
    kube = (connect or Cluster.connect)(request.cluster)
    try:
        kube.ensure_namespace(shape.namespace)
        quotas = kube.quota_limits(shape.namespace, shape.resource)
        # only the counted resource and the pod-count capacity matter to the verdict
        nodes, bound, listed = kube.list_nodes_and_bound_pods(frozenset({shape.resource, "pods"}))
    finally:
        kube.close()
    t1 = time.perf_counter()
    result = core.check(nodes, bound, shape, request.policy, quotas)
    outcome = CheckOutcome(
        result=result,
        server=kube.server,
        timings_s={
            **listed,
            "compute": round(time.perf_counter() - t1, 3),
            "total": round(time.perf_counter() - t0, 3),
        },
    )
    if not result.fits:
        outcome.notification = webhook.post(
            request.notify.url_env, _shortage_event(outcome, request)
        )
    return outcome


def _shortage_event(outcome: CheckOutcome, request: CheckRequest) -> dict[str, Any]:
    r = outcome.result
    return {
        "event": "gpu-headroom-shortage",
        "text": f"gpuops headroom check: {r.message}",
        "namespace": r.shape.namespace,
        "resource": r.shape.resource,
        "gpus_needed": r.shape.needed,
        "pods": r.shape.pods,
        "pods_placeable": r.pods_placeable,
        "shortages": list(r.shortages),
        "classes": [
            {
                "node_class": c.node_class,
                "free": c.free,
                "free_usable": c.free_usable,
                "largest_free_block": c.largest_free_block,
                "reserve": c.reserve,
                "pods_placeable": c.pods_placeable,
            }
            for c in r.classes
        ],
        "link": request.notify.link or "",
    }


@dataclass(frozen=True)
class ExplainRequest:
    kind: str  # pod, deployment or job
    name: str
    namespace: str = "default"
    group_by: str = core.DEFAULT_GROUP_BY
    cluster: Cluster = field(default_factory=Cluster)


@dataclass
class ExplainOutcome:
    """Either ``explanation`` (of the first pending pod) or the pods that are not pending."""

    request: ExplainRequest
    server: str
    pods: list[PodObject]
    pending: list[PodObject]
    explanation: ExplainResult | None

    @property
    def target(self) -> str:
        return f"{self.request.kind}/{self.request.name}"

    def to_dict(self) -> dict[str, Any]:
        base = {
            "target": self.target,
            "namespace": self.request.namespace,
            "pending_pods": len(self.pending),
            "server": self.server,
        }
        if self.explanation is None:
            bound = {o.pod.key: o.pod.node_name for o in self.pods if o.pod.node_name}
            return {**base, "bound": bound, "summary": self.nothing_pending()}
        return {**self.explanation.to_dict(), **base}

    def nothing_pending(self) -> str:
        req = self.request
        placed = [o for o in self.pods if o.pod.node_name]
        if req.kind == "pod" and placed:
            node = placed[0].pod.node_name
            return f"pod {req.namespace}/{req.name} is not pending: it is bound to {node}"
        return f"{self.target} in {req.namespace} has no pending pods ({len(self.pods)} pod(s))"


def explain(
    request: ExplainRequest, connect: Callable[[Cluster], KubeClient] | None = None
) -> ExplainOutcome:
    """Why the workload's first pending pod does not fit, node by node, in the scheduler's
    words, next to the scheduler's own FailedScheduling message when there is one."""
    kube = (connect or Cluster.connect)(request.cluster)
    try:
        if request.kind == "pod":
            pods = [kube.read_pod(request.namespace, request.name)]
        else:
            pods = kube.workload_pods(request.namespace, request.kind, request.name)
        pending = [o for o in pods if not o.pod.node_name and not o.pod.terminal]
        if not pending:
            return ExplainOutcome(request, kube.server, pods, [], None)
        nodes, bound, _ = kube.list_nodes_and_bound_pods()
    finally:
        kube.close()
    first = pending[0]
    result = explain_core.explain(first.pod, nodes, bound, request.group_by)
    if first.scheduled_reason == "Unschedulable":
        result.event_message = first.scheduled_message
    return ExplainOutcome(request, kube.server, pods, pending, result)
