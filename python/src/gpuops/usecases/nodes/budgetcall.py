"""The disruption budget as ``nodes inspect --quarantine --drain`` uses it: one node's share of
its class (the node label ``nvidia.com/gpu.product``, as the budget counts classes) taken
before it is cordoned and drained, renewed while it drains, and given back after
(usecases/nodes/budget.py: ``take``/``give``). A node left cordoned keeps counting as
unavailable through the cluster's own state (the budget counts cordoned nodes), so the share
need not be held while the node stays quarantined.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from gpuops.adapters.kube import KubeClient
from gpuops.adapters.kube import nodes as kubenodes
from gpuops.core import disruption
from gpuops.usecases.nodes import budget
from gpuops.usecases.nodes.budget import BudgetSpec

HOLDER_PREFIX = "nodes-inspect-quarantine"


@contextlib.contextmanager
def held(
    kube: KubeClient, node: str, spec: BudgetSpec, say: Callable[[str], None]
) -> Iterator[str | None]:
    """Inside: None while ``node``'s share is held, else why the budget refused it (spent
    after ``spec.wait_s``: the message names the holders)."""
    info = kubenodes.get_node(kube, node)
    klass = disruption.class_of(info.labels)
    if disruption.limit_for(spec.limits, klass) is None:  # no permission to take it down
        yield f"--budget-max-unavailable gives no limit for its class {klass}"
        return
    holder = f"{HOLDER_PREFIX}/{budget.holder_identity()}"
    where = budget.Where(
        spec.where.namespace, spec.where.kured, spec.where.lease_s, f"quarantine {node}"
    )
    got = budget.take(kube, holder, {klass: [node]}, spec.limits, spec.wait_s, say, where=where)
    if not isinstance(got, budget.Taken):
        yield got.message
        return
    renewer = budget.Renewer(kube, say, where.lease_s)
    with renewer.lock:
        renewer.held = got
    try:
        yield None
    finally:
        renewer.stop()
        budget.give(kube, got)
