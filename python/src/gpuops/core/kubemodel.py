"""A small, typed model of Kubernetes nodes and pods, and the scheduler's matching rules.

Only what GPU capacity questions need: labels, taints, cordon and Ready state, allocatable
amounts per resource; a pod's requests, node selector, required node affinity and
tolerations. The matching rules follow kube-scheduler's filter plugins (NodeUnschedulable,
TaintToleration, NodeAffinity, NodeResourcesFit) so that our answers agree with its
``FailedScheduling`` events. Pure: no Kubernetes client, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Annotated, TypedDict

#: Pod phases after which a pod no longer holds resources on its node.
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
#: The taint key kube-scheduler's NodeUnschedulable plugin checks tolerations against.
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
#: Effects that keep a pod off a node (PreferNoSchedule only affects scoring).
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
TOLERATION_OPERATORS = ("Equal", "Exists")
AFFINITY_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")

_SUFFIXES: dict[str, Fraction] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_INT_SUFFIXES = {k: int(v) for k, v in _SUFFIXES.items() if len(k) == 2}
_QUANTITY = re.compile(
    r"(?P<num>[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exp>[+-]?[0-9]{1,3}))?"
)


def parse_quantity(text: str | int | float, *, milli: bool = False) -> int:
    """A Kubernetes quantity as an integer, rounded up like ``Quantity.Value()``.

    With ``milli`` the value is in thousandths (``MilliValue()``), as the scheduler counts CPU.
    """
    if isinstance(text, bool):
        raise TypeError(f"{text!r} is not a quantity")
    if isinstance(text, str) and text.isascii():  # fast paths: what the API writes most
        if text.isdigit():
            return int(text) * 1000 if milli else int(text)
        if milli and text[-1:] == "m" and text[:-1].isdigit():
            return int(text[:-1])
        mult = _INT_SUFFIXES.get(text[-2:])
        if mult and text[:-2].isdigit():
            return int(text[:-2]) * mult * (1000 if milli else 1)
    if isinstance(text, int | float):
        if isinstance(text, float) and not math.isfinite(text):
            raise ValueError(f"{text!r} is not a Kubernetes quantity")
        value = Fraction(text)
    else:
        m = _QUANTITY.fullmatch(text)
        if not m:
            raise ValueError(f"{text!r} is not a Kubernetes quantity")
        value = Fraction(m["num"])
        if m["exp"] is not None:
            value *= Fraction(10) ** int(m["exp"])
        else:
            value *= _SUFFIXES[m["suffix"] or ""]
    if milli:
        value *= 1000
    return math.ceil(value)


def resource_amount(resource: str, quantity: str | int | float) -> int:
    """The scheduler's integer for ``quantity`` of ``resource``: millicores for CPU."""
    return parse_quantity(quantity, milli=resource == "cpu")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


class TolerationDocument(TypedDict, total=False):
    """A toleration as JSON: its non-empty fields (no value for ``Exists``)."""

    key: str
    operator: str
    value: str
    effect: str


class PlacementDocument(TypedDict):
    """Where a workload may go, as JSON."""

    node_selector: dict[str, str]
    node_affinity: list[str] | None  # each required term in words; None: no affinity
    tolerations: list[Annotated[dict[str, str], TolerationDocument]]


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """``Toleration.ToleratesTaint`` of k8s.io/api/core/v1."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("", "Equal") and self.value == taint.value

    def to_dict(self) -> dict[str, str]:
        doc = {"key": self.key, "operator": self.operator, "effect": self.effect}
        if self.operator != "Exists":
            doc["value"] = self.value
        return {k: v for k, v in doc.items() if v}


@dataclass(frozen=True)
class Requirement:
    """One ``matchExpressions`` (or ``matchFields``) entry of a node selector term."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        op = self.operator
        if op == "In":
            return present and value in self.values
        if op == "NotIn":
            return not present or value not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt") and present and len(self.values) == 1:
            try:
                have, bound = int(value), int(self.values[0])
            except ValueError:
                return False
            return have > bound if op == "Gt" else have < bound
        return False

    def __str__(self) -> str:
        if self.operator in ("Exists", "DoesNotExist"):
            return f"{'' if self.operator == 'Exists' else '!'}{self.key}"
        if self.operator == "In" and len(self.values) == 1:
            return f"{self.key}={self.values[0]}"
        if self.operator in ("Gt", "Lt"):
            return f"{self.key}{'>' if self.operator == 'Gt' else '<'}{','.join(self.values)}"
        word = "in" if self.operator == "In" else "notin"
        return f"{self.key} {word} ({','.join(self.values)})"


@dataclass(frozen=True)
class NodeSelectorTerm:
    """Requirements ANDed; a term with none matches no node (as in Kubernetes)."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if not self.expressions and not self.fields:
            return False
        return all(r.matches(labels) for r in self.expressions) and all(
            r.matches({"metadata.name": node_name}) for r in self.fields
        )

    def __str__(self) -> str:
        return ",".join(str(r) for r in (*self.expressions, *self.fields))


@dataclass(frozen=True)
class Placement:
    """Where a pod may go: node selector, required node affinity (terms ORed), tolerations.

    ``affinity`` is ``None`` when the pod has no required node affinity at all; an empty tuple
    means required affinity with no terms, which no node satisfies.
    """

    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: tuple[NodeSelectorTerm, ...] | None = None
    tolerations: tuple[Toleration, ...] = ()

    def selector_mismatch(self, node: Node) -> list[str]:
        """What of the selector/affinity ``node`` fails; empty when it matches."""
        missing = [
            f"{k}={v}" for k, v in sorted(self.node_selector.items()) if node.labels.get(k) != v
        ]
        if self.affinity is not None and not any(
            t.matches(node.name, node.labels) for t in self.affinity
        ):
            missing.append(" or ".join(f"({t})" for t in self.affinity) or "(no terms)")
        return missing

    def untolerated_taint(self, node: Node) -> Taint | None:
        """The first NoSchedule/NoExecute taint of ``node`` no toleration covers."""
        for taint in node.taints:
            if taint.effect in BLOCKING_EFFECTS and not self.tolerates(taint):
                return taint
        return None

    def tolerates(self, taint: Taint) -> bool:
        return any(t.tolerates(taint) for t in self.tolerations)

    def tolerates_unschedulable(self) -> bool:
        return self.tolerates(Taint(UNSCHEDULABLE_TAINT, "", "NoSchedule"))

    def to_dict(self) -> PlacementDocument:
        return {
            "node_selector": dict(self.node_selector),
            "node_affinity": None if self.affinity is None else [str(t) for t in self.affinity],
            "tolerations": [t.to_dict() for t in self.tolerations],
        }


@dataclass
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    #: why the node is not Ready (the Ready condition's reason), empty when Ready
    not_ready_reason: str = ""
    #: resource name -> amount (``resource_amount``); ``pods`` is the pod-count capacity
    allocatable: Mapping[str, int] = field(default_factory=dict)
    #: resources the node reports in ``status.capacity`` (a device plugin at 0 still does)
    capacity: Mapping[str, int] = field(default_factory=dict)

    def offers(self, resource: str) -> bool:
        return resource in self.allocatable or resource in self.capacity


@dataclass
class Pod:
    namespace: str
    name: str
    node_name: str = ""
    phase: str = "Pending"
    requests: Mapping[str, int] = field(default_factory=dict)
    placement: Placement = field(default_factory=Placement)
    #: ``Kind/name`` of the controlling owner, empty for a bare pod
    owner: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES


@dataclass(frozen=True)
class Container:
    """The resource part of one container spec."""

    requests: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)
    #: ``Always`` marks a sidecar (restartable init container)
    restart_policy: str = ""

    def effective(self) -> dict[str, int]:
        """Requests, with limits standing in where a request is absent (API defaulting)."""
        return {**self.limits, **self.requests}


def _add(total: dict[str, int], more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount


def pod_requests(
    containers: Sequence[Container],
    init_containers: Sequence[Container] = (),
    overhead: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """What the scheduler reserves for a pod (``resourcehelper.PodRequests``).

    Containers run together (sum); init containers run one after the other (max), each
    alongside the sidecars started before it; sidecars also run with the main containers.
    """
    total: dict[str, int] = {}
    for c in containers:
        _add(total, c.effective())
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in init_containers:
        own = c.effective()
        if c.restart_policy == "Always":
            _add(total, own)
            _add(sidecars, own)
            peak = dict(sidecars)
        else:
            peak = dict(sidecars)
            _add(peak, own)
        for name, amount in peak.items():
            init_max[name] = max(init_max.get(name, 0), amount)
    for name, amount in init_max.items():
        total[name] = max(total.get(name, 0), amount)
    if overhead:
        _add(total, overhead)
    return {k: v for k, v in total.items() if v}


@dataclass
class NodeUsage:
    """What the non-terminal pods bound to one node hold."""

    requested: dict[str, int] = field(default_factory=dict)
    pods: list[Pod] = field(default_factory=list)


def usage_by_node(pods: Iterable[Pod]) -> dict[str, NodeUsage]:
    """Pods and summed requests per node; hot on a large cluster, so plain dict work inline."""
    usage: dict[str, NodeUsage] = {}
    for pod in pods:
        node = pod.node_name
        if not node or pod.phase in TERMINAL_PHASES:
            continue
        u = usage.get(node)
        if u is None:
            u = usage[node] = NodeUsage()
        u.pods.append(pod)
        requested = u.requested
        for name, amount in pod.requests.items():
            requested[name] = requested.get(name, 0) + amount
    return usage


def node_class(node: Node, group_by: str, fallback: str = "nvidia.com/gpu.product") -> str:
    """The node's class: its ``group_by`` label, else its ``fallback`` label, else ``-``."""
    return node.labels.get(group_by) or node.labels.get(fallback) or "-"
