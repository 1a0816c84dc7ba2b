"""The node change history of one fleet: a record per ``gpuops nodes update`` run, pure.

A record says who ran it, when, from which build and inventory revision, what each group ran
before and after, and how each host ended. It lives in the cluster (a ConfigMap per fleet,
:mod:`gpuops.usecases.nodes.history`); this module encodes, decodes, trims it and answers
"what did the fleet run when record N ended" (:func:`state_after`), which ``nodes rollback
--to N`` puts back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from gpuops.core.values import json_kind, shown
from gpuops.errors import InvalidInput, OperationFailed

HISTORY_KEY = "nodes.json"
#: The document's version: a newer one is refused, never read as if it were this one.
VERSION = 1
KEEP = 100  # records kept per fleet at most
#: The encoded history's size limit: a ConfigMap must stay under 1 MiB (the API server refuses
#: a larger one), and its metadata needs room too. Oldest records go first to stay under it.
MAX_BYTES = 900 * 1024
REASON_COMPACT = 80  # a record too large on its own: its hosts' reasons cut to this
MAX_NUMBER = 10**9
CONFIGMAP_PREFIX = "gpuops-node-history-"

SUCCEEDED = "succeeded"
FAILED = "failed"  # some host failed (rolled back or not)
REFUSED = "refused"  # a gate stopped the run (headroom, downgrade)
STATUSES = (SUCCEEDED, FAILED, REFUSED)
ACTIONS = ("update", "rollback")
_ID = re.compile(r"^(?:(?P<fleet>[a-z0-9]([-a-z0-9.]*[a-z0-9])?)-)?(?P<n>[0-9]{1,10})$")
_HINT = "restore it from a backup or fix it by hand; gpuops does not overwrite it"


@dataclass
class HostOutcome:
    """How one host ended a run."""

    status: str  # the rollout's host status: changed, unchanged, failed, rolled-back, ...
    group: str
    node: str | None = None
    driver_before: str | None = None
    cuda_before: str | None = None
    driver_after: str | None = None  # what it runs when the run ended (None: not known)
    cuda_after: str | None = None
    rolled_back: bool = False  # its change failed and its old driver was put back
    reason: str = ""


@dataclass
class GroupDrivers:
    """The drivers a group's hosts ran before and after: version -> host count."""

    before: dict[str, int] = field(default_factory=dict)
    after: dict[str, int] = field(default_factory=dict)


@dataclass
class Resume:
    """Where a run that stopped before its end (held by a batch gate, or aborted) leaves its
    rollout: ``nodes update --resume`` continues with ``left``, no host of ``done`` again."""

    reason: str  # why it stopped (the run's ``stopped``)
    #: finished their change (this run and the runs it resumed)
    done: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # never started, or interrupted mid-batch
    failed: list[str] = field(default_factory=list)  # failed in this run: not resumed


@dataclass
class NodeRecord:
    number: int
    fleet: str
    action: str  # update | rollback
    status: str
    started: str
    finished: str = ""
    who: str = ""
    who_from: str = ""  # jenkins (BUILD_USER_ID) | requested-by | os-user
    link: str | None = None  # the CI build
    inventory: str = ""
    inventory_revision: str | None = None  # git commit of the inventory's work tree
    inventory_dirty: bool | None = None  # the work tree had uncommitted changes (None: unknown)
    limit: str | None = None
    change: list[str] = field(default_factory=list)
    stopped: str = ""
    rollback_of: int | None = None  # a rollback: the record whose state it restored
    rollback_before: bool = False  # ... what ran before that record (--before), not after it
    groups: dict[str, GroupDrivers] = field(default_factory=dict)
    hosts: dict[str, HostOutcome] = field(default_factory=dict)
    #: a record too large for the ConfigMap: host status -> hosts left out of ``hosts`` (their
    #: drivers still counted in ``groups``)
    hosts_omitted: dict[str, int] = field(default_factory=dict)
    #: a run that stopped before its end with hosts left (None: nothing to resume)
    resume: Resume | None = None
    resumed_from: int | None = None  # the record whose hosts left this run continued

    @property
    def id(self) -> str:
        return record_id(self.fleet, self.number)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def record_id(fleet: str, number: int) -> str:
    return f"{fleet}-{number}"


def valid_id(value: str) -> str:
    """``value`` when it reads as a record id (checked as the option is read, before any
    inventory or cluster is)."""
    if not isinstance(value, str) or _ID.fullmatch(value.strip()) is None:
        raise InvalidInput(
            f"{shown(value)} is not a node record id: a number or <fleet>-<number>",
            hint="see gpuops nodes history",
        )
    return value.strip()


def parse_id(value: str, fleet: str) -> int:
    """The number of a record id: ``12`` or ``<fleet>-12`` (another fleet's id is refused)."""
    m = _ID.fullmatch(value.strip()) if isinstance(value, str) else None
    if m is None:
        raise InvalidInput(
            f"{shown(value)} is not a node record id: a number or <fleet>-<number>",
            hint="see gpuops nodes history",
            field="to",
        )
    if m.group("fleet") is not None and m.group("fleet") != fleet:
        raise InvalidInput(
            f"record {shown(value)} is not of this inventory's fleet {fleet!r}",
            field="to",
        )
    return int(m.group("n"))


def group_drivers(hosts: Mapping[str, HostOutcome]) -> dict[str, GroupDrivers]:
    out: dict[str, GroupDrivers] = {}
    for h in hosts.values():
        g = out.setdefault(h.group, GroupDrivers())
        for table, version in ((g.before, h.driver_before), (g.after, h.driver_after)):
            key = version or "unknown"
            table[key] = table.get(key, 0) + 1
    return {k: out[k] for k in sorted(out)}


# -- decoding ---------------------------------------------------------------------------


def _damaged(where: str, what: str) -> OperationFailed:
    return OperationFailed(f"{where}: {what}", hint=_HINT)


def _get(
    item: Mapping[str, Any], key: str, kinds: tuple[type, ...], where: str, required: bool
) -> Any:
    value = item.get(key)
    if value is None:
        if required:
            raise _damaged(where, f"lacks {key!r}")
        return None
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        raise _damaged(where, f"field {key!r} is a JSON {json_kind(value)}: {shown(value, 40)}")
    return value


def _text(item: Mapping[str, Any], key: str, where: str, required: bool = False) -> Any:
    return _get(item, key, (str,), where, required)


def _number(item: Mapping[str, Any], key: str, where: str, required: bool = False) -> Any:
    value = _get(item, key, (int,), where, required)
    if value is not None and not 1 <= value <= MAX_NUMBER:
        raise _damaged(where, f"field {key!r} must be 1 to {MAX_NUMBER}, not {value}")
    return value


def _counts(value: Any, where: str) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value.values()
    ):
        raise _damaged(where, "must be an object of driver version -> host count")
    return {str(k): int(v) for k, v in value.items()}


def _host(item: Any, where: str) -> HostOutcome:
    if not isinstance(item, Mapping):
        raise _damaged(where, f"is a JSON {json_kind(item)}, not an object")
    rolled = _get(item, "rolled_back", (bool,), where, False)
    return HostOutcome(
        status=_text(item, "status", where, True),
        group=_text(item, "group", where, True),
        node=_text(item, "node", where),
        driver_before=_text(item, "driver_before", where),
        cuda_before=_text(item, "cuda_before", where),
        driver_after=_text(item, "driver_after", where),
        cuda_after=_text(item, "cuda_after", where),
        rolled_back=bool(rolled),
        reason=_text(item, "reason", where) or "",
    )


def _record(item: Any, i: int, where: str) -> NodeRecord:
    at = f"{where}: node record {i}"
    if not isinstance(item, Mapping):
        raise _damaged(at, f"is a JSON {json_kind(item)}, not an object")
    status, action = _text(item, "status", at, True), _text(item, "action", at, True)
    if status not in STATUSES:
        raise _damaged(at, f"has an unknown status {shown(status, 40)}")
    if action not in ACTIONS:
        raise _damaged(at, f"has an unknown action {shown(action, 40)}")
    change = _get(item, "change", (list,), at, False) or []
    if not all(isinstance(c, str) for c in change):
        raise _damaged(at, "field 'change' must be a list of strings")
    hosts = _get(item, "hosts", (dict,), at, False) or {}
    groups = _get(item, "groups", (dict,), at, False) or {}
    for g, v in groups.items():
        if not isinstance(v, Mapping):
            raise _damaged(f"{at}: group {shown(g, 40)}", "is no object")
    return NodeRecord(
        number=_number(item, "number", at, True),
        fleet=_text(item, "fleet", at, True),
        action=action,
        status=status,
        started=_text(item, "started", at, True),
        finished=_text(item, "finished", at) or "",
        who=_text(item, "who", at) or "",
        who_from=_text(item, "who_from", at) or "",
        link=_text(item, "link", at),
        inventory=_text(item, "inventory", at) or "",
        inventory_revision=_text(item, "inventory_revision", at),
        inventory_dirty=_get(item, "inventory_dirty", (bool,), at, False),
        limit=_text(item, "limit", at),
        change=list(change),
        stopped=_text(item, "stopped", at) or "",
        rollback_of=_number(item, "rollback_of", at),
        rollback_before=_get(item, "rollback_before", (bool,), at, False) is True,
        groups={
            str(g): GroupDrivers(
                _counts(v.get("before"), f"{at}: group {g} before"),
                _counts(v.get("after"), f"{at}: group {g} after"),
            )
            for g, v in groups.items()
        },
        hosts={str(h): _host(v, f"{at}: host {shown(h, 40)}") for h, v in hosts.items()},
        hosts_omitted=_counts(item.get("hosts_omitted"), f"{at}: hosts_omitted"),
        resume=_resume(item.get("resume"), f"{at}: resume"),
        resumed_from=_number(item, "resumed_from", at),
    )


def _resume(value: Any, where: str) -> Resume | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _damaged(where, f"is a JSON {json_kind(value)}, not an object")
    lists = {}
    for key in ("done", "left", "failed"):
        got = value.get(key) or []
        if not isinstance(got, list) or not all(isinstance(h, str) for h in got):
            raise _damaged(where, f"field {key!r} must be a list of host names")
        lists[key] = list(got)
    return Resume(reason=_text(value, "reason", where) or "", **lists)


def decode(text: str | None, where: str) -> list[NodeRecord]:
    """The records of a history document, oldest first. No document is an empty history; a
    damaged one (not JSON, another version, a field of the wrong kind) is an error naming
    ``where``: a history is never silently reset."""
    if text is None:
        return []
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _damaged(where, f"the node history is not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise _damaged(where, "the node history is nested too deeply") from None
    if not isinstance(doc, Mapping):
        raise _damaged(where, f"the node history must be a JSON object, not {json_kind(doc)}")
    if "version" not in doc:
        raise _damaged(where, f"the node history has no version; this gpuops reads {VERSION}")
    if doc.get("version") != VERSION or isinstance(doc.get("version"), bool):
        raise _damaged(
            where,
            f"the node history has version {shown(doc.get('version'), 20)}; this gpuops "
            f"reads version {VERSION}",
        )
    items = doc.get("records")
    if not isinstance(items, list):
        raise _damaged(where, "the node history's 'records' must be a JSON list")
    out = [_record(item, i, where) for i, item in enumerate(items)]
    seen: set[int] = set()
    for r in out:
        if r.number in seen:
            raise _damaged(where, f"node record number {r.number} appears twice")
        seen.add(r.number)
    return sorted(out, key=lambda r: r.number)


def _dumps(value: Any) -> str:
    # ASCII only (json's default), so the text's length is its size in bytes
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def encode(records: Sequence[NodeRecord]) -> str:
    return _dumps({"version": VERSION, "records": [r.to_dict() for r in records]})


def size(records: Sequence[NodeRecord]) -> int:
    """The size in bytes of ``encode(records)``."""
    return len(encode(records))


def next_number(records: Sequence[NodeRecord]) -> int:
    return max((r.number for r in records), default=0) + 1


def trim(
    records: Sequence[NodeRecord], keep: int = KEEP, max_bytes: int = MAX_BYTES
) -> list[NodeRecord]:
    """The newest ``keep`` records whose encoding fits in ``max_bytes``: the oldest go first.
    The newest record is always kept; when it is too large on its own it is compacted
    (:func:`compact`), so a history write never fails for its size."""
    kept = sorted(records, key=lambda r: r.number)[-keep:] if keep > 0 else []
    if not kept:
        return []
    empty = size([])
    kept[-1] = compact(kept[-1], max_bytes - empty)
    sizes = [len(_dumps(r.to_dict())) for r in kept]
    total = empty + sum(sizes) + len(kept) - 1  # the commas between records
    while len(kept) > 1 and total > max_bytes:
        total -= sizes.pop(0) + 1
        kept.pop(0)
    return kept


def compact(r: NodeRecord, max_bytes: int) -> NodeRecord:
    """``r`` made to fit in ``max_bytes`` (as it is when it fits): first its hosts' reasons are
    cut to :data:`REASON_COMPACT` characters, then the hosts whose driver did not change are
    left out of ``hosts`` (counted in ``hosts_omitted``), then all hosts. ``groups`` keeps
    every host's drivers."""

    def fits(x: NodeRecord) -> bool:
        return len(_dumps(x.to_dict())) <= max_bytes

    if fits(r):
        return r
    cut = {
        name: replace(h, reason=h.reason[:REASON_COMPACT]) if len(h.reason) > REASON_COMPACT else h
        for name, h in r.hosts.items()
    }
    out = replace(r, hosts=cut)
    for leave_out in (_unchanged, lambda _h: True):
        if fits(out):
            return out
        omitted = dict(out.hosts_omitted)
        hosts = {}
        for name, h in out.hosts.items():
            if leave_out(h):
                omitted[h.status] = omitted.get(h.status, 0) + 1
            else:
                hosts[name] = h
        out = replace(out, hosts=hosts, hosts_omitted=dict(sorted(omitted.items())))
    return out


def _unchanged(h: HostOutcome) -> bool:
    return not h.rolled_back and h.driver_before == h.driver_after and h.driver_after is not None


def find(records: Sequence[NodeRecord], number: int) -> NodeRecord:
    for r in records:
        if r.number == number:
            return r
    known = ", ".join(str(r.number) for r in records[-10:]) or "none"
    raise InvalidInput(
        f"no node record {number} in this fleet's history (newest: {known})",
        hint="see gpuops nodes history",
        field="to",
    )


@dataclass(frozen=True)
class HostState:
    """A host's driver when a record ended, and the record that says so (``driver`` None:
    that record names the host but does not know its driver, e.g. a failed host)."""

    driver: str | None
    cuda: str
    number: int


def state_after(records: Sequence[NodeRecord], number: int) -> dict[str, HostState]:
    """What each host ran when record ``number`` ended: for each host, its ``driver_after`` in
    the newest record up to ``number`` that names it (a run that left a host out says nothing
    about it, so an earlier record does). When that record does not know the host's driver
    (``driver_after`` null) the state is unknown (``driver`` None): an older record's driver is
    not what the host ran then. ``number`` must exist."""
    find(records, number)
    out: dict[str, HostState] = {}
    for r in sorted(records, key=lambda x: x.number):
        if r.number > number:
            break
        if r.hosts_omitted and not r.hosts:
            # compacted to no hosts at all (too large): no host's driver is known after it
            out = {name: HostState(None, "", r.number) for name in out}
        for name, h in r.hosts.items():
            known = h.driver_after or None
            out[name] = HostState(known, (h.cuda_after or "") if known else "", r.number)
    return out


def state_before(records: Sequence[NodeRecord], number: int) -> dict[str, HostState]:
    """What each host ran before record ``number`` ran (what undoing it restores): the
    ``driver_before`` record ``number`` saw on each host it names, and for any other host its
    state after the newest earlier record."""
    r = find(records, number)
    earlier = [x.number for x in records if x.number < number]
    out = state_after(records, max(earlier)) if earlier else {}
    for name, h in r.hosts.items():
        if h.driver_before:
            out[name] = HostState(h.driver_before, h.cuda_before or "", number)
    return out
