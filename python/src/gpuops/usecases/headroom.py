"""Use cases of ``gpuops headroom``: the GPU headroom gate and the scheduling explanation.

A use case takes typed input, talks to the cluster through the Kubernetes adapter, asks the
pure core for the answer, and returns an :class:`~gpuops.usecases.outcome.Outcome`: a shape
that does not fit is *refused* here (exit 3), not in the CLI. It neither parses options nor
renders.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NotRequired, TypedDict, cast

from gpuops.adapters import webhook
from gpuops.adapters.kube import KubeClient, PodObject
from gpuops.core import explain as explain_core
from gpuops.core import headroom as core
from gpuops.core.explain import ExplainDocument, ExplainResult
from gpuops.core.headroom import HeadroomDocument, HeadroomResult
from gpuops.errors import GateRefused
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.outcome import Outcome
from gpuops.usecases.reportdoc import ReportDocument

if TYPE_CHECKING:
    from gpuops.usecases.reports import BesideReport

#: The environment variable that holds the shortage webhook's URL, unless told otherwise.
WEBHOOK_ENV = webhook.DEFAULT_ENV

#: What to do when the shape does not fit (the refusal's hint).
SHORTAGE_HINT = (
    "free GPUs on the wanted class, lower the reserve, or relax the node selector; "
    "'gpuops headroom explain' says why a pending pod does not fit"
)


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
    show_nodes: bool = False  # per-node rows in the result
    report_dir: Path | None = None  # also write the capacity page there


class DeliveryDocument(TypedDict):
    """What became of the shortage notification."""

    status: Annotated[str, {"enum": ["sent", "failed", "not-configured"]}]
    detail: str


class CheckDocument(HeadroomDocument):
    """The ``result`` of ``gpuops headroom check``."""

    server: str
    timings_s: dict[str, float]  # phase -> seconds (the listing's phases, compute, total)
    notification: NotRequired[DeliveryDocument]  # a shortage: the webhook's delivery
    report: NotRequired[ReportDocument]  # with --report-dir


@dataclass
class CheckResult:
    """The headroom check's result: the core's answer, where it was asked, how long it took,
    the shortage notification and the capacity page, when there are."""

    result: HeadroomResult
    server: str
    timings_s: dict[str, float]
    notification: webhook.Delivery | None = None
    show_nodes: bool = False
    report: BesideReport | None = None

    @property
    def fits(self) -> bool:
        return self.result.fits

    @property
    def message(self) -> str:
        return self.result.message

    def to_dict(self, *, with_nodes: bool | None = None) -> CheckDocument:
        """The result document's ``result`` (per-node rows as asked, unless ``with_nodes``)."""
        nodes = self.show_nodes if with_nodes is None else with_nodes
        data = cast(
            "CheckDocument",
            {
                **self.result.to_dict(with_nodes=nodes),
                "server": self.server,
                "timings_s": dict(self.timings_s),
            },
        )
        if self.notification is not None:
            delivery = self.notification.to_dict()
            data["notification"] = {"status": delivery["status"], "detail": delivery["detail"]}
        if self.report is not None:
            data["report"] = self.report.to_dict()
        return data


def check(
    request: CheckRequest, connect: Callable[[Cluster], KubeClient] | None = None
) -> Outcome[CheckResult]:
    """Does the shape fit now? Refused (exit 3) when it does not. A shortage is announced to
    the webhook, if one is set; a failed announcement, like a capacity page that cannot be
    written, is reported beside the verdict and never changes it."""
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
    checked = CheckResult(
        result=result,
        server=kube.server,
        timings_s={
            **listed,
            "compute": round(time.perf_counter() - t1, 3),
            "total": round(time.perf_counter() - t0, 3),
        },
        show_nodes=request.show_nodes,
    )
    if not result.fits:
        checked.notification = webhook.post(
            request.notify.url_env, _shortage_event(checked, request)
        )
    if request.report_dir is not None:  # the page shows the notification, not itself
        from gpuops.usecases import reports  # noqa: PLC0415 - Jinja2 and pygal only when asked

        checked.report = reports.write_beside(
            "capacity", request.report_dir, lambda: checked.to_dict(with_nodes=True)
        )
    files = checked.report.files if checked.report else {}
    if result.fits:
        return Outcome(checked, files=files)
    return Outcome(checked, GateRefused(result.message, hint=SHORTAGE_HINT), files=files)


def _shortage_event(checked: CheckResult, request: CheckRequest) -> dict[str, Any]:
    r = checked.result
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


class _Asked(TypedDict):
    target: str  # kind/name
    namespace: str
    pending_pods: int
    server: str


class ExplainedDocument(ExplainDocument, _Asked):
    """The ``result`` of ``gpuops headroom explain`` about a pending pod."""


class NothingPendingDocument(_Asked):
    """The ``result`` of ``gpuops headroom explain`` when no pod is pending."""

    bound: dict[str, str]  # namespace/pod -> the node it is bound to
    summary: str


@dataclass
class Explained:
    """Either ``explanation`` (of the first pending pod) or the pods that are not pending."""

    request: ExplainRequest
    server: str
    pods: list[PodObject]
    pending: list[PodObject]
    explanation: ExplainResult | None

    @property
    def target(self) -> str:
        return f"{self.request.kind}/{self.request.name}"

    def to_dict(self) -> ExplainedDocument | NothingPendingDocument:
        base: _Asked = {
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
) -> Outcome[Explained]:
    """Why the workload's first pending pod does not fit, node by node, in the scheduler's
    words, next to the scheduler's own FailedScheduling message when there is one. Always
    ok: a workload with no pending pod is an answer too."""
    kube = (connect or Cluster.connect)(request.cluster)
    try:
        if request.kind == "pod":
            pods = [kube.read_pod(request.namespace, request.name)]
        else:
            pods = kube.workload_pods(request.namespace, request.kind, request.name)
        pending = [o for o in pods if not o.pod.node_name and not o.pod.terminal]
        if not pending:
            return Outcome(Explained(request, kube.server, pods, [], None))
        nodes, bound, _ = kube.list_nodes_and_bound_pods()
    finally:
        kube.close()
    first = pending[0]
    result = explain_core.explain(first.pod, nodes, bound, request.group_by)
    if first.scheduled_reason == "Unschedulable":
        result.event_message = first.scheduled_message
    return Outcome(Explained(request, kube.server, pods, pending, result))
