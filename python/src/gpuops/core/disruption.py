"""The cluster's disruption budget for GPU nodes, pure: its limits, holders and verdicts.

One budget per GPU *class*: the node label ``nvidia.com/gpu.product`` (NVIDIA GPU Feature
Discovery's, as :mod:`gpuops.core.nodelabels` sets it); a node without that label is in the
class :data:`UNLABELLED`. The inventory group is not the class: two inventories (two Jenkins
jobs) of one cluster may hold hosts of one model under different groups, and they must share
one budget.

The budget of a class is one Lease (coordination.k8s.io/v1) in :data:`NAMESPACE`, named
``gpuops-disruption.<class>``. Its holders are a JSON list in the annotation
:data:`HOLDERS_ANNOTATION`: per holder its identity, its run, the nodes it holds, when it took
them, when it last renewed, its lease duration and the limit it asked for. A holder that has
not renewed for its lease duration is dead (a killed process, a lost agent, a process stopped
with SIGSTOP): the next taker drops its claim and says so, as the release lock
(:mod:`gpuops.core.releaselock`) takes over a silent holder.

A class's unavailable nodes are the union of the nodes live holders claim, the class's nodes
that are cordoned or not Ready in the cluster now (whoever did it: an administrator, a failed
run that left a node cordoned, Kured draining) and the node Kured's lock names. A take fits when
that union with the nodes asked for stays within the strictest limit of the taker and every
live holder (two runs passing different limits never exceed the smaller one).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from gpuops.errors import InvalidInput, OperationFailed

NAMESPACE = "gpuops-system"
LEASE_PREFIX = "gpuops-disruption."
HOLDERS_ANNOTATION = "gpuops.io/disruption-holders"
CLASS_ANNOTATION = "gpuops.io/disruption-class"
CLASS_LABEL = "nvidia.com/gpu.product"
UNLABELLED = "unlabelled"  # the class of nodes without CLASS_LABEL
DEFAULT_LEASE_S = 60
ANY_CLASS = "*"

#: Kured's lock (kubereboot/kured release 1.23.0, pkg/daemonsetlock/daemonsetlock.go:
#: ``LockAnnotationValue{NodeID "nodeID", Metadata "metadata", Created "created", TTL "TTL"}``
#: and, with ``--concurrency`` > 1, ``multiLockAnnotationValue{MaxOwners "maxOwners",
#: LockAnnotations "locks"}``; the key is cmd/kured/main.go's ``KuredNodeLockAnnotation``, the
#: DaemonSet ``--ds-namespace``/``--ds-name`` default to kube-system/kured). TTL is a Go
#: ``time.Duration`` (nanoseconds); 0 never expires (``ttlExpired``: ttl > 0 and
#: time.Since(created) >= ttl).
KURED_ANNOTATION = "weave.works/kured-node-lock"
KURED_DAEMONSET = ("kube-system", "kured")

_NAME_OK = re.compile(r"[^a-z0-9.-]+")
_LIMIT = re.compile(r"^(?:(?P<cls>[^=]+)=)?(?P<n>[0-9]{1,6})(?P<pct>%?)$")
_MAX_NAME = 253


@dataclass(frozen=True)
class BudgetLimit:
    """``max_unavailable`` of a class: a count, or a percentage of the class's nodes in the
    cluster (rounded down, at least 1 when the class has nodes, so a rollout can progress)."""

    count: int | None = None
    percent: int | None = None

    def __post_init__(self) -> None:
        if (self.count is None) == (self.percent is None):
            raise ValueError("a BudgetLimit is a count or a percentage")

    def resolve(self, class_size: int) -> int:
        if self.percent is None:
            return self.count or 0
        if class_size <= 0:
            return 0
        return max(1, math.floor(class_size * self.percent / 100))

    def __str__(self) -> str:
        return f"{self.percent}%" if self.percent is not None else str(self.count)


def parse_limits(values: Iterable[str]) -> dict[str, BudgetLimit]:
    """``--budget-max-unavailable`` values: ``N``, ``N%`` (every class) or ``CLASS=N[%]``
    (that class: the ``nvidia.com/gpu.product`` value, e.g. ``NVIDIA-A100-SXM4-80GB``).
    Returns class -> limit, :data:`ANY_CLASS` for the default."""
    out: dict[str, BudgetLimit] = {}
    for raw in values:
        text = raw.strip()
        m = _LIMIT.match(text)
        if m is None:
            raise InvalidInput(
                f"--budget-max-unavailable {raw!r}: expected N, N% or CLASS=N[%] "
                "(CLASS: the node label nvidia.com/gpu.product, e.g. NVIDIA-A100-SXM4-80GB)",
                field="budget_max_unavailable",
            )
        cls = (m.group("cls") or ANY_CLASS).strip()
        if cls not in (ANY_CLASS, UNLABELLED) and not _label_value_ok(cls):
            raise InvalidInput(
                f"--budget-max-unavailable {raw!r}: {cls!r} is not a node label value",
                field="budget_max_unavailable",
            )
        n = int(m.group("n"))
        if m.group("pct"):
            if not 1 <= n <= 100:
                raise InvalidInput(
                    f"--budget-max-unavailable {raw!r}: a percentage is 1% to 100%",
                    field="budget_max_unavailable",
                )
            limit = BudgetLimit(percent=n)
        else:
            if n < 1:
                raise InvalidInput(
                    f"--budget-max-unavailable {raw!r}: at least 1 (0 would hold every run)",
                    field="budget_max_unavailable",
                )
            limit = BudgetLimit(count=n)
        if cls in out:
            raise InvalidInput(
                f"--budget-max-unavailable: class {cls!r} given twice",
                field="budget_max_unavailable",
            )
        out[cls] = limit
    return out


def limit_for(limits: Mapping[str, BudgetLimit], cls: str) -> BudgetLimit | None:
    return limits.get(cls) or limits.get(ANY_CLASS)


def _label_value_ok(value: str) -> bool:
    return (
        len(value) <= 63
        and re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", value) is not None
    )


def class_of(labels: Mapping[str, str]) -> str:
    return labels.get(CLASS_LABEL) or UNLABELLED


def class_selector(cls: str) -> str:
    """The label selector of a class's nodes."""
    return f"!{CLASS_LABEL}" if cls == UNLABELLED else f"{CLASS_LABEL}={cls}"


def lease_name(cls: str) -> str:
    """``gpuops-disruption.<class>``: lower case, characters a Lease name cannot hold made
    ``-``; a short digest of the class when that changed it (so two classes never share)."""
    clean = _NAME_OK.sub("-", cls.lower()).strip("-.") or "class"
    name = LEASE_PREFIX + clean
    if clean != cls:
        name += "-" + hashlib.sha256(cls.encode()).hexdigest()[:8]
    if len(name) > _MAX_NAME:
        name = name[: _MAX_NAME - 9] + "-" + hashlib.sha256(cls.encode()).hexdigest()[:8]
    return name


def micro_time(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Claim:
    """One holder's share of a class's budget."""

    holder: str
    run: str
    nodes: tuple[str, ...]
    since: datetime
    renewed: datetime
    lease_s: int
    max_unavailable: int  # the limit this holder asked for (the strictest one applies)

    def alive(self, now: datetime) -> bool:
        return (now - self.renewed).total_seconds() <= self.lease_s

    def silent_s(self, now: datetime) -> float:
        return max(0.0, (now - self.renewed).total_seconds())

    def describe(self) -> str:
        what = f" ({self.run})" if self.run else ""
        since = self.since.strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"{self.holder}{what} holds {', '.join(self.nodes)} since {since}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "holder": self.holder,
            "run": self.run,
            "nodes": list(self.nodes),
            "since": micro_time(self.since),
            "renewed": micro_time(self.renewed),
            "lease_seconds": self.lease_s,
            "max_unavailable": self.max_unavailable,
        }


def parse_claims(text: str | None, where: str) -> list[Claim]:
    """The holders annotation; a value gpuops cannot read is an operation failure naming the
    Lease (never silently treated as empty: that would let a run exceed the budget)."""
    if not text:
        return []
    try:
        raw = json.loads(text)
    except ValueError:
        raise OperationFailed(f"{where}: {HOLDERS_ANNOTATION} is not JSON") from None
    if not isinstance(raw, list):
        raise OperationFailed(f"{where}: {HOLDERS_ANNOTATION} is not a JSON list")
    out = []
    for item in raw:
        found = _claim(item)
        if found is None:
            raise OperationFailed(
                f"{where}: a holder in {HOLDERS_ANNOTATION} is not readable: {item!r:.200}"
            )
        out.append(found)
    return out


def _claim(item: Any) -> Claim | None:
    if not isinstance(item, dict):
        return None
    since, renewed, nodes = (
        parse_time(item.get("since")),
        parse_time(item.get("renewed")),
        item.get("nodes"),
    )
    lease_s, limit = item.get("lease_seconds"), item.get("max_unavailable")
    if (
        since is None
        or renewed is None
        or not isinstance(nodes, list)
        or not isinstance(item.get("holder"), str)
        or not isinstance(lease_s, int)
        or not isinstance(limit, int)
    ):
        return None
    return Claim(
        holder=item["holder"],
        run=str(item.get("run", "")),
        nodes=tuple(str(n) for n in nodes),
        since=since,
        renewed=renewed,
        lease_s=lease_s,
        max_unavailable=limit,
    )


def dump_claims(claims: Sequence[Claim]) -> str:
    return json.dumps([c.to_dict() for c in claims], sort_keys=True)


@dataclass(frozen=True)
class ClassState:
    """What the cluster says about a class now."""

    cls: str
    size: int  # nodes of the class in the cluster
    down: frozenset[str]  # cordoned or not Ready
    kured: frozenset[str] = frozenset()  # nodes Kured's lock names (live)


@dataclass(frozen=True)
class Verdict:
    fits: bool
    cls: str
    limit: int  # the strictest limit that applies
    asked: tuple[str, ...]
    unavailable: tuple[str, ...]  # before this take
    live: tuple[Claim, ...]  # other holders alive
    dead: tuple[Claim, ...]  # other holders silent for longer than their lease: dropped
    state: ClassState
    claims_after: tuple[Claim, ...] = field(default=())
    own: int = 0  # the taker's own limit: asking more than it can never fit

    @property
    def never(self) -> bool:
        return len(self.asked) > self.own

    def message(self) -> str:
        after = len(set(self.unavailable) | set(self.asked))
        who = "; ".join(c.describe() for c in self.live) or "no gpuops holder"
        extra = []
        cordoned = sorted(self.state.down - {n for c in self.live for n in c.nodes})
        if cordoned:
            extra.append(f"cordoned or not Ready: {', '.join(cordoned)}")
        if self.state.kured:
            extra.append(f"Kured's lock: {', '.join(sorted(self.state.kured))}")
        tail = f" ({'; '.join(extra)})" if extra else ""
        return (
            f"class {self.cls}: {len(self.unavailable)} node(s) unavailable, "
            f"{len(self.asked)} more would make {after} > max_unavailable {self.limit}; "
            f"holders: {who}{tail}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "class": self.cls,
            "max_unavailable": self.limit,
            "asked": list(self.asked),
            "unavailable": list(self.unavailable),
            "holders": [c.to_dict() for c in self.live],
            "kured": sorted(self.state.kured),
            "down": sorted(self.state.down),
        }


def judge(
    claims: Sequence[Claim],
    state: ClassState,
    me: str,
    run: str,
    asked: Sequence[str],
    limit: BudgetLimit,
    lease_s: int,
    now: datetime,
) -> Verdict:
    """Whether ``me`` may take ``asked`` of this class now, and the holders list after it."""
    others = [c for c in claims if c.holder != me]
    mine = next((c for c in claims if c.holder == me), None)
    live = tuple(c for c in others if c.alive(now))
    dead = tuple(c for c in others if not c.alive(now))
    own = limit.resolve(state.size)
    strictest = min([own, *(c.max_unavailable for c in live)])
    held_by_me = set(mine.nodes) if mine else set()
    unavailable = (
        {n for c in live for n in c.nodes} | set(state.down) | set(state.kured) | held_by_me
    )
    want = tuple(sorted(set(asked)))
    fits = len(unavailable | set(want)) <= strictest
    after: tuple[Claim, ...] = ()
    if fits:
        nodes = tuple(sorted(held_by_me | set(want)))
        claim = (
            replace(mine, nodes=nodes, renewed=now, lease_s=lease_s, max_unavailable=own)
            if mine
            else Claim(me, run, nodes, now, now, lease_s, own)
        )
        after = (*live, claim)
    return Verdict(
        fits, state.cls, strictest, want, tuple(sorted(unavailable)), live, dead, state, after, own
    )


def after_give(claims: Sequence[Claim], me: str, nodes: Iterable[str]) -> list[Claim]:
    gone = set(nodes)
    out = []
    for c in claims:
        if c.holder == me:
            left = tuple(n for n in c.nodes if n not in gone)
            if left:
                out.append(replace(c, nodes=left))
        else:
            out.append(c)
    return out


def after_renew(claims: Sequence[Claim], me: str, now: datetime) -> list[Claim] | None:
    """The holders with ``me`` renewed; None when ``me`` holds nothing there any more (its
    claim was dropped as dead by another taker)."""
    if not any(c.holder == me for c in claims):
        return None
    return [replace(c, renewed=now) if c.holder == me else c for c in claims]


def kured_nodes(text: str | None, now: datetime) -> frozenset[str]:
    """The nodes Kured's lock names and whose lock has not expired (its TTL, a Go duration in
    nanoseconds; 0: never). Unreadable: an operation failure (fail closed)."""
    if not text:
        return frozenset()
    try:
        raw = json.loads(text)
    except ValueError:
        raise OperationFailed(f"Kured's lock annotation {KURED_ANNOTATION} is not JSON") from None
    if not isinstance(raw, dict):
        raise OperationFailed(f"Kured's lock annotation {KURED_ANNOTATION} is not a JSON object")
    locks = raw.get("locks") if "locks" in raw else [raw]
    if not isinstance(locks, list):
        raise OperationFailed(f"Kured's lock annotation {KURED_ANNOTATION}: locks is no list")
    out = set()
    for lock in locks:
        if not isinstance(lock, dict) or not isinstance(lock.get("nodeID"), str):
            raise OperationFailed(f"Kured's lock annotation {KURED_ANNOTATION}: no nodeID")
        if not lock["nodeID"]:
            continue
        ttl_ns = lock.get("TTL") or 0
        created = parse_time(lock.get("created"))
        expires = isinstance(ttl_ns, int) and ttl_ns > 0 and created is not None
        if expires and now - created >= timedelta(microseconds=ttl_ns / 1000):  # type: ignore[operator]
            continue  # expired: Kured itself takes it over
        out.add(lock["nodeID"])
    return frozenset(out)


def lease_body(
    cls: str,
    claims: Sequence[Claim],
    now: datetime,
    *,
    namespace: str = NAMESPACE,
    resource_version: str | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": lease_name(cls),
        "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": "gpuops"},
        "annotations": {CLASS_ANNOTATION: cls, HOLDERS_ANNOTATION: dump_claims(claims)},
    }
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "leaseDurationSeconds": max([c.lease_s for c in claims] or [DEFAULT_LEASE_S]),
            "renewTime": micro_time(now),
        },
    }
