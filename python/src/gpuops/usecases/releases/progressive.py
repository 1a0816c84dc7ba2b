"""A progressive release (issue 20, S-22): the environment's strategy steps, run inside the
release (under its lock, after its gates), before "all".

- ``replicas``: the canary Deployment (:mod:`.canary`) runs that many pods; beside the stable
  (surge) or in their place when the GPUs are full (in place: the headroom gate decided);
- ``pause_seconds``: wait, renewing the lock, watching for someone else's change;
- ``analysis``: measure the canary (:func:`gpuops.usecases.releases.analysis.run`);
- ``approval``: the release is recorded ``pending`` and paused; ``release resume`` goes on.

Then "all" is the release of today (the stable patched, conditional, watched), after which the
canary's pods go (in place: back to the stable one batch at a time) and the canary is deleted.
Any failed step restores the previous release at once: the canary goes, the stable is put
back as it was. Every step, its measured values and why it stopped are kept in the release
record's ``steps`` (written after each step, so a run that stops leaves them) and the result.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gpuops.adapters.kube import KubeClient
from gpuops.core import canary as canary_core
from gpuops.core import deploywatch
from gpuops.core import releasehistory as hist
from gpuops.core.analysis import FAILED as ANALYSIS_FAILED
from gpuops.core.deploywatch import Problem
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasehistory import Release
from gpuops.core.releasepatch import Content
from gpuops.core.releasestrategy import (
    AnalysisStep,
    ApprovalStep,
    CanaryReplicas,
    Pause,
    Step,
    step_kind,
)
from gpuops.usecases.releases import analysis, guard
from gpuops.usecases.releases import model as m
from gpuops.usecases.releases.canary import IN_PLACE, SURGE, Canary, ForeignChange
from gpuops.usecases.releases.guard import Left
from gpuops.usecases.releases.plan import Plan
from gpuops.usecases.releases.store import HistoryStore
from gpuops.usecases.releases.watch import Say, WatchResult

#: Measurements an analysis step keeps in the release record (the ConfigMap holds every
#: record of the history: 1 MiB in all); the newest are kept, the count of the others said.
KEEP_MEASUREMENTS = 50
#: How often a pause looks at the stable and the canary (someone else's change ends it).
PAUSE_CHECK_S = 2.0


@dataclass
class Stop:
    """Why the steps stopped before "all": a failed step (restore) or an approval (pause)."""

    index: int
    problem: Problem | None = None  # failed


def _now() -> str:
    return hist.now_iso()


def _trimmed(tally: Mapping[str, Any]) -> dict[str, Any]:
    doc = dict(tally)
    measured = list(doc.get("measurements") or [])
    if len(measured) > KEEP_MEASUREMENTS:
        doc["measurements"] = measured[-KEEP_MEASUREMENTS:]
        doc["measurements_dropped"] = len(measured) - KEEP_MEASUREMENTS
    return doc


@dataclass
class Progressive:
    """The steps of one release and its canary, between the release's record and "all"."""

    kube: KubeClient
    env: Environment
    store: HistoryStore
    out: m.ReleaseOutcome
    plan: Plan
    canary: Canary
    record: Release
    say: Say
    renew: Callable[[], None]
    entries: list[dict[str, Any]] = field(default_factory=list)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    @classmethod
    def start(
        cls,
        kube: KubeClient,
        env: Environment,
        store: HistoryStore,
        out: m.ReleaseOutcome,
        plan: Plan,
        record: Release,
        content: Content,
        cause: str,
        left: dict[str, Left],
        say: Say,
        renew: Callable[[], None],
    ) -> Progressive:
        canary = Canary(
            kube,
            env,
            env.deployments[0],
            record.number,
            content,
            cause,
            plan.mode,
            plan.max_unavailable,
            plan.stable_replicas,
            plan.stable_strategy,
            left,
            say,
            renew,
        )
        prog = cls(kube, env, store, out, plan, canary, record, say, renew)
        out.steps = prog.entries  # type: ignore[assignment] # the result shows them as they go
        out.strategy = plan.to_dict(env.deployments[0])
        return prog

    # -- the record --------------------------------------------------------------------------
    def rec(self, record: Release | None = None) -> Release:
        """``record`` (or this release's) with the steps, the canary and the pause as now."""
        base = record if record is not None else self.record
        canary = self.canary.to_record() if self.plan.steps or self.plan.mode == IN_PLACE else None
        return replace(
            base,
            steps=[dict(e) for e in self.entries] or None,
            canary=canary,
            paused=self.record.paused,
        )

    def save(self, **changes: Any) -> None:
        self.record = replace(self.rec(), **changes)
        self.store.put(self.record, self.record.previous)
        self.out.record = self.record

    # -- the steps ---------------------------------------------------------------------------
    def run(self, start: int = 0) -> Stop | None:
        """The steps from ``start``; a Stop when one failed or an approval pauses the
        release; :class:`ForeignChange` when someone else changed the stable or canary."""
        steps = self.plan.steps
        for i in range(start, len(steps)):
            step = steps[i]
            entry = self._begin(i, step)
            try:
                problem = self._step(i, step, entry)
            except ForeignChange:
                self._end(entry, "failed", "someone else changed a Deployment")
                raise
            # any other error (the API server gone, the lock lost) stops the run as today's
            # release stops: interrupted, its record open for the next release to finish
            if entry["state"] == "paused":
                return Stop(i)
            if problem is not None:
                self._end(entry, "failed", problem.message)
                self.say(f"step {i + 1}/{len(steps)} {entry['kind']}: failed: {problem.message}")
                return Stop(i, problem)
            self._end(entry, "passed", entry["detail"])
            self.say(f"step {i + 1}/{len(steps)} {entry['kind']}: passed: {entry['detail']}")
        return None

    def _begin(self, index: int, step: Step) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "index": index,
            "kind": step_kind(step),
            "state": "running",
            "started": _now(),
            "finished": None,
            "detail": "",
        }
        self.entries.append(entry)
        self.save()
        total = len(self.plan.steps)
        self.say(f"step {index + 1}/{total} {entry['kind']}: {describe(step, self.plan)}")
        return entry

    def _end(self, entry: dict[str, Any], state: str, detail: str) -> None:
        entry.update(state=state, finished=_now(), detail=detail)
        self.save()

    def _step(self, index: int, step: Step, entry: dict[str, Any]) -> Problem | None:
        if isinstance(step, CanaryReplicas):
            wanted = step.resolve(self.plan.stable_replicas)
            entry.update(replicas=wanted, mode=self.plan.mode)
            self.save()  # the canary's record before it is made: a killed run names it
            problem = self.canary.scale_to(wanted)
            where = "beside the stable" if self.plan.mode == SURGE else "in the stable's place"
            stable = self.canary.stable_now
            entry["detail"] = f"the canary runs {wanted} pod(s) {where}" + (
                f" (the stable {stable})" if stable >= 0 else ""
            )
            return problem
        if isinstance(step, Pause):
            entry["seconds"] = step.seconds
            self._pause(step.seconds)
            entry["detail"] = f"paused {step.seconds}s"
            return self._healthy()
        if isinstance(step, AnalysisStep):
            return self._analysis(step, entry)
        assert isinstance(step, ApprovalStep)  # noqa: S101 - the four kinds
        return self._approval(index, step, entry)

    def _pause(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self.sleep(min(left, PAUSE_CHECK_S))
            self.renew()
            self._check_ours()

    def _check_ours(self) -> None:
        for name in (self.canary.deployment, self.canary.name):
            if name in self.canary.left:
                _, foreign = guard.check(self.kube, self.env, self.canary.left[name])
                if foreign is not None:
                    raise ForeignChange(foreign)

    def _healthy(self) -> Problem | None:
        """The canary still has every pod available (a pod that crashed during a pause or an
        analysis fails the step, as the rollout watch would have)."""
        if self.canary.uid is None:
            return None
        obj = self.canary.read()
        if obj is None:
            return Problem(
                "canary-gone", self.canary.name, f"the canary {self.canary.name} is gone"
            )
        from gpuops.adapters.kube import apps as kubeapps  # noqa: PLC0415

        d = kubeapps.deployment_state(obj)
        if d.available < self.canary.replicas:
            return Problem(
                "canary-unavailable",
                self.canary.name,
                f"the canary has {d.available} of {self.canary.replicas} pods available",
            )
        return None

    def _analysis(self, step: AnalysisStep, entry: dict[str, Any]) -> Problem | None:
        target = analysis.Target(
            kube=self.kube,
            namespace=self.env.namespace,
            deployment=self.canary.deployment,
            canary=self.canary.name,
            release=self.record.number,
            image=self.canary.content.image,
            since=time.time(),
            pods=self.canary.pods,
        )
        tally = analysis.run(step, target, sleep=self.sleep, say=self.say, renew=self.renew)
        entry.update(_trimmed(tally.to_dict()))
        entry["detail"] = f"{step.name}: {tally.verdict}: {tally.reason}"
        if tally.verdict == ANALYSIS_FAILED:
            return Problem(
                "analysis",
                self.canary.name,
                f"analysis {step.name} ({step.kind}) failed: {tally.reason}",
            )
        return self._healthy()

    def _approval(self, index: int, step: ApprovalStep, entry: dict[str, Any]) -> Problem | None:
        entry.update(
            state="paused",
            approvers=list(step.approvers),
            detail=f"waiting for {', '.join(step.approvers)} (timeout {step.timeout_minutes} min)",
        )
        paused = {
            "step": index,
            "approvers": list(step.approvers),
            "timeout_minutes": step.timeout_minutes,
            "since": _now(),
        }
        self.save(paused=paused)
        self.out.paused = {
            "step": index,
            "approvers": list(step.approvers),
            "timeout_minutes": step.timeout_minutes,
            "record": self.record.number,
        }
        self.out.state = m.PAUSED
        self.say(
            f"step {index + 1}/{len(self.plan.steps)} approval: paused: release "
            f"#{self.record.number} waits for {', '.join(step.approvers)}; 'gpuops release "
            "resume' goes on (or --reject restores)"
        )
        return None

    def approved(self, index: int, who: str, reason: str | None) -> None:
        """``release resume``: the approval step ``index`` passed."""
        entry = self.entries[index] if index < len(self.entries) else None
        if entry is None or entry.get("kind") != "approval":
            entry = {"index": index, "kind": "approval", "started": _now(), "detail": ""}
            self.entries.append(entry)
        detail = f"approved by {who}" + (f": {reason}" if reason else "")
        entry.update(state="passed", finished=_now(), approved_by=who, detail=detail)
        self.save(paused=None)
        self.say(f"step {index + 1}/{len(self.plan.steps)} approval: passed: {detail}")

    def rejected(self, index: int, who: str | None, reason: str | None) -> Problem:
        entry = self.entries[index] if index < len(self.entries) else None
        if entry is None or entry.get("kind") != "approval":
            entry = {"index": index, "kind": "approval", "started": _now(), "detail": ""}
            self.entries.append(entry)
        detail = "rejected" + (f" by {who}" if who else "") + (f": {reason}" if reason else "")
        entry.update(state="failed", finished=_now(), detail=detail)
        if who:
            entry["approved_by"] = who
        self.save(paused=None)
        self.say(f"step {index + 1}/{len(self.plan.steps)} approval: failed: {detail}")
        return Problem("rejected", self.canary.deployment, detail)

    # -- "all" and the way back ------------------------------------------------------------
    def all_patch(self) -> dict[str, Any]:
        """What "all" adds to the release patch: in place, the stable's rollout strategy (no
        surge, ``max_unavailable`` down) and, the first time, its annotation."""
        if self.plan.mode != IN_PLACE:
            return {}
        patch: dict[str, Any] = {
            "spec": {"strategy": canary_core.in_place_strategy(self.plan.max_unavailable)}
        }
        if self.canary.stable_now < 0:
            note = canary_core.in_place_note(
                self.record.number, self.plan.stable_replicas, self.plan.stable_strategy
            )
            patch["metadata"] = {"annotations": {canary_core.IN_PLACE_ANNOTATION: note}}
            self.canary.stable_now = self.plan.stable_replicas
        return patch

    def begin_all(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "index": len(self.plan.steps),
            "kind": "all",
            "state": "running",
            "started": _now(),
            "finished": None,
            "detail": "",
            "replicas": self.plan.stable_replicas,
            "mode": self.plan.mode,
        }
        self.entries.append(entry)
        self.save()
        how = (
            "beside it (surge)"
            if self.plan.mode == SURGE
            else f"in place, {self.plan.max_unavailable} at a time"
        )
        self.say(f"step all: the stable {self.canary.deployment} takes the release, {how}")
        return entry

    def after_all(self) -> Problem | None:
        """The stable runs the release: the canary's pods go back to it (in place) and the
        canary goes; the stable's strategy as it was."""
        problem = self.canary.give_back()
        if problem is not None:
            return problem
        self.canary.remove()
        self.canary.finish_stable()
        return None

    def end_all(self, state: str, detail: str) -> None:
        entry = next((e for e in self.entries if e["kind"] == "all"), None)
        if entry is not None:
            self._end(entry, state, detail)

    def restore_patch(self) -> dict[str, Any]:
        return self.canary.restore_replicas_patch()

    def take_canary_out(self) -> WatchResult:
        """On the way back: the canary goes first (its pods and their GPUs)."""
        t0 = time.monotonic()
        said = self.canary.remove()
        self.canary.replicas = 0
        lines = [said] if said else []
        return WatchResult(deploywatch.COMPLETE, round(time.monotonic() - t0, 2), None, lines)

    def restore(self) -> WatchResult:
        """After a failed step: the canary goes, then the stable is as it was (in place:
        its replicas and strategy, watched)."""
        removed = self.take_canary_out()
        result = self.canary.restore_stable()
        if result is None:
            return removed
        result.lines[:0] = removed.lines
        result.seconds = round(result.seconds + removed.seconds, 2)
        return result


def describe(step: Step, plan: Plan) -> str:
    if isinstance(step, CanaryReplicas):
        where = "beside the stable" if plan.mode == SURGE else "in the stable's place"
        return (
            f"the canary to {step.resolve(plan.stable_replicas)} pod(s) ({step.describe()}) {where}"
        )
    if isinstance(step, Pause):
        return f"pause {step.seconds}s"
    if isinstance(step, AnalysisStep):
        return (
            f"analysis {step.name} ({step.kind}): {step.count} measurement(s) "
            f"{step.interval_s}s apart, failure limit {step.failure_limit}, "
            f"inconclusive: {step.inconclusive}"
        )
    return f"approval by {', '.join(step.approvers)}"


__all__ = ["Progressive", "Stop"]
