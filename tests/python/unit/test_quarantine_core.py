"""core/quarantine.py: the quarantine rules (breaker per class, release after N healthy
inspections), pure."""

from __future__ import annotations

import pytest

from gpuops.core import quarantine as q
from gpuops.errors import InvalidInput

SIZES = {"gpu_a100": 3, "gpu_h800": 20}


def _plan(state: q.State, *seen: q.Seen, release_after: int = 3) -> q.Plan:
    return q.plan(state, seen, SIZES, share_pct=10, release_after=release_after, now="T")


def test_limit_is_a_share_of_the_class_and_at_least_one() -> None:
    assert q.limit(10, 3) == 1
    assert q.limit(10, 20) == 2
    assert q.limit(10, 29) == 2
    assert q.limit(10, 30) == 3
    assert q.limit(100, 7) == 7
    assert q.limit(33.3, 3) == 1


def test_a_critical_node_is_quarantined_and_the_state_round_trips() -> None:
    p = _plan(
        q.State(),
        q.Seen("n1", "gpu_h800", "critical", "xid 48"),
        q.Seen("n2", "gpu_h800", "ok"),
    )
    assert p.quarantine == ["n1"] and p.release == [] and p.held == {} and p.tripped == []
    assert p.state.quarantined() == ["n1"]
    again = q.decode(q.encode(p.state), "cm")
    assert again.to_dict() == p.state.to_dict()
    assert again.nodes["n1"].reason == "xid 48" and again.nodes["n1"].since == "T"
    # the next inspection: still critical, nothing new, no second taint planned
    p2 = _plan(again, q.Seen("n1", "gpu_h800", "critical", "xid 48"))
    assert p2.quarantine == [] and p2.state.quarantined() == ["n1"]


def test_too_many_at_once_opens_the_breaker_and_quarantines_none_of_them() -> None:
    p = _plan(
        q.State(),
        q.Seen("a1", "gpu_a100", "critical"),
        q.Seen("a2", "gpu_a100", "critical"),
        q.Seen("h1", "gpu_h800", "critical"),
    )
    assert p.tripped == ["gpu_a100"] and p.quarantine == ["h1"]
    assert set(p.held) == {"a1", "a2"} and "opened" in p.held["a1"]
    assert p.state.breakers["gpu_a100"].nodes == ["a1", "a2"]
    assert "2 node(s) of class gpu_a100" in p.state.breakers["gpu_a100"].reason
    # open until reset: one critical node alone is held back too, and the breaker stays
    p2 = _plan(p.state, q.Seen("a1", "gpu_a100", "critical"), q.Seen("a2", "gpu_a100", "ok"))
    assert p2.quarantine == [] and p2.tripped == [] and "is open" in p2.held["a1"]
    state, closed = q.reset(p2.state, ["gpu_a100"])
    assert closed == ["gpu_a100"] and state.breakers == {}
    p3 = _plan(state, q.Seen("a1", "gpu_a100", "critical"))
    assert p3.quarantine == ["a1"]


def test_one_already_quarantined_counts_against_the_limit() -> None:
    p = _plan(q.State(), q.Seen("a1", "gpu_a100", "critical"))
    assert p.quarantine == ["a1"]
    p2 = _plan(
        p.state,
        q.Seen("a1", "gpu_a100", "critical"),
        q.Seen("a2", "gpu_a100", "critical"),
    )
    assert p2.tripped == ["gpu_a100"] and p2.quarantine == [] and list(p2.held) == ["a2"]
    assert p2.state.quarantined() == ["a1"]  # a quarantined node stays so


def test_release_after_n_healthy_inspections_in_a_row() -> None:
    state = _plan(q.State(), q.Seen("n1", "gpu_h800", "critical")).state
    streaks = []
    for status in ("ok", "warning", "unreachable", "ok", "ok"):
        p = _plan(state, q.Seen("n1", "gpu_h800", status))
        assert p.release == [], status
        state = p.state
        streaks.append(state.nodes["n1"].healthy_streak)
    assert streaks == [1, 2, 0, 1, 2]  # unreachable is not healthy: counted again
    p = _plan(state, q.Seen("n1", "gpu_h800", "ok"))
    assert p.release == ["n1"] and p.state.quarantined() == [] and "n1" not in p.state.nodes
    # critical in between starts the count again
    state = _plan(q.State(), q.Seen("n1", "gpu_h800", "critical")).state
    state = _plan(state, q.Seen("n1", "gpu_h800", "ok")).state
    state = _plan(state, q.Seen("n1", "gpu_h800", "critical")).state
    assert state.nodes["n1"].healthy_streak == 0


def test_release_happens_while_the_breaker_is_open() -> None:
    state = _plan(q.State(), q.Seen("a1", "gpu_a100", "critical")).state
    state = _plan(
        state,
        q.Seen("a2", "gpu_a100", "critical"),
        q.Seen("a3", "gpu_a100", "critical"),
    ).state
    assert "gpu_a100" in state.breakers
    p = _plan(state, q.Seen("a1", "gpu_a100", "ok"), release_after=1)
    assert p.release == ["a1"] and "gpu_a100" in p.state.breakers


@pytest.mark.parametrize(
    "text",
    ["{", "[]", '{"version": 2, "nodes": {}, "breakers": {}}', '{"version": 1, "nodes": []}',
     '{"version": 1, "nodes": {"n": {}}, "breakers": {}}'],
)  # fmt: skip
def test_an_unreadable_state_is_refused_not_guessed(text: str) -> None:
    with pytest.raises(InvalidInput, match="quarantine state is not readable"):
        q.decode(text, "ConfigMap gpuops-system/gpuops-quarantine")


def test_share_is_checked() -> None:
    for bad in (0, -1, 101, float("nan")):
        with pytest.raises(InvalidInput):
            q.check_share(bad)
    assert q.check_share(10) == 10
