"""Why a pending pod does not fit: per node, then summarised the way kube-scheduler does.

The filters run in the default profile's order (NodeUnschedulable, TaintToleration,
NodeAffinity, NodeResourcesFit) and, like the scheduler, a node's reasons are those of the
first filter that rejects it; the histogram ``0/N nodes are available: ...`` is formatted and
sorted as ``FitError.Error()`` does (kube-scheduler v1.36), so it can be compared with the
real ``FailedScheduling`` message. On top of that we say what the scheduler does not: how many
GPUs are free where, which selector or taint excluded a node, and concrete fixes.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from gpuops.core.kubemodel import (
    BLOCKING_EFFECTS,
    UNSCHEDULABLE_TAINT,
    Node,
    NodeUsage,
    PlacementDocument,
    Pod,
    node_class,
    usage_by_node,
)

UNSCHEDULABLE = "node(s) were unschedulable"
UNTOLERATED_TAINT = "node(s) had untolerated taint(s)"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"
_NATIVE = ("cpu", "memory", "ephemeral-storage")
#: taints the node lifecycle controller sets from the Ready condition
CONDITION_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
_MAX_LISTED = 5


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


@dataclass
class NodeFit:
    name: str
    node_class: str
    #: the reasons the scheduler counts for this node (first rejecting filter), empty = fits
    scheduler_reasons: list[str] = field(default_factory=list)
    #: every failing check, kind -> detail (kinds: not-ready, unschedulable, taint, affinity,
    #: resources)
    failures: dict[str, str] = field(default_factory=dict)
    #: free amount of each resource the pod requests
    free: dict[str, int] = field(default_factory=dict)
    #: the first untolerated NoSchedule/NoExecute taint (what the scheduler stops at)
    taint: str = ""
    #: requested extended resources the node advertises in capacity but offers 0 of
    dead: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return not self.scheduler_reasons


def _fit_reasons(pod: Pod, node: Node, usage: NodeUsage) -> tuple[list[str], dict[str, int]]:
    reasons: list[str] = []
    pod_cap = node.allocatable.get("pods")
    if pod_cap is not None and len(usage.pods) + 1 > pod_cap:
        reasons.append(TOO_MANY_PODS)
    free: dict[str, int] = {}
    for res in [r for r in _NATIVE if r in pod.requests] + sorted(
        r for r in pod.requests if r not in _NATIVE and r != "pods"
    ):
        want = pod.requests[res]
        free[res] = node.allocatable.get(res, 0) - usage.requested.get(res, 0)
        if want > 0 and want > free[res]:
            reasons.append(insufficient(res))
    return reasons, free


def filter_node(pod: Pod, node: Node, usage: NodeUsage, group_by: str) -> NodeFit:
    place = pod.placement
    fit = NodeFit(node.name, node_class(node, group_by))
    checks: list[tuple[str, list[str], str]] = []
    if node.unschedulable and not place.tolerates_unschedulable():
        checks.append(("unschedulable", [UNSCHEDULABLE], "cordoned (spec.unschedulable)"))
    taint = place.untolerated_taint(node)
    if taint is not None:
        fit.taint = str(taint)
        # taints the node's state explains go with that state: uncordon / repair fixes them
        own = [
            t
            for t in node.taints
            if t.effect in BLOCKING_EFFECTS
            and not place.tolerates(t)
            and not (node.unschedulable and t.key == UNSCHEDULABLE_TAINT)
            and not (not node.ready and t.key in CONDITION_TAINTS)
        ]
        if own:
            checks.append(("taint", [UNTOLERATED_TAINT], ", ".join(str(t) for t in own)))
        elif not node.ready:
            checks.append(("not-ready", [UNTOLERATED_TAINT], str(taint)))
        else:
            checks.append(("unschedulable", [UNTOLERATED_TAINT], str(taint)))
    mismatch = place.selector_mismatch(node)
    if mismatch:
        keys = [k for k, v in sorted(place.node_selector.items()) if node.labels.get(k) != v]
        for term in place.affinity or ():
            keys.extend(r.key for r in term.expressions if r.key not in keys)
        have = ", ".join(f"{k}={node.labels.get(k, '<none>')}" for k in keys)
        checks.append(("affinity", [AFFINITY], f"wants {', '.join(mismatch)}; has {have or '-'}"))
    fit_reasons, fit.free = _fit_reasons(pod, node, usage)
    fit.dead = sorted(
        r
        for r in pod.requests
        if r not in _NATIVE and r in node.capacity and node.allocatable.get(r, 0) <= 0
    )
    if fit_reasons:
        detail = ", ".join(
            f"{r} (free {fit.free.get(r.removeprefix('Insufficient '), 0)}, need "
            f"{pod.requests.get(r.removeprefix('Insufficient '), 0)})"
            if r.startswith("Insufficient ")
            else r
            for r in fit_reasons
        )
        checks.append(("resources", fit_reasons, detail))
    if checks:
        fit.scheduler_reasons = list(checks[0][1])
    for kind, _, detail in checks:
        fit.failures[kind] = "; ".join(x for x in (fit.failures.get(kind), detail) if x)
    if not node.ready:
        state = node.not_ready_reason or "Ready condition not True"
        fit.failures["not-ready"] = "; ".join(
            x for x in (f"NotReady ({state})", fit.failures.get("not-ready")) if x
        )
    return fit


def histogram(fits: Iterable[NodeFit]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for f in fits:
        counts.update(f.scheduler_reasons)
    return counts


def scheduler_message(nodes_total: int, counts: Mapping[str, int]) -> str:
    """``FitError.Error()``'s filter part: ``"count reason"`` strings sorted as strings."""
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    return f"0/{nodes_total} nodes are available: {', '.join(parts)}."


_EVENT = re.compile(r"^0/(?P<total>\d+) nodes are available: (?P<body>.*?)\.(?: |$)")
_ITEM = re.compile(r"^(?P<n>\d+) (?P<reason>.+)$")


def normalize_reason(reason: str) -> str:
    """Fold version differences: ``untolerated taint {k: v}`` (<=1.33) -> ``taint(s)``."""
    if reason.startswith("node(s) had untolerated taint") or reason.startswith("node(s) had taint"):
        return UNTOLERATED_TAINT
    return reason


def parse_scheduler_message(message: str) -> tuple[int, Counter[str]] | None:
    """Parse a FailedScheduling message into (nodes total, reason -> count); None if other."""
    m = _EVENT.match(message.strip())
    if not m:
        return None
    counts: Counter[str] = Counter()
    body = m["body"]
    for item in body.split(", ") if body else []:
        im = _ITEM.match(item.strip())
        if not im:
            return None
        counts[normalize_reason(im["reason"])] += int(im["n"])
    return int(m["total"]), counts


class NodeFitDocument(TypedDict):
    """One node's verdict as JSON: :class:`NodeFit`'s fields and whether it fits."""

    name: str
    node_class: str
    scheduler_reasons: list[str]
    failures: dict[str, str]  # kind of check -> detail
    free: dict[str, int]  # resource -> free amount
    taint: str
    dead: list[str]
    fits: bool


class ExplainDocument(TypedDict):
    """Why a pod does not fit, as JSON."""

    pod: str  # namespace/name
    owner: str  # Kind/name of the controlling owner, empty for a bare pod
    requests: dict[str, int]  # resource -> amount
    placement: PlacementDocument
    nodes_total: int
    fits_now: list[str]
    reasons: dict[str, int]  # the scheduler's reason -> nodes
    scheduler_message: str
    summary: str
    fixes: list[str]
    nodes: list[NodeFitDocument]
    event_message: NotRequired[str]  # the scheduler's own FailedScheduling message
    agrees_with_event: NotRequired[bool | None]  # None: that message could not be read


@dataclass
class ExplainResult:
    pod: Pod
    nodes_total: int
    nodes: list[NodeFit]
    counts: Counter[str]
    summary: str
    fixes: list[str]
    event_message: str = ""

    @property
    def fits_now(self) -> list[str]:
        return [f.name for f in self.nodes if f.fits]

    @property
    def scheduler_message(self) -> str:
        return scheduler_message(self.nodes_total, self.counts)

    def agrees_with(self, message: str) -> bool | None:
        """Whether the real scheduler's message has our histogram; None if unparsable."""
        parsed = parse_scheduler_message(message)
        if parsed is None:
            return None
        total, counts = parsed
        ours = Counter({normalize_reason(k): v for k, v in self.counts.items()})
        return total == self.nodes_total and counts == ours

    def to_dict(self) -> ExplainDocument:
        doc: ExplainDocument = {
            "pod": self.pod.key,
            "owner": self.pod.owner,
            "requests": dict(self.pod.requests),
            "placement": self.pod.placement.to_dict(),
            "nodes_total": self.nodes_total,
            "fits_now": self.fits_now,
            "reasons": dict(sorted(self.counts.items())),
            "scheduler_message": self.scheduler_message,
            "summary": self.summary,
            "fixes": list(self.fixes),
            "nodes": [_fit_document(f) for f in self.nodes],
        }
        if self.event_message:
            doc["event_message"] = self.event_message
            doc["agrees_with_event"] = self.agrees_with(self.event_message)
        return doc


def _fit_document(f: NodeFit) -> NodeFitDocument:
    return {
        "name": f.name,
        "node_class": f.node_class,
        "scheduler_reasons": list(f.scheduler_reasons),
        "failures": dict(f.failures),
        "free": dict(f.free),
        "taint": f.taint,
        "dead": list(f.dead),
        "fits": f.fits,
    }


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_MAX_LISTED])
    return shown + (f" and {len(names) - _MAX_LISTED} more" if len(names) > _MAX_LISTED else "")


def _detail(reason: str, fits: Sequence[NodeFit], pod: Pod) -> str:
    hit = [f for f in fits if reason in f.scheduler_reasons]
    if reason.startswith("Insufficient "):
        res = reason.removeprefix("Insufficient ")
        most = max((f.free.get(res, 0) for f in hit), default=0)
        return f"most free: {max(most, 0)}, need {pod.requests.get(res, 0)}"
    if reason == AFFINITY:
        place = pod.placement
        wants = [f"{k}={v}" for k, v in sorted(place.node_selector.items())]
        if place.affinity is not None:
            wants.append(" or ".join(f"({t})" for t in place.affinity) or "(no terms)")
        return ", ".join(wants)
    if reason == UNTOLERATED_TAINT:
        taints = Counter(f.taint for f in hit)
        return ", ".join(f"{t}" + (f" x{n}" if n > 1 else "") for t, n in taints.most_common())
    if reason == UNSCHEDULABLE:
        return "cordoned: " + _names([f.name for f in hit])
    return ""


def _summary(nodes_total: int, counts: Counter[str], fits: Sequence[NodeFit], pod: Pod) -> str:
    parts = []
    for item in sorted(f"{n} {r}" for r, n in counts.items()):
        reason = item.split(" ", 1)[1]
        detail = _detail(reason, fits, pod)
        parts.append(f"{item} ({detail})" if detail else item)
    ok = [f.name for f in fits if f.fits]
    if ok:
        parts.append(f"{len(ok)} node(s) fit now: {_names(ok)}")
    return f"{len(ok)}/{nodes_total} nodes are available: {', '.join(parts)}"


def _fixes(pod: Pod, fits: Sequence[NodeFit], usage: Mapping[str, NodeUsage]) -> list[str]:
    out: list[str] = []
    ok = [f.name for f in fits if f.fits]
    if ok:
        out.append(f"the pod fits now on {_names(ok)}: the scheduler places it on its next try")
    only: dict[str, list[NodeFit]] = defaultdict(list)
    for f in fits:
        if len(f.failures) == 1:
            only[next(iter(f.failures))].append(f)
    by_class: dict[str, list[str]] = defaultdict(list)
    for f in only["affinity"]:
        by_class[f.node_class].append(f.name)
    for cls, names in sorted(by_class.items()):
        out.append(
            f"relax the node selector/affinity: class {cls} would fit it now on {_names(names)}"
        )
    if only["taint"]:
        taints = sorted({f.failures["taint"] for f in only["taint"]})
        out.append(
            f"tolerate {', '.join(taints)}: would fit on {_names([f.name for f in only['taint']])}"
        )
    if only["unschedulable"]:
        names = [f.name for f in only["unschedulable"]]
        out.append(f"uncordon {_names(names)} (kubectl uncordon NODE): it would fit there")
    wanted = [r for r in pod.requests if r not in _NATIVE and r != "pods"]
    if only["not-ready"]:
        names = [f.name for f in only["not-ready"]]
        out.append(
            f"{_names(names)} would fit but are NotReady: check kubelet and containerd "
            "out of band; do not reboot nodes running training"
        )
    for res in wanted:
        dead = [f.name for f in fits if res in f.dead and "affinity" not in f.failures]
        if dead:
            out.append(
                f"{_names(dead)} report no allocatable {res} with nothing using it: check "
                "the device plugin and driver (nvidia.com/gpu dropping to 0 means a broken driver)"
            )
        short = [f for f in only["resources"] if insufficient(res) in f.scheduler_reasons]
        holders: list[tuple[int, str]] = []
        owners: Counter[str] = Counter()
        owner_pods: Counter[str] = Counter()
        for f in short:
            for p in usage.get(f.name, NodeUsage()).pods:
                amount = p.requests.get(res, 0)
                if amount:
                    owner = f", {p.owner}" if p.owner else ""
                    holders.append((amount, f"{p.key} ({amount} on {f.name}{owner})"))
                    who = f"{p.namespace}/{p.owner or p.name}"
                    owners[who] += amount
                    owner_pods[who] += 1
        if holders:
            holders.sort(key=lambda h: (-h[0], h[1]))
            by_owner = ", ".join(
                f"{who} ({n} in {owner_pods[who]} pod(s))" for who, n in owners.most_common(5)
            )
            shown = [h[1] for h in holders[:_MAX_LISTED]]
            more = f" and {len(holders) - _MAX_LISTED} more" if len(holders) > _MAX_LISTED else ""
            out.append(
                f"{res} on the matching nodes is held by {by_owner}; pods: {', '.join(shown)}{more}"
            )
    return out


def explain(
    pod: Pod, nodes: Sequence[Node], pods: Iterable[Pod], group_by: str = "accelerator"
) -> ExplainResult:
    """Why ``pod`` does not fit on any of ``nodes`` given the bound ``pods``."""
    usage = usage_by_node(p for p in pods if p.key != pod.key)
    empty = NodeUsage()
    fits = [
        filter_node(pod, n, usage.get(n.name, empty), group_by)
        for n in sorted(nodes, key=lambda n: n.name)
    ]
    counts = histogram(fits)
    return ExplainResult(
        pod=pod,
        nodes_total=len(nodes),
        nodes=fits,
        counts=counts,
        summary=_summary(len(nodes), counts, fits, pod),
        fixes=_fixes(pod, fits, usage),
    )
