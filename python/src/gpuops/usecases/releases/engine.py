"""One release of one environment, in this order: approval, gates (image, headroom), lock,
finish what an earlier run left open, record the release as pending, change the Deployments
(image by digest, model version), watch the rollout, move the registry tag, record the end.
A failed rollout restores what ran before, at once, and the record says why.

Every write to a Deployment after gpuops read it, and the watch itself, are conditional on
the Deployment being what gpuops left (:mod:`.guard`: its generation and the fields gpuops
owns). Someone else's change (``kubectl set image`` during the rollout or the restore) ends
the release as ``aborted``: the record names their field manager, when, and what runs now;
no registry tag moves and their change is never overwritten.

One module: the order of one release and the one state machine that runs it (:class:`_Run`),
read top to bottom; what each step does has its own module (:mod:`.steps`, :mod:`.gates`,
:mod:`.guard`, :mod:`.watch`, :mod:`.store`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from gpuops.adapters.kube import KubeClient
from gpuops.core import deploywatch
from gpuops.core import releasehistory as hist
from gpuops.core.deploywatch import Problem
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasehistory import Release
from gpuops.core.releasepatch import Content, change_cause, release_patch
from gpuops.errors import GateRefused, GpuOpsError, InternalError, OperationFailed
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.outcome import Outcome
from gpuops.usecases.releases import guard, steps
from gpuops.usecases.releases import model as m
from gpuops.usecases.releases.approval import four_eyes_refusal
from gpuops.usecases.releases.canary import ForeignChange
from gpuops.usecases.releases.gates import Gate, Registry, first_closed
from gpuops.usecases.releases.guard import Foreign, Left
from gpuops.usecases.releases.plan import Plan, lender, run_gates
from gpuops.usecases.releases.progressive import Progressive, Stop
from gpuops.usecases.releases.store import HistoryStore, TargetLock
from gpuops.usecases.releases.watch import (
    ABORTED,
    Say,
    WatchResult,
    explain_unschedulable,
    watch,
)


@dataclass
class Deps:
    """What the release use cases talk to: the registry of an environment (a factory: each
    environment says how its registry is reached), the console, and the cluster."""

    registry_for: Callable[[Environment], Registry]
    say: Say
    connect: Callable[[Cluster], KubeClient] = Cluster.connect
    bound: Registry | None = None

    def for_env(self, env: Environment) -> Deps:
        return replace(self, bound=self.registry_for(env))

    @property
    def registry(self) -> Registry:
        if self.bound is None:
            raise InternalError("the release use case ran without its registry")
        return self.bound


@dataclass
class Context:
    kube: KubeClient
    live: list[steps.Live]
    records: list[Release]
    current: Release | None


#: What the release puts on the cluster and the gates that chose it (the image gate); None
#: only when one of those gates did not pass.
Choose = Callable[[Context], tuple[m.Wanted | None, list[Gate]]]


def cluster_of(env: Environment, target: m.Target) -> Cluster:
    return Cluster(target.kubeconfig or env.kubeconfig, target.context or env.context)


def run(
    env: Environment,
    action: str,
    target: m.Target,
    who: m.Who,
    dry_run: bool,
    choose: Choose,
    deps: Deps,
) -> Outcome[m.ReleaseOutcome]:
    """The release, and its verdict: refused (a gate, the approval or the lock said no,
    nothing changed), failed (the rollout failed or someone else changed a Deployment) or
    partial (interrupted after it changed some Deployments)."""
    approval = {
        "required": env.approval.required,
        "approvers": list(env.approval.approvers),
        "timeout_minutes": env.approval.timeout_minutes,
        "approved_by": who.approved_by,
        "requested_by": who.requested_by,
    }
    cluster = cluster_of(env, target)
    kube = deps.connect(cluster)
    out = m.ReleaseOutcome(env, action, m.PLANNED, kube.server, approval=approval)
    t0 = out.t0
    out.lock = {"resource": m.lock_resource(kube.server, env)}
    try:
        said_no = approval_refusal(env, who, dry_run)  # before anything is read or changed
        if said_no is not None:
            return _refused(out, said_no)
        live = steps.read_live(kube, env)
        store = HistoryStore(kube, env)
        records = store.read()
        out.current = hist.by_number(records, live[0].release)
        wanted, gates = choose(Context(kube, live, records, out.current))
        out.gates.extend(gates)
        closed = first_closed(gates)
        if closed is not None or wanted is None:
            assert closed is not None  # noqa: S101 - choose says why it has nothing to release
            return _refused(out, closed.refusal())
        out.wanted = wanted
        if _unchanged(live, wanted) and not any(r.status == hist.PENDING for r in records):
            out.state = m.UNCHANGED  # (an open record is finished under the lock below)
            return Outcome(out)
        lend = lender(kube)
        closed, plan = run_gates(lend, env, cluster, live, wanted, who, deps.registry, out, action)
        if closed is not None:  # the first gate that did not pass: refused, nothing changes
            return _refused(out, closed.refusal())
        out.timings_s["gates"] = round(time.monotonic() - t0, 3)
        if dry_run:
            return Outcome(out)
        label = wanted.tag or wanted.model or wanted.image
        lock = TargetLock(kube, env, f"{action} {label} to {env.name}")
        try:
            lock.acquire()
        except GateRefused as exc:
            return _refused(out, exc)
        out.lock.update(lock.to_dict())
        gone = _digest_gone(deps, env, wanted, lock, out)
        if gone is not None:
            return _refused(out, gone)
        for stale in lock.taken_over:
            deps.say(
                f"took over the stale lock {stale['lease']}: {stale['holder']} "
                f"({stale['operation']}) had not renewed it for {stale['silent_for_s']}s"
            )
        run_ = _Run(kube, env, store, out, wanted, deps, lock, plan=plan)
        try:
            error = _locked(run_, who)
        except GpuOpsError as exc:  # e.g. the API server gone for good: what we know so far
            out.notes.append(f"stopped: {exc.message}")
            out.state = m.INTERRUPTED
            # some Deployments changed and the rest did not: partial
            return Outcome(out, exc, partial=bool(run_.applied))
        finally:
            out.notes.extend(lock.release())
        return Outcome(out, error)
    finally:
        out.timings_s["total"] = round(time.monotonic() - t0, 3)
        kube.close()


def approval_refusal(env: Environment, who: m.Who, dry_run: bool) -> GateRefused | None:
    """Four eyes, then the approval an environment requires (not asked of a dry run)."""
    same = four_eyes_refusal(env.name, who)
    if same is not None:
        return same
    if env.approval.required and not who.approved_by and not dry_run:
        who_may = ", ".join(env.approval.approvers) or "an approver"
        return GateRefused(
            f"{env.name} requires an approval ({who_may}) and none was given",
            hint="approve it in the pipeline (promoteTag asks) or pass --approved-by",
        )
    return None


def _digest_gone(
    deps: Deps, env: Environment, wanted: m.Wanted, lock: TargetLock, out: m.ReleaseOutcome
) -> GateRefused | None:
    """The wanted digest asked for again under the lock: ``gpuops image prune`` holds this
    Lease while it deletes, so a digest it deleted after the gates resolved it (before this
    release took the Lease) is seen here, before anything changes. One HEAD. When it is gone
    (or the registry cannot answer) the lock goes back at once."""
    try:
        there = not wanted.digest or deps.registry.has_digest(env.image, wanted.digest)
    except BaseException:
        lock.release()
        raise
    if there:
        return None
    out.notes.extend(lock.release())
    return GateRefused(
        f"{wanted.image} is no longer in the registry: it was deleted after the gates passed "
        "(image prune?); nothing changed",
        hint="release a tag that exists (see 'gpuops image prune --dry-run' for what is kept)",
    )


def _refused(out: m.ReleaseOutcome, error: GateRefused) -> Outcome[m.ReleaseOutcome]:
    out.state = m.REFUSED
    return Outcome(out, error)


def _unchanged(live: list[steps.Live], wanted: m.Wanted) -> bool:
    return all(x.content == Content(wanted.image, wanted.model) for x in live)


@dataclass
class _Run:
    """One release under the lock: what it read, what it changed so far."""

    kube: KubeClient
    env: Environment
    store: HistoryStore
    out: m.ReleaseOutcome
    wanted: m.Wanted
    deps: Deps
    lock: TargetLock
    live: list[steps.Live] = field(default_factory=list)
    applied: list[steps.Live] = field(default_factory=list)
    old_cm: str | bool | None = False
    #: each Deployment as gpuops left it (before its first write: as gpuops read it)
    left: dict[str, Left] = field(default_factory=dict)
    #: a release with a strategy: how it runs (decided by the headroom gate) and its steps
    plan: Plan | None = None
    prog: Progressive | None = None

    def rec(self, record: Release) -> Release:
        """``record`` with the steps, the canary and the pause as they are now."""
        return self.prog.rec(record) if self.prog is not None else record

    def say(self, line: str) -> None:
        self.deps.say(line)

    def begin(self, who: m.Who) -> Release | None:
        """Finish what earlier runs left open, then record this release as pending (None:
        the environment already runs what is wanted)."""
        env, out = self.env, self.out
        self.live = steps.read_live(self.kube, env)  # again: it may have moved meanwhile
        records = steps.reconcile(self.kube, env, self.store, self.live, out, self.say)
        self.left = {x.name: guard.left_of(x.obj, env) for x in self.live}
        current = out.current = hist.by_number(records, self.live[0].release)
        steps.align_registry_tag(env, current, self.deps.registry, out, self.say)
        if _unchanged(self.live, self.wanted):
            out.state = m.UNCHANGED
            return None
        w = self.wanted
        record = Release(
            number=hist.next_number(records),
            environment=env.name,
            action=out.action,
            tag=w.tag,
            digest=w.digest,
            image=w.image,
            model=w.model,
            status=hist.PENDING,
            started=hist.now_iso(),
            previous=current.number if current else None,
            reason=who.reason,
            approved_by=who.approved_by,
            requested_by=who.requested_by,
            git_revision=who.git_revision,
            link=who.link,
            node_change=who.node_change,
        )
        self.store.put(record, record.number)
        out.record = record
        was = current.label if current else self.live[0].content.image
        self.say(
            f"release #{record.number}: {out.action} {_what(w)} to {env.name} ({env.target}); "
            f"was {was}"
        )
        if self.plan is not None:
            self.progressive(record, who)
        return record

    def progressive(self, record: Release, who: m.Who) -> Progressive:
        assert self.plan is not None  # noqa: S101 - only for a release with a strategy
        w = self.wanted
        cause = change_cause(
            f"gpuops #{record.number} canary of {self.env.deployments[0]} ({self.env.name}): "
            f"{_what(w)}" + (f": {who.reason}" if who.reason else "")
        )
        self.prog = Progressive.start(
            self.kube,
            self.env,
            self.store,
            self.out,
            self.plan,
            record,
            Content(w.image, w.model),
            cause,
            self.left,
            self.say,
            self.lock.renew,
        )
        return self.prog

    def go(self, record: Release, who: m.Who, start: int = 0) -> GpuOpsError | None:
        """From step ``start`` of the strategy (none: straight on) to the end of the release:
        the steps, then "all" (the stable patched and watched), the tag, the record."""
        if self.prog is not None and start < len(self.prog.plan.steps):
            try:
                stop = self.prog.run(start)
            except ForeignChange as exc:
                return self.abort(record, exc.foreign, "during the release's steps")
            if stop is not None and stop.problem is None:
                return None  # paused on an approval step: 'release resume' goes on
            if stop is not None:
                assert stop.problem is not None  # noqa: S101 - a failed step names its problem
                return self.fail_step(record, stop)
        error = self.apply(record, who)
        if error is not None:
            return error
        self.out.timings_s["applied"] = round(time.monotonic() - self.out.t0, 3)
        return self.finish(record)

    def apply(self, record: Release, who: m.Who) -> GpuOpsError | None:
        env, w = self.env, self.wanted
        cause = change_cause(
            f"gpuops #{record.number} {self.out.action} {env.name}: {_what(w)}"
            + (f" approved by {who.approved_by}" if who.approved_by else "")
            + (f": {who.reason}" if who.reason else "")
        )
        self.old_cm = steps.set_model_configmap(self.kube, env, w.model, self.live)
        extra: dict[str, Any] = {}
        if self.prog is not None:
            self.prog.begin_all()
            extra = self.prog.all_patch()
        for x in self.live:
            patch = steps.merged(
                release_patch(
                    env.container,
                    env.model,
                    x.content,
                    Content(w.image, w.model),
                    release=record.number,
                    change_cause=cause,
                ),
                extra,
            )
            made, foreign = guard.patch_if_ours(self.kube, env, self.left[x.name], patch)
            if foreign is not None:
                if self.applied:  # the Deployments changed so far go back (while still ours)
                    _, other = steps.restore(
                        self.kube,
                        env,
                        self.applied,
                        self.left,
                        w,
                        record,
                        self.out.current,
                        self.old_cm,
                        self.say,
                        extra=self.prog.restore_patch() if self.prog else None,
                    )
                    foreign = foreign if other is None else other
                elif self.old_cm is not False:
                    steps.write_model_configmap(
                        self.kube,
                        env,
                        self.old_cm if isinstance(self.old_cm, str) else None,
                        expect=w.model,
                        say=self.say,
                    )
                return self.abort(record, foreign, "before gpuops changed it")
            self.left[x.name] = guard.left_of(made, env)
            self.applied.append(x)
        return None

    def abort(
        self, record: Release, foreign: Foreign, when: str, problem: Problem | None = None
    ) -> GpuOpsError:
        """Someone else changed a Deployment: the release ends here, as ``aborted``, naming
        who and what runs now; their change stays, no registry tag moves."""
        env = self.env
        said = foreign.message(env.namespace)
        left = self.left.get(foreign.deployment)
        # their pod template runs something else: gpuops' release marks come off it; a write
        # of the generation only (kubectl scale, an autoscaler) leaves gpuops' image running
        theirs = left is not None and bool({"image", "model"} & set(foreign.changed))
        taken = steps.disown(self.kube, env, left, foreign, record) if left and theirs else []
        failure: dict[str, Any] = {
            "kind": "foreign-change",
            "deployment": foreign.deployment,
            "message": f"{said} ({when})",
            "changed_by": foreign.to_dict(),
        }
        if problem is not None:
            failure["rollout_problem"] = problem.to_dict()
        note = (
            f"someone else changed the Deployment {when}: gpuops left their change as it is "
            "and moved no registry tag"
        )
        if taken:
            note += f"; took back its annotations {', '.join(taken)}"
        if self.prog is not None:
            note += self._canary_out_after_abort()
        self._end(
            replace(
                record, status=hist.ABORTED, finished=hist.now_iso(), failure=failure, note=note
            ),
            m.ABORTED,
        )
        self.say(f"release #{record.number} aborted: {said}")
        return OperationFailed(
            f"release #{record.number} ({_what(self.wanted)}) to {env.name} aborted: {said} "
            f"({when}); gpuops did not overwrite it and moved no registry tag",
            hint="ask who changed it (its managed fields name them; kubectl rollout history), "
            "then release again",
        )

    def _canary_out_after_abort(self) -> str:
        """After someone else's change: gpuops' own canary goes (while still its own), and
        in place the stable's replicas come back (while the stable is as gpuops left it)."""
        assert self.prog is not None  # noqa: S101 - only for a release with a strategy
        said = []
        for what in (self.prog.take_canary_out, self.prog.canary.restore_stable):
            try:
                done = what()
            except (ForeignChange, GpuOpsError):
                said.append("left the rest as it is (someone else's change)")
                break
            if isinstance(done, WatchResult) and done.lines:
                said.extend(done.lines[:1])
        return ("; " + "; ".join(said)) if said else ""

    def fail_step(self, record: Release, stop: Stop) -> GpuOpsError:
        """A step failed: the previous release back at once (the canary goes; in place the
        stable's replicas and strategy as they were), the record says which step and why."""
        assert self.prog is not None and stop.problem is not None  # noqa: S101
        env, out, current, problem = self.env, self.out, self.out.current, stop.problem
        back = current.label if current else self.live[0].content.image
        step = f"step {stop.index + 1} ({self.prog.entries[-1]['kind']})"
        self.say(f"release #{record.number} failed at {step}: {problem.message}")
        self.say(f"rolling back to {back}")
        try:
            out.restore = self.prog.restore()
        except ForeignChange as exc:
            return self.abort(
                record, exc.foreign, "while gpuops restored the previous release", problem
            )
        restored = out.restore.state == deploywatch.COMPLETE
        if restored:
            self.say(f"rolled back: {env.name} runs {back} again")
        failure: dict[str, Any] = {**problem.to_dict(), "step": stop.index}
        self._end(
            replace(
                record,
                status=hist.FAILED,
                finished=hist.now_iso(),
                failure=failure,
                rolled_back_to=current.number if current else None,
                note=None if restored else "the restore did not complete: check the Deployment",
            )
        )
        ended = "rolled back to" if restored else "tried to roll back to"
        error = OperationFailed(
            f"release #{record.number} ({_what(self.wanted)}) to {env.name} failed at {step}: "
            f"{problem.message}; {ended} {back}",
            hint="see the release's steps in 'gpuops release history'",
        )
        if problem.kind == "rejected":
            return GateRefused(error.message, hint="release again when it may go on")
        return error

    def foreign(self) -> Foreign | None:
        """A fresh look at every Deployment this release changed."""
        for x in self.applied:
            _, foreign = guard.check(self.kube, self.env, self.left[x.name])
            if foreign is not None:
                return foreign
        return None

    def _end(self, record: Release, state: str = m.FAILED) -> None:
        record = self.rec(record)
        self.store.put(record, record.number)
        self.out.record = record
        self.out.state = state

    def finish(self, record: Release) -> GpuOpsError | None:
        env, out = self.env, self.out
        result = watch(
            self.kube,
            env.namespace,
            env.deployments,
            env.rollout,
            say=self.say,
            renew=self.lock.renew,
            guard=lambda name, obj: guard.foreign_change(self.left[name], obj, env),
        )
        out.rollout = result
        problem = result.problem
        if result.state == ABORTED and result.foreign is not None:
            return self.abort(record, result.foreign, "while gpuops watched its rollout")
        if result.state == deploywatch.COMPLETE and self.prog is not None:
            try:
                problem = (
                    self.prog.after_all()
                )  # the canary goes (in place: back, a batch at a time)
            except ForeignChange as exc:
                return self.abort(record, exc.foreign, "while the canary went")
            if problem is None:
                self.prog.end_all("passed", f"the stable runs {_what(self.wanted)}")
        if result.state == deploywatch.COMPLETE and problem is None:
            foreign = self.foreign()  # the tag moves only onto what gpuops released
            if foreign is not None:
                return self.abort(record, foreign, "after its rollout, before the tag moved")
            problem = steps.move_registry_tag(env, self.wanted, self.deps.registry, self.say)
            foreign = self.foreign() if problem is None else None
            if foreign is not None:
                steps.align_registry_tag(env, out.current, self.deps.registry, out, self.say)
                return self.abort(record, foreign, "while the registry tag moved")
            if problem is None:
                _succeeded(self.store, out, self.rec(record), out.current, env)
                self.say(
                    f"release #{record.number} succeeded: {env.name} runs {_what(self.wanted)}"
                )
                return None
        assert problem is not None  # noqa: S101 - a failed watch always names its problem
        return self.fail(record, problem)

    def fail(self, record: Release, problem: Problem) -> GpuOpsError:
        env, out, current = self.env, self.out, self.out.current
        if problem.kind == "unschedulable":
            out.explanation = explain_unschedulable(self.kube, env.namespace, problem, env.group_by)
        back = current.label if current else self.live[0].content.image
        self.say(f"release #{record.number} failed ({problem.kind}): {problem.message}")
        self.say(f"rolling back to {back}")
        extra: dict[str, Any] | None = None
        if self.prog is not None:
            self.prog.end_all("failed", problem.message)
            try:
                self.prog.take_canary_out()  # its GPUs first: the stable may need them back
            except ForeignChange as exc:
                return self.abort(
                    record, exc.foreign, "while gpuops restored the previous release", problem
                )
            extra = self.prog.restore_patch()
        out.restore, foreign = steps.restore(
            self.kube,
            env,
            self.applied,
            self.left,
            self.wanted,
            record,
            current,
            self.old_cm,
            self.say,
            extra=extra,
        )
        if foreign is not None:
            return self.abort(
                record, foreign, "while gpuops restored the previous release", problem
            )
        if self.prog is not None and out.restore and out.restore.state == deploywatch.COMPLETE:
            try:  # in place: the stable's own strategy back once the restore is complete
                self.prog.canary.finish_stable()
            except ForeignChange as exc:
                return self.abort(record, exc.foreign, "after gpuops restored it", problem)
        failure: dict[str, Any] = problem.to_dict()
        if out.explanation:
            failure["explanation"] = out.explanation.get("summary")
            failure["fixes"] = out.explanation.get("fixes")
        restored = out.restore is not None and out.restore.state == deploywatch.COMPLETE
        self._end(
            replace(
                record,
                status=hist.FAILED,
                finished=hist.now_iso(),
                failure=failure,
                rolled_back_to=current.number if current else None,
                note=None if restored else "the restore did not complete: check the Deployment",
            )
        )
        ended = "rolled back to" if restored else "tried to roll back to"
        return OperationFailed(
            f"release #{record.number} ({_what(self.wanted)}) to {env.name} failed: "
            f"{problem.message}; {ended} {back}",
            hint=(out.explanation or {}).get("summary")
            or "see the release's failure in 'gpuops release history'",
        )


def _locked(run_: _Run, who: m.Who) -> GpuOpsError | None:
    record = run_.begin(who)
    if record is None:
        return None
    return run_.go(record, who)


def _what(w: m.Wanted) -> str:
    parts = []
    if w.tag:
        parts.append(f"{w.tag} ({(w.digest or '')[:19]})")
    if w.model:
        parts.append(f"model {w.model}")
    return ", ".join(parts) or w.image


def _succeeded(
    store: HistoryStore,
    out: m.ReleaseOutcome,
    record: Release,
    current: Release | None,
    env: Environment,
) -> None:
    done = replace(
        record, status=hist.SUCCEEDED, finished=hist.now_iso(), registry_tag=env.registry_tag
    )

    def change(records: list[Release]) -> list[Release]:
        records = hist.upsert(records, done)
        if out.action == "rollback" and current is not None:
            replaced = hist.by_number(records, current.number)
            if replaced is not None:
                records = hist.upsert(records, replace(replaced, rolled_back_by=done.number))
        return records

    store.update(change, done.number)
    out.record = done
    out.state = m.SUCCEEDED
