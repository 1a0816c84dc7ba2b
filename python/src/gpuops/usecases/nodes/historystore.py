"""Where the node change history lives and how a run's record is written (the hook at the
end of every ``nodes update``; reading and rolling back: :mod:`.history`).

One ConfigMap per fleet (the inventory's ``gpuops_environment``), named
``gpuops-node-history-<fleet>``, key ``nodes.json``, in the namespace of the inventory variable
``gpuops_history_namespace`` (default ``default``: it exists in every cluster). It is written
read-modify-write with the resourceVersion it was read at as the precondition; a concurrent
writer (409) makes gpuops read it again and redo its change. The records are the core's
(:mod:`gpuops.core.nodehistory`).
"""

from __future__ import annotations

import contextvars
import getpass
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gpuops.adapters import gitrev
from gpuops.adapters.kube import Conflict, KubeClient, NotFound
from gpuops.adapters.kube import apps as kubeapps
from gpuops.core import nodehistory as nh
from gpuops.core import rollout
from gpuops.core.inventory import Inventory
from gpuops.core.kubeinput import dns_label, dns_subdomain
from gpuops.core.nodestate import DriverPin
from gpuops.core.urls import without_userinfo
from gpuops.errors import GpuOpsError, InvalidInput, OperationFailed
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.nodes import common

if TYPE_CHECKING:
    from gpuops.usecases.nodes.records import HostRecord, Rollout


class _Run(Protocol):
    """What the hook reads of an :class:`~gpuops.usecases.nodes.update.UpdateRequest`."""

    @property
    def inventory(self) -> str: ...
    @property
    def limit(self) -> str | None: ...
    @property
    def pattern(self) -> str: ...
    @property
    def check(self) -> bool: ...
    @property
    def cluster(self) -> Cluster | None: ...
    @property
    def pins(self) -> dict[str, DriverPin]: ...


log = logging.getLogger(__name__)
NAMESPACE_VAR = "gpuops_history_namespace"
DEFAULT_NAMESPACE = "default"
_RETRIES = 5
#: Set by rollback_to while its update runs: the record the run restores.
ROLLBACK_OF: contextvars.ContextVar[tuple[int, bool] | None] = contextvars.ContextVar(
    "gpuops_rollback_of", default=None
)
_FAILED_HOST = {"failed", "rolled-back", "rollback-failed"}


def fleet_of(inv: Inventory) -> str:
    """The fleet: the inventory's one ``gpuops_environment`` (``unspecified`` when none)."""
    fleet = inv.environment
    if "," in fleet:
        raise InvalidInput(
            f"the hosts belong to several fleets ({fleet}): a node history is per fleet",
            hint="--limit the run to one gpuops_environment",
            field="inventory",
        )
    return dns_label(fleet, "gpuops_environment")


def namespace_of(inv: Inventory) -> str:
    found = {h.text(NAMESPACE_VAR) for h in inv.hosts} - {""}
    if len(found) > 1:
        raise InvalidInput(
            f"the hosts name several {NAMESPACE_VAR}: {', '.join(sorted(found))}",
            hint="set it once, in group_vars/all",
            field="inventory",
        )
    return dns_label(found.pop() if found else DEFAULT_NAMESPACE, NAMESPACE_VAR)


class Store:
    """A fleet's history ConfigMap, read and written with its resourceVersion."""

    def __init__(self, kube: KubeClient, fleet: str, namespace: str) -> None:
        self.kube, self.fleet, self.namespace = kube, fleet, namespace
        self.name = dns_subdomain(nh.CONFIGMAP_PREFIX + fleet, "node history ConfigMap")
        self.where = f"ConfigMap {namespace}/{self.name}"

    def _get(self) -> Any:
        return kubeapps.get_configmap(self.kube, self.namespace, self.name)

    def _records(self, cm: Any) -> list[nh.NodeRecord]:
        if cm is None:
            return []
        return nh.decode((cm.get("data") or {}).get(nh.HISTORY_KEY), self.where)

    def read(self) -> list[nh.NodeRecord]:
        return self._records(self._get())

    def add(self, make: Callable[[int], nh.NodeRecord]) -> nh.NodeRecord:
        """Append the record ``make(number)`` (number: the next free one), trimmed to
        :data:`~gpuops.core.nodehistory.KEEP` records and
        :data:`~gpuops.core.nodehistory.MAX_BYTES`; redone (read again) when someone wrote
        it since it was read (409: a newer resourceVersion, or a create that lost the race
        with another) or deleted it since (404 on the PUT)."""
        for _ in range(_RETRIES):
            cm = self._get()
            records = self._records(cm)
            new = make(nh.next_number(records))
            data = {nh.HISTORY_KEY: nh.encode(nh.trim([*records, new]))}
            try:
                if cm is None:
                    kubeapps.create_configmap(self.kube, self.namespace, self.name, data)
                else:
                    kubeapps.replace_configmap_data(
                        self.kube, cm, {**(cm.get("data") or {}), **data}
                    )
            except Conflict:
                log.info("%s changed while writing; reading it again", self.where)
                continue
            except NotFound:
                if cm is None:
                    raise  # the create's 404: the namespace does not exist
                log.info("%s was deleted while writing; reading it again", self.where)
                continue
            return new
        raise OperationFailed(f"{self.where} kept changing while gpuops wrote the node history")


# -- writing a record --------------------------------------------------------------------


def who() -> tuple[str, str]:
    """Who ran it and how that is known: the Jenkins user, ``GPUOPS_REQUESTED_BY``, else the
    operating system's user."""
    for var, source in (("BUILD_USER_ID", "jenkins"), ("GPUOPS_REQUESTED_BY", "requested-by")):
        value = os.environ.get(var, "").strip()
        if value:
            return value[:200], source
    try:
        return getpass.getuser(), "os-user"
    except (KeyError, OSError):
        return "unknown", "os-user"


def build_link() -> str | None:
    """``BUILD_URL`` (Jenkins), when it is an http(s) URL; no user:password@ in it."""
    url = without_userinfo(os.environ.get("BUILD_URL", "").strip())
    return url[:2000] if url.startswith(("https://", "http://")) else None


def _outcome(
    h: HostRecord, ro: Rollout, inv: Inventory, pins: Mapping[str, DriverPin]
) -> nh.HostOutcome:
    status = str(h.status)
    before, cuda_before, after = h.driver_before, h.cuda_before, h.driver_after
    pin = pins.get(h.host)
    wanted = pin.version if pin else h.driver_wanted
    rolled_back = status == rollout.ROLLED_BACK
    if after is None and "nvidia_driver" in ro.change:
        # without a reading: a host that changed or had nothing to change runs what was
        # wanted (the plan compares the host with it); a failed host is not known
        after = wanted if status in (rollout.CHANGED, rollout.UNCHANGED) else None
    if after is None and status in (rollout.UNCHANGED, rollout.NOT_STARTED):
        after = before
    if after is not None and after == before:
        cuda_after = cuda_before
    elif pin is not None and after == pin.version:
        cuda_after = pin.cuda or None
    elif after is not None and after == h.driver_wanted:
        cuda_after = _host_cuda(inv, h.host)
    else:
        cuda_after = None
    return nh.HostOutcome(
        status=status,
        group=h.group,
        node=h.node,
        driver_before=before,
        cuda_before=cuda_before,
        driver_after=after,
        cuda_after=cuda_after,
        rolled_back=rolled_back,
        reason=h.reason[:500],
    )


def _host_cuda(inv: Inventory, name: str) -> str | None:
    try:
        return inv.host(name).cuda_version or None
    except KeyError:
        return None


def _status(ro: Rollout) -> str:
    if ro.refused or (ro.held is not None and not ro.failures):
        return nh.REFUSED  # a gate stopped it: the headroom gate, or a batch gate's hold
    if ro.stopped.startswith("error:") or any(
        str(h.status) in _FAILED_HOST for h in ro.hosts.values()
    ):  # "error: ...": the run raised mid-rollout (update._interrupted)
        return nh.FAILED
    return nh.SUCCEEDED


def new_record(
    number: int,
    inv: Inventory,
    ro: Rollout,
    *,
    pins: Mapping[str, DriverPin] | None = None,
    rollback_of: tuple[int, bool] | None = None,
    revision: str | None = None,
    dirty: bool | None = None,
) -> nh.NodeRecord:
    """The record of the run ``ro`` as number ``number`` (who and the build link from the
    environment: :func:`who`, :func:`build_link`)."""
    person, source = who()
    hosts = {h.host: _outcome(h, ro, inv, pins or {}) for h in ro.hosts.values()}
    resume = nh.Resume(**ro.resume) if ro.resume else None
    fleet = fleet_of(inv)
    return nh.NodeRecord(
        number=number,
        fleet=fleet,
        action="rollback" if rollback_of is not None else "update",
        status=_status(ro),
        started=ro.started_at,
        finished=ro.finished_at,
        who=person,
        who_from=source,
        link=build_link(),
        inventory=inv.path,
        inventory_revision=revision,
        inventory_dirty=dirty,
        limit=ro.limit,
        change=list(ro.change),
        stopped=ro.stopped,
        rollback_of=rollback_of[0] if rollback_of else None,
        rollback_before=rollback_of[1] if rollback_of else False,
        groups=nh.group_drivers(hosts),
        hosts=hosts,
        resume=resume,
        resumed_from=nh.parse_id(ro.resumed_from, fleet) if ro.resumed_from else None,
    )


def record(
    kube: KubeClient,
    inv: Inventory,
    ro: Rollout,
    *,
    pins: Mapping[str, DriverPin] | None = None,
    rollback_of: tuple[int, bool] | None = None,
) -> str:
    """Append the record of the run ``ro`` to the fleet's history; returns its id."""
    store = Store(kube, fleet_of(inv), namespace_of(inv))
    where = Path(inv.path)  # -i names the inventory's file or its folder
    folder = where if where.is_dir() else where.parent
    revision = gitrev.revision(folder)
    dirty = gitrev.dirty(folder) if revision is not None else None
    made = store.add(
        lambda n: new_record(
            n, inv, ro, pins=pins, rollback_of=rollback_of, revision=revision, dirty=dirty
        )
    )
    return made.id


@dataclass(frozen=True)
class ResumePoint:
    """The record ``nodes update --resume`` continues: its id, why it stopped, its hosts."""

    record: str
    reason: str
    done: list[str]
    left: list[str]


def resume_point(
    kube: KubeClient, inv: Inventory, limit: str | None, change: Sequence[str]
) -> ResumePoint:
    """The newest update record of this inventory (its path as given), limit and change; it
    must have hosts left (held by a batch gate, or aborted). Else exit 2, nothing touched."""
    store = Store(kube, fleet_of(inv), namespace_of(inv))
    same = [
        r
        for r in store.read()
        if r.action == "update"
        and r.inventory == inv.path
        and r.limit == limit
        and r.change == list(change)
    ]
    what = f"inventory {inv.path}, limit {limit or '(none)'}, change {' '.join(change)}"
    if not same:
        raise InvalidInput(
            f"--resume: no run of {what} in the node history ({store.where})",
            hint="run without --resume",
            field="resume",
        )
    last = same[-1]
    if last.resume is None or not last.resume.left:
        raise InvalidInput(
            f"--resume: the latest run of {what} (record {last.id}, {last.status}) left "
            "nothing to resume: it was neither held by a batch gate nor aborted with hosts left",
            hint="run without --resume: the plan finds what is left to change",
            field="resume",
        )
    r = last.resume
    return ResumePoint(last.id, r.reason, list(r.done), list(r.left))


def after_update(
    request: _Run,
    connect: Callable[[Cluster], KubeClient] | None,
    ro: Rollout,
) -> GpuOpsError | None:
    """The hook at the end of ``nodes update``: record the run (not for ``--check``, not
    without Kubernetes) and put its id in ``ro.record``. A record that cannot be written is
    returned as the run's problem: the change is done, but its history is not."""
    if request.check or request.cluster is None:
        return None
    try:
        inv = common.load(request.inventory, request.limit, request.pattern)
        kube = (connect or Cluster.connect)(request.cluster)
        try:
            ro.record = record(kube, inv, ro, pins=request.pins, rollback_of=ROLLBACK_OF.get())
        finally:
            kube.close()
    except GpuOpsError as exc:
        common.say(f"[gpuops] the node history record was not written: {exc.message}")
        return OperationFailed(
            f"the run's node history record was not written: {exc.message}",
            hint=exc.hint or "the hosts are as the result says; check the cluster and RBAC",
        )
    common.say(f"[gpuops] node history: record {ro.record}")
    return None
