"""The node change history in the cluster: shown by ``gpuops nodes history``, restored by
``gpuops nodes rollback``; written by every ``nodes update`` run (:mod:`.historystore`).

One ConfigMap per fleet (the inventory's ``gpuops_environment``), named
``gpuops-node-history-<fleet>``, key ``nodes.json``, in the namespace of the inventory variable
``gpuops_history_namespace`` (default ``default``: it exists in every cluster). The records are
the core's (:mod:`gpuops.core.nodehistory`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NotRequired, TypedDict

from gpuops.adapters.kube import KubeClient
from gpuops.core import nodehistory as nh
from gpuops.core.inventory import DEFAULT_PATTERN, Inventory
from gpuops.core.nodestate import DriverPin
from gpuops.errors import InvalidInput
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.nodes import common, update
from gpuops.usecases.nodes.historystore import (
    ROLLBACK_OF,
    Store,
    fleet_of,
    namespace_of,
    record,
)
from gpuops.usecases.outcome import Outcome
from gpuops.usecases.reportdoc import ReportDocument

if TYPE_CHECKING:
    from gpuops.usecases.nodes.records import Rollout
    from gpuops.usecases.reports import BesideReport

__all__ = ["fleet_of", "namespace_of", "read", "record", "rollback_to", "target_pins"]


# -- reading -----------------------------------------------------------------------------


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HistoryRequest:
    inventory: str
    limit: str | None = None
    pattern: str = DEFAULT_PATTERN
    cluster: Cluster = field(default_factory=Cluster)
    last: int = 20
    report_dir: Path | None = None


class NodeHistoryDocument(TypedDict):
    """The ``result`` of ``gpuops nodes history``."""

    fleet: str
    namespace: str
    configmap: str
    server: str
    total: int  # records kept in the ConfigMap
    records: list[Annotated[dict[str, Any], nh.NodeRecord, "asdict"]]  # newest first
    report: NotRequired[ReportDocument]  # with --report-dir


@dataclass
class NodeHistory:
    fleet: str
    namespace: str
    configmap: str
    server: str
    total: int
    records: list[nh.NodeRecord]  # newest first
    report: BesideReport | None = None

    def to_dict(self) -> NodeHistoryDocument:
        doc: NodeHistoryDocument = {
            "fleet": self.fleet,
            "namespace": self.namespace,
            "configmap": self.configmap,
            "server": self.server,
            "total": self.total,
            "records": [r.to_dict() for r in self.records],
        }
        if self.report is not None:
            doc["report"] = self.report.to_dict()
        return doc


def read(kube: KubeClient, inv: Inventory) -> tuple[Store, list[nh.NodeRecord]]:
    """The fleet's store and its records, oldest first."""
    store = Store(kube, fleet_of(inv), namespace_of(inv))
    return store, store.read()


def history(
    request: HistoryRequest, connect: Callable[[Cluster], KubeClient] | None = None
) -> Outcome[NodeHistory]:
    """The newest ``last`` records of the inventory's fleet; with ``report_dir`` the page
    (a page that cannot be written is said in the result and changes no verdict)."""
    inv = common.load(request.inventory, request.limit, request.pattern)
    kube = (connect or Cluster.connect)(request.cluster)
    try:
        store, records = read(kube, inv)
    finally:
        kube.close()
    out = NodeHistory(
        store.fleet,
        store.namespace,
        store.name,
        kube.server,
        len(records),
        sorted(records, key=lambda r: r.number, reverse=True)[: request.last],
    )
    if request.report_dir is None:
        return Outcome(out)
    from gpuops.usecases import reports  # noqa: PLC0415 - the pages only when asked

    out.report = reports.write_beside("node-history", request.report_dir, out.to_dict)
    return Outcome(out, files=out.report.files)


# -- rolling back ------------------------------------------------------------------------


def pins_for(
    records: list[nh.NodeRecord], fleet: str, inv: Inventory, to: str, *, before: bool = False
) -> dict[str, DriverPin]:
    """The pins that put ``inv``'s hosts back to the drivers they ran when record ``to``
    ended (:func:`gpuops.core.nodehistory.state_after`), or with ``before`` what they ran
    before it ran (:func:`~gpuops.core.nodehistory.state_before`). Refused when the record is
    unknown, when a host's driver there is not known, or when its group has no sha256 for
    that driver (the playbook could not check the .run)."""
    number = nh.parse_id(to, fleet)
    state = (nh.state_before if before else nh.state_after)(records, number)
    unknown = [h.name for h in inv.hosts if h.name not in state]
    if unknown:
        when = "before" if before else "when"
        raise InvalidInput(
            f"the history does not say which driver {', '.join(unknown[:10])} ran {when} "
            f"record {nh.record_id(fleet, number)} (no record names the host)",
            hint="--limit the rollback to the hosts the history knows",
            field="to",
        )
    blind = [(h.name, state[h.name].number) for h in inv.hosts if state[h.name].driver is None]
    if blind:
        when = "before" if before else "when"
        named = ", ".join(f"{h} (record {nh.record_id(fleet, n)})" for h, n in blind[:10])
        raise InvalidInput(
            f"the history does not know which driver {named} ran {when} record "
            f"{nh.record_id(fleet, number)}: the newest record naming the host does not know its "
            "driver (e.g. it failed there and was not rolled back)",
            hint="--limit it out of the rollback",
            field="to",
        )
    pins = {}
    for host in inv.hosts:
        s = state[host.name]
        table = host.vars.get("gpu_nodes_driver_sha256")
        if s.driver is None:  # refused above
            continue
        if not isinstance(table, Mapping) or s.driver not in table:
            raise InvalidInput(
                f"group {host.group} has no sha256 for driver {s.driver} (record "
                f"{nh.record_id(fleet, s.number)}'s driver of {host.name}): its .run "
                "could not be checked",
                hint=f'add "{s.driver}": <sha256> to gpu_nodes_driver_sha256 of {host.group}',
                field="inventory",
            )
        pins[host.name] = DriverPin(s.driver, s.cuda)
    return pins


def target_pins(
    kube: KubeClient, inv: Inventory, to: str, *, before: bool = False
) -> dict[str, DriverPin]:
    """What :func:`rollback_to` pins: each host's driver when record ``to`` ended (with
    ``before``: before it ran)."""
    store, records = read(kube, inv)
    return pins_for(records, store.fleet, inv, to, before=before)


def rollback_to(
    request: update.UpdateRequest,
    to: str,
    connect: Callable[[Cluster], KubeClient] | None = None,
    *,
    before: bool = False,
) -> Outcome[Rollout]:
    """Put the inventory's hosts (after ``request.limit``) back to the drivers they ran when
    record ``to`` ended (``before``: before it ran, undoing it), through ``nodes update`` with
    pins: canary, batches, headroom gate, validation. The run is recorded as a ``rollback``
    record with ``rollback_of`` (and ``rollback_before``)."""
    if request.cluster is None:
        raise InvalidInput("a rollback reads the node history in the cluster: drop --no-kube")
    inv = common.load(request.inventory, request.limit, request.pattern)
    kube = (connect or Cluster.connect)(request.cluster)
    try:
        pins = target_pins(kube, inv, to, before=before)
        number = nh.parse_id(to, fleet_of(inv))
    finally:
        kube.close()
    # a log line (-v), not a progress line: with --output json, stderr holds the error
    # document alone when pre-flight refuses; the pre-flight line says each host's drivers
    log.info(
        "rollback to %srecord %s: %s",
        "before " if before else "",
        nh.record_id(fleet_of(inv), number),
        ", ".join(f"{h} {p.version}" for h, p in pins.items()),
    )
    pinned = replace(request, change=("nvidia_driver",), pins=pins)
    token = ROLLBACK_OF.set((number, before))
    try:
        return update.update(pinned, connect)
    finally:
        ROLLBACK_OF.reset(token)
