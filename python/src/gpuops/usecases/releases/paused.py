"""``gpuops release resume``: a release paused on an approval step of its strategy goes on
(the remaining steps, then "all"), or, rejected, the previous release is restored.

The paused release's record (``pending``, with ``paused``, its ``steps`` and its ``canary``)
says where it stood. Resume takes the target's lock again, reads the record again under it,
checks that the environment's steps are still those the release paused in, and that the stable
and the canary are as gpuops left them (their generations as recorded, the canary's uid):
someone else's change meanwhile ends the release ``aborted`` and is never overwritten.
Four eyes as for promote: neither the release's requester nor one given here may approve."""

from __future__ import annotations

import time
from typing import Any

from gpuops.adapters.kube import apps as kubeapps
from gpuops.core import canary as canary_core
from gpuops.core import releasehistory as hist
from gpuops.core.deploywatch import Problem
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasehistory import Release
from gpuops.core.releasestrategy import canary_name, step_kind
from gpuops.errors import GateRefused, GpuOpsError, InvalidInput
from gpuops.usecases.outcome import Outcome
from gpuops.usecases.releases import config, guard, steps
from gpuops.usecases.releases import model as m
from gpuops.usecases.releases.approval import four_eyes_refusal
from gpuops.usecases.releases.engine import Deps, _refused, _Run, cluster_of
from gpuops.usecases.releases.guard import Left
from gpuops.usecases.releases.plan import Plan
from gpuops.usecases.releases.progressive import Stop
from gpuops.usecases.releases.store import HistoryStore, TargetLock


def paused_record(records: list[Release]) -> Release | None:
    """The newest release of the history waiting on an approval step."""
    waiting = [r for r in records if r.status == hist.PENDING and r.paused is not None]
    return max(waiting, key=lambda r: r.number) if waiting else None


def resume(request: m.ResumeRequest, deps: Deps) -> Outcome[m.ReleaseOutcome]:
    env = config.load(request.target.config).environment(request.target.environment)
    deps = deps.for_env(env)
    who = request.who
    if env.strategy is None:
        raise InvalidInput(
            f"{env.source}: environment {env.name} has no strategy: none of its releases "
            "waits on an approval step",
            field="environment",
        )
    kube = deps.connect(cluster_of(env, request.target))
    approval: dict[str, Any] = {
        "required": True,
        "approvers": [],
        "timeout_minutes": 0,
        "approved_by": who.approved_by,
        "requested_by": who.requested_by,
    }
    out = m.ReleaseOutcome(env, "promote", m.PLANNED, kube.server, approval=approval)
    out.lock = {"resource": m.lock_resource(kube.server, env)}
    try:
        # four eyes guards an approval; a rejection only restores what ran before
        refusal = None if request.reject else four_eyes_refusal(env.name, who)
        if refusal is not None:
            return _refused(out, refusal)
        store = HistoryStore(kube, env)
        record = paused_record(store.read())
        if record is None:
            return _refused(out, _nothing_paused(env))
        if not request.reject:
            refusal = four_eyes_refusal(
                env.name, m.Who(approved_by=who.approved_by, requested_by=record.requested_by)
            )
            if refusal is not None:
                return _refused(out, refusal)
        _describe(out, record, store.read())
        lock = TargetLock(kube, env, f"resume release #{record.number} of {env.name}")
        try:
            lock.acquire()
        except GateRefused as exc:
            return _refused(out, exc)
        out.lock.update(lock.to_dict())
        assert out.wanted is not None  # noqa: S101 - _describe sets it
        run_ = _Run(kube, env, store, out, out.wanted, deps, lock)
        try:
            error = _resumed(run_, record.number, request)
        except GpuOpsError as exc:
            out.notes.append(f"stopped: {exc.message}")
            out.state = m.INTERRUPTED
            return Outcome(out, exc, partial=True)
        finally:
            out.notes.extend(lock.release())
        return Outcome(out, error)
    finally:
        out.timings_s["total"] = round(time.monotonic() - out.t0, 3)
        kube.close()


def _nothing_paused(env: Environment) -> GateRefused:
    return GateRefused(
        f"no release of {env.name} waits on an approval step",
        hint="see 'gpuops release history'; a later release may have replaced it",
    )


def _describe(out: m.ReleaseOutcome, record: Release, records: list[Release]) -> None:
    out.action = record.action
    out.record = record
    out.current = hist.by_number(records, record.previous)
    out.wanted = m.Wanted(record.tag, record.digest, record.image or "", record.model)
    paused = record.paused or {}
    out.approval.update(
        approvers=list(paused.get("approvers") or []),
        timeout_minutes=int(paused.get("timeout_minutes") or 0),
    )


def _resumed(run_: _Run, number: int, request: m.ResumeRequest) -> Any:
    env, out, who = run_.env, run_.out, request.who
    assert env.strategy is not None and (request.reject or who.approved_by)  # noqa: S101
    record = hist.by_number(run_.store.read(), number)  # again, under the lock
    if record is None or record.status != hist.PENDING or record.paused is None:
        return _refusal(out, _nothing_paused(env))
    doc, index = record.canary or {}, int(record.paused.get("step", -1))
    steps_now = env.strategy.steps
    kinds = [step_kind(s) for s in steps_now]
    done = [str(e.get("kind")) for e in record.steps or [] if e.get("kind") != "all"]
    if kinds[: len(done)] != done or not 0 <= index < len(kinds) or kinds[index] != "approval":
        return _refusal(
            out,
            GateRefused(
                f"the steps of {env.name} in {env.source} changed since release "
                f"#{record.number} paused at step {index + 1}: it cannot go on",
                hint="reject it (--reject), then release again",
            ),
        )
    run_.live = steps.read_live(run_.kube, env)
    deployment = env.deployments[0]
    run_.left = {x.name: guard.left_of(x.obj, env) for x in run_.live}
    run_.plan = Plan(
        mode=str(doc.get("mode") or "surge"),
        stable_replicas=int(doc.get("stable_replicas") or 0),
        stable_strategy=dict(doc.get("stable_strategy") or {}),
        max_unavailable=int(doc.get("max_unavailable") or 1),
        message="resumed after its approval step",
        steps=steps_now,
    )
    out.steps = None
    prog = run_.progressive(record, who)
    prog.entries.extend(dict(e) for e in record.steps or [])
    canary = prog.canary
    canary.uid = doc.get("uid") if isinstance(doc.get("uid"), str) else None
    canary.replicas = int(doc.get("replicas") or 0)
    canary.stable_now = int(doc.get("stable_now", -1))
    generations = doc.get("generations") or {}
    foreign = _changed(run_, deployment, generations.get(deployment))
    problem: Problem | None = None
    if foreign is None and canary.uid is not None:
        obj = kubeapps.find_deployment(run_.kube, env.namespace, canary_name(deployment))
        if obj is None or not canary_core.is_ours(obj, deployment, {record.number}, canary.uid):
            problem = Problem(
                "canary-gone",
                canary.name,
                f"the canary {canary.name} is gone or no longer gpuops' own",
            )
            canary.uid = None
        else:
            run_.left[canary.name] = guard.left_of(obj, env)
            foreign = _changed(run_, canary.name, generations.get(canary.name))
    if foreign is not None:
        return run_.abort(record, foreign, "while the release waited on its approval")
    if problem is not None:
        return run_.fail_step(record, Stop(index, problem))
    if request.reject:
        return run_.fail_step(
            record, Stop(index, prog.rejected(index, who.approved_by, who.reason))
        )
    assert who.approved_by is not None  # noqa: S101 - the CLI asks for it unless rejected
    prog.approved(index, who.approved_by, who.reason)
    return run_.go(record, who, start=index + 1)


def _changed(run_: _Run, name: str, generation: Any) -> Any:
    """Someone else's change of ``name`` since the release paused (its spec's generation
    moved since gpuops recorded it)."""
    left = run_.left.get(name)
    if left is None or type(generation) is not int or generation == left.generation:
        return None
    then = Left(left.name, generation, left.owned)
    obj, _ = guard.check(run_.kube, run_.env, left)
    return guard.foreign_change(then, obj, run_.env)


def _refusal(out: m.ReleaseOutcome, error: GateRefused) -> GateRefused:
    out.state = m.REFUSED
    return error
