"""GPU headroom: does a workload shape fit the cluster now, per node class, with a reserve.

Counts only what the scheduler could really use: a node that is NotReady, cordoned (and not
tolerated), tainted NoSchedule/NoExecute without a toleration, outside the workload's node
selector / required affinity, or whose device plugin reports 0 of the resource gives nothing.
Free = allocatable - requests of the non-terminal pods bound to the node. Each pod needs all
of its GPUs on one node, and a node takes no more pods than its pod capacity, so
fragmentation shows. A reserve (total or per class) and the namespace's ResourceQuota limit
what may be taken. Pure: the adapters supply nodes, pods and quotas.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, TypedDict

from gpuops.core.kubemodel import (
    Node,
    NodeUsage,
    Placement,
    PlacementDocument,
    Pod,
    node_class,
    usage_by_node,
)

DEFAULT_RESOURCE = "nvidia.com/gpu"
DEFAULT_GROUP_BY = "accelerator"


@dataclass(frozen=True)
class Shape:
    """The workload asked about: ``pods`` pods of ``gpus_per_pod`` units of ``resource``."""

    gpus_per_pod: int
    pods: int
    resource: str = DEFAULT_RESOURCE
    placement: Placement = field(default_factory=Placement)
    namespace: str = "default"

    def __post_init__(self) -> None:
        if self.gpus_per_pod < 1 or self.pods < 1:
            raise ValueError("gpus_per_pod and pods must be at least 1")

    @property
    def needed(self) -> int:
        return self.gpus_per_pod * self.pods


@dataclass(frozen=True)
class Policy:
    reserve: int = 0
    reserve_per_class: Mapping[str, int] = field(default_factory=dict)
    group_by: str = DEFAULT_GROUP_BY


@dataclass(frozen=True)
class QuotaLimit:
    """One ``hard`` entry of a ResourceQuota that bounds the workload."""

    quota: str
    resource: str  # "requests.nvidia.com/gpu" or "pods"
    hard: int
    used: int

    @property
    def left(self) -> int:
        return max(0, self.hard - self.used)


@dataclass
class NodeHeadroom:
    name: str
    node_class: str
    allocatable: int
    requested: int
    free: int
    healthy: bool  # usable, or Ready, not cordoned and the device plugin reports > 0
    usable: bool  # passes every filter for this workload
    slots: int  # pods of this shape it can take now
    reasons: list[str] = field(default_factory=list)


@dataclass
class ClassHeadroom:
    node_class: str
    nodes: int = 0
    nodes_healthy: int = 0
    nodes_usable: int = 0
    allocatable: int = 0  # healthy nodes
    requested: int = 0  # healthy nodes
    free: int = 0  # healthy nodes
    free_usable: int = 0  # nodes this workload may use
    largest_free_block: int = 0  # most free on one usable node
    unavailable: int = 0  # allocatable on unhealthy nodes
    reserve: int = 0
    slots: int = 0
    pods_placeable: int = 0


class QuotaDocument(TypedDict):
    """A quota limit as JSON: its ``hard`` entry, what is used and what is left."""

    quota: str
    resource: str
    hard: int
    used: int
    left: int


class HeadroomDocument(TypedDict):
    """The headroom answer as JSON (the core of ``headroom check``'s result)."""

    verdict: Annotated[str, {"enum": ["fits", "shortage"]}]
    fits: bool
    message: str
    resource: str
    gpus_per_pod: int
    pods: int
    gpus_needed: int
    pods_placeable: int
    pods_placeable_on_nodes: int
    namespace: str
    placement: PlacementDocument
    group_by: str
    reserve: int
    reserve_per_class: dict[str, int]  # node class -> GPUs kept free
    free_total: int
    free_usable: int
    nodes_total: int
    classes: list[Annotated[dict[str, Any], ClassHeadroom, "asdict"]]
    nodes: list[Annotated[dict[str, Any], NodeHeadroom, "asdict"]] | None  # --show-nodes
    excluded: dict[str, int]  # kind of reason -> nodes it keeps out
    quotas: list[QuotaDocument]
    shortages: list[str]
    plan: dict[str, int]  # node class -> pods placed there


@dataclass
class HeadroomResult:
    shape: Shape
    policy: Policy
    fits: bool
    pods_placeable: int
    free_total: int
    classes: list[ClassHeadroom]
    nodes: list[NodeHeadroom]
    quotas: list[QuotaLimit]
    shortages: list[str]
    plan: dict[str, int]
    nodes_total: int
    pods_placeable_on_nodes: int = 0  # what the nodes take, before quota and total reserve

    @property
    def message(self) -> str:
        s = self.shape
        what = f"{s.pods} pod(s) x {s.gpus_per_pod} {s.resource} ({s.needed} in all)"
        if self.fits:
            where = ", ".join(f"{n}: {k}" for n, k in sorted(self.plan.items()))
            return f"fits: {what} can be placed now ({where})"
        return f"shortage: {what}: " + "; ".join(self.shortages)

    def to_dict(self, *, with_nodes: bool = False) -> HeadroomDocument:
        """The result for JSON; per-node rows only ``with_nodes`` (2,000 nodes make ~1 MB)."""
        s = self.shape
        return {
            "verdict": "fits" if self.fits else "shortage",
            "fits": self.fits,
            "message": self.message,
            "resource": s.resource,
            "gpus_per_pod": s.gpus_per_pod,
            "pods": s.pods,
            "gpus_needed": s.needed,
            "pods_placeable": self.pods_placeable,
            "pods_placeable_on_nodes": self.pods_placeable_on_nodes,
            "namespace": s.namespace,
            "placement": s.placement.to_dict(),
            "group_by": self.policy.group_by,
            "reserve": self.policy.reserve,
            "reserve_per_class": dict(self.policy.reserve_per_class),
            "free_total": self.free_total,
            "free_usable": sum(c.free_usable for c in self.classes),
            "nodes_total": self.nodes_total,
            "classes": [asdict(c) for c in self.classes],
            "nodes": [asdict(n) for n in self.nodes] if with_nodes else None,
            "excluded": dict(excluded_reasons(self.nodes)),
            "quotas": [
                {
                    "quota": q.quota,
                    "resource": q.resource,
                    "hard": q.hard,
                    "used": q.used,
                    "left": q.left,
                }
                for q in self.quotas
            ],
            "shortages": list(self.shortages),
            "plan": dict(self.plan),
        }


def _reason_kind(reason: str) -> str:
    return reason.split(":", 1)[0].split(" (", 1)[0]


def excluded_reasons(nodes: Iterable[NodeHeadroom]) -> Counter[str]:
    """How many nodes each kind of reason keeps out (first reason per node)."""
    return Counter(_reason_kind(n.reasons[0]) for n in nodes if not n.usable and n.reasons)


def evaluate_node(node: Node, usage: NodeUsage, shape: Shape, group_by: str) -> NodeHeadroom:
    res, place = shape.resource, shape.placement
    alloc = node.allocatable.get(res, 0)
    requested = usage.requested.get(res, 0)
    free = max(0, alloc - requested)
    reasons: list[str] = []
    if not node.ready:
        reasons.append(f"NotReady ({node.not_ready_reason or 'Ready condition not True'})")
    if node.unschedulable and not place.tolerates_unschedulable():
        reasons.append("cordoned (spec.unschedulable)")
    if alloc <= 0:
        if node.offers(res):
            reasons.append(f"device plugin reports 0 {res}")
        else:
            reasons.append(f"no {res}: not advertised by the node")
    taint = place.untolerated_taint(node)
    if taint is not None:
        reasons.append(f"untolerated taint: {taint}")
    mismatch = place.selector_mismatch(node)
    if mismatch:
        reasons.append(f"node selector/affinity mismatch: wants {', '.join(mismatch)}")
    usable = not reasons
    healthy = usable or (node.ready and not node.unschedulable and alloc > 0)
    slots = 0
    if usable:
        pod_cap = node.allocatable.get("pods")
        room = shape.pods if pod_cap is None else max(0, pod_cap - len(usage.pods))
        slots = min(free // shape.gpus_per_pod, room)
        if free < shape.gpus_per_pod:
            reasons.append(f"fragmented: {free} free {res}, a pod needs {shape.gpus_per_pod}")
        if room <= 0:
            reasons.append(f"pod capacity full: {len(usage.pods)}/{pod_cap} pods")
    return NodeHeadroom(
        name=node.name,
        node_class=node_class(node, group_by),
        allocatable=alloc,
        requested=requested,
        free=free,
        healthy=healthy,
        usable=usable,
        slots=slots,
        reasons=reasons,
    )


def _relevant(node: Node, resource: str, group_by: str) -> bool:
    return node.offers(resource) or group_by in node.labels


def check(
    nodes: Sequence[Node],
    pods: Iterable[Pod],
    shape: Shape,
    policy: Policy | None = None,
    quotas: Sequence[QuotaLimit] = (),
) -> HeadroomResult:
    """Answer whether ``shape`` fits now; the verdict comes with the numbers behind it."""
    policy = policy or Policy()
    usage = usage_by_node(pods)
    empty = NodeUsage()
    evaluated = [
        evaluate_node(n, usage.get(n.name, empty), shape, policy.group_by)
        for n in sorted(nodes, key=lambda n: n.name)
        if _relevant(n, shape.resource, policy.group_by)
    ]
    classes: dict[str, ClassHeadroom] = {}
    for nh in evaluated:
        c = classes.setdefault(nh.node_class, ClassHeadroom(nh.node_class))
        c.nodes += 1
        if nh.healthy:
            c.nodes_healthy += 1
            c.allocatable += nh.allocatable
            c.requested += nh.requested
            c.free += nh.free
        else:
            c.unavailable += nh.allocatable
        if nh.usable:
            c.nodes_usable += 1
            c.free_usable += nh.free
            c.largest_free_block = max(c.largest_free_block, nh.free)
            c.slots += nh.slots
    g = shape.gpus_per_pod
    for c in classes.values():
        c.reserve = policy.reserve_per_class.get(c.node_class, 0)
        c.pods_placeable = min(c.slots, max(0, c.free - c.reserve) // g)
    ordered = sorted(classes.values(), key=lambda c: c.node_class)
    on_nodes = sum(c.pods_placeable for c in ordered)
    free_total = sum(c.free for c in ordered)
    placeable = _admissible(shape, policy, on_nodes, free_total, quotas)
    shortages = _shortages(shape, policy, ordered, evaluated, on_nodes, free_total, quotas)
    fits = not shortages
    plan = _plan(shape, ordered, evaluated) if fits else {}
    return HeadroomResult(
        shape=shape,
        policy=policy,
        fits=fits,
        pods_placeable=placeable,
        free_total=free_total,
        classes=ordered,
        nodes=evaluated,
        quotas=list(quotas),
        shortages=shortages,
        plan=plan,
        nodes_total=len(nodes),
        pods_placeable_on_nodes=on_nodes,
    )


def _admissible(
    shape: Shape,
    policy: Policy,
    on_nodes: int,
    free_total: int,
    quotas: Sequence[QuotaLimit],
) -> int:
    """How many pods of the shape could be created and placed now: what the nodes take, and
    no more than the total reserve leaves, nor than the namespace's ResourceQuotas admit (the
    API server refuses the pod that would exceed one)."""
    g = shape.gpus_per_pod
    caps = [on_nodes]
    if policy.reserve:
        caps.append(max(0, free_total - policy.reserve) // g)
    for q in quotas:
        caps.append(q.left // (g if q.resource.startswith("requests.") else 1))
    return max(0, min(caps))


def _class_line(c: ClassHeadroom, g: int, res: str) -> str:
    reserve = f", reserve {c.reserve} of {c.free} free in class" if c.reserve else ""
    return (
        f"class {c.node_class}: {c.pods_placeable} pod(s) fit (free {c.free_usable} {res} "
        f"on {c.nodes_usable} usable node(s), largest block {c.largest_free_block}, "
        f"need {g} per pod{reserve})"
    )


def _shortages(
    shape: Shape,
    policy: Policy,
    classes: Sequence[ClassHeadroom],
    nodes: Sequence[NodeHeadroom],
    placeable: int,
    free_total: int,
    quotas: Sequence[QuotaLimit],
) -> list[str]:
    out: list[str] = []
    g, res = shape.gpus_per_pod, shape.resource
    if placeable < shape.pods:
        usable = [c for c in classes if c.nodes_usable]
        if usable:
            lines = "; ".join(_class_line(c, g, res) for c in usable)
            out.append(f"only {placeable} of {shape.pods} pod(s) fit: {lines}")
        else:
            kinds = excluded_reasons(nodes)
            why = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "no GPU nodes"
            out.append(f"no node can take a pod needing {g} {res} ({why})")
    if policy.reserve and free_total - shape.needed < policy.reserve:
        out.append(
            f"total reserve: {free_total} {res} free, {shape.needed} needed would leave "
            f"{free_total - shape.needed}, below the reserve of {policy.reserve}"
        )
    for q in quotas:
        need = shape.needed if q.resource.startswith("requests.") else shape.pods
        if q.left < need:
            out.append(
                f"ResourceQuota {q.quota} in namespace {shape.namespace}: {q.left} of "
                f"{q.hard} {q.resource} left ({q.used} used), {need} needed"
            )
    return out


def _plan(
    shape: Shape, classes: Sequence[ClassHeadroom], nodes: Sequence[NodeHeadroom]
) -> dict[str, int]:
    """One placement that satisfies the verdict: fullest free nodes first, within class caps."""
    left = shape.pods
    cap = {c.node_class: c.pods_placeable for c in classes}
    plan: dict[str, int] = {}
    for nh in sorted(nodes, key=lambda n: (-n.free, n.name)):
        if left == 0:
            break
        take = min(nh.slots, cap.get(nh.node_class, 0), left)
        if take > 0:
            plan[nh.name] = take
            cap[nh.node_class] -= take
            left -= take
    return plan
