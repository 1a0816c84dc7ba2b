"""How a release will run, decided before anything changes: the gates after the image's
(compat; headroom; with a strategy, surge or in place and the canary's name), and the plan of a
release with a strategy (:class:`Plan`), which :mod:`.progressive` then runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from gpuops.adapters.kube import KubeClient
from gpuops.adapters.kube import apps as kubeapps
from gpuops.core import canary as canary_core
from gpuops.core import explain as explain_core
from gpuops.core import releasehistory as hist
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasehistory import Release
from gpuops.core.releasestrategy import CanaryReplicas, Step, Strategy, canary_name
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.releases import model as m
from gpuops.usecases.releases import steps
from gpuops.usecases.releases.canary import IN_PLACE, SURGE, new_pod
from gpuops.usecases.releases.gates import Gate, Registry, first_closed, headroom_gate
from gpuops.usecases.releases.leftover import leftover
from gpuops.usecases.releases.store import HistoryStore


@dataclass(frozen=True)
class Plan:
    """How a release with a strategy runs, decided by the headroom gate."""

    mode: str  # surge | in-place
    stable_replicas: int
    stable_strategy: dict[str, Any]
    max_unavailable: int
    message: str
    steps: tuple[Step, ...]  # none for a rollback: it goes straight to "all"

    def to_dict(self, deployment: str) -> m.StrategyDocument:
        canary = any(isinstance(s, CanaryReplicas) for s in self.steps)
        return {
            "mode": self.mode,
            "canary": canary_name(deployment) if canary else None,
            "stable_replicas": self.stable_replicas,
            "max_unavailable": self.max_unavailable if self.mode == IN_PLACE else None,
            "message": self.message,
        }


def largest_canary(steps: Sequence[Step], total: int) -> int:
    return max((s.resolve(total) for s in steps if isinstance(s, CanaryReplicas)), default=0)


def headroom(
    env: Environment,
    strategy: Strategy,
    cluster: Cluster,
    stable: Mapping[str, Any],
    link: str | None,
    lend: Callable[[Cluster], KubeClient],
    *,
    with_steps: bool,
) -> tuple[Gate, Plan | None, dict[str, Any] | None]:
    """The headroom gate of a release with a strategy: room for the largest canary plus the
    stable's surge (surge), else, where the environment allows it, replacement in place
    (each stable pod's place must take the new pod), else refused naming what holds the GPUs.
    Returns the gate, the plan (None when refused) and an explanation when refused."""
    steps = strategy.steps if with_steps else ()
    # a run that stopped while replacing in place left the stable smaller: what it had before
    # is on its annotation (the release finishes or restores that run first, under its lock)
    note = canary_core.read_in_place_note(stable)
    total = note["replicas"] if note else canary_core.replicas_of(stable)
    before = dict(note["strategy"]) if note else canary_core.strategy_of(stable)
    extra = largest_canary(steps, total)
    gate = headroom_gate(env, cluster, [stable], link, lend, extra_pods=extra)
    if gate.ok:
        gate.details["mode"] = SURGE
        return gate, Plan(SURGE, total, before, 0, gate.message, steps), None
    if strategy.in_place is None:
        gate.hint = (gate.hint or "") + "; or let it replace pods in place: strategy.in_place"
        return gate, None, None
    u = strategy.in_place.max_unavailable
    kube = lend(cluster)
    pods = kubeapps.pods_of_deployment(kube, stable)
    keys = [f"{env.namespace}/{(p.get('metadata') or {}).get('name', '')}" for p in pods]
    nodes, bound, _ = kube.list_nodes_and_bound_pods()
    pod = new_pod(stable, env.namespace)
    fit = canary_core.in_place_fit(pod, nodes, bound, keys, env.group_by)
    if fit.fits:
        message = (
            f"no room for surge pods ({gate.message}); replacing in place, at most {u} of "
            f"{total} replicas down at a time: {fit.message}"
        )
        details = {**gate.details, "mode": IN_PLACE, "max_unavailable": u}
        return (
            Gate("headroom", True, message, details),
            Plan(IN_PLACE, total, before, u, message, steps),
            None,
        )
    result = explain_core.explain(pod, nodes, bound, env.group_by)
    explanation: dict[str, Any] = {
        "summary": result.summary,
        "fixes": list(result.fixes),
        "nodes": [
            {"name": f.name, "node_class": f.node_class, "why": f.failures}
            for f in result.nodes
            if not f.fits
        ][:20],
        "held_by": list(fit.holders),
        "blocked": dict(fit.blocked),
    }
    message = f"no room for surge pods ({gate.message}), and not in place either: {fit.message}"
    held = "; ".join(fit.holders[:3])
    hint = f"what holds the GPUs: {held}" if held else result.summary
    details = {**gate.details, "mode": None, "held_by": list(fit.holders)}
    return Gate("headroom", False, message, details, hint=hint), None, explanation


def canary_gate(kube: KubeClient, env: Environment, records: Sequence[Release]) -> Gate:
    """The canary's name must be free: no Deployment ``D-canary``, or one gpuops left from a
    release its history holds open (the release finishes or removes it first)."""
    deployment = env.deployments[0]
    name = canary_name(deployment)
    open_ = {r.number for r in records if r.status == hist.PENDING}
    obj, number = leftover(kube, env, deployment, open_)
    if obj is None:
        return Gate("canary", True, f"{env.namespace}/{name} is free for the canary")
    if number is not None:
        return Gate(
            "canary",
            True,
            f"{env.namespace}/{name} is the canary release #{number} left: it goes first",
        )
    return Gate(
        "canary",
        False,
        f"Deployment {env.namespace}/{name} exists and is not a canary gpuops left (no "
        f"{canary_core.CANARY_OF}: {deployment} and an open release number): the canary "
        "cannot be made",
        hint=f"remove or rename {name}, or release {deployment} without a strategy",
    )


def run_gates(
    lend: Callable[[Cluster], KubeClient],
    env: Environment,
    cluster: Cluster,
    live: list[steps.Live],
    wanted: m.Wanted,
    who: m.Who,
    registry: Registry,
    out: m.ReleaseOutcome,
    action: str = "promote",
) -> tuple[Gate | None, Plan | None]:
    """The gates after the image's, on this run's connection: compat (a new image only; against
    the drivers the nodes will run where the release brings its nodes back, ``wanted.drivers``),
    then headroom (with a strategy: surge or in place, and the canary's name); returns the first
    gate that did not pass, and how a release with a strategy runs."""
    if wanted.digest and any(x.content.image != wanted.image for x in live):
        if wanted.drivers:
            gate = registry.compat(env, wanted.digest, cluster, lend, drivers=wanted.drivers)
        else:
            gate = registry.compat(env, wanted.digest, cluster, lend)
        out.gates.append(gate)
    plan = None
    if first_closed(out.gates) is None and env.strategy is None:
        out.gates.append(headroom_gate(env, cluster, [x.obj for x in live], who.link, lend))
    elif first_closed(out.gates) is None and env.strategy is not None:
        # a rollback restores what ran before: straight to "all" (in place if need be)
        with_steps = action == "promote"
        gate, plan, explanation = headroom(
            env, env.strategy, cluster, live[0].obj, who.link, lend, with_steps=with_steps
        )
        out.gates.append(gate)
        if explanation is not None:
            out.explanation = explanation
        if plan is not None:
            out.strategy = plan.to_dict(env.deployments[0])
            if not plan.steps and plan.mode != "in-place":
                plan = None  # nothing of a strategy to run: the release of today
        if gate.ok and plan is not None and plan.steps and env.strategy.canary:
            kube = lend(cluster)
            out.gates.append(canary_gate(kube, env, HistoryStore(kube, env).read()))
    return first_closed(out.gates), plan


class Borrowed:
    """This run's client, lent to a use case that closes the client it connects."""

    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kube, name)

    def close(self) -> None:
        """The lender closes it."""


def lender(kube: KubeClient) -> Callable[[Cluster], KubeClient]:
    return lambda _cluster: cast(KubeClient, Borrowed(kube))
