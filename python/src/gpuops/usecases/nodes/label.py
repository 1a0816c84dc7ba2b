"""``gpuops nodes label``: each host's GPU facts (read as ``nodes inspect`` reads them) become
its node's labels (S-30, GFD names) and, by policy, a pending reboot or a critical finding a
taint. Idempotent: a node that matches is not written; only labels gpuops owns are removed.
The ``gpuops.io/gpu-unhealthy`` taint is claimed as setter ``nodes-inspect`` (its reason in the
node's ``gpuops.io/gpu-unhealthy-by`` annotation): inspection releases only its own claim, so a
taint ``nodes update`` (or a person) set stays. Every write is conditional on the node's
resourceVersion; on a conflict (the node changed since it was read, before the inspection) it is
read again and planned again, at most :data:`ATTEMPTS` times.
A host that cannot be read leaves its node as it is and makes the run unreachable (exit 4)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from gpuops.adapters import hostkeys
from gpuops.adapters.kube import KubeClient
from gpuops.adapters.kube import nodes as kubenodes
from gpuops.adapters.kube.client import Conflict
from gpuops.core import gpuhealth, inventory, nodelabels
from gpuops.core.inventory import DEFAULT_PATTERN
from gpuops.errors import OperationFailed, Unreachable
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.nodes import common
from gpuops.usecases.outcome import Outcome

#: writes of one node tried before the run fails (each after a conflict: read, plan again)
ATTEMPTS = 5


@dataclass(frozen=True)
class LabelRequest:
    inventory: str
    limit: str | None = None
    pattern: str = DEFAULT_PATTERN
    taint_effect: str = "NoSchedule"
    cluster: Cluster = field(default_factory=Cluster)
    timeout_s: int = 60
    parallel: int = 50
    dry_run: bool = False
    known_hosts: str | None = None  # None: the inventory's known_hosts, else ssh's own


#: A host's health as the inspection found it.
Health = Annotated[
    str,
    {"enum": [gpuhealth.OK, gpuhealth.WARNING, gpuhealth.CRITICAL, gpuhealth.UNREACHABLE]},
]


class NodeChangeDocument(TypedDict):
    """What gpuops changes (or would change) on one node."""

    node: str
    set_labels: dict[str, str]
    remove_labels: list[str]
    owned: list[str]  # the labels gpuops owns on the node after the change
    owned_changed: bool
    taints: list[str] | None  # the node's full new taint list; None: unchanged
    taints_added: list[str]
    taints_removed: list[str]
    unhealthy_by: dict[str, str] | None  # the unhealthy taint's claims after; None: unchanged
    changed: bool


class HostLabelsDocument(TypedDict):
    host: str
    node: str
    status: Annotated[
        str, {"enum": ["updated", "unchanged", "not-a-node", "unreachable", "would-update"]}
    ]
    health: Health
    labels: dict[str, str]  # the labels the inspection derived
    change: Annotated[dict[str, Any] | None, NodeChangeDocument]  # None: not a reachable node


class LabelDocument(TypedDict):
    """The ``result`` of ``gpuops nodes label``."""

    environment: str
    inventory: str
    limit: str | None
    server: str
    taint_effect: str
    dry_run: bool
    summary: dict[str, int]  # a host status -> hosts
    hosts: list[HostLabelsDocument]
    timings_s: dict[str, float]  # phase -> seconds


@dataclass
class HostLabels:
    host: str
    node: str
    status: str  # updated, unchanged, not-a-node, unreachable, would-update
    health: str
    change: nodelabels.NodeChange | None = None
    labels: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> HostLabelsDocument:
        return {
            "host": self.host,
            "node": self.node,
            "status": self.status,
            "health": self.health,
            "labels": dict(self.labels),
            "change": self.change.to_dict() if self.change else None,
        }


@dataclass
class LabelResult:
    request: LabelRequest
    environment: str
    server: str
    hosts: list[HostLabels]
    timings_s: dict[str, float]

    def to_dict(self) -> LabelDocument:
        counts: dict[str, int] = {}
        for h in self.hosts:
            counts[h.status] = counts.get(h.status, 0) + 1
        return {
            "environment": self.environment,
            "inventory": self.request.inventory,
            "limit": self.request.limit,
            "server": self.server,
            "taint_effect": self.request.taint_effect,
            "dry_run": self.request.dry_run,
            "summary": counts,
            "hosts": [h.to_dict() for h in self.hosts],
            "timings_s": dict(self.timings_s),
        }


def label(
    request: LabelRequest, connect: Callable[[Cluster], KubeClient] | None = None
) -> Outcome[LabelResult]:
    started = time.monotonic()
    keys = hostkeys.HostKeys(hostkeys.find(request.known_hosts, request.inventory))
    inv = common.load(request.inventory, request.limit, request.pattern)
    inventory.check_node_names(inv)
    nodelabels.check_inventory_labels(inv)  # exit 2 before any node is touched
    thresholds = inventory.check_thresholds(inv)
    kube = (connect or Cluster.connect)(request.cluster)
    try:
        nodes = {h.name: kubenodes.get_node(kube, h.node_name) for h in inv.hosts}
        for node in nodes.values():  # a malformed annotation stops the run before any write
            nodelabels.owned_labels(node.annotations, node.name)
        health, _ = common.inspect_hosts(
            inv.hosts,
            thresholds,
            timeout_s=request.timeout_s,
            parallel=request.parallel,
            host_keys=keys,
        )
        inspected = time.monotonic()
        out = [_one(kube, h, nodes[h.name], health[h.name], request) for h in inv.hosts]
    finally:
        kube.close()
    result = LabelResult(
        request,
        inv.environment,
        kube.server,
        out,
        {
            "inspect": round(inspected - started, 3),
            "total": round(time.monotonic() - started, 3),
        },
    )
    down = [h.host for h in out if h.status == "unreachable"]
    if down:
        return Outcome(
            result,
            Unreachable(
                f"{len(down)} host(s) could not be read, their nodes left as they are: "
                f"{', '.join(down)}",
                hint="check their management network and ssh",
            ),
        )
    return Outcome(result)


def _one(
    kube: KubeClient,
    host: inventory.Host,
    node: kubenodes.NodeInfo,
    health: gpuhealth.HostHealth,
    request: LabelRequest,
) -> HostLabels:
    if not node.exists:
        return HostLabels(host.name, host.node_name, "not-a-node", health.status)
    if health.status == gpuhealth.UNREACHABLE:
        return HostLabels(host.name, host.node_name, "unreachable", health.status)
    labels, unknown = nodelabels.desired_labels(
        health, rack=host.rack, accelerator_name=host.accelerator
    )
    taints = nodelabels.desired_taints(health, request.taint_effect)
    for attempt in range(1, ATTEMPTS + 1):
        change = nodelabels.plan_node(
            node.name,
            node.labels,
            node.annotations,
            node.taints,
            labels,
            unknown,
            taints,
            manage_taints=request.taint_effect != "none",
            unhealthy_reason=nodelabels.unhealthy_reason(health),
        )
        if not change.changed:
            status = "unchanged"
        elif request.dry_run:
            status = "would-update"
        else:
            try:
                kubenodes.apply(kube, change, node.resource_version, node.taint_times)
            except Conflict:
                # changed since it was read (before the inspection): read it, plan again
                if attempt == ATTEMPTS:
                    raise OperationFailed(
                        f"cannot label node {node.name}: it changed {ATTEMPTS} times while "
                        "gpuops wrote it",
                        hint="something else keeps writing the node; run again",
                    ) from None
                node = kubenodes.get_node(kube, node.name)
                if not node.exists:
                    return HostLabels(host.name, host.node_name, "not-a-node", health.status)
                continue
            status = "updated"
        break
    return HostLabels(host.name, node.name, status, health.status, change, labels)
