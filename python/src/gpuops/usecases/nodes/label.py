"""``gpuops nodes label``: each host's GPU facts (read as ``nodes inspect`` reads them) become
its node's labels (S-30, GFD names) and, by policy, a pending reboot or a critical finding a
taint. Idempotent: a node that matches is not written; only labels gpuops owns are removed."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuops.adapters import hostkeys, kubenodes
from gpuops.adapters.kube import KubeClient
from gpuops.core import gpuhealth, inventory, nodelabels
from gpuops.core.inventory import DEFAULT_PATTERN
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.nodes import common


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


@dataclass
class HostLabels:
    host: str
    node: str
    status: str  # updated, unchanged, not-a-node, unreachable, would-update
    health: str
    change: nodelabels.NodeChange | None = None
    labels: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "node": self.node,
            "status": self.status,
            "health": self.health,
            "labels": dict(self.labels),
            "change": self.change.to_dict() if self.change else None,
        }


@dataclass
class LabelOutcome:
    request: LabelRequest
    environment: str
    server: str
    hosts: list[HostLabels]
    timings_s: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
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
) -> LabelOutcome:
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
    return LabelOutcome(
        request,
        inv.environment,
        kube.server,
        out,
        {
            "inspect": round(inspected - started, 3),
            "total": round(time.monotonic() - started, 3),
        },
    )


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
    change = nodelabels.plan_node(
        node.name,
        node.labels,
        node.annotations,
        node.taints,
        labels,
        unknown,
        taints,
        manage_taints=request.taint_effect != "none",
    )
    if not change.changed:
        status = "unchanged"
    elif request.dry_run:
        status = "would-update"
    else:
        kubenodes.apply(kube, change, node.resource_version)
        status = "updated"
    return HostLabels(host.name, node.name, status, health.status, change, labels)
