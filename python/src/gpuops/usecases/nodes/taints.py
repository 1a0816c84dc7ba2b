"""Set and release the ``gpuops.io/gpu-unhealthy`` taint as one setter (``nodes-update``,
``nodes-inspect``, ``quarantine``): the reason goes into the node's annotation
``gpuops.io/gpu-unhealthy-by``, and a setter removes the taint only when no other claim is
left (rules: core/taintclaims.py).

Every write is conditional on the node's resourceVersion as just read; on a conflict (someone
changed the node in between) the node is read again and the change planned again, at most
:data:`ATTEMPTS` times.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuops.adapters.kube import KubeClient
from gpuops.adapters.kube import nodes as kubenodes
from gpuops.adapters.kube.client import Conflict
from gpuops.core import taintclaims
from gpuops.core.taintclaims import TaintPlan
from gpuops.errors import OperationFailed

ATTEMPTS = 5


def _write(
    kube: KubeClient,
    node: str,
    plan_of: Callable[[kubenodes.NodeInfo], TaintPlan],
    what: str,
) -> TaintPlan:
    for _ in range(ATTEMPTS):
        info = kubenodes.get_node(kube, node)
        if not info.exists:
            raise OperationFailed(f"cannot {what} node {node}: it does not exist")
        plan = plan_of(info)
        if not plan.changed:
            return plan
        try:
            kubenodes.set_taints(
                kube,
                node,
                plan.taints,
                {taintclaims.ANNOTATION: plan.annotation},
                info.resource_version,
                info.taint_times,
            )
        except Conflict:
            continue
        return plan
    raise OperationFailed(
        f"cannot {what} node {node}: it changed {ATTEMPTS} times while gpuops wrote it",
        hint="something else keeps writing the node; run again",
    )


def mark_unhealthy(
    kube: KubeClient,
    node: str,
    setter: str,
    reason: str,
    *,
    effect: str = taintclaims.DEFAULT_EFFECT,
) -> None:
    """Taint ``node`` unhealthy (unless it is already) and record ``setter``'s ``reason``."""
    taintclaims.check_setter(setter)
    _write(
        kube,
        node,
        lambda info: taintclaims.plan_mark(
            info.taints, info.annotations, setter, reason, effect=effect
        ),
        "taint",
    )


def release_unhealthy(kube: KubeClient, node: str, setter: str) -> bool:
    """Drop ``setter``'s claim; True when the node carries no unhealthy taint afterwards (no
    other claim was left), False when it stays (another setter's, untracked, or unreadable)."""
    taintclaims.check_setter(setter)
    plan = _write(
        kube,
        node,
        lambda info: taintclaims.plan_release(info.taints, info.annotations, setter),
        "untaint",
    )
    return not plan.tainted
