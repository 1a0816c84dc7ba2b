"""Text renderings of releases, histories and statuses, for a terminal and a build log.

Render imports only the core: each renderer names what it reads of a use case's result as a
:class:`~typing.Protocol` below (the release use cases' results have these attributes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from gpuops.core.deploywatch import Problem
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasehistory import Release


class _Wanted(Protocol):
    @property
    def tag(self) -> str | None: ...
    @property
    def digest(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...


class _Gate(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    @property
    def message(self) -> str: ...


class _Watch(Protocol):
    @property
    def state(self) -> str: ...
    @property
    def seconds(self) -> float: ...
    @property
    def problem(self) -> Problem | None: ...


class ReleaseShown(Protocol):
    """What :func:`release_text` reads of a promote or rollback result."""

    @property
    def env(self) -> Environment: ...
    @property
    def action(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def server(self) -> str: ...
    @property
    def wanted(self) -> _Wanted | None: ...
    @property
    def current(self) -> Release | None: ...
    @property
    def record(self) -> Release | None: ...
    @property
    def gates(self) -> Sequence[_Gate]: ...
    @property
    def approval(self) -> Mapping[str, Any]: ...
    @property
    def lock(self) -> Mapping[str, Any]: ...
    @property
    def rollout(self) -> _Watch | None: ...
    @property
    def restore(self) -> _Watch | None: ...
    @property
    def explanation(self) -> Mapping[str, Any] | None: ...
    @property
    def reconciled(self) -> Sequence[Mapping[str, Any]]: ...
    @property
    def notes(self) -> Sequence[str]: ...
    @property
    def nodes(self) -> Mapping[str, Any] | None: ...  # rollback --with-nodes: the nodes' part
    @property
    def steps(self) -> Sequence[Mapping[str, Any]] | None: ...  # a progressive release's
    @property
    def paused(self) -> Mapping[str, Any] | None: ...
    @property
    def strategy(self) -> Mapping[str, Any] | None: ...


class HistoryShown(Protocol):
    """What :func:`history_table` reads of a history result."""

    @property
    def env(self) -> Environment: ...
    @property
    def server(self) -> str: ...
    @property
    def records(self) -> Sequence[Release]: ...  # newest first
    @property
    def current(self) -> Release | None: ...
    @property
    def previous(self) -> Release | None: ...
    @property
    def choices(self) -> Sequence[Release]: ...
    @property
    def open(self) -> Mapping[int, str]: ...


class StatusShown(Protocol):
    """What :func:`status_text` reads of a status result."""

    @property
    def env(self) -> Environment: ...
    @property
    def server(self) -> str: ...
    @property
    def current(self) -> Release | None: ...
    @property
    def deployments(self) -> Sequence[Mapping[str, Any]]: ...
    @property
    def locks(self) -> Sequence[Mapping[str, Any]]: ...
    @property
    def open(self) -> Mapping[int, str]: ...
    @property
    def registry_tag(self) -> Mapping[str, Any] | None: ...


_STATE_WORDS = {
    "planned": "dry run: every gate passed; nothing was changed",
    "unchanged": "nothing to do: the environment already runs this",
    "succeeded": "released",
    "failed": "FAILED and rolled back",
    "aborted": "ABORTED: someone else changed the Deployment; gpuops left their change as it is",
    "refused": "REFUSED before anything changed",
    "interrupted": "INTERRUPTED: the next release of this environment finishes its record",
    "paused": "PAUSED at an approval step: 'gpuops release resume' goes on (or --reject)",
}


def _short(digest: str | None) -> str:
    return (digest or "-").removeprefix("sha256:")[:12]


def release_text(out: ReleaseShown) -> str:
    e = out.env
    lines = [f"{out.action} to {e.name} ({e.namespace}/{','.join(e.deployments)} on {out.server})"]
    if out.wanted is not None:
        w = out.wanted
        model = f", model {w.model}" if w.model else ""
        lines.append(f"  wanted:   {w.tag} ({_short(w.digest)}){model}")
    if out.current is not None:
        lines.append(f"  was:      {out.current.label} ({_short(out.current.digest)})")
    for gate in out.gates:
        lines.append(f"  gate {gate.name:<9} {'ok' if gate.ok else 'NO'}: {gate.message}")
    if out.approval.get("required"):
        who = out.approval.get("approved_by") or "nobody yet"
        asked = out.approval.get("requested_by")
        lines.append(
            f"  approval: required ({', '.join(out.approval['approvers']) or 'any'}); {who}"
            + (f"; requested by {asked}" if asked else "")
        )
    for taken in out.lock.get("taken_over") or ():
        lines.append(
            f"  lock:     took over {taken['lease']} from {taken['holder']} "
            f"(silent for {taken['silent_for_s']}s)"
        )
    for fixed in out.reconciled:
        lines.append(
            f"  finished release #{fixed['release']}, left {fixed['was']} by an earlier run: "
            f"{fixed['now']}"
        )
    if out.strategy is not None:
        st = out.strategy
        limit = f", at most {st['max_unavailable']} down" if st.get("max_unavailable") else ""
        lines.append(f"  strategy: {st['mode']}{limit}: {st['message']}")
    lines.extend(step_lines(out.steps or ()))
    if out.paused is not None:
        wait = out.paused
        lines.append(
            f"  paused:   step {wait['step'] + 1} waits for {', '.join(wait['approvers'])} "
            f"(timeout {wait['timeout_minutes']} min)"
        )
    if out.rollout is not None:
        lines.append(f"  rollout:  {out.rollout.state} after {out.rollout.seconds:.1f}s")
    if out.rollout is not None and out.rollout.problem is not None:
        p = out.rollout.problem
        lines.append(f"  problem:  {p.kind}: {p.message}")
    if out.explanation:
        lines.extend(_explanation(out.explanation))
    if out.restore is not None:
        lines.append(f"  restore:  {out.restore.state} after {out.restore.seconds:.1f}s")
    if out.nodes is not None:
        n = out.nodes
        lines.append(f"  nodes:    {n['state']}: {n['message']}")
        if n.get("failed"):
            lines.append(f"    hosts that did not go back: {', '.join(n['failed'])}")
    if out.record is not None and out.record.node_change:
        lines.append(f"  node change: record {out.record.node_change}")
    lines.extend(f"  note:     {n}" for n in out.notes)
    label = f"release #{out.record.number} " if out.record else ""
    lines.append(f"{label}{_STATE_WORDS.get(out.state, out.state)}")
    return "\n".join(lines)


def step_lines(steps: Sequence[Mapping[str, Any]], indent: str = "  ") -> list[str]:
    """A progressive release's steps, one line each: its number, kind, state and detail."""
    out = []
    for s in steps:
        n = "all" if s.get("kind") == "all" else str(int(s.get("index", 0)) + 1)
        kind = str(s.get("kind", ""))
        if kind == "analysis":
            kind = f"analysis {s.get('name', '')} ({s.get('provider', '')})"
        out.append(f"{indent}step {n:<3} {kind:<32} {s.get('state', ''):<8} {s.get('detail', '')}")
    return out


def _explanation(doc: Mapping[str, Any]) -> list[str]:
    lines = [f"  why:      {doc.get('summary', '')}"]
    said = doc.get("event_message")
    if said:
        agree = {True: "agrees", False: "DIFFERS", None: "not comparable"}[
            doc.get("agrees_with_scheduler")
        ]
        lines.append(f"  scheduler ({agree}): {said}")
    for node in (doc.get("nodes") or [])[:8]:
        why = "; ".join(f"{k}: {v}" for k, v in node["why"].items())
        lines.append(f"    {node['name']:<28} {node['node_class']:<18} {why}")
    lines.extend(f"  held:     {held}" for held in doc.get("held_by") or ())
    lines.extend(f"  fix:      {fix}" for fix in doc.get("fixes") or ())
    return lines


def _row(r: Release, current: int | None) -> str:
    mark = "*" if r.number == current else " "
    asked, approved = r.requested_by or "-", r.approved_by or "-"
    what = r.status + (f" ({r.failure['kind']})" if r.failure else "")
    if r.rolled_back_by:
        what += f", rolled back by #{r.rolled_back_by}"
    return (
        f"{mark}{r.number:<4} {r.action:<9} {r.tag or '-':<24} {_short(r.digest):<12} "
        f"{r.model or '-':<12} {what:<36} {r.started:<20} {asked:<16} {approved:<16} "
        f"{r.node_change or '-':<16} {r.reason or ''}"
    )


def history_table(out: HistoryShown) -> str:
    e = out.env
    lines = [
        f"releases of {e.name} ({e.namespace}/{','.join(e.deployments)} on {out.server}), "
        "newest first",
        f" {'#':<4} {'ACTION':<9} {'TAG':<24} {'DIGEST':<12} {'MODEL':<12} {'STATUS':<36} "
        f"{'STARTED':<20} {'REQUESTED BY':<16} {'APPROVED BY':<16} {'NODE CHANGE':<16} REASON",
    ]
    current = out.current.number if out.current else None
    for r in out.records:
        lines.append(_row(r, current))
        lines.extend(step_lines(r.steps or (), "       "))
    if not out.records:
        lines.append(" (no release recorded yet)")
    lines.extend(f"open: #{n}: {what}" for n, what in sorted(out.open.items()))
    now = out.current.label if out.current else "no gpuops release"
    prev = out.previous.label if out.previous else "none"
    lines.append(f"current: {now}; rollback --previous: {prev}")
    lines.append("rollback choices: " + (", ".join(r.tag or "" for r in out.choices) or "none"))
    return "\n".join(lines)


def status_text(out: StatusShown) -> str:
    e = out.env
    now = out.current.label if out.current else "no gpuops release"
    lines = [f"{e.name} ({e.namespace} on {out.server}) runs {now}"]
    for d in out.deployments:
        lines.append(f"  {d['progress']}")
        lines.append(f"    image {d['image']}" + (f", model {d['model']}" if d["model"] else ""))
    for lock in out.locks:
        state = "silent, may be taken over" if lock["stale"] else "held"
        lines.append(f"  lock {lock['lease']}: {state} by {lock['holder']} ({lock['operation']})")
    lines.extend(f"  open: #{n}: {what}" for n, what in sorted(out.open.items()))
    tag = out.registry_tag
    if tag is not None:
        if tag.get("problem"):
            lines.append(f"  registry tag {tag['tag']}: cannot tell ({tag['problem']})")
        else:
            ok = "points at it" if tag.get("matches_current") else "DOES NOT point at it"
            lines.append(f"  registry tag {tag['tag']} ({_short(tag['digest'])}) {ok}")
    return "\n".join(lines)
