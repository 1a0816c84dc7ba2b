"""The release history of one environment: records, what is current, what is previous, pure.

Each record describes the whole state a release put on the cluster (image tag and digest,
model version), who asked and who approved, and how it ended. A record is written *before*
the cluster is changed, as ``pending``, and finished afterwards; the Deployment carries the
number of the release it runs (annotation ``gpuops.io/release``). So whatever stops a release
half way (the API server, the registry, the process itself), the next release can tell what
really happened and finish the record: :func:`reconcile`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any

from gpuops.core.values import json_kind, shown
from gpuops.errors import InvalidInput, OperationFailed

#: Annotations on the Deployment (never on its pod template: a rollback must find the old
#: ReplicaSet's template unchanged, or Kubernetes would start new pods instead of reusing it).
RELEASE_ANNOTATION = "gpuops.io/release"
ROLLED_BACK_ANNOTATION = "gpuops.io/rolled-back-release"
CHANGE_CAUSE = "kubernetes.io/change-cause"
HISTORY_KEY = "releases.json"

PENDING = "pending"
SUCCEEDED = "succeeded"
FAILED = "failed"  # the rollout failed; the previous release was restored (rolled_back_to)
ABORTED = "aborted"  # never reached the cluster
INTERRUPTED = "interrupted"  # reached the cluster, but nobody saw the rollout finish
STATUSES = (PENDING, SUCCEEDED, FAILED, ABORTED, INTERRUPTED)
ACTIONS = ("promote", "rollback")
PREVIOUS = "previous"
#: Where the updateGpuNodes step leaves its node change's record id for a later promoteTag of
#: the same build (``release promote --node-change`` defaults to it).
NODE_CHANGE_ENV = "GPUOPS_NODE_CHANGE"
#: A node change history record's id: its number, or ``<fleet>-<number>`` (lower case letters,
#: digits, '.', '-'; at most 100 characters). Checked where it is given and where it is read.
NODE_CHANGE_ID = re.compile(r"(?:[a-z0-9](?:[a-z0-9.-]{0,88}[a-z0-9])?-)?[0-9]{1,10}")


def now_iso(ts: float | None = None) -> str:
    moment = datetime.now(UTC) if ts is None else datetime.fromtimestamp(ts, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def check_node_change(value: str, what: str = "--node-change") -> str:
    """A node change record id (:data:`NODE_CHANGE_ID`), or InvalidInput naming ``what``."""
    if not NODE_CHANGE_ID.fullmatch(value):
        raise InvalidInput(
            f"{what}: {shown(value, 40)} is not a node change record id (its number, e.g. 7, "
            "or <fleet>-<number>, e.g. gpu-prod-7)",
            hint="the id 'gpuops nodes history' shows, or that 'nodes update' printed",
            field="node_change",
        )
    return value


@dataclass
class Release:
    number: int
    environment: str
    action: str  # promote | rollback
    status: str
    started: str
    tag: str | None = None  # the image tag in effect after this release
    digest: str | None = None  # ... and its digest
    image: str | None = None  # repository:tag@digest as set on the container
    model: str | None = None  # the model version in effect after this release (S-22)
    finished: str | None = None
    previous: int | None = None  # the release that ran before this one
    reason: str | None = None
    approved_by: str | None = None
    requested_by: str | None = None
    git_revision: str | None = None
    link: str | None = None  # e.g. the CI build that released it
    failure: dict[str, Any] | None = None  # kind, message, details
    rolled_back_to: int | None = None  # a failed release: what was restored
    rolled_back_by: int | None = None  # a later rollback replaced this release
    registry_tag: str | None = None  # the environment's tag, moved to this digest
    note: str | None = None
    #: the node change made in the same build (S-24): its node change history record's id
    node_change: str | None = None
    #: a progressive release (issue 20): each step, its measured values and how it ended
    steps: list[dict[str, Any]] | None = None
    #: ... its canary and how it runs (surge or in place): what the next run needs to finish
    #: or restore it (:mod:`gpuops.core.canary`)
    canary: dict[str, Any] | None = None
    #: ... waiting on an approval step: the step, its approvers and timeout
    paused: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        parts = [self.tag or "-"]
        if self.model:
            parts.append(f"model {self.model}")
        return f"#{self.number} " + ", ".join(parts)

    def same_content(self, other: Release) -> bool:
        return (self.digest, self.model) == (other.digest, other.model)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


_FIELDS = tuple(f.name for f in fields(Release))
_REQUIRED = ("number", "environment", "action", "status", "started")
_TEXT = frozenset(
    {
        "environment",
        "action",
        "status",
        "started",
        "tag",
        "digest",
        "image",
        "model",
        "finished",
        "reason",
        "approved_by",
        "requested_by",
        "git_revision",
        "link",
        "registry_tag",
        "note",
        "node_change",
    }
)
_NUMBERS = frozenset({"number", "previous", "rolled_back_to", "rolled_back_by"})
#: object fields and the keys each must hold, with their JSON type
_OBJECTS: dict[str, tuple[tuple[str, type], ...]] = {
    "failure": (("kind", str),),
    "canary": (("deployment", str), ("name", str), ("mode", str)),
    "paused": (("step", int),),
}
_STEP_KEYS: tuple[tuple[str, type], ...] = (("index", int), ("kind", str), ("state", str))
#: A release number: what ``gpuops.io/release`` and a history record can carry.
MAX_NUMBER = 10**9


def _damaged(where: str, i: int, what: str) -> OperationFailed:
    return OperationFailed(
        f"{where}: release record {i} {what}",
        hint="restore it from a backup or fix it by hand; gpuops does not overwrite it",
    )


def _holds(value: Any, keys: tuple[tuple[str, type], ...]) -> bool:
    """An object holding each of ``keys`` with a value of its JSON type (no boolean as a
    number)."""
    if not isinstance(value, Mapping):
        return False
    return all(isinstance(value.get(k), t) and not isinstance(value.get(k), bool) for k, t in keys)


def _record(item: Any, i: int, where: str) -> Release:
    """One record, every field of its own type (a list where a tag belongs, ``true`` as a
    number: the record is damaged, never coerced)."""
    if not isinstance(item, Mapping):
        raise _damaged(where, i, f"is a JSON {json_kind(item)}, not an object")
    missing = [k for k in _REQUIRED if item.get(k) is None]
    if missing:
        raise _damaged(where, i, f"lacks {', '.join(missing)}")
    values: dict[str, Any] = {}
    for key in _FIELDS:
        value = item.get(key)
        if value is None:
            continue
        if key in _NUMBERS:
            ok = type(value) is int and 1 <= value <= MAX_NUMBER
            want = f"a release number (1 to {MAX_NUMBER})"
        elif key in _TEXT:
            ok, want = isinstance(value, str), "a string"
        elif key == "steps":
            ok = isinstance(value, list) and all(_holds(s, _STEP_KEYS) for s in value)
            want = "a list of steps (objects with index, kind and state)"
        else:  # failure, canary, paused
            keys = _OBJECTS[key]
            ok = _holds(value, keys)
            kinds = (f"{'a string' if t is str else 'a number'} {k!r}" for k, t in keys)
            want = "an object with " + ", ".join(kinds)
        if not ok:
            bad = "has a bad number or status: " if key == "number" else ""
            raise _damaged(where, i, f"{bad}field {key!r} must be {want}, not {shown(value, 40)}")
        if isinstance(value, Mapping):
            value = dict(value)
        elif isinstance(value, list):
            value = [dict(v) for v in value]
        values[key] = value
    if values["status"] not in STATUSES:
        raise _damaged(
            where, i, f"has a bad number or status: unknown status {shown(values['status'], 40)}"
        )
    if values["action"] not in ACTIONS:
        raise _damaged(where, i, f"has an unknown action {shown(values['action'], 40)}")
    return Release(**values)


def decode(text: str | None, where: str) -> list[Release]:
    """The records of a history document, oldest first; a damaged document is an error
    naming ``where`` (a history is never silently reset, and never half read: every field
    of every record is checked for its type)."""
    if not text:
        return []
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OperationFailed(
            f"{where}: the release history is not valid JSON ({exc.msg})",
            hint="restore it from a backup or fix it by hand; gpuops does not overwrite it",
        ) from None
    except RecursionError:
        raise OperationFailed(
            f"{where}: the release history is nested too deeply to be a release history"
        ) from None
    if not isinstance(doc, list):
        raise OperationFailed(
            f"{where}: the release history must be a JSON list, not a JSON {json_kind(doc)}"
        )
    out = [_record(item, i, where) for i, item in enumerate(doc)]
    seen: set[int] = set()
    for i, r in enumerate(out):
        if r.number in seen:
            raise _damaged(where, i, f"repeats release number {r.number}")
        seen.add(r.number)
    return sorted(out, key=lambda r: r.number)


def encode(records: Sequence[Release]) -> str:
    return json.dumps([r.to_dict() for r in records], separators=(",", ":"), sort_keys=True)


def next_number(records: Sequence[Release]) -> int:
    return max((r.number for r in records), default=0) + 1


def by_number(records: Iterable[Release], number: int | None) -> Release | None:
    return next((r for r in records if r.number == number), None) if number else None


def trim(records: Sequence[Release], keep: int, current: int | None) -> list[Release]:
    """The newest ``keep`` records, never dropping the current release or an open one."""
    ordered = sorted(records, key=lambda r: r.number)
    if len(ordered) <= keep:
        return ordered
    cut = ordered[-keep:]
    kept = {r.number for r in cut}
    extra = [
        r for r in ordered if r.number not in kept and (r.number == current or r.status == PENDING)
    ]
    return sorted(extra + cut, key=lambda r: r.number)


def upsert(records: Sequence[Release], record: Release) -> list[Release]:
    out = [r for r in records if r.number != record.number] + [record]
    return sorted(out, key=lambda r: r.number)


@dataclass(frozen=True)
class Reconciled:
    record: Release
    was: str


def reconcile(
    records: Sequence[Release],
    deployed: int | None,
    rolled_back: int | None,
    rollout_complete: bool,
    at: str,
    cleaned: Mapping[int, Sequence[str]] | None = None,
) -> list[Reconciled]:
    """Finish every ``pending`` record from what the cluster shows: the release number the
    Deployment runs (``deployed``), the one a restore replaced (``rolled_back``), and whether
    its rollout is complete. Call it only while holding the target's lock.

    A progressive release (its record names a canary) reached the cluster with its canary
    even where the stable never took it: ``cleaned`` says what the caller removed or put
    back of it (its canary, the stable's replicas), and such a record ends ``interrupted``
    (a run stopped during its steps) or ``aborted`` (it waited on an approval nobody gave
    before this release came), with the previous release restored."""
    cleaned = cleaned or {}
    out = []
    for r in records:
        if r.status != PENDING:
            continue
        done = cleaned.get(r.number) or ()
        undone = f"; {'; '.join(done)}" if done else ""
        if deployed == r.number:
            status = SUCCEEDED if rollout_complete else INTERRUPTED
            note = (
                "finished by a later run: the cluster runs it and its rollout is complete"
                if rollout_complete
                else "the cluster runs it, but its rollout was not seen to finish"
            )
            new = replace(r, status=status, finished=at, note=note + undone, paused=None)
        elif rolled_back == r.number:
            new = replace(
                r,
                status=FAILED,
                finished=at,
                rolled_back_to=deployed,
                note="it was rolled back, but the run that did so ended before recording why"
                + undone,
            )
        elif r.paused is not None:
            step = r.paused.get("step")
            which = step + 1 if isinstance(step, int) else "?"
            new = replace(
                r,
                status=ABORTED,
                finished=at,
                rolled_back_to=deployed,
                paused=None,
                note=f"it waited on its approval (step {which}) "
                f"and a later release came first: the previous release restored{undone}",
            )
        elif r.canary is not None:
            new = replace(
                r,
                status=INTERRUPTED,
                finished=at,
                rolled_back_to=deployed,
                note="the run stopped during its steps (before all replicas took it): the "
                f"previous release restored{undone}",
            )
        else:
            new = replace(r, status=ABORTED, finished=at, note="it never reached the cluster")
        out.append(Reconciled(new, r.status))
    return out


def is_candidate(r: Release) -> bool:
    """A release one may go back to: it succeeded and no rollback replaced it since."""
    return r.status == SUCCEEDED and r.rolled_back_by is None and r.digest is not None


def previous(records: Sequence[Release], current: Release | None) -> Release | None:
    """What ``rollback --previous`` restores: the newest release before the current one that
    succeeded, was not rolled back, and differs from what runs now."""
    for r in sorted(records, key=lambda x: x.number, reverse=True):
        if current is not None and r.number >= current.number:
            continue
        if is_candidate(r) and (current is None or not r.same_content(current)):
            return r
    return None


def rollback_choices(records: Sequence[Release], current: Release | None) -> list[Release]:
    """The releases ``rollback --to`` accepts, newest first, one per tag (the rollback job's
    choices)."""
    seen: set[str] = set()
    out = []
    for r in sorted(records, key=lambda x: x.number, reverse=True):
        if not is_candidate(r) or r.tag is None or r.tag in seen:
            continue
        if current is not None and r.same_content(current):
            continue
        seen.add(r.tag)
        out.append(r)
    return out


def find_tag(records: Sequence[Release], tag: str, current: Release | None) -> Release:
    """The newest successful release of ``tag`` (for ``rollback --to``)."""
    for r in sorted(records, key=lambda x: x.number, reverse=True):
        if r.tag == tag and r.status == SUCCEEDED and r.digest:
            if current is not None and r.same_content(current):
                raise InvalidInput(
                    f"{tag} is what the environment runs now (release #{current.number})",
                    field="to",
                )
            return r
    choices = ", ".join(c.tag or "" for c in rollback_choices(records, current)) or "none"
    raise InvalidInput(
        f"no successful release of tag {shown(tag)} in this environment's history",
        hint=f"roll back to one of: {choices} (gpuops release history)",
        field="to",
    )


@dataclass(frozen=True)
class Summary:
    """What an environment runs and could go back to."""

    current: Release | None
    previous: Release | None
    choices: list[Release] = field(default_factory=list)
