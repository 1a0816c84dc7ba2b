"""Watching a rollout: poll the Deployments, their new ReplicaSets and pods; say what is
happening as it happens; stop at the first sign of failure (:mod:`gpuops.core.deploywatch`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuops.adapters.kube import KubeClient
from gpuops.adapters.kube import apps as kubeapps
from gpuops.core import deploywatch as rollout
from gpuops.core import explain as explain_core
from gpuops.core.deploywatch import Observation, Problem, Tracker
from gpuops.core.releaseconfig import RolloutPolicy
from gpuops.errors import GpuOpsError, Unreachable

if TYPE_CHECKING:
    from gpuops.usecases.releases.guard import Foreign

Say = Callable[[str], None]
#: Is this Deployment (name, object as just read) still what gpuops left? None: it is.
Guard = Callable[[str, Mapping[str, Any]], "Foreign | None"]
#: A watch that found someone else's change of a watched Deployment.
ABORTED = "aborted"
#: Say the same progress line again after this long, so a quiet console shows it is alive.
HEARTBEAT_S = 15.0


@dataclass
class WatchResult:
    state: str  # complete | failed | aborted
    seconds: float
    problem: Problem | None = None
    lines: list[str] = field(default_factory=list)
    explanation: dict[str, Any] | None = None
    foreign: Foreign | None = None  # aborted: whose change, and what runs now


def observe(kube: KubeClient, namespace: str, name: str) -> Observation:
    """The Deployment and, while its rollout is not complete, its new ReplicaSet's pods."""
    return observe_object(kube, kubeapps.get_deployment(kube, namespace, name))


def observe_object(kube: KubeClient, obj: Mapping[str, Any]) -> Observation:
    state = kubeapps.deployment_state(obj)
    pods: tuple[rollout.PodState, ...] = ()
    if state.observed_generation >= state.generation and not rollout.is_complete(state):
        rs = kubeapps.new_replicaset(kube, obj)
        if rs is not None:
            pods = tuple(kubeapps.pod_state(p) for p in kubeapps.pods_of_replicaset(kube, rs))
    return Observation(state, pods)


def watch(
    kube: KubeClient,
    namespace: str,
    deployments: Sequence[str],
    policy: RolloutPolicy,
    *,
    say: Say,
    renew: Callable[[], None] = lambda: None,
    guard: Guard | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> WatchResult:
    """Until every Deployment's rollout is complete or one fails. The API server may stop
    answering for up to ``policy.unreachable_s`` (then :class:`Unreachable` is raised).

    With a ``guard``, every Deployment read is first checked to be what gpuops left: a
    rollout someone else started (a newer ReplicaSet of their template) is never followed;
    the watch ends ``aborted`` with their change."""
    started = clock()
    trackers = {name: Tracker(started=started) for name in deployments}
    last: dict[str, tuple[str, float]] = {}
    lines: list[str] = []
    unreachable_since: float | None = None
    while True:
        now = clock()
        try:
            verdicts = []
            for n in deployments:
                obj = kubeapps.get_deployment(kube, namespace, n)
                foreign = guard(n, obj) if guard is not None else None
                if foreign is not None:
                    problem = Problem("foreign-change", n, foreign.message(namespace))
                    return WatchResult(
                        ABORTED, round(clock() - started, 2), problem, lines, foreign=foreign
                    )
                verdicts.append(rollout.assess(observe_object(kube, obj), trackers[n], now, policy))
            renew()
        except Unreachable:
            if unreachable_since is None:
                unreachable_since = now
                say(
                    f"the Kubernetes API at {kube.server} is not answering; retrying for "
                    f"{policy.unreachable_s}s"
                )
            if now - unreachable_since >= policy.unreachable_s:
                raise
            sleep(policy.poll_s)
            continue
        if unreachable_since is not None:
            say(f"the Kubernetes API answers again after {now - unreachable_since:.0f}s")
            unreachable_since = None
            for tracker in trackers.values():  # kubelets could not report meanwhile either
                tracker.resume(now)
        for name, verdict in zip(deployments, verdicts, strict=True):
            said, at = last.get(name, ("", 0.0))
            if verdict.line != said or now - at >= HEARTBEAT_S:
                say(verdict.line)
                lines.append(verdict.line)
                last[name] = (verdict.line, now)
        failed = next((v for v in verdicts if v.state == rollout.FAILED), None)
        if failed is not None and failed.problem is not None:
            return WatchResult(rollout.FAILED, round(clock() - started, 2), failed.problem, lines)
        if all(v.state == rollout.COMPLETE for v in verdicts):
            return WatchResult(rollout.COMPLETE, round(clock() - started, 2), None, lines)
        sleep(poll_interval(clock() - started, policy.poll_s))


def poll_interval(elapsed: float, longest: float) -> float:
    """Often at first (most rollouts of a few pods finish in seconds), then every ``longest``."""
    if elapsed < 5.0:
        return min(0.15, longest)
    if elapsed < 30.0:
        return min(0.3, longest)
    return longest


def explain_unschedulable(
    kube: KubeClient, namespace: str, problem: Problem, group_by: str
) -> dict[str, Any] | None:
    """``headroom explain`` for the first unschedulable pod: per node, in the scheduler's
    words, beside the scheduler's own message. None when it cannot be had (the explanation
    never changes the verdict)."""
    if problem.kind != "unschedulable" or not problem.pods:
        return None
    try:
        pod = kube.read_pod(namespace, problem.pods[0])
        nodes, bound, _ = kube.list_nodes_and_bound_pods()
    except GpuOpsError:
        return None
    result = explain_core.explain(pod.pod, nodes, bound, group_by)
    if pod.scheduled_reason == "Unschedulable":
        result.event_message = pod.scheduled_message
    doc: dict[str, Any] = dict(result.to_dict())
    blocked = [n for n in doc.pop("nodes") if not n["fits"]]
    doc["nodes"] = [
        {"name": n["name"], "node_class": n["node_class"], "why": n["failures"]}
        for n in blocked[:20]
    ]
    agree = result.agrees_with(result.event_message) if result.event_message else None
    doc["agrees_with_scheduler"] = agree
    return doc
