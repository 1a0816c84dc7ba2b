"""``gpuops nodes update``: change GPU nodes without interrupting training (S-3, S-13 ... S-15).

Order of operations:

1. Pre-flight, before any host or node is touched: the inventory and limit, every host's
   wanted driver and repository (S-7), the Kubernetes API, every host reachable and its
   driver ``.run`` in the repository, and what it runs now (:class:`HostBefore`, the same
   read-only ssh session): a host validating with ``dcgm`` without ``dcgmi``, or one whose
   current driver a rollback could not reinstall (not readable, its ``.run`` not in the
   repository or not checkable there, no sha256 for it), is refused here (exit 2) unless
   ``--no-rollback``.
2. Plan (:mod:`gpuops.usecases.nodes.plan`): which hosts would change, what on each (the
   tasks check mode would name, their diffs) and where one would fail: the driver role from
   its own state script read over ssh and its own decision, node_init by check mode; only
   the hosts that would change are rolled out, canary first, then batches. ``--check`` stops
   here.
3. Per batch: the headroom gate (can the cluster lose these GPUs, reserve honoured?), then for
   Kubernetes nodes cordon, wait for GPU pods, drain; the playbook on the batch through
   ansible-runner (progress per host as events arrive); node Ready, uncordon.
4. A host whose install, verification or validation failed is tainted
   (``gpuops.io/gpu-unhealthy``, setter ``nodes-update``) and, rollback on, the playbook runs
   again on the batch's failed hosts only, pinned to the driver each ran before
   (``rolled-back``, or ``rollback-failed``: left cordoned and tainted). After a successful
   rollback the cordon follows ``--after-rollback`` (default ``keep-cordoned``).
   A failure (rolled back or not) beyond the budget stops the rollout: later batches are never
   started. A re-run plans again from what the hosts report, so it resumes where the last one
   stopped.
5. The records: ``update.json``, ``update-junit.xml`` and the node update page beside them;
   a run that raises mid-rollout still writes update.json and its history record
   (``stopped``: ``error: ...``) before the error goes on.

The order, the canary, the stop rules and the statuses are the core's
(:mod:`gpuops.core.rollout`); this module does the I/O around them.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuops.adapters import aborts, ansible, hostkeys
from gpuops.adapters.kube import KubeClient
from gpuops.core import inventory, rollout
from gpuops.core.inventory import DEFAULT_PATTERN
from gpuops.core.nodestate import DriverPin, HostBefore, pins_extravars
from gpuops.errors import (
    GateRefused,
    GpuOpsError,
    HostBroken,
    InvalidInput,
    OperationFailed,
    Unreachable,
)
from gpuops.fsio import OutDir
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.images.registryops import RegistryAccess
from gpuops.usecases.nodes import common, downgrade, historystore
from gpuops.usecases.nodes import gates as batchgates
from gpuops.usecases.nodes import plan as nodeplan
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
    #: hosts whose wanted driver is not their group's (``nodes rollback --to``); a pin of a
    #: host outside the inventory's pattern and limit changes nothing
    pins: dict[str, DriverPin] = field(default_factory=dict)
    rollback: rollout.RollbackPolicy = field(default_factory=rollout.RollbackPolicy)
    validation_level: int | None = None  # dcgmi diag -r N for every group; None: each group's
    #: how the downgrade gate reads the images of the pods a driver downgrade would strand
    registry: RegistryAccess = field(default_factory=RegistryAccess)
    #: Deployments (namespace, name) the caller replaces right after (release rollback
    #: --with-nodes): the downgrade gate does not judge their pods
    replaced: tuple[tuple[str, str], ...] = ()
    #: the batch gates asked before each batch, in order (window, budget, alerts)
    gates: tuple[batchgates.GateSpec, ...] = ()
    #: continue the latest run of this inventory, limit and change that was held or aborted
    #: with hosts left (its node history record): only those hosts, no canary if one passed
    resume: bool = False


def update(
    request: UpdateRequest, connect: Callable[[Cluster], KubeClient] | None = None
) -> Outcome[Rollout]:
    """Roll the change out; the outcome holds the rollout record, failed hosts (exit 1) or a
    refused batch (exit 3), and the files written: ``json``, ``junit`` and the node update
    page (``page``; one that cannot be written is said in the result's ``report``)."""
    ansible.ansible_config()  # a site's unreadable ansible.cfg is an input error, up front
    # SIGTERM (a Jenkins abort) or SIGINT: Aborted where the run is; between batches the run
    # ends with a resumable record (adapters/aborts.py); a signal while the records are
    # written is only noted
    with aborts.handled():
        with hostkeys.policy(
            request.known_hosts, request.inventory, learn=request.learn_host_keys
        ) as keys:
            ro, folder, error = _update(request, connect, keys)
        with aborts.deferred():
            if error is not None:  # raised mid-rollout: recorded as failed, then raised on
                _record_interrupted(request, connect, ro, folder)
                raise error
            unrecorded = historystore.after_update(request, connect, ro)  # the run's record
    return _finish(ro, folder, unrecorded)


def _finish(ro: Rollout, folder: OutDir, unrecorded: GpuOpsError | None) -> Outcome[Rollout]:
    if ro.record is not None:
        folder.save_json("update.json", ro.to_dict())  # with the record's id
    from gpuops.usecases import reports  # noqa: PLC0415 - Jinja2 and pygal only when asked

    doc = ro.to_dict()  # the page beside update.json, for people (Jenkins archives the folder)
    page = reports.write_beside("node-update", folder.path, lambda: doc)
    ro.report = page.to_dict()
    files = {"json": ro.artifacts["json"], "junit": ro.artifacts["junit"], **page.files}
    problem = _verdict(ro) or unrecorded
    partial = isinstance(problem, OperationFailed | HostBroken) and bool(
        ro.with_status(rollout.CHANGED)
    )
    return Outcome(ro, problem, partial=partial, files=files)


def _record_interrupted(
    request: UpdateRequest,
    connect: Callable[[Cluster], KubeClient] | None,
    ro: Rollout,
    folder: OutDir,
) -> None:
    """The node history record of a run that raised (``stopped``: ``error: ...``), and
    update.json with its id. Best effort: a failure here is logged, never raised over the
    run's own error."""
    try:
        historystore.after_update(request, connect, ro)
        if ro.record is not None:
            folder.save_json("update.json", ro.to_dict())
    except Exception as exc:  # the run's own error is the one the caller sees
        why = exc.message if isinstance(exc, GpuOpsError) else type(exc).__name__
        common.say(f"[gpuops] the interrupted run's node history record was not written: {why}")


def _interrupted(ro: Rollout, exc: BaseException) -> None:
    """A run that raised mid-rollout: ``stopped`` says so, and each host of a started batch
    that did not finish is failed (its state is not known: it may be cordoned)."""
    why = exc.message if isinstance(exc, GpuOpsError) else type(exc).__name__
    ro.stopped = f"error: {why}"
    interrupted = []
    for b in ro.batches:
        open_ = [ro.hosts[h] for h in b.hosts if ro.hosts[h].status == rollout.NOT_STARTED]
        if b.started_at is None and not any(r.started_at or r.cordoned for r in open_):
            for r in open_:
                r.reason = rollout.not_started(ro.stopped)
            continue
        for r in open_:
            r.status, r.reason = rollout.FAILED, f"{ro.stopped}; left as it was then"
            interrupted.append(r.host)
        if b.status == rollout.BatchStatus.NOT_STARTED:
            b.status = rollout.BatchStatus.FAILED
    if isinstance(exc, aborts.Aborted):  # an abort: resumable, its interrupted hosts left too
        _resumable(ro, interrupted)


def _resumable(ro: Rollout, interrupted: list[str]) -> None:
    """``ro.resume`` of a run that stopped before its end (held, aborted): the hosts done
    (with those of the runs it resumed), those left (never started, or interrupted mid-batch:
    their state is not known, the resumed run plans them again) and those failed."""
    planned = [h for b in ro.batches for h in b.hosts]
    left = [h for h in planned if ro.hosts[h].status == rollout.NOT_STARTED or h in interrupted]
    if not left:
        ro.resume = None
        return
    done_before = list(ro.resume["done"]) if ro.resume else []
    finished = (rollout.CHANGED, rollout.UNCHANGED)
    done = [h for h in planned if ro.hosts[h].status in finished and h not in done_before]
    failed = [h for h in planned if ro.hosts[h].status in rollout.FAILURES and h not in left]
    ro.resume = {
        "reason": ro.stopped,
        "done": done_before + done,
        "left": left,
        "failed": failed,
    }


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
) -> tuple[Rollout, OutDir, BaseException | None]:
    """The run; the error that interrupted the rollout (after pre-flight and the plan, when
    hosts may have changed) comes back beside its records, to be raised once they are kept."""
    started = time.monotonic()
    error: BaseException | None = None
    folder = common.artifacts_dir(request.artifacts_dir, "nodes-update")  # made on first write
    inv = common.load(request.inventory, request.limit, request.pattern)
    if "nvidia_driver" in request.change:
        inventory.check_driver_policy(inv)
    inventory.check_node_names(inv)
    if request.resume and request.cluster is None:
        raise InvalidInput(
            "--resume continues a run recorded in the cluster's node history: not with --no-kube",
            hint="run without --resume: the plan finds what is left to change",
            field="resume",
        )
    kube = (connect or Cluster.connect)(request.cluster) if request.cluster else None
    try:
        point, inv, policy = _resume_from(request, kube, inv)
        ro = Rollout(
            inventory=inv.path,
            limit=request.limit,
            environment=inv.environment,
            change=list(request.change),
            policy=policy,
            check=request.check,
            kube=kube.server if kube else None,
            rollback=request.rollback,
            validation_level=request.validation_level,
            started_at=common.now(),
        )
        ro.artifacts = {"folder": str(folder.path), "progress": str(folder.file("progress.log"))}

        def say(line: str) -> None:
            common.say(line)
            with folder.append("progress.log") as out:
                out.write(f"{common.now()} {line}\n")

        if point is not None:
            _resuming(ro, point, say)
        _records(ro, inv, kube, request.pins)
        try:
            _preflight(ro, inv, request, say, keys, kube)
        finally:  # the keys learned so far, also when a host was refused
            learned = hostkeys.save_learned(keys, folder)
        if learned:
            ro.artifacts["known_hosts_learned"] = learned
            say(f"[gpuops] host keys learned, review them: {learned}")
        pre = time.monotonic()
        run = rollout.Run(policy)
        _plan(ro, run, inv, request, folder, say, keys)
        planned = time.monotonic()
        ro.timings_s.update(phase_timings(started, preflight=pre, plan=planned))
        if not request.check and not run.stopped:
            error = _rollout(ro, run, inv, request, kube, folder, say, started, keys)
    except BaseException:
        if kube is not None:
            kube.close()
        raise
    with aborts.deferred():  # the rollout is over: a signal now only notes itself
        if kube is not None:
            kube.close()
        _ended(ro, error)
        ro.timings_s["total"] = round(time.monotonic() - started, 3)
        ro.finished_at = common.now()
        ro.artifacts["json"] = str(folder.file("update.json"))
        ro.artifacts["junit"] = str(folder.save_text("update-junit.xml", ro.junit()))
        folder.save_json("update.json", ro.to_dict())
    return ro, folder, error


def _rollout(
    ro: Rollout,
    run: rollout.Run,
    inv: inventory.Inventory,
    request: UpdateRequest,
    kube: KubeClient | None,
    folder: OutDir,
    say: common.Say,
    started: float,
    keys: hostkeys.HostKeys,
) -> BaseException | None:
    """The batches with the run's gates open; the error that interrupted them is recorded and
    returned (raised by :func:`update` once the records are kept)."""
    guard = Guard(kube, request.drain, lambda h, m: say(f"[{h}] {m}")) if kube else None
    try:
        opened = batchgates.open_all(request.gates, batchgates.GateContext(kube, inv, ro, say))
        try:
            _run(ro, run, inv, request, guard, opened, folder, say, started, keys)
        finally:
            batchgates.close_all(opened)
    except BaseException as exc:  # recorded, then raised by update()
        _interrupted(ro, exc)
        say(f"[gpuops] rollout interrupted: {ro.stopped}")
        return exc
    return None


def _resume_from(
    request: UpdateRequest, kube: KubeClient | None, inv: inventory.Inventory
) -> tuple[historystore.ResumePoint | None, inventory.Inventory, rollout.Policy]:
    """``--resume``: the record continued, the inventory narrowed to its hosts left, and the
    policy (no canary when the run resumed had one pass); else none, as they are."""
    if not request.resume or kube is None:
        return None, inv, request.policy
    point = historystore.resume_point(kube, inv, request.limit, request.change)
    policy = dataclasses.replace(request.policy, canary=0) if point.done else request.policy
    return point, _resumed(inv, point), policy


def _resuming(ro: Rollout, point: historystore.ResumePoint, say: common.Say) -> None:
    ro.resumed_from = point.record
    ro.resume = {"reason": "", "done": list(point.done), "left": [], "failed": []}
    say(
        f"[gpuops] resuming record {point.record} ({point.reason}): "
        f"{len(point.done)} host(s) done, not touched again; {len(point.left)} left: "
        + " ".join(point.left)
        + ("; no canary (it passed)" if point.done else "")
    )


def _ended(ro: Rollout, error: BaseException | None) -> None:
    """The run's end: resumable when held or aborted with hosts left; each host's driver."""
    if ro.held is not None:
        _resumable(ro, [])
    elif not isinstance(error, aborts.Aborted):
        ro.resume = None  # ran to its end (or failed): nothing to resume
    _ends(ro)


def _resumed(inv: inventory.Inventory, point: historystore.ResumePoint) -> inventory.Inventory:
    """The inventory narrowed to the hosts the resumed record left, in its order; a host left
    that the inventory and limit no longer name is refused (it would be skipped)."""
    names = set(inv.names())
    gone = [h for h in point.left if h not in names]
    if gone:
        raise InvalidInput(
            f"--resume: record {point.record} left host(s) the inventory and limit no longer "
            f"name: {', '.join(gone)}",
            hint="put them back, or run without --resume: the plan finds what is left to change",
            field="resume",
        )
    left = set(point.left)
    return dataclasses.replace(inv, hosts=tuple(h for h in inv.hosts if h.name in left))


def _records(
    ro: Rollout, inv: inventory.Inventory, kube: KubeClient | None, pins: dict[str, DriverPin]
) -> None:
    from gpuops.adapters.kube import nodes as kubenodes  # noqa: PLC0415 - with Kubernetes only

    for host in inv.hosts:
        node = None
        if kube is not None and kubenodes.get_node(kube, host.node_name).exists:
            node = host.node_name
        pin = pins.get(host.name)
        wanted = pin.version if pin else host.driver_version
        ro.hosts[host.name] = HostRecord(host.name, host.group, node, wanted)


def _preflight(
    ro: Rollout,
    inv: inventory.Inventory,
    request: UpdateRequest,
    say: common.Say,
    keys: hostkeys.HostKeys,
    kube: KubeClient | None,
) -> None:
    driver = "nvidia_driver" in request.change
    probe = common.probe(
        inv.hosts,
        check_runs=driver,
        parallel=request.forks,
        host_keys=keys,
        wanted={h: r.driver_wanted for h, r in ro.hosts.items()},
        check_previous=driver,
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
            f"driver {ro.hosts[host.name].driver_wanted} (group {host.group}) is not in the "
            "repository: "
            f"{url} cannot be fetched from {hosts[0]}",
            hint="put the .run into the local repository or fix gpu_nodes_driver_version; "
            "nothing was changed",
            field="inventory",
        )
    for name, before in probe.before.items():
        ro.hosts[name].driver_before, ro.hosts[name].cuda_before = before.driver, before.cuda
        ro.hosts[name].container_toolkit_before = before.container_toolkit
    if driver:
        inventory.check_stack_pins(inv, request.pins)  # Fabric Manager/toolkit pins (A2)
        _check_dcgm(inv, probe)
        _check_rollback(ro, inv, probe, request.rollback)
        if kube is not None:  # drivers going down: the workloads on the class must still run
            modules = {h: b.module for h, b in probe.before.items()}
            installed = {h: b.installed for h, b in probe.before.items()}
            verdict = downgrade.check(
                kube,
                downgrade.changes_of(ro.hosts.values(), modules, installed),
                request.registry,
                replaced=request.replaced,
            )
            if verdict.downgrades or verdict.judged or verdict.problems:
                ro.downgrade = verdict.to_dict()
    say(
        f"[gpuops] pre-flight: {len(inv.hosts)} host(s) reachable ({probe.elapsed_s}s)"
        + (f"; {_before_line(ro, probe)}" if driver else "")
    )


def _before_line(ro: Rollout, probe: common.Probe) -> str:
    """What the hosts run now and what a rollback would reinstall, for the progress log."""
    runs: dict[str, list[str]] = {}
    for name in ro.hosts:
        b = probe.before[name]
        what = b.driver or f"no readable driver ({b.module})"
        runs.setdefault(what, []).append(name)
    text = "running " + "; ".join(f"{v}: {' '.join(h)}" for v, h in runs.items())
    if not ro.rollback.enabled:
        return text + "; rollback off (--no-rollback)"
    return text + f"; rollback on, then {ro.rollback.after}"


def _check_dcgm(inv: inventory.Inventory, probe: common.Probe) -> None:
    """A group that validates with DCGM needs ``dcgmi`` on each host (refused, exit 2)."""
    lacking = [h for h in inv.hosts if h.validation == "dcgm" and not probe.dcgmi[h.name]]
    if lacking:
        groups = sorted({h.group for h in lacking})
        raise InvalidInput(
            f"pre-flight: group(s) {', '.join(groups)} validate the GPUs with DCGM "
            "(gpu_nodes_validation: dcgm, the default) but dcgmi is not on host(s) "
            + ", ".join(h.name for h in lacking),
            hint="install DCGM on them, or set gpu_nodes_validation to a command or none in "
            "the group's group_vars; nothing was changed",
            field="inventory",
        )


def _check_rollback(
    ro: Rollout, inv: inventory.Inventory, probe: common.Probe, policy: rollout.RollbackPolicy
) -> None:
    """Every host that may change can be put back to the driver it runs now: that .run is in
    the repository and its sha256 in ``gpu_nodes_driver_sha256`` (and, where the group pins
    Fabric Manager, that version's in ``gpu_nodes_fabricmanager_sha256``; its archive in the
    repository is not probed here). A host whose driver cannot be read (nvidia-smi failed or
    timed out, a module mismatch) could not be put back either, unless it only waits for the
    reboot into the wanted driver (mismatch, the role's installed version the wanted one).
    Else refused (exit 2), naming each host, unless ``--no-rollback``."""
    gaps = []
    for host in inv.hosts:
        b, wanted = probe.before[host.name], ro.hosts[host.name].driver_wanted
        before = b.driver
        if before is None and b.module != "none" and not _pending_reboot(b, wanted):
            gaps.append(f"{host.name}: the driver it runs cannot be read (nvidia-smi: {b.module})")
            continue
        if not before or before == wanted:
            continue  # nothing to go back to, or no driver change
        table = host.vars.get("gpu_nodes_driver_sha256")
        if host.name in probe.missing_previous:
            gaps.append(
                f"{host.name} runs {before}, not in the repository "
                f"({probe.missing_previous[host.name]})"
            )
        elif host.name in probe.unchecked_previous:
            gaps.append(
                f"{host.name} runs {before}; whether the repository holds it cannot be checked "
                f"({probe.unchecked_previous[host.name]}: no curl or wget on the host)"
            )
        elif not isinstance(table, dict) or not table.get(before):
            gaps.append(f"{host.name} runs {before}, no sha256 for it in gpu_nodes_driver_sha256")
        elif host.fabricmanager_version and not host.fabricmanager_sha256(before):
            gaps.append(  # Fabric Manager goes back with the driver (the playbook's pin)
                f"{host.name} runs {before}, no sha256 for Fabric Manager {before} in "
                "gpu_nodes_fabricmanager_sha256"
            )
    if gaps and policy.enabled:
        raise InvalidInput(
            "pre-flight: a failed host could not be rolled back to the driver it runs: "
            + "; ".join(gaps),
            hint="put that .run into the repository and its sha256 into "
            "gpu_nodes_driver_sha256 (a driver that cannot be read: repair nvidia-smi on the "
            "host first; no curl or wget: install one), or run with --no-rollback (a failed "
            "host then stays on the broken driver, cordoned and tainted); nothing was changed",
            field="inventory",
        )


def _pending_reboot(b: HostBefore, wanted: str) -> bool:
    """Whether the host only waits for a reboot into ``wanted``: the role installed it, the
    old module stays loaded (``gpu_nodes_driver_reboot: false``); a re-run finishes it."""
    return b.module == "mismatch" and b.installed is not None and b.installed == wanted


def _extravars(
    request: UpdateRequest, pins: dict[str, DriverPin], roles: tuple[str, ...] | None = None
) -> dict[str, object]:
    """The playbook's extravars: the roles, the pinned hosts' drivers, the validation level."""
    out: dict[str, object] = {"update_gpu_nodes_roles": list(roles or request.change)}
    out.update(pins_extravars(pins))
    if request.validation_level is not None:
        out["gpu_nodes_validation_level"] = request.validation_level
    return out


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
    """Which hosts would change (:mod:`gpuops.usecases.nodes.plan`: the driver role from its
    own state script and decision, node_init by check mode): they are the rollout's hosts."""
    found = nodeplan.plan(
        inv,
        request.change,
        pins=request.pins,
        extravars=_extravars(request, request.pins),
        folder=folder,
        parallel=request.forks,
        host_keys=keys,
    )
    if found.artifacts is not None:
        ro.artifacts["plan"] = found.artifacts
    if found.readings:
        ro.artifacts["plan_readings"] = str(folder.save_json("plan-readings.json", found.readings))
    changing = set()
    for name in inv.names():
        hp, rec = found.hosts[name], ro.hosts[name]
        rec.planned_changes = hp.changes
        ro.diffs[name] = hp.diffs
        if hp.status:
            rec.status = rollout.FAILED
            rec.failed_task = hp.failed_task
            by = f"plan ({hp.by})" if hp.by else "plan"
            rec.reason = f"{by}: {hp.failed_task}: {hp.message}".strip()
        elif hp.changes:
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
        + (f"; failed in the plan: {' '.join(ro.failed)}" if ro.failed else "")
    )
    run.plan_failed(ro.failed)
    ro.stopped = run.stopped


def _run(
    ro: Rollout,
    run: rollout.Run,
    inv: inventory.Inventory,
    request: UpdateRequest,
    guard: Guard | None,
    opened: list[batchgates.BatchGate],
    folder: OutDir,
    say: common.Say,
    started: float,
    keys: hostkeys.HostKeys,
) -> None:
    """The batches in order; before each, the batch gates then the headroom gate say whether
    it starts; after each, the core's stop rules say whether the next one may."""
    total = len(ro.batches)
    for b in ro.batches:
        tag = f"[{b.kind} {b.index + 1}/{total}]"
        if run.stopped:
            for h in b.hosts:
                ro.hosts[h].reason = rollout.not_started(run.stopped)
            continue
        records = [ro.hosts[h] for h in b.hosts]
        ta = time.monotonic()
        hold = next((x for g in opened if (x := g.admit(b, records)) is not None), None)
        if opened:  # what the window, budget and alerts cost (a budget wait included)
            b.phases_s["gates_admit"] = round(time.monotonic() - ta, 3)
        if hold is not None:  # not started: the gate said not now
            say(f"{tag} held by the {hold.gate}: {hold.message}")
            b.status = run.hold(b.index, hold.gate, hold.message)
            ro.stopped, ro.held = run.stopped, hold.to_dict()
            for r in records:
                r.reason = rollout.not_started(run.stopped)
            continue
        b.started_at = common.now()
        t0 = time.monotonic()
        b.start_s = round(t0 - started, 3)
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
        batchgates.confirm_all(opened, b, records)  # still ours, right before the cordon
        ready = guard.prepare(records) if guard is not None else records
        b.phases_s["kubernetes_before"] = round(time.monotonic() - t0, 3)
        for r in ready:
            r.started_at = common.now()
        if ready:
            _batch(b, ready, inv, request, guard, folder, say, tag, keys)
        b.status = run.finish(r.status for r in records)
        ro.stopped = run.stopped
        td = time.monotonic()
        for g in opened:
            g.done(b, records)
        if opened:
            b.phases_s["gates_done"] = round(time.monotonic() - td, 3)
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
        extravars=_extravars(request, request.pins),
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
    broken = []  # failed in their change: install, verification, validation
    for r in ready:
        hr = done.hosts[r.host]
        _after(r, hr, done.rc, guard, done.elapsed_s, driver="nvidia_driver" in request.change)
        say(f"{tag} {r.host}: {r.status}" + (f": {r.reason}" if r.reason else ""))
        if r.status == rollout.FAILED and hr.status == "failed":
            broken.append(r)
    b.phases_s["kubernetes_after"] = round(time.monotonic() - t2, 3)
    if broken:
        t3 = time.monotonic()
        _fail_changes(b, broken, inv, request, guard, folder, say, tag, keys)
        b.phases_s["rollback"] = round(time.monotonic() - t3, 3)


def _fail_changes(
    b: BatchRecord,
    broken: list[HostRecord],
    inv: inventory.Inventory,
    request: UpdateRequest,
    guard: Guard | None,
    folder: OutDir,
    say: common.Say,
    tag: str,
    keys: hostkeys.HostKeys,
) -> None:
    """Hosts whose change failed: tainted when the rollback runs, the validation failed or
    the driver they are left on is not known (a driver change, not rolled back); then
    (rollback on, their previous driver known) the playbook again on them alone, pinned to
    what each ran before."""
    driver = "nvidia_driver" in request.change
    back = [
        r
        for r in broken
        if driver
        and rollout.wants_rollback(
            request.rollback, failed_in_change=True, before=r.driver_before, wanted=r.driver_wanted
        )
    ]
    for r in broken:
        if guard is not None and r.node and (driver or r.validation):
            was = r.driver_before or "unknown"
            why = f"{r.failed_task or 'change'} failed ({was} -> {r.driver_wanted})"
            guard.taint(r, why)
        if r not in back:
            r.reason += (
                "; not rolled back (--no-rollback)"
                if driver and r.driver_before and not request.rollback.enabled
                else ""
            )
    if not back:
        return
    pins = {r.host: DriverPin(r.driver_before or "", r.cuda_before or "") for r in back}
    say(
        f"{tag} rolling back "
        + ", ".join(f"{h} to {p.version}" for h, p in pins.items())
        + " (no other host is touched)"
    )
    done = ansible.run_playbook(
        PLAYBOOK,
        inv.path,
        list(pins),
        data_dir=folder.subdir("ansible"),
        ident=f"batch-{b.index:02d}-rollback",
        extravars={
            **_extravars(request, {**request.pins, **pins}, ("nvidia_driver",)),
            TOOLKIT_VAR: _toolkit_back(back, inv),
        },
        forks=request.forks,
        progress=_progress(f"{tag} rollback", say),
        host_keys=keys,
    )
    b.rollback = {
        "ident": done.ident,
        "rc": done.rc,
        "status": done.status,
        "artifacts": done.artifacts,
        "elapsed_s": done.elapsed_s,
    }
    for r in back:
        hr, pin = done.hosts[r.host], pins[r.host]
        doc = {"to": pin.version, "cuda": pin.cuda, "reason": r.reason, "ident": done.ident}
        if hr.status in ("failed", "unreachable") or (done.rc != 0 and not hr.ok):
            r.status = rollout.ROLLBACK_FAILED
            why = f"{hr.status}: {hr.failed_task}: {hr.message}".strip(": ") or (
                f"no result (ansible-playbook exited {done.rc})"
            )
            r.rollback = {**doc, "status": str(rollout.ROLLBACK_FAILED)}
            r.rollback["reason"] = f"{r.reason}; rollback to {pin.version} failed: {why}"
            r.reason = r.rollback["reason"] + "; left cordoned and tainted"
            say(f"{tag} {r.host}: {r.status}: {why}")
            continue
        r.status = rollout.ROLLED_BACK
        r.rollback = {**doc, "status": str(rollout.ROLLED_BACK)}
        r.driver_after = pin.version
        r.reason = f"{r.reason}; rolled back to {pin.version}"
        if guard is not None and request.rollback.after == rollout.AfterRollback.UNCORDON:
            guard.release(r, untaint=True)
            if r.status == rollout.ROLLED_BACK and r.uncordoned:
                r.reason += " and uncordoned (--after-rollback uncordon)"
        elif r.node:
            r.reason += ", kept cordoned (--after-rollback keep-cordoned)"
        say(f"{tag} {r.host}: {r.status}: {r.reason}")


#: the group variable the playbook takes the container toolkit's version from ("": the role's
#: toolkit tasks are skipped, tasks/main.yml); an extravar overrides the inventory's
TOOLKIT_VAR = "gpu_nodes_container_toolkit_version"
_TOOLKIT = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")


def _toolkit_back(back: list[HostRecord], inv: inventory.Inventory) -> str:
    """The container toolkit version the rollback run pins: the one every rolled-back host ran
    before (the group's pin may be what failed), else "" (one not known, they differ, or a
    group does not manage the toolkit): the rollback leaves the toolkit as it is."""
    if not all(inv.host(r.host).container_toolkit_version for r in back):
        return ""
    found = {r.container_toolkit_before for r in back}
    one = found.pop() if len(found) == 1 else None
    return one if one is not None and _TOOLKIT.fullmatch(one) else ""


def _progress(tag: str, say: common.Say) -> ansible.Progress:
    def report(host: str, status: str, task: str, seconds: float | None) -> None:
        say(f"{tag} {host}: {status} {task}" + (f" ({seconds:.1f}s)" if seconds else ""))

    return report


def _after(
    r: HostRecord,
    hr: ansible.HostRun,
    rc: int,
    guard: Guard | None,
    elapsed: float,
    *,
    driver: bool,
) -> None:
    """A host's result of its batch's playbook run; ``driver``: the run changed drivers (else
    the host runs the driver it ran before)."""
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
        if rollout.is_validation(hr.failed_task):
            r.validation = {"task": hr.failed_task, "message": hr.message}
        return
    r.status = rollout.CHANGED if hr.changed else rollout.UNCHANGED
    r.driver_after = r.driver_wanted if driver else r.driver_before
    if guard is not None:
        guard.release(r, untaint=True)


def _ends(ro: Rollout) -> None:
    """What each host runs when the run ends, as far as gpuops knows (None: unknown). A run
    without ``nvidia_driver`` in ``--change`` installs no driver: each runs what it ran."""
    driver = "nvidia_driver" in ro.change
    for r in ro.hosts.values():
        if r.status in (rollout.CHANGED, rollout.ROLLED_BACK) and r.driver_after is not None:
            continue  # set when it happened
        if not driver:
            r.driver_after = r.driver_before
        elif r.status == rollout.UNCHANGED and r.started_at is not None:
            r.driver_after = r.driver_wanted  # the playbook ran and found it as wanted
        elif r.started_at is None:  # never given to the playbook: as it was
            r.driver_after = r.driver_before
        else:  # failed in its change, not rolled back: unknown
            r.driver_after = None


#: what to do about a held run, per batch gate
_HELD_HINTS = {
    "window": "run it again in the next maintenance window",
    "budget": "run it again when the disruption budget has room (the holders are named)",
    "alerts": "run it again when the alerts named have resolved",
}


def _verdict(ro: Rollout) -> GpuOpsError | None:
    if ro.held is not None and not ro.failures:
        return GateRefused(
            f"rollout held: {ro.stopped}",
            hint=_HELD_HINTS.get(ro.held["gate"], "run it again later") + ": it resumes",
        )
    if ro.refused:
        return GateRefused(
            f"rollout stopped: {ro.stopped}",
            hint="free GPUs or lower --reserve, then run again: it resumes",
        )
    if ro.failures:
        not_started = ro.with_status(rollout.NOT_STARTED)
        back, broken = ro.with_status(rollout.ROLLED_BACK), ro.with_status(rollout.ROLLBACK_FAILED)
        failed = ro.failed
        parts = [f"{len(failed)} host(s) failed: {', '.join(failed)}"] if failed else []
        if back:
            parts.append(f"{len(back)} rolled back: {', '.join(back)}")
        if broken:
            parts.append(f"{len(broken)} rollback(s) failed, left broken: {', '.join(broken)}")
        error = HostBroken if broken else OperationFailed  # exit 6: a person must act now
        return error(
            "; ".join(parts)
            + (f"; {len(not_started)} never started" if not_started else "")
            + (f" ({ro.stopped})" if ro.stopped else ""),
            hint=(
                "a host left broken stays cordoned and tainted (gpuops.io/gpu-unhealthy): "
                "repair it by hand before it takes work; "
                if broken
                else ""
            )
            + "failed hosts stay cordoned; fix them and run again: it resumes "
            f"(artifacts: {ro.artifacts.get('folder')})",
        )
    return None
