"""Quarantine for ``gpuops nodes inspect --quarantine`` and the breaker reset
(``gpuops nodes quarantine-reset``). The rules are the core's (:mod:`gpuops.core.quarantine`).

State lives in the cluster: ConfigMap ``gpuops-quarantine`` (key ``state.json``) in the
namespace ``--quarantine-namespace`` (default ``gpuops-system``; it must exist). It is written
read-modify-write with the resourceVersion it was read at as the precondition: a concurrent
inspection (409) makes this one read the state again and plan again, so two inspections never
quarantine past a breaker's limit together. Only after the state is written are the taints
set (setter ``quarantine``: core/taintclaims.py; each node write conditional on its
resourceVersion, usecases/nodes/taints.py); every node the state holds quarantined and this
inspection saw has its taint claim asserted again, so a failed taint write is repaired by the
next inspection.

Class: the node's inventory group (the hosts of one group are one model with one policy).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from gpuops.adapters.kube import Conflict, KubeClient, NotFound
from gpuops.adapters.kube import apps as kubeapps
from gpuops.adapters.kube import nodes as kubenodes
from gpuops.core import quarantine as q
from gpuops.core.inventory import Inventory
from gpuops.core.kubeinput import dns_label
from gpuops.errors import InvalidInput, OperationFailed
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.nodes import budgetcall, taints
from gpuops.usecases.nodes.budget import BudgetSpec
from gpuops.usecases.outcome import Outcome

CONFIGMAP = "gpuops-quarantine"
KEY = "state.json"
DEFAULT_NAMESPACE = "gpuops-system"
ATTEMPTS = 5
#: the cordon note on a node ``--drain`` cordoned (gpuops uncordons only what it cordoned)
CORDON_NOTE = "gpuops nodes inspect --quarantine"


@dataclass(frozen=True)
class QuarantinePolicy:
    share_pct: float = q.DEFAULT_SHARE_PCT
    release_after: int = q.DEFAULT_RELEASE_AFTER
    namespace: str = DEFAULT_NAMESPACE
    drain: bool = False
    drain_timeout_s: int = 300
    #: with ``drain``: the disruption budget each drained node takes its share from
    budget: BudgetSpec | None = None


class BreakerDocument(TypedDict):
    since: str
    reason: str
    nodes: list[str]


class QuarantineDocument(TypedDict):
    """What ``--quarantine`` did (the ``quarantine`` key of the inspect result)."""

    configmap: str  # namespace/name of the state
    quarantined: list[str]  # every host quarantined after this inspection
    newly: list[str]  # quarantined by this inspection
    released: list[str]  # released by this inspection (N healthy inspections in a row)
    held: dict[str, str]  # critical hosts not quarantined: why (the breaker)
    tripped: list[str]  # classes whose breaker this inspection opened
    breakers_open: dict[str, BreakerDocument]  # class -> the open breaker
    limits: dict[str, int]  # class -> nodes that may be quarantined at once
    healthy_streak: dict[str, int]  # quarantined host -> healthy inspections in a row
    drained: list[str]  # with --drain: hosts cordoned and drained by this inspection
    not_drained: dict[str, str]  # with --drain: quarantined now but not drained: why
    release_after: int
    share_pct: float


@dataclass
class QuarantineReport:
    configmap: str
    plan: q.Plan
    hosts_of: dict[str, str]  # node -> host
    policy: QuarantinePolicy
    drained: list[str] = field(default_factory=list)
    not_drained: dict[str, str] = field(default_factory=dict)

    def _host(self, node: str) -> str:
        return self.hosts_of.get(node, node)

    def to_dict(self) -> QuarantineDocument:
        st = self.plan.state
        return {
            "configmap": self.configmap,
            "quarantined": sorted(self._host(n) for n in st.quarantined()),
            "newly": [self._host(n) for n in self.plan.quarantine],
            "released": [self._host(n) for n in self.plan.release],
            "held": {self._host(n): why for n, why in sorted(self.plan.held.items())},
            "tripped": list(self.plan.tripped),
            "breakers_open": {
                c: {"since": b.since, "reason": b.reason, "nodes": list(b.nodes)}
                for c, b in sorted(st.breakers.items())
            },
            "limits": dict(self.plan.limits),
            "healthy_streak": {
                self._host(n): s.healthy_streak
                for n, s in sorted(st.nodes.items())
                if s.quarantined
            },
            "drained": list(self.drained),
            "not_drained": dict(self.not_drained),
            "release_after": self.policy.release_after,
            "share_pct": self.policy.share_pct,
        }


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Store:
    """The state ConfigMap, read and written with its resourceVersion."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube = kube
        self.namespace = dns_label(namespace, "quarantine_namespace")
        self.where = f"ConfigMap {self.namespace}/{CONFIGMAP}"

    def read(self) -> tuple[Any, q.State]:
        try:
            cm = kubeapps.get_configmap(self.kube, self.namespace, CONFIGMAP)
        except NotFound:
            cm = None
        return cm, q.decode(((cm or {}).get("data") or {}).get(KEY), self.where)

    def update(self, change: Callable[[q.State], tuple[q.State, Any]]) -> Any:
        """Read, ``change`` (state -> (new state, what to return)), write conditionally; on
        a conflict (someone wrote it since it was read) all of it again."""
        for _ in range(ATTEMPTS):
            cm, state = self.read()
            new, out = change(state)
            data = {KEY: q.encode(new)}
            if cm is None and data[KEY] == q.encode(q.State()):
                return out  # nothing to remember: no ConfigMap is made for it
            try:
                if cm is None:
                    kubeapps.create_configmap(self.kube, self.namespace, CONFIGMAP, data)
                elif (cm.get("data") or {}).get(KEY) != data[KEY]:
                    kubeapps.replace_configmap_data(self.kube, cm, {**cm["data"], **data})
            except Conflict:
                continue
            except NotFound:
                if cm is None:
                    raise InvalidInput(
                        f"namespace {self.namespace} does not exist: the quarantine state "
                        "lives there",
                        hint="create it (kubectl create namespace "
                        f"{self.namespace}) or give --quarantine-namespace",
                        field="quarantine_namespace",
                    ) from None
                continue
            return out
        raise OperationFailed(f"{self.where} kept changing while gpuops wrote it")


Say = Callable[[str], None]


def apply(
    kube: KubeClient,
    inv: Inventory,
    statuses: Mapping[str, tuple[str, str]],  # host -> (status, reason)
    policy: QuarantinePolicy,
    say: Say,
) -> QuarantineReport:
    """Plan against the state in the cluster, write it, then taint and release."""
    store = Store(kube, policy.namespace)
    node_of = {h.name: h.node_name for h in inv.hosts}
    hosts_of = {v: k for k, v in node_of.items()}
    sizes: dict[str, int] = {}
    for h in inv.hosts:
        sizes[h.group] = sizes.get(h.group, 0) + 1
    seen = [
        q.Seen(node_of[h.name], h.group, *statuses[h.name]) for h in inv.hosts if h.name in statuses
    ]
    now = _now()

    def change(state: q.State) -> tuple[q.State, q.Plan]:
        p = q.plan(
            state,
            seen,
            sizes,
            share_pct=policy.share_pct,
            release_after=policy.release_after,
            now=now,
        )
        return p.state, p

    plan: q.Plan = store.update(change)
    report = QuarantineReport(store.where.split(" ", 1)[1], plan, hosts_of, policy)
    seen_nodes = {s.node for s in seen}
    for node in plan.state.quarantined():
        if node not in seen_nodes:
            continue
        ns = plan.state.nodes[node]
        taints.mark_unhealthy(kube, node, q.SETTER, f"quarantined {ns.since}: {ns.reason}")
        if node in plan.quarantine:
            say(f"[gpuops] quarantined node {node}: {ns.reason}")
    for node in plan.release:
        gone = taints.release_unhealthy(kube, node, q.SETTER)
        info = kubenodes.get_node(kube, node)
        if info.cordoned_by_us and info.annotations.get(kubenodes.CORDONED_BY) == CORDON_NOTE:
            kubenodes.uncordon(kube, node)
        say(
            f"[gpuops] released node {node} after {policy.release_after} healthy inspections"
            + ("" if gone else " (another claim keeps the taint)")
        )
    for klass in plan.tripped:
        say(
            f"[gpuops] quarantine circuit breaker of class {klass} OPEN: "
            + plan.state.breakers[klass].reason
        )
    if policy.drain and policy.budget is not None:
        _drain(kube, report, policy.budget, say)
    return report


def _drain(kube: KubeClient, report: QuarantineReport, spec: BudgetSpec, say: Say) -> None:
    """Cordon and drain the nodes quarantined now, each holding its share of the disruption
    budget while it drains (a spent budget: the node stays tainted, not drained, said)."""
    for node in report.plan.quarantine:
        host = report.hosts_of.get(node, node)
        with budgetcall.held(kube, node, spec, say) as refused:
            if refused is not None:
                report.not_drained[host] = refused
                say(f"[gpuops] node {node} quarantined but not drained: {refused}")
                continue
            info = kubenodes.get_node(kube, node)
            if not info.unschedulable:
                kubenodes.cordon(kube, node, CORDON_NOTE)
            rest = kubenodes.wait_for(
                kube,
                node,
                "nvidia.com/gpu",
                which="drain",
                timeout_s=report.policy.drain_timeout_s,
                evict_after=True,
            )
            if rest:
                why = f"drain incomplete: {', '.join(kubenodes.names(rest))}"
                report.not_drained[host] = why
                say(f"[gpuops] node {node}: {why}")
                continue
            report.drained.append(host)
            say(f"[gpuops] cordoned and drained node {node}")


# -- the explicit reset ----------------------------------------------------------------------


@dataclass(frozen=True)
class ResetRequest:
    classes: tuple[str, ...] = ()  # empty: every open breaker
    namespace: str = DEFAULT_NAMESPACE
    cluster: Cluster = field(default_factory=Cluster)


class ResetDocument(TypedDict):
    """The ``result`` of ``gpuops nodes quarantine-reset``."""

    configmap: str
    closed: list[str]  # the classes whose breaker was open and is closed now
    still_open: list[str]
    quarantined: list[str]  # nodes that stay quarantined (released by healthy inspections)


@dataclass
class ResetResult:
    configmap: str
    closed: list[str]
    still_open: list[str]
    quarantined: list[str]

    def to_dict(self) -> ResetDocument:
        return {
            "configmap": self.configmap,
            "closed": list(self.closed),
            "still_open": list(self.still_open),
            "quarantined": list(self.quarantined),
        }


def reset(request: ResetRequest) -> Outcome[ResetResult]:
    """Close the named breakers (conditional write). Naming a class whose breaker is not
    open is not an error (it is said: ``closed`` lacks it)."""
    for c in request.classes:
        if not c or any(ch.isspace() or ord(ch) < 32 for ch in c):
            raise InvalidInput(f"class {c!r} is not a class name", field="classes")
    kube = request.cluster.connect()
    try:
        store = Store(kube, request.namespace)

        def change(state: q.State) -> tuple[q.State, tuple[list[str], q.State]]:
            new, closed = q.reset(state, request.classes)
            return new, (closed, new)

        closed, state = store.update(change)
    finally:
        kube.close()
    return Outcome(
        ResetResult(
            store.where.split(" ", 1)[1], closed, sorted(state.breakers), state.quarantined()
        ),
        None,
    )
