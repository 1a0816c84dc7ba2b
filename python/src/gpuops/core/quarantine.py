"""Quarantine of unhealthy GPU nodes by ``gpuops nodes inspect --quarantine``: its state and
its decisions, pure (state and one inspection's findings in, the new state and what to do out).

Rules:

* A node with a critical finding is quarantined (the use case taints it
  ``gpuops.io/gpu-unhealthy`` as setter ``quarantine``), unless its class's circuit breaker is
  open or would open.
* The breaker of a class: at most :func:`limit` nodes of a class are quarantined at once
  (``max(1, floor(share% x class size))``). An inspection that would quarantine more opens
  (trips) the breaker: *none* of that class's new critical nodes is quarantined (a share of a
  class failing at once is more likely a bad driver, a monitoring fault or a rack than that
  many broken GPUs: a person decides), the result says so and the run alerts. An open
  breaker stays open, whatever later inspections find, until it is reset explicitly
  (``gpuops nodes quarantine-reset``).
* A quarantined node is released after ``release_after`` healthy inspections in a row (ok or
  warning); a critical or unreachable inspection starts the count again. Release happens also
  while the breaker is open (releasing removes no capacity).

The state is one JSON document (stored by the use case in a ConfigMap, written conditionally):
``{"version": 1, "nodes": {node: {...}}, "breakers": {class: {...}}}``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuops.errors import InvalidInput

VERSION = 1
SETTER = "quarantine"
MAX_BYTES = 512 * 1024  # a ConfigMap holds at most 1 MiB
DEFAULT_SHARE_PCT = 10.0
DEFAULT_RELEASE_AFTER = 3

CRITICAL = "critical"
UNREACHABLE = "unreachable"
HEALTHY = ("ok", "warning")


@dataclass(frozen=True)
class Seen:
    """One node as this inspection found it."""

    node: str
    klass: str
    status: str  # ok, warning, critical, unreachable
    reason: str = ""


@dataclass
class NodeState:
    klass: str
    quarantined: bool = False
    since: str = ""
    reason: str = ""
    healthy_streak: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "class": self.klass,
            "quarantined": self.quarantined,
            "since": self.since,
            "reason": self.reason,
            "healthy_streak": self.healthy_streak,
        }


@dataclass
class Breaker:
    since: str
    reason: str
    nodes: list[str]  # the critical nodes of the class when it opened

    def to_dict(self) -> dict[str, Any]:
        return {"since": self.since, "reason": self.reason, "nodes": list(self.nodes)}


@dataclass
class State:
    nodes: dict[str, NodeState] = field(default_factory=dict)
    breakers: dict[str, Breaker] = field(default_factory=dict)  # open breakers only

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "nodes": {n: s.to_dict() for n, s in sorted(self.nodes.items())},
            "breakers": {c: b.to_dict() for c, b in sorted(self.breakers.items())},
        }

    def quarantined(self, klass: str | None = None) -> list[str]:
        return sorted(
            n
            for n, s in self.nodes.items()
            if s.quarantined and (klass is None or s.klass == klass)
        )


def encode(state: State) -> str:
    text = json.dumps(state.to_dict(), separators=(",", ":"), sort_keys=True)
    if len(text.encode()) > MAX_BYTES:
        raise InvalidInput(f"the quarantine state would exceed {MAX_BYTES} bytes")
    return text


def decode(text: str | None, where: str) -> State:
    """The state a ConfigMap holds (None or empty: no state yet); anything else malformed is
    refused (an operation that cannot read its state must not guess it)."""
    if not text:
        return State()

    def bad(problem: str) -> InvalidInput:
        return InvalidInput(
            f"{where}: the quarantine state is not readable ({problem})",
            hint="inspect it (kubectl get configmap -o yaml); fix or delete the key",
        )

    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        raise bad("not JSON") from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        raise bad(f"not a version {VERSION} document")
    nodes, breakers = doc.get("nodes"), doc.get("breakers")
    if not isinstance(nodes, dict) or not isinstance(breakers, dict):
        raise bad("nodes and breakers must be objects")
    state = State()
    try:
        for name, n in nodes.items():
            state.nodes[str(name)] = NodeState(
                klass=str(n["class"]),
                quarantined=bool(n["quarantined"]),
                since=str(n.get("since", "")),
                reason=str(n.get("reason", "")),
                healthy_streak=int(n.get("healthy_streak", 0)),
            )
        for klass, b in breakers.items():
            state.breakers[str(klass)] = Breaker(
                since=str(b["since"]),
                reason=str(b["reason"]),
                nodes=[str(x) for x in b.get("nodes", [])],
            )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise bad(f"an entry lacks {exc}") from None
    return state


def check_share(pct: float) -> float:
    if not (0 < pct <= 100) or math.isnan(pct):
        raise InvalidInput(
            f"quarantine share {pct} is not a percentage in (0, 100]", field="quarantine_share"
        )
    return pct


def limit(share_pct: float, class_size: int) -> int:
    """Nodes of a class that may be quarantined at once: ``share_pct`` of the class, at least
    one (a class of 3 nodes at 10 % may still lose its one broken node)."""
    return max(1, math.floor(share_pct * class_size / 100 + 1e-9))


@dataclass
class Plan:
    state: State
    quarantine: list[str] = field(default_factory=list)  # taint these now
    release: list[str] = field(default_factory=list)  # drop our claim on these now
    held: dict[str, str] = field(default_factory=dict)  # critical, not quarantined: why
    tripped: list[str] = field(default_factory=list)  # classes whose breaker opened now
    limits: dict[str, int] = field(default_factory=dict)  # class -> limit this run


def plan(
    state: State,
    seen: Sequence[Seen],
    class_sizes: Mapping[str, int],
    *,
    share_pct: float,
    release_after: int,
    now: str,
) -> Plan:
    """What this inspection changes. ``state`` is not modified; the plan carries the new one."""
    new = State(
        nodes={n: NodeState(**vars(s)) for n, s in state.nodes.items()},
        breakers={c: Breaker(b.since, b.reason, list(b.nodes)) for c, b in state.breakers.items()},
    )
    out = Plan(state=new)
    out.limits = {c: limit(share_pct, n) for c, n in sorted(class_sizes.items())}
    candidates: dict[str, list[Seen]] = {}
    for s in seen:
        ns = new.nodes.get(s.node)
        if s.status == CRITICAL:
            if ns is not None:
                ns.healthy_streak = 0
                ns.klass = s.klass
            if ns is None or not ns.quarantined:
                candidates.setdefault(s.klass, []).append(s)
        elif s.status in HEALTHY and ns is not None and ns.quarantined:
            ns.healthy_streak += 1
            if ns.healthy_streak >= release_after:
                out.release.append(s.node)
                del new.nodes[s.node]
        elif ns is not None:  # unreachable: not a healthy inspection
            ns.healthy_streak = 0
    for klass, nodes in sorted(candidates.items()):
        names = [s.node for s in nodes]
        if klass in new.breakers:
            for s in nodes:
                out.held[s.node] = f"the circuit breaker of class {klass} is open"
            continue
        already = len(new.quarantined(klass))
        cap = out.limits.get(klass, 1)
        if already + len(nodes) > cap:
            reason = (
                f"{already + len(nodes)} node(s) of class {klass} would be quarantined "
                f"(limit {cap} of {class_sizes.get(klass, 0)})"
            )
            new.breakers[klass] = Breaker(now, reason, sorted(names))
            out.tripped.append(klass)
            for s in nodes:
                out.held[s.node] = f"circuit breaker of class {klass} opened: {reason}"
            continue
        for s in nodes:
            new.nodes[s.node] = NodeState(s.klass, True, now, s.reason[:500], 0)
            out.quarantine.append(s.node)
    out.quarantine.sort()
    out.release.sort()
    return out


def reset(state: State, classes: Sequence[str]) -> tuple[State, list[str]]:
    """Close the named breakers (all with an empty ``classes``); the classes closed."""
    wanted = set(classes) or set(state.breakers)
    closed = sorted(c for c in state.breakers if c in wanted)
    return (
        State(
            nodes=dict(state.nodes),
            breakers={c: b for c, b in state.breakers.items() if c not in wanted},
        ),
        closed,
    )
