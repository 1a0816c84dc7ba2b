"""The disruption budget as ``nodes inspect --quarantine --drain`` uses it: one node's share
taken before it is drained and given back after (usecases/nodes/budget.py, the budget
engineer's module: ``take(kube, holder, nodes, limits, wait_s, say) -> Taken | Hold`` and
``give(kube, taken)``, as docs/ISSUE21-22 fixed them).

The budget module is loaded when a drain runs (``importlib``: this branch was written before
it landed; once merged, a plain import replaces this). Without it a drain is refused (the node
stays quarantined, tainted but not drained) and the result says so.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from typing import Any

from gpuops.adapters.kube import KubeClient
from gpuops.adapters.kube import nodes as kubenodes

HOLDER = "gpuops-nodes-inspect"
WAIT_S = 0.0  # a quarantine drain does not wait for budget: the next inspection tries again
CLASS_LABEL = "nvidia.com/gpu.product"


@contextlib.contextmanager
def held(kube: KubeClient, node: str, say: Callable[[str], None]) -> Iterator[bool]:
    """True inside while ``node``'s share of its class's budget is held; False when the budget
    (or the budget module) refused it."""
    try:
        budget: Any = importlib.import_module("gpuops.usecases.nodes.budget")
    except ImportError:
        say(f"[gpuops] node {node} not drained: the disruption budget module is not installed")
        yield False
        return
    info = kubenodes.get_node(kube, node)
    klass = info.labels.get(CLASS_LABEL, "unknown")
    taken = budget.take(kube, HOLDER, {klass: [node]}, {}, WAIT_S, say)
    if not isinstance(taken, budget.Taken):
        say(f"[gpuops] node {node} not drained: the disruption budget is spent: {taken.message}")
        yield False
        return
    try:
        yield True
    finally:
        budget.give(kube, taken)
