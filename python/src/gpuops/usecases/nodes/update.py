"""``gpuops nodes update``: change GPU nodes without interrupting training (S-3, S-13 ... S-15).

Order of operations:

1. Pre-flight, before any host or node is touched: the inventory and limit, every host's
   wanted driver and repository (S-7), the Kubernetes API, every host reachable and its
   driver ``.run`` in the repository (read-only ssh).
2. Plan: the playbook in check mode shows which hosts would change (and the diff); only they
   are rolled out, canary first, then batches. ``--check`` stops here.
3. Per batch: the headroom gate (can the cluster lose these GPUs, reserve honoured?), then for
   Kubernetes nodes cordon, wait for GPU pods, drain; the playbook on the batch through
   ansible-runner (progress per host as events arrive); node Ready, uncordon.
4. A failure beyond the budget stops the rollout: later batches are never started. A re-run
   plans again from what the hosts report, so it resumes where the last one stopped.
5. The records: ``update.json``, ``update-junit.xml`` and the node update page beside them.

The order, the canary, the stop rules and the statuses are the core's
(:mod:`gpuops.core.rollout`); this module does the I/O around them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuops.adapters import ansible, hostkeys
from gpuops.adapters.kube import KubeClient
from gpuops.core import inventory, rollout
from gpuops.core.inventory import DEFAULT_PATTERN
from gpuops.errors import GateRefused, GpuOpsError, InvalidInput, OperationFailed, Unreachable
from gpuops.fsio import OutDir
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.nodes import common
from gpuops.usecases.nodes.drain import DrainPolicy, Guard
from gpuops.usecases.nodes.records import BatchRecord, HostRecord, Rollout
from gpuops.usecases.outcome import Outcome

PLAYBOOK = "update_gpu_nodes"
ROLES = ("node_init", "nvidia_driver")


@dataclass(frozen=True)
class UpdateRequest:
    inventory: str
    limit: str | None = None
    pattern: str = DEFAULT_PATTERN
    change: tuple[str, ...] = ROLES
    policy: rollout.Policy = field(default_factory=rollout.Policy)
    drain: DrainPolicy = field(default_factory=DrainPolicy)
    cluster: Cluster | None = field(default_factory=Cluster)  # None: hosts are no nodes
    check: bool = False
    artifacts_dir: str | None = None
    forks: int = 50
    known_hosts: str | None = None  # None: the inventory's known_hosts, else ssh's own
    learn_host_keys: bool = False  # accept new host keys; written to the artifacts for review


def update(
    request: UpdateRequest, connect: Callable[[Cluster], KubeClient] | None = None
) -> Outcome[Rollout]:
    """Roll the change out; the outcome holds the rollout record, failed hosts (exit 1) or a
    refused batch (exit 3), and the files written: ``json``, ``junit`` and the node update
    page (``page``; one that cannot be written is said in the result's ``report``)."""
    ansible.ansible_config()  # a site's unreadable ansible.cfg is an input error, up front
    with hostkeys.policy(
        request.known_hosts, request.inventory, learn=request.learn_host_keys
    ) as keys:
        ro, folder = _update(request, connect, keys)
    from gpuops.usecases import reports  # noqa: PLC0415 - Jinja2 and pygal only when asked

    doc = ro.to_dict()  # the page beside update.json, for people (Jenkins archives the folder)
    page = reports.write_beside("node-update", folder.path, lambda: doc)
    ro.report = page.to_dict()
    files = {"json": ro.artifacts["json"], "junit": ro.artifacts["junit"], **page.files}
    problem = _verdict(ro)
    partial = isinstance(problem, OperationFailed) and bool(ro.with_status(rollout.CHANGED))
    return Outcome(ro, problem, partial=partial, files=files)


def phase_timings(started: float, **ends: float) -> dict[str, float]:
    """Seconds each phase took, from the monotonic time each one ended.

    Counted in whole milliseconds since ``started``, so the phases add up to the time the last
    one ended, as a batch's ``start_s`` (rounded the same way) counts it: two phases rounded
    apart could add up to a millisecond more than the run had taken."""
    out, last = {}, 0
    for name, end in ends.items():
        ms = round((end - started) * 1000)
        out[name], last = (ms - last) / 1000, ms
    return out


def _update(
    request: UpdateRequest,
    connect: Callable[[Cluster], KubeClient] | None,
    keys: hostkeys.HostKeys,
) -> tuple[Rollout, OutDir]:
    started = time.monotonic()
    folder = common.artifacts_dir(request.artifacts_dir, "nodes-update")  # made on first write
    inv = common.load(request.inventory, request.limit, request.pattern)
    if "nvidia_driver" in request.change:
        inventory.check_driver_policy(inv)
    inventory.check_node_names(inv)
    kube = (connect or Cluster.connect)(request.cluster) if request.cluster else None
    try:
        ro = Rollout(
            inventory=inv.path,
            limit=request.limit,
            environment=inv.environment,
            change=list(request.change),
            policy=request.policy,
            check=request.check,
            kube=kube.server if kube else None,
            started_at=common.now(),
        )
        ro.artifacts = {"folder": str(folder.path), "progress": str(folder.file("progress.log"))}

        def say(line: str) -> None:
            common.say(line)
            with folder.append("progress.log") as out:
                out.write(f"{common.now()} {line}\n")

        _records(ro, inv, kube)
        try:
            _preflight(inv, request, say, keys)
        finally:  # the keys learned so far, also when a host was refused
            learned = hostkeys.save_learned(keys, folder)
        if learned:
            ro.artifacts["known_hosts_learned"] = learned
            say(f"[gpuops] host keys learned, review them: {learned}")
        pre = time.monotonic()
        run = rollout.Run(request.policy)
        _plan(ro, run, inv, request, folder, say, keys)
        planned = time.monotonic()
        ro.timings_s.update(phase_timings(started, preflight=pre, plan=planned))
        if not request.check and not run.stopped:
            guard = Guard(kube, request.drain, lambda h, m: say(f"[{h}] {m}")) if kube else None
            _run(ro, run, inv, request, guard, folder, say, started, keys)
        ro.timings_s["total"] = round(time.monotonic() - started, 3)
        ro.finished_at = common.now()
    finally:
        if kube is not None:
            kube.close()
    ro.artifacts["json"] = str(folder.file("update.json"))
    ro.artifacts["junit"] = str(folder.save_text("update-junit.xml", ro.junit()))
    folder.save_json("update.json", ro.to_dict())
    return ro, folder


def _records(ro: Rollout, inv: inventory.Inventory, kube: KubeClient | None) -> None:
    from gpuops.adapters.kube import nodes as kubenodes  # noqa: PLC0415 - with Kubernetes only

    for host in inv.hosts:
        node = None
        if kube is not None and kubenodes.get_node(kube, host.node_name).exists:
            node = host.node_name
        ro.hosts[host.name] = HostRecord(host.name, host.group, node, host.driver_version)


def _preflight(
    inv: inventory.Inventory, request: UpdateRequest, say: common.Say, keys: hostkeys.HostKeys
) -> None:
    probe = common.probe(
        inv.hosts,
        check_runs="nvidia_driver" in request.change,
        parallel=request.forks,
        host_keys=keys,
    )
    down = [h for h in inv.names() if not probe.reachable[h]]
    if down:
        first = _order(inv)[0]
        what = f"canary candidate {first}" if first in down else "host(s)"
        raise Unreachable(
            f"pre-flight: {what} unreachable over ssh: "
            + "; ".join(f"{h}: {probe.reasons[h]}" for h in down[:5]),
            hint="nothing was changed; bring the host(s) back or --limit them out",
        )
    for url, hosts in probe.missing_runs.items():
        host = inv.host(hosts[0])
        raise InvalidInput(
            f"driver {host.driver_version} (group {host.group}) is not in the repository: "
            f"{url} cannot be fetched from {hosts[0]}",
            hint="put the .run into the local repository or fix gpu_nodes_driver_version; "
            "nothing was changed",
            field="inventory",
        )
    say(f"[gpuops] pre-flight: {len(inv.hosts)} host(s) reachable ({probe.elapsed_s}s)")


def _order(inv: inventory.Inventory) -> list[str]:
    """The hosts in the core's rollout order: its first host that will change is the canary."""
    return rollout.rollout_order(inv.names())


def _plan(
    ro: Rollout,
    run: rollout.Run,
    inv: inventory.Inventory,
    request: UpdateRequest,
    folder: OutDir,
    say: common.Say,
    keys: hostkeys.HostKeys,
) -> None:
    """Check mode on every host: those that would change are the rollout's hosts."""
    checked = ansible.run_playbook(
        PLAYBOOK,
        inv.path,
        inv.names(),
        data_dir=folder.subdir("ansible"),
        ident="plan",
        extravars={"update_gpu_nodes_roles": list(request.change)},
        check=True,
        forks=request.forks,
        host_keys=keys,
    )
    ro.artifacts["plan"] = checked.artifacts
    changing = set()
    for name in inv.names():
        hr, rec = checked.hosts[name], ro.hosts[name]
        rec.planned_changes = hr.changed_tasks
        ro.diffs[name] = hr.diffs
        if hr.status in ("failed", "unreachable") or (checked.rc != 0 and not hr.ok):
            rec.status = rollout.FAILED
            rec.failed_task = hr.failed_task
            rec.reason = f"plan (check mode): {hr.failed_task}: {hr.message}".strip()
        elif hr.changed:
            changing.add(name)
    pending = [h for h in _order(inv) if h in changing]
    ro.batches = [
        BatchRecord(b.index, b.kind, list(b.hosts)) for b in rollout.plan(pending, ro.policy)
    ]
    for b in ro.batches:
        if request.check:
            b.status = rollout.BatchStatus.PLANNED
        for h in b.hosts:
            ro.hosts[h].batch = b.index
            ro.hosts[h].status = rollout.PLANNED if request.check else rollout.NOT_STARTED
    say(
        f"[gpuops] plan: {len(inv.hosts)} host(s), {len(pending)} to change in "
        f"{len(ro.batches)} batch(es): "
        + "; ".join(f"{b.kind} {b.index}: {' '.join(b.hosts)}" for b in ro.batches)
        + (f"; failed in check mode: {' '.join(ro.failed)}" if ro.failed else "")
    )
    run.plan_failed(ro.failed)
    ro.stopped = run.stopped


def _run(
    ro: Rollout,
    run: rollout.Run,
    inv: inventory.Inventory,
    request: UpdateRequest,
    guard: Guard | None,
    folder: OutDir,
    say: common.Say,
    started: float,
    keys: hostkeys.HostKeys,
) -> None:
    """The batches in order; after each, the core's stop rules say whether the next starts."""
    total = len(ro.batches)
    for b in ro.batches:
        tag = f"[{b.kind} {b.index + 1}/{total}]"
        if run.stopped:
            for h in b.hosts:
                ro.hosts[h].reason = rollout.not_started(run.stopped)
            continue
        b.started_at = common.now()
        t0 = time.monotonic()
        b.start_s = round(t0 - started, 3)
        records = [ro.hosts[h] for h in b.hosts]
        if guard is not None and any(r.node for r in records):
            verdict = guard.headroom(records)
            b.headroom = verdict.to_dict()
            say(f"{tag} headroom: {verdict.message}")
            if not verdict.fits:
                b.status = run.refuse(b.index, verdict.message)
                ro.stopped, ro.refused = run.stopped, run.refused
                for r in records:
                    r.reason = rollout.not_started(run.stopped)
                continue
        ready = guard.prepare(records) if guard is not None else records
        b.phases_s["kubernetes_before"] = round(time.monotonic() - t0, 3)
        for r in ready:
            r.started_at = common.now()
        if ready:
            _batch(b, ready, inv, request, guard, folder, say, tag, keys)
        b.status = run.finish(r.status for r in records)
        ro.stopped = run.stopped
        b.finished_at, b.elapsed_s = common.now(), round(time.monotonic() - t0, 3)
        if run.stopped:
            say(f"{tag} stopping: {run.stopped}")


def _batch(
    b: BatchRecord,
    ready: list[HostRecord],
    inv: inventory.Inventory,
    request: UpdateRequest,
    guard: Guard | None,
    folder: OutDir,
    say: common.Say,
    tag: str,
    keys: hostkeys.HostKeys,
) -> None:
    """The playbook on a batch's ready hosts, then each host's status and release."""
    t1 = time.monotonic()
    done = ansible.run_playbook(
        PLAYBOOK,
        inv.path,
        [r.host for r in ready],
        data_dir=folder.subdir("ansible"),
        ident=f"batch-{b.index:02d}",
        extravars={"update_gpu_nodes_roles": list(request.change)},
        forks=request.forks,
        progress=_progress(tag, say),
        host_keys=keys,
    )
    b.ansible = {
        "ident": done.ident,
        "rc": done.rc,
        "status": done.status,
        "artifacts": done.artifacts,
        "elapsed_s": done.elapsed_s,
    }
    b.phases_s["ansible"] = round(time.monotonic() - t1, 3)
    t2 = time.monotonic()
    for r in ready:
        _after(r, done.hosts[r.host], done.rc, guard, done.elapsed_s)
        say(f"{tag} {r.host}: {r.status}" + (f": {r.reason}" if r.reason else ""))
    b.phases_s["kubernetes_after"] = round(time.monotonic() - t2, 3)


def _progress(tag: str, say: common.Say) -> ansible.Progress:
    def report(host: str, status: str, task: str, seconds: float | None) -> None:
        say(f"{tag} {host}: {status} {task}" + (f" ({seconds:.1f}s)" if seconds else ""))

    return report


def _after(
    r: HostRecord, hr: ansible.HostRun, rc: int, guard: Guard | None, elapsed: float
) -> None:
    r.changed_tasks = hr.changed_tasks
    r.phases_s["change"] = round(sum(hr.task_seconds.values()), 3) or elapsed
    slow = sorted(hr.task_seconds.items(), key=lambda kv: -kv[1])[:5]
    r.slowest_tasks_s = dict(slow)
    r.finished_at = common.now()
    if hr.status in ("failed", "unreachable") or (rc != 0 and not hr.ok):
        r.status, r.failed_task = rollout.FAILED, hr.failed_task
        r.reason = f"{hr.status}: {hr.failed_task}: {hr.message}".strip(": ") or (
            f"no result (ansible-playbook exited {rc})"
        )
        return
    r.status = rollout.CHANGED if hr.changed else rollout.UNCHANGED
    if guard is not None:
        guard.release(r)


def _verdict(ro: Rollout) -> GpuOpsError | None:
    if ro.refused:
        return GateRefused(
            f"rollout stopped: {ro.stopped}",
            hint="free GPUs or lower --reserve, then run again: it resumes",
        )
    if ro.failed:
        not_started = ro.with_status(rollout.NOT_STARTED)
        return OperationFailed(
            f"{len(ro.failed)} host(s) failed: {', '.join(ro.failed)}"
            + (f"; {len(not_started)} never started" if not_started else "")
            + (f" ({ro.stopped})" if ro.stopped else ""),
            hint="failed hosts stay cordoned; fix them and run again: it resumes "
            f"(artifacts: {ro.artifacts.get('folder')})",
        )
    return None
