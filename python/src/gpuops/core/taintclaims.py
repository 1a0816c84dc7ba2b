"""Who holds the ``gpuops.io/gpu-unhealthy`` taint, and why: one claim per setter.

Several parts of gpuops set the same taint (``nodes update`` after a failed validation or
rollback, ``nodes label`` for a critical finding, later quarantine). Each records its reason in
the node annotation :data:`ANNOTATION`, a JSON object setter -> reason, and releases only its
own claim: the taint goes when no claim is left. The annotation also records (key
:data:`ADDED`) the value and effect of the taint gpuops added: only a taint that matches it is
ever removed. Pure: node state in, the new state out.

Two pseudo-claims keep what gpuops cannot account for:

- :data:`UNTRACKED`: the taint was on the node without any claim, or not as gpuops added it
  (set by hand, by another tool, or by a gpuops older than the claims). gpuops never removes
  such a taint.
- :data:`UNREADABLE`: the annotation (or one entry of it) was not a JSON object of strings; its
  text is kept under this key, so no setter's claim is dropped silently, and the taint stays
  until a person removes the annotation entry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuops.core.kubemodel import Taint
from gpuops.errors import InvalidInput

ANNOTATION = "gpuops.io/gpu-unhealthy-by"
TAINT = "gpuops.io/gpu-unhealthy"  # the same key as core.nodelabels.TAINT_UNHEALTHY
SETTERS = ("nodes-update", "nodes-inspect", "quarantine")
UNTRACKED = "untracked"
UNREADABLE = "unreadable"
DEFAULT_EFFECT = "NoSchedule"
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MAX_REASON = 512  # characters kept per new reason (an annotation is bounded: 256 KiB in all)
#: the annotation's record of the taint gpuops added (its value and effect): only a taint
#: that matches it is ever removed
ADDED = "@taint"


def check_setter(setter: str) -> str:
    if setter not in SETTERS:
        raise InvalidInput(f"taint setter {setter!r} is not one of {', '.join(SETTERS)}")
    return setter


def decode(text: str | None) -> dict[str, str]:
    """The claims the annotation holds. Never raises and never drops or shortens anything: a
    text that is not a JSON object becomes the claim :data:`UNREADABLE` (its whole text), an
    entry whose value is not a string keeps its key with the value as JSON text. The record
    :data:`ADDED` is not a claim (:func:`decode_added`)."""
    if text is None:
        return {}
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return {UNREADABLE: text}
    if not isinstance(doc, dict):
        return {UNREADABLE: text}
    return {
        str(k): v if isinstance(v, str) else json.dumps(v)
        for k, v in doc.items()
        if not (k == ADDED and _added(v) is not None)
    }


def _added(value: object) -> Taint | None:
    if (
        isinstance(value, dict)
        and set(value) == {"value", "effect"}
        and isinstance(value["value"], str)
        and value["effect"] in EFFECTS
    ):
        return Taint(TAINT, value["value"], value["effect"])
    return None


def decode_added(text: str | None) -> Taint | None:
    """The taint gpuops added, as the annotation records it (None: not recorded)."""
    try:
        doc = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):
        return None
    return _added(doc.get(ADDED)) if isinstance(doc, dict) else None


def encode(claims: Mapping[str, str], added: Taint | None = None) -> str | None:
    """The annotation's text (keys sorted, so a plan is stable), with the taint gpuops added
    (``added``); None when no claim is left."""
    if not claims:
        return None
    doc: dict[str, object] = dict(sorted(claims.items()))
    if added is not None:
        doc = {ADDED: {"value": added.value, "effect": added.effect}, **doc}
    return json.dumps(doc, separators=(",", ":"))


@dataclass(frozen=True)
class TaintPlan:
    """What to write on one node: its full new taint list and the new annotation text (None:
    remove it), or nothing when ``changed`` is False."""

    taints: list[Taint]
    claims: dict[str, str]
    added: Taint | None  # the taint gpuops added and may remove (recorded in the annotation)
    annotation: str | None
    changed: bool
    tainted: bool  # the node carries the taint after the change
    taints_changed: bool


def _key(t: Taint) -> tuple[str, str, str]:
    return (t.key, t.value, t.effect)


def _plan(
    current: Sequence[Taint],
    recorded: str | None,
    claims: dict[str, str],
    taints: list[Taint],
    added: Taint | None,
) -> TaintPlan:
    added = added if added is not None and _key(added) in {_key(t) for t in taints} else None
    annotation = encode(claims, added)
    taints_changed = [_key(t) for t in taints] != [_key(t) for t in current]
    return TaintPlan(
        taints=taints,
        claims=claims,
        added=added,
        annotation=annotation,
        changed=taints_changed or annotation != recorded,
        tainted=any(t.key == TAINT for t in taints),
        taints_changed=taints_changed,
    )


def plan_mark(
    current: Sequence[Taint],
    annotations: Mapping[str, str],
    setter: str,
    reason: str,
    *,
    effect: str = DEFAULT_EFFECT,
    value: str = "",
) -> TaintPlan:
    """``setter`` claims the taint for ``reason``; the taint is added (``value``, default the
    setter's name, and ``effect``) unless the node has it already, with whatever effect."""
    check_setter(setter)
    if effect not in EFFECTS:
        raise InvalidInput(f"taint effect {effect!r} is not one of {', '.join(EFFECTS)}")
    recorded = annotations.get(ANNOTATION)
    claims, added = decode(recorded), decode_added(recorded)
    ours = [t for t in current if t.key == TAINT and added is not None and _key(t) == _key(added)]
    if any(t.key == TAINT and t not in ours for t in current) and UNTRACKED not in claims:
        # on the node, but not as gpuops added it (or gpuops never recorded adding it)
        claims[UNTRACKED] = "the taint was on the node before gpuops claimed it"
    claims[setter] = reason[:MAX_REASON]
    if any(t.key == TAINT for t in current):
        return _plan(current, recorded, claims, list(current), added)
    new = Taint(TAINT, value or setter, effect)
    return _plan(current, recorded, claims, [*current, new], new)


def plan_release(
    current: Sequence[Taint], annotations: Mapping[str, str], setter: str
) -> TaintPlan:
    """``setter`` drops its claim; the taint goes only when that was the last claim, and only a
    taint with the value and effect gpuops added it with (a taint set by hand since stays, as
    an untracked claim). A setter without a claim changes nothing."""
    check_setter(setter)
    recorded = annotations.get(ANNOTATION)
    claims, added = decode(recorded), decode_added(recorded)
    if setter not in claims:  # nothing of this setter's to release: nothing is written
        return TaintPlan(
            list(current),
            claims,
            added,
            recorded,
            False,
            any(t.key == TAINT for t in current),
            False,
        )
    del claims[setter]
    if claims:
        return _plan(current, recorded, claims, list(current), added)
    taints = [t for t in current if added is None or _key(t) != _key(added)]
    if any(t.key == TAINT for t in taints):
        claims[UNTRACKED] = "the taint on the node is not the one gpuops added"
    return _plan(current, recorded, claims, taints, None)
