"""The gpuops.io/gpu-unhealthy taint held by setters with reasons (core.taintclaims and its use
in core.nodelabels.plan_node): each setter releases only its own claim."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuops.core import nodelabels, taintclaims
from gpuops.core.kubemodel import Taint
from gpuops.errors import InvalidInput

ANNOTATION = "gpuops.io/gpu-unhealthy-by"
TAINT = nodelabels.TAINT_UNHEALTHY
UNHEALTHY = Taint(TAINT, "nodes-update", "NoSchedule")


def test_inspection_keeps_a_taint_nodes_update_set() -> None:
    annotations = {ANNOTATION: json.dumps({"nodes-update": "validation failed: dcgmi diag -r 1"})}
    change = nodelabels.plan_node("n", {}, annotations, [UNHEALTHY], {}, set(), [])
    assert change.taints is None and change.taints_removed == []


def _tuples(taints: list[Taint]) -> list[tuple[str, str, str]]:
    return [(t.key, t.value, t.effect) for t in taints]


def test_two_setters_each_release_only_their_own_claim() -> None:
    first = taintclaims.plan_mark([], {}, "nodes-update", "validation failed")
    assert first.changed and first.tainted
    assert _tuples(first.taints) == [(TAINT, "nodes-update", "NoSchedule")]
    assert json.loads(first.annotation or "") == {
        "@taint": {"value": "nodes-update", "effect": "NoSchedule"},
        "nodes-update": "validation failed",
    }
    notes = {ANNOTATION: first.annotation or ""}
    second = taintclaims.plan_mark(first.taints, notes, "nodes-inspect", "critical temperature")
    assert _tuples(second.taints) == _tuples(first.taints)  # one taint, two claims
    assert second.claims == {
        "nodes-update": "validation failed",
        "nodes-inspect": "critical temperature",
    }
    notes = {ANNOTATION: second.annotation or ""}
    inspect_gone = taintclaims.plan_release(second.taints, notes, "nodes-inspect")
    assert inspect_gone.tainted and inspect_gone.claims == {"nodes-update": "validation failed"}
    notes = {ANNOTATION: inspect_gone.annotation or ""}
    last = taintclaims.plan_release(inspect_gone.taints, notes, "nodes-update")
    assert not last.tainted and last.taints == [] and last.annotation is None


def test_marking_twice_writes_nothing_and_keeps_other_taints() -> None:
    other = Taint("team/maintenance", "x", "NoExecute")
    first = taintclaims.plan_mark([other], {}, "nodes-update", "r", effect="NoExecute")
    assert _tuples(first.taints) == [
        ("team/maintenance", "x", "NoExecute"),
        (TAINT, "nodes-update", "NoExecute"),
    ]
    again = taintclaims.plan_mark(
        first.taints, {ANNOTATION: first.annotation or ""}, "nodes-update", "r"
    )
    assert not again.changed


def test_a_taint_set_without_a_claim_is_never_removed() -> None:
    hand = [Taint(TAINT, "by-hand", "NoSchedule")]
    # releasing without a claim: nothing changes
    assert not taintclaims.plan_release(hand, {}, "nodes-update").changed
    # claiming it records that it was there before, so the last release keeps it
    marked = taintclaims.plan_mark(hand, {}, "nodes-update", "validation failed")
    assert set(marked.claims) == {"nodes-update", taintclaims.UNTRACKED}
    released = taintclaims.plan_release(
        marked.taints, {ANNOTATION: marked.annotation or ""}, "nodes-update"
    )
    assert released.tainted and _tuples(released.taints) == [(TAINT, "by-hand", "NoSchedule")]
    assert set(released.claims) == {taintclaims.UNTRACKED}


@pytest.mark.parametrize(
    "text", ["not json", "[1, 2]", '"a string"', "{", '{"nodes-update": 3}', "null"]
)
def test_a_malformed_annotation_is_kept_and_holds_the_taint(text: str) -> None:
    tainted = [Taint(TAINT, "nodes-update", "NoSchedule")]
    notes = {ANNOTATION: text}
    released = taintclaims.plan_release(tainted, notes, "nodes-inspect")
    assert released.tainted
    marked = taintclaims.plan_mark(tainted, notes, "nodes-inspect", "critical ecc")
    assert marked.tainted and marked.claims["nodes-inspect"] == "critical ecc"
    kept = {k: v for k, v in marked.claims.items() if k != "nodes-inspect"}
    assert kept  # what was there is still there, readable, under its key or UNREADABLE
    assert text in kept.values() or json.loads(text) == {"nodes-update": 3}
    back = taintclaims.plan_release(
        marked.taints, {ANNOTATION: marked.annotation or ""}, "nodes-inspect"
    )
    assert back.tainted and back.claims == kept  # and the taint stays for a person to check


@given(st.one_of(st.text(max_size=2000), st.text(min_size=600, max_size=3000)))
def test_decode_never_raises_and_keeps_any_text(text: str) -> None:
    claims = taintclaims.decode(text)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in claims.items())
    if text.strip() and not claims:
        assert json.loads(text) == {}
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):  # not an object: the whole text, not a prefix
        assert claims == {taintclaims.UNREADABLE: text}
    # and what gpuops writes back reads as the same claims (nothing shortened on the way)
    assert taintclaims.decode(taintclaims.encode(claims)) == claims


def test_a_long_unreadable_annotation_is_kept_whole() -> None:
    text = "ticket " + "x" * 2000
    tainted = [Taint(TAINT, "nodes-update", "NoSchedule")]
    marked = taintclaims.plan_mark(tainted, {ANNOTATION: text}, "nodes-inspect", "critical ecc")
    assert marked.claims[taintclaims.UNREADABLE] == text
    assert json.loads(marked.annotation or "")[taintclaims.UNREADABLE] == text
    entry = json.dumps({"nodes-update": {"note": "y" * 1000}})
    assert taintclaims.decode(entry) == {"nodes-update": json.dumps({"note": "y" * 1000})}


def test_a_hand_taint_set_after_an_admin_removed_gpuops_taint_stays() -> None:
    """An admin removes gpuops' taint but not the annotation, later taints by hand: the next
    release removes only a taint with the value and effect gpuops added."""
    first = taintclaims.plan_mark([], {}, "nodes-update", "validation failed")
    notes = {ANNOTATION: first.annotation or ""}
    hand = [Taint(TAINT, "ops-ticket-123", "NoExecute")]
    released = taintclaims.plan_release(hand, notes, "nodes-update")
    assert released.tainted and _tuples(released.taints) == [(TAINT, "ops-ticket-123", "NoExecute")]
    assert set(released.claims) == {taintclaims.UNTRACKED}
    # a claim on the hand taint records it as untracked, so the claim's release keeps it
    marked = taintclaims.plan_mark(hand, notes, "nodes-inspect", "critical ecc")
    assert taintclaims.UNTRACKED in marked.claims
    back = taintclaims.plan_release(
        marked.taints, {ANNOTATION: marked.annotation or ""}, "nodes-inspect"
    )
    assert back.tainted and _tuples(back.taints) == [(TAINT, "ops-ticket-123", "NoExecute")]
    both = taintclaims.plan_release(
        back.taints, {ANNOTATION: back.annotation or ""}, "nodes-update"
    )
    assert both.tainted and _tuples(both.taints) == _tuples(hand)
    # gpuops' own taint next to the hand one: only gpuops' goes
    mine = [*hand, Taint(TAINT, "nodes-update", "NoSchedule")]
    only = taintclaims.plan_release(mine, notes, "nodes-update")
    assert _tuples(only.taints) == _tuples(hand) and set(only.claims) == {taintclaims.UNTRACKED}


def test_unknown_setters_and_effects_are_refused() -> None:
    with pytest.raises(InvalidInput, match="taint setter"):
        taintclaims.plan_mark([], {}, "someone", "r")
    with pytest.raises(InvalidInput, match="taint effect"):
        taintclaims.plan_mark([], {}, "nodes-update", "r", effect="none")


def test_inspection_claims_and_releases_its_own_through_plan_node() -> None:
    want = [Taint(TAINT, "temperature", "NoSchedule")]
    change = nodelabels.plan_node(
        "n", {}, {}, [], {}, set(), want, unhealthy_reason="nodes inspect: critical temperature"
    )
    assert change.taints_added == ["gpuops.io/gpu-unhealthy=temperature:NoSchedule"]
    assert change.unhealthy_by == {"nodes-inspect": "nodes inspect: critical temperature"}
    notes = {ANNOTATION: change.unhealthy_annotation or ""}
    assert change.taints is not None
    assert not nodelabels.plan_node(
        "n",
        {},
        notes,
        change.taints,
        {},
        set(),
        want,
        unhealthy_reason="nodes inspect: critical temperature",
    ).changed
    # both setters hold it: inspection's finding clears, nodes-update's claim keeps the taint
    recorded = {"@taint": {"value": "temperature", "effect": "NoSchedule"}}
    both = {
        ANNOTATION: json.dumps(
            {**recorded, "nodes-inspect": "x", "nodes-update": "validation failed"}
        )
    }
    cleared = nodelabels.plan_node("n", {}, both, change.taints, {}, set(), [])
    assert cleared.taints is None and cleared.unhealthy_by == {"nodes-update": "validation failed"}
    # inspection alone: its release removes the taint and the annotation
    alone = nodelabels.plan_node("n", {}, notes, change.taints, {}, set(), [])
    assert alone.taints == [] and alone.unhealthy_by == {}
    assert alone.taints_removed == ["gpuops.io/gpu-unhealthy=temperature:NoSchedule"]


def test_taint_effect_none_leaves_the_taint_and_the_claims() -> None:
    notes = {ANNOTATION: json.dumps({"nodes-inspect": "nodes inspect: critical ecc"})}
    tainted = [Taint(TAINT, "ecc", "NoSchedule")]
    for want in ([], [Taint(TAINT, "temperature", "NoSchedule")]):
        change = nodelabels.plan_node("n", {}, notes, tainted, {}, set(), want, manage_taints=False)
        assert change.taints is None and change.unhealthy_by is None and not change.changed
