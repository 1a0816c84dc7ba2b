"""The cluster's disruption budget for GPU nodes: take before disrupting nodes, give back after.

Every ``gpuops nodes update`` run given ``--budget-max-unavailable`` takes its batch's nodes from
the budget of their GPU class before the batch (the :class:`BudgetSpec` gate) and gives them
back when the batch ended; quarantine drains (``nodes inspect --quarantine --drain``) call
:func:`take` and :func:`give` themselves. The model and verdicts are the core's
(:mod:`gpuops.core.disruption`); this module reads and writes the Leases in
``gpuops-system`` (``gpuops-disruption.<class>``), every write after the read conditional on
the Lease's resourceVersion (a 409 Conflict: read again and decide again).

What serialises what: the Jenkins ``lock`` of a fleet keeps two runs of *one* inventory apart;
this budget is per *cluster and GPU class* and bounds the nodes every run together (any
inventory, any job, quarantine drains, Kured's reboot) takes down at once.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gpuops.adapters.kube import Conflict, KubeClient, NotFound
from gpuops.adapters.kube import apps as kubeapps
from gpuops.adapters.kube import nodes as kubenodes
from gpuops.core import disruption as core
from gpuops.core.disruption import BudgetLimit
from gpuops.errors import GpuOpsError, InvalidInput, OperationFailed
from gpuops.usecases.nodes import gates as batchgates
from gpuops.usecases.nodes.gates import Hold
from gpuops.usecases.nodes.records import BatchRecord, HostRecord

__all__ = [
    "BudgetLimit",
    "BudgetSpec",
    "Hold",
    "Taken",
    "Where",
    "give",
    "holder_identity",
    "renew",
    "take",
]

Say = Callable[[str], None]
_RETRIES = 12
_POLL_S = 1.0


def holder_identity() -> str:
    """Who takes from the budget: host, process and a random part."""
    return f"{socket.gethostname()}/pid-{os.getpid()}-{os.urandom(3).hex()}"


@dataclass(frozen=True)
class Where:
    """Where the budget lives and what else counts: the Leases' namespace, Kured's DaemonSet
    (None: do not read Kured's lock), the holder's lease duration and what its run is."""

    namespace: str = core.NAMESPACE
    kured: tuple[str, str] | None = core.KURED_DAEMONSET
    lease_s: int = core.DEFAULT_LEASE_S
    run: str = ""


@dataclass
class Taken:
    """What a holder took: nodes per class. Give it back with :func:`give`."""

    holder: str
    nodes: dict[str, tuple[str, ...]]
    where: Where = field(default_factory=Where)
    waited_s: float = 0.0
    #: dead holders whose claims this take dropped (silent for longer than their lease)
    recovered: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "holder": self.holder,
            "nodes": {c: list(n) for c, n in sorted(self.nodes.items())},
            "waited_s": round(self.waited_s, 3),
            "recovered": list(self.recovered),
            "lease": {c: f"{self.where.namespace}/{core.lease_name(c)}" for c in self.nodes},
        }


def take(
    kube: KubeClient,
    holder: str,
    nodes: Mapping[str, Sequence[str]],  # class -> node names
    limits: Mapping[str, BudgetLimit],
    wait_s: float,
    say: Say,
    *,
    where: Where | None = None,
) -> Taken | Hold:
    """Take ``nodes`` (all classes or none) from the budget; while it is spent, try again
    every second for up to ``wait_s`` seconds, then a :class:`Hold` naming the holders.

    ``limits``: class -> limit, ``"*"`` for every other class; a class without a limit is
    refused (:class:`~gpuops.errors.InvalidInput`). A batch asking more of a class than its limit
    allows can never fit: held at once, saying so."""
    where = where or Where()
    asked = {c: tuple(sorted(set(n))) for c, n in nodes.items() if n}
    for cls in asked:
        if core.limit_for(limits, cls) is None:
            raise InvalidInput(f"no disruption budget for class {cls}", field="budget")
    started = time.monotonic()
    said = False
    while True:
        got, blocked, recovered = _try_all(kube, holder, asked, limits, where)
        if got is not None:
            for r in recovered:
                say(
                    f"[budget] recovered {', '.join(r['nodes'])} of class {r['class']} from "
                    f"{r['holder']} ({r['run']}): silent for {r['silent_for_s']}s, longer "
                    f"than its {r['lease_seconds']}s lease"
                )
            return Taken(holder, got, where, time.monotonic() - started, recovered)
        if blocked is None:  # pragma: no cover - _try_all returns one or the other
            raise OperationFailed("the disruption budget answered neither taken nor spent")
        waited = time.monotonic() - started
        never = blocked.never
        if never or waited >= wait_s:
            why = "" if never else f" (waited {round(waited)}s of --budget-wait {round(wait_s)}s)"
            message = f"disruption budget spent: {blocked.message()}{why}"
            if never:
                message = (
                    f"the batch takes {len(blocked.asked)} node(s) of class {blocked.cls}, "
                    f"more than its max_unavailable {blocked.own}: use a smaller batch"
                )
            return Hold("budget", message, {**blocked.to_dict(), "waited_s": round(waited, 3)})
        if not said:
            say(f"[budget] waiting up to {round(wait_s - waited)}s: {blocked.message()}")
            said = True
        time.sleep(min(_POLL_S, max(0.05, wait_s - waited)))


def _try_all(
    kube: KubeClient,
    holder: str,
    asked: Mapping[str, tuple[str, ...]],
    limits: Mapping[str, BudgetLimit],
    where: Where,
) -> tuple[dict[str, tuple[str, ...]] | None, core.Verdict | None, list[dict[str, Any]]]:
    """One attempt over the classes in name order; a class that does not fit gives back
    those taken in this attempt."""
    kured = _kured(kube, where)
    got: dict[str, tuple[str, ...]] = {}
    recovered: list[dict[str, Any]] = []
    for cls in sorted(asked):
        limit = core.limit_for(limits, cls) or core.BudgetLimit(count=1)
        verdict = _take_class(kube, holder, cls, asked[cls], limit, kured, where)
        if not verdict.fits:
            if got:
                give(kube, Taken(holder, got, where))
            return None, verdict, []
        got[cls] = asked[cls]
        now = datetime.now(UTC)
        recovered += [
            {**c.to_dict(), "class": cls, "silent_for_s": round(c.silent_s(now))}
            for c in verdict.dead
        ]
    return got, None, recovered


def _kured(kube: KubeClient, where: Where) -> frozenset[str]:
    if where.kured is None:
        return frozenset()
    ns, name = where.kured
    annotations = kubeapps.daemonset_annotations(kube, ns, name)
    if not annotations:
        return frozenset()
    return core.kured_nodes(annotations.get(core.KURED_ANNOTATION), datetime.now(UTC))


def _state(kube: KubeClient, cls: str, kured: frozenset[str]) -> core.ClassState:
    nodes = kubenodes.list_brief(kube, core.class_selector(cls))
    names = {n.name for n in nodes}
    down = frozenset(n.name for n in nodes if n.unschedulable or not n.ready)
    return core.ClassState(cls, len(nodes), down, frozenset(kured & names))


def _take_class(
    kube: KubeClient,
    holder: str,
    cls: str,
    asked: Sequence[str],
    limit: BudgetLimit,
    kured: frozenset[str],
    where: Where,
) -> core.Verdict:
    name = core.lease_name(cls)
    for _ in range(_RETRIES):
        lease = kubeapps.get_lease(kube, where.namespace, name)
        claims = _claims(lease, cls, where) if lease else []
        state = _state(kube, cls, kured)
        now = datetime.now(UTC)
        verdict = core.judge(claims, state, holder, where.run, asked, limit, where.lease_s, now)
        if not verdict.fits:
            return verdict
        body = core.lease_body(
            cls,
            verdict.claims_after,
            now,
            namespace=where.namespace,
            resource_version=_version(lease) if lease else None,
        )
        try:
            if lease is None:
                _create(kube, body, where)
            else:
                kubeapps.replace_lease(kube, body)
        except Conflict:
            continue  # someone wrote it since we read it: read and decide again
        return verdict
    raise OperationFailed(
        f"the disruption budget Lease {where.namespace}/{name} kept changing; try again"
    )


def _create(kube: KubeClient, body: Mapping[str, Any], where: Where) -> None:
    try:
        kubeapps.create_lease(kube, body)
    except NotFound:  # the namespace is missing: create it, then the Lease
        kubeapps.ensure_namespace(kube, where.namespace)
        kubeapps.create_lease(kube, body)


def _claims(lease: Any, cls: str, where: Where) -> list[core.Claim]:
    meta = lease.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    label = f"Lease {where.namespace}/{meta.get('name', '')}"
    found = annotations.get(core.CLASS_ANNOTATION)
    if found is not None and found != cls:
        raise OperationFailed(f"{label} is the budget of class {found!r}, not {cls!r}")
    return core.parse_claims(annotations.get(core.HOLDERS_ANNOTATION), label)


def _version(obj: Any) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _update(
    kube: KubeClient,
    cls: str,
    where: Where,
    change: Callable[[list[core.Claim]], list[core.Claim] | None],
) -> bool:
    """Read-modify-write the class's holders; False when ``change`` says None (nothing to
    write) or the Lease is gone."""
    name = core.lease_name(cls)
    for _ in range(_RETRIES):
        lease = kubeapps.get_lease(kube, where.namespace, name)
        if lease is None:
            return False
        after = change(_claims(lease, cls, where))
        if after is None:
            return False
        body = core.lease_body(
            cls,
            after,
            datetime.now(UTC),
            namespace=where.namespace,
            resource_version=_version(lease),
        )
        try:
            kubeapps.replace_lease(kube, body)
        except Conflict:
            continue
        return True
    raise OperationFailed(
        f"the disruption budget Lease {where.namespace}/{name} kept changing; try again"
    )


def give(kube: KubeClient, taken: Taken) -> None:
    """Give back every node ``taken`` holds (a node still cordoned keeps counting as
    unavailable through the cluster's own state, whoever holds it)."""
    for cls, nodes in sorted(taken.nodes.items()):

        def without(claims: list[core.Claim], gone: Sequence[str] = nodes) -> list[core.Claim]:
            return core.after_give(claims, taken.holder, gone)

        _update(kube, cls, taken.where, without)
    taken.nodes = {}


def renew(kube: KubeClient, taken: Taken) -> None:
    """Renew the holder's claims; an :class:`~gpuops.errors.OperationFailed` when one was
    dropped (this holder was silent for longer than its lease and another taker recovered
    it)."""
    for cls in sorted(taken.nodes):
        ok = _update(
            kube,
            cls,
            taken.where,
            lambda c: core.after_renew(c, taken.holder, datetime.now(UTC)),
        )
        if not ok:
            raise OperationFailed(
                f"lost the disruption budget of class {cls}: this run was silent for longer "
                f"than its {taken.where.lease_s}s lease and another run recovered it"
            )


class Renewer:
    """Renews a holder's claims every third of its lease in a thread while it holds any; a
    process stopped (SIGSTOP) stops renewing with it, so others recover its share."""

    def __init__(self, kube: KubeClient, say: Say, lease_s: int) -> None:
        self.kube, self.say, self.period = kube, say, max(0.5, lease_s / 3)
        self.lock = threading.Lock()
        self.held: Taken | None = None
        self.confirmed = time.monotonic()  # the last write that proved the share ours
        self.failed = ""  # the last renewal error said
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="budget-renew", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            with self.lock:
                if self.held is None or not self.held.nodes:
                    continue
                try:
                    renew(self.kube, self.held)
                    self.confirmed = time.monotonic()
                except GpuOpsError as exc:
                    if exc.message != self.failed:  # said once, not every period
                        self.failed = exc.message
                        self.say(f"[budget] could not renew: {exc.message}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@dataclass(frozen=True)
class BudgetSpec:
    """The ``nodes update`` gate's options (``--budget-max-unavailable``, ``--budget-wait``,
    ``--budget-lease``, ``--kured-daemonset``)."""

    limits: Mapping[str, BudgetLimit]
    wait_s: float = 0.0
    where: Where = field(default_factory=Where)

    def open(self, ctx: batchgates.GateContext) -> batchgates.BatchGate:
        return BudgetGate(self, ctx)


class BudgetGate:
    """Takes a batch's nodes before it, gives them back when it ended, everything at close."""

    name = "budget"

    def __init__(self, spec: BudgetSpec, ctx: batchgates.GateContext) -> None:
        self.spec, self.ctx = spec, ctx
        self.holder = holder_identity()
        run = spec.where.run or _run_name(ctx)
        self.where = Where(spec.where.namespace, spec.where.kured, spec.where.lease_s, run)
        self.renewer: Renewer | None = None
        self.unlimited: set[str] = set()  # classes the limits do not name (not asked)
        if ctx.kube is None:
            ctx.say("[budget] no Kubernetes: hosts are no nodes, the budget is not asked")

    def _classes(self, kube: KubeClient, hosts: Sequence[HostRecord]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for h in hosts:
            if not h.node:
                continue
            info = kubenodes.get_node(kube, h.node)
            cls = core.class_of(info.labels) if info.exists else core.UNLABELLED
            if core.limit_for(self.spec.limits, cls) is None:
                if cls not in self.unlimited:
                    self.unlimited.add(cls)
                    self.ctx.say(f"[budget] class {cls} has no limit given: not asked for it")
                continue
            out.setdefault(cls, []).append(h.node)
        return out

    def admit(self, batch: BatchRecord, hosts: Sequence[HostRecord]) -> Hold | None:
        kube = self.ctx.kube
        if kube is None:
            return None
        nodes = self._classes(kube, hosts)
        if not nodes:
            return None
        if self.renewer is None:
            self.renewer = Renewer(kube, self.ctx.say, self.where.lease_s)
        with self.renewer.lock:
            before = self.renewer.held
        got = take(
            kube,
            self.holder,
            nodes,
            self.spec.limits,
            self.spec.wait_s,
            self.ctx.say,
            where=self.where,
        )
        if isinstance(got, Hold):
            return got
        with self.renewer.lock:
            if before is not None and before.nodes:  # a batch not given back (should not be)
                for cls, n in before.nodes.items():
                    got.nodes[cls] = tuple(sorted(set(got.nodes.get(cls, ())) | set(n)))
            self.renewer.held = got
            self.renewer.confirmed = time.monotonic()
        taken = ", ".join(f"{c}: {len(n)}" for c, n in sorted(got.to_dict()["nodes"].items()))
        self.ctx.say(f"[budget] took {taken} (waited {round(got.waited_s)}s)")
        batch.budget = got.to_dict()
        return None

    def confirm(self, batch: BatchRecord, hosts: Sequence[HostRecord]) -> None:
        """Renew now, right before the batch's nodes are cordoned: when this run's share was
        recovered by another run (this one was stopped for longer than its lease since it took
        it) the run stops here with an error, its nodes untouched."""
        if self.renewer is None or self.ctx.kube is None:
            return
        with self.renewer.lock:
            if self.renewer.held is None or not self.renewer.held.nodes:
                return
            try:
                renew(self.ctx.kube, self.renewer.held)
            except OperationFailed:
                self.renewer.held = None  # nothing of it is ours any more: nothing to give back
                raise
            self.renewer.confirmed = time.monotonic()

    def done(self, batch: BatchRecord, hosts: Sequence[HostRecord]) -> None:
        self._give_back()

    def close(self) -> None:
        try:
            self._give_back()
        finally:
            if self.renewer is not None:
                self.renewer.stop()

    def _give_back(self) -> None:
        if self.renewer is None or self.ctx.kube is None:
            return
        with self.renewer.lock:
            held, self.renewer.held = self.renewer.held, None
            if held is None or not held.nodes:
                return
            try:
                give(self.ctx.kube, held)
            except GpuOpsError as exc:
                self.ctx.say(
                    f"[budget] could not give back ({exc.message}); the share is recovered "
                    f"{self.where.lease_s}s after its last renewal"
                )


def _run_name(ctx: batchgates.GateContext) -> str:
    build = os.environ.get("BUILD_URL") or os.environ.get("BUILD_TAG") or ""
    inv = getattr(ctx.inventory, "path", "")
    return f"nodes update {inv}" + (f" {build}" if build else "")
