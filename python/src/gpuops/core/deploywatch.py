"""Is a Deployment's rollout progressing, complete, or failed? Decided early, pure.

``kubectl rollout status`` waits until the Deployment's progress deadline (600 s by default)
before it calls a stuck rollout failed. The new ReplicaSet's pods say much sooner what is
wrong, in the same words the kubelet and the scheduler use:

* unschedulable: ``PodScheduled=False``, reason ``Unschedulable`` (the scheduler's message), for
  ``unschedulable_s`` while nothing progresses;
* image pull errors: ``ImagePullBackOff``, ``InvalidImageName``, ``ErrImageNeverPull`` at once,
  ``ErrImagePull`` after ``image_pull_s``;
* crash loops: ``CrashLoopBackOff``, or ``restarts`` container restarts;
* containers that cannot start: ``CreateContainerConfigError`` and friends after
  ``image_pull_s``;
* readiness never reached: running for ``ready_s`` without becoming Ready;
* the Deployment's own verdicts: ``ProgressDeadlineExceeded``, ``ReplicaFailure``; and our
  overall ``timeout_s``.

Complete means what ``kubectl rollout status`` means: the controller saw the change, every
replica is updated, no old replica is left, every updated replica is available.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuops.core.releaseconfig import RolloutPolicy

PROGRESSING = "progressing"
COMPLETE = "complete"
FAILED = "failed"

_PULL_NOW = frozenset({"ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
_START_ERRORS = frozenset(
    {
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "PreCreateHookError",
    }
)


@dataclass(frozen=True)
class Condition:
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class ContainerState:
    name: str
    ready: bool = False
    running: bool = False
    restarts: int = 0
    waiting: str = ""  # reason of state.waiting
    waiting_message: str = ""
    last_exit_code: int | None = None


@dataclass(frozen=True)
class PodState:
    name: str
    phase: str = "Pending"
    node: str = ""
    unschedulable: str = ""  # the scheduler's message while PodScheduled is False
    ready: bool = False
    deleting: bool = False
    containers: tuple[ContainerState, ...] = ()


@dataclass(frozen=True)
class DeploymentState:
    name: str
    generation: int
    observed_generation: int
    replicas: int  # wanted (spec)
    current: int  # every pod of every ReplicaSet (status.replicas)
    updated: int
    ready: int
    available: int
    conditions: Mapping[str, Condition] = field(default_factory=dict)


@dataclass(frozen=True)
class Observation:
    deployment: DeploymentState
    new_pods: tuple[PodState, ...] = ()  # pods of the new ReplicaSet, once it exists


@dataclass(frozen=True)
class Problem:
    kind: str  # unschedulable, image-pull, crash-loop, cannot-start, not-ready,
    #            progress-deadline, replica-failure, timeout
    deployment: str
    message: str
    pods: tuple[str, ...] = ()
    scheduler_message: str = ""

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "kind": self.kind,
            "deployment": self.deployment,
            "message": self.message,
            "pods": list(self.pods),
        }
        if self.scheduler_message:
            doc["scheduler_message"] = self.scheduler_message
        return doc


@dataclass(frozen=True)
class Verdict:
    state: str
    line: str  # one progress line: counts and what is being waited for
    problem: Problem | None = None


@dataclass
class Tracker:
    """What one watch remembers between observations of one Deployment."""

    started: float
    first_seen: dict[tuple[str, str], float] = field(default_factory=dict)
    progress_key: tuple[int, ...] | None = None
    progress_at: float = 0.0

    def since(self, kind: str, pod: str, now: float) -> float:
        """Seconds this (problem, pod) has been seen, now included."""
        return now - self.first_seen.setdefault((kind, pod), now)

    def resume(self, now: float) -> None:
        """After a time nobody could observe (the API server did not answer, so no kubelet
        could report either): every problem's clock and the progress clock start again now;
        the rollout's own timeout keeps counting from ``started``."""
        self.first_seen.clear()
        self.progress_at = now

    def forget(self, keep: set[tuple[str, str]]) -> None:
        for key in [k for k in self.first_seen if k not in keep]:
            del self.first_seen[key]


def assess(obs: Observation, tracker: Tracker, now: float, policy: RolloutPolicy) -> Verdict:
    d = obs.deployment
    live = [p for p in obs.new_pods if not p.deleting]
    key = (
        d.observed_generation,
        d.updated,
        d.ready,
        d.available,
        d.current,
        sum(1 for p in live if p.ready),
        sum(1 for p in live if p.node),
    )
    if key != tracker.progress_key:
        tracker.progress_key, tracker.progress_at = key, now
    line = progress_line(obs)
    seen: set[tuple[str, str]] = set()

    def fail(kind: str, message: str, pods: Sequence[str] = (), sched: str = "") -> Verdict:
        return Verdict(FAILED, line, Problem(kind, d.name, message, tuple(pods), sched))

    observed = d.observed_generation >= d.generation
    progressing = d.conditions.get("Progressing")
    if observed and progressing and progressing.reason == "ProgressDeadlineExceeded":
        return fail("progress-deadline", f"Deployment {d.name}: {progressing.message}".strip())
    failure = d.conditions.get("ReplicaFailure")
    if failure is not None and failure.status == "True":
        seen.add(("replica-failure", ""))
        if tracker.since("replica-failure", "", now) >= policy.unschedulable_s:
            return fail(
                "replica-failure",
                f"Deployment {d.name} cannot create pods ({failure.reason}): {failure.message}",
            )
    stalled = now - tracker.progress_at
    for pod in live:
        problem = _pod_problem(pod, tracker, now, policy, stalled, seen)
        if problem is not None:
            kind, message, sched = problem
            tracker.forget(seen)
            return fail(kind, f"pod {pod.name}: {message}", [pod.name], sched)
    tracker.forget(seen)
    if now - tracker.started > policy.timeout_s:
        return fail("timeout", f"Deployment {d.name}: not complete after {policy.timeout_s}s")
    if observed and is_complete(d):
        return Verdict(COMPLETE, line)
    return Verdict(PROGRESSING, line)


def _pod_problem(
    pod: PodState,
    tracker: Tracker,
    now: float,
    policy: RolloutPolicy,
    stalled: float,
    seen: set[tuple[str, str]],
) -> tuple[str, str, str] | None:
    if pod.unschedulable:
        seen.add(("unschedulable", pod.name))
        waited = tracker.since("unschedulable", pod.name, now)
        if waited >= policy.unschedulable_s and stalled >= policy.unschedulable_s:
            return (
                "unschedulable",
                f"cannot be scheduled for {waited:.0f}s: {pod.unschedulable}",
                pod.unschedulable,
            )
    for c in pod.containers:
        what = f"container {c.name}"
        if c.waiting in _PULL_NOW:
            return "image-pull", f"{what}: {c.waiting}: {c.waiting_message}".rstrip(": "), ""
        if c.waiting == "ErrImagePull":
            seen.add(("image-pull", pod.name))
            if tracker.since("image-pull", pod.name, now) >= policy.image_pull_s:
                return "image-pull", f"{what}: ErrImagePull: {c.waiting_message}".rstrip(": "), ""
        if c.waiting == "CrashLoopBackOff" or c.restarts >= policy.restarts:
            code = f", last exit code {c.last_exit_code}" if c.last_exit_code is not None else ""
            return (
                "crash-loop",
                f"{what} restarted {c.restarts} times{code} ({c.waiting or 'running'})",
                "",
            )
        if c.waiting in _START_ERRORS:
            seen.add(("cannot-start", pod.name))
            if tracker.since("cannot-start", pod.name, now) >= policy.image_pull_s:
                return "cannot-start", f"{what}: {c.waiting}: {c.waiting_message}".rstrip(": "), ""
    running = pod.phase == "Running" and pod.containers and all(c.running for c in pod.containers)
    if running and not pod.ready:
        seen.add(("not-ready", pod.name))
        waited = tracker.since("not-ready", pod.name, now)
        if waited >= policy.ready_s:
            return "not-ready", f"running for {waited:.0f}s but never Ready", ""
    return None


def is_complete(d: DeploymentState) -> bool:
    return (
        d.observed_generation >= d.generation
        and d.updated >= d.replicas
        and d.current <= d.updated
        and d.available >= d.updated
    )


def progress_line(obs: Observation) -> str:
    d = obs.deployment
    live = [p for p in obs.new_pods if not p.deleting]
    head = (
        f"{d.name}: {d.updated}/{d.replicas} updated, {d.ready}/{d.replicas} ready, "
        f"{d.available} available"
    )
    if d.observed_generation < d.generation:
        return f"{head}; waiting for the deployment controller to see the change"
    if is_complete(d):
        return f"{head}; rollout complete"
    waits: list[str] = []
    pending = [p for p in live if p.unschedulable]
    if pending:
        waits.append(f"{len(pending)} pod(s) to be scheduled ({_short(pending[0].unschedulable)})")
    elif any(not p.node for p in live):
        waits.append(f"{sum(1 for p in live if not p.node)} pod(s) to be scheduled")
    pulling = [c for p in live for c in p.containers if c.waiting in ("ErrImagePull", *_PULL_NOW)]
    if pulling:
        waits.append(f"image pull ({pulling[0].waiting})")
    starting = sum(1 for p in live if p.node and not any(c.running for c in p.containers))
    if starting and not pulling:
        waits.append(f"{starting} pod(s) to start")
    unready = sum(1 for p in live if _started(p) and not p.ready)
    if unready:
        waits.append(f"{unready} pod(s) to become ready")
    if d.updated < d.replicas and not pending:
        waits.append(f"{d.replicas - d.updated} more updated replica(s)")
    if d.current > d.updated:
        waits.append(f"{d.current - d.updated} old pod(s) to terminate")
    if d.available < d.updated and not waits:
        waits.append(f"{d.updated - d.available} updated pod(s) to become available")
    return f"{head}; waiting for {', '.join(waits) or 'the controller'}"


def _started(p: PodState) -> bool:
    return bool(p.node and p.containers and all(c.running for c in p.containers))


def _short(message: str, limit: int = 120) -> str:
    return message if len(message) <= limit else message[: limit - 3] + "..."
