"""The disruption budget's pure model (core/disruption.py): limits, claims, verdicts, Kured's
lock as kured 1.23.0 writes it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from gpuops.core import disruption as d
from gpuops.errors import InvalidInput, OperationFailed

NOW = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
A100 = "NVIDIA-A100-SXM4-80GB"


def claim(
    holder: str, *nodes: str, silent_s: float = 0, lease_s: int = 60, limit: int = 2
) -> d.Claim:
    at = NOW - timedelta(seconds=silent_s)
    return d.Claim(holder, f"run of {holder}", nodes, at, at, lease_s, limit)


def state(size: int = 4, down: tuple[str, ...] = (), kured: tuple[str, ...] = ()) -> d.ClassState:
    return d.ClassState(A100, size, frozenset(down), frozenset(kured))


def test_limits_parse_counts_percentages_and_classes() -> None:
    limits = d.parse_limits(["1", f"{A100}=25%"])
    assert limits == {"*": d.BudgetLimit(count=1), A100: d.BudgetLimit(percent=25)}
    assert d.limit_for(limits, A100) == d.BudgetLimit(percent=25)
    assert d.limit_for(limits, "NVIDIA-L40S") == d.BudgetLimit(count=1)
    assert d.BudgetLimit(percent=25).resolve(10) == 2  # rounded down
    assert d.BudgetLimit(percent=10).resolve(4) == 1  # at least one
    assert d.BudgetLimit(percent=10).resolve(0) == 0


@pytest.mark.parametrize("bad", ["0", "x", "150%", "0%", "a b=1", "1;rm", "=2", "-1"])
def test_bad_limits_are_input_errors(bad: str) -> None:
    with pytest.raises(InvalidInput, match="budget-max-unavailable"):
        d.parse_limits([bad])


def test_a_class_given_twice_is_an_input_error() -> None:
    with pytest.raises(InvalidInput, match="twice"):
        d.parse_limits(["1", "2"])


def test_lease_names_are_valid_and_distinct() -> None:
    a, b = d.lease_name(A100), d.lease_name(A100.lower())
    assert a.startswith("gpuops-disruption.nvidia-a100-sxm4-80gb-") and a != b
    assert b == "gpuops-disruption.nvidia-a100-sxm4-80gb"
    assert d.class_selector(d.UNLABELLED) == "!nvidia.com/gpu.product"
    assert d.class_selector(A100) == f"nvidia.com/gpu.product={A100}"


def test_a_take_within_the_limit_fits_and_adds_the_claim() -> None:
    v = d.judge([claim("b", "n2")], state(), "a", "run a", ["n1"], d.BudgetLimit(count=2), 30, NOW)
    assert v.fits and v.unavailable == ("n2",)
    assert sorted(c.holder for c in v.claims_after) == ["a", "b"]
    mine = next(c for c in v.claims_after if c.holder == "a")
    assert mine.nodes == ("n1",) and mine.lease_s == 30 and mine.max_unavailable == 2


def test_a_spent_budget_does_not_fit_and_names_the_holders() -> None:
    v = d.judge([claim("b", "n2")], state(), "a", "", ["n1"], d.BudgetLimit(count=1), 60, NOW)
    assert not v.fits
    assert "b (run of b) holds n2" in v.message() and "max_unavailable 1" in v.message()
    assert v.to_dict()["holders"][0]["holder"] == "b"


def test_the_strictest_live_limit_applies() -> None:
    # b asked for at most 1: a, asking for 3, may not make it 2
    v = d.judge(
        [claim("b", "n2", limit=1)], state(), "a", "", ["n1"], d.BudgetLimit(count=3), 60, NOW
    )
    assert not v.fits and v.limit == 1
    assert not v.never  # it fits once b has gone
    big = d.judge([], state(), "a", "", ["n1", "n2", "n3"], d.BudgetLimit(count=2), 60, NOW)
    assert not big.fits and big.never


def test_cordoned_not_ready_and_kured_nodes_count() -> None:
    limit = d.BudgetLimit(count=2)
    assert not d.judge([], state(down=("n3", "n4")), "a", "", ["n1"], limit, 60, NOW).fits
    assert not d.judge([], state(down=("n3",), kured=("n4",)), "a", "", ["n1"], limit, 60, NOW).fits
    # a node already down costs nothing more to take
    assert d.judge([], state(down=("n1", "n3")), "a", "", ["n1"], limit, 60, NOW).fits


def test_a_dead_holder_is_dropped_and_reported() -> None:
    dead = claim("b", "n2", silent_s=61, lease_s=60)
    v = d.judge([dead], state(), "a", "", ["n1"], d.BudgetLimit(count=1), 60, NOW)
    assert v.fits and v.dead == (dead,)
    assert [c.holder for c in v.claims_after] == ["a"]
    alive = claim("b", "n2", silent_s=59, lease_s=60)
    assert not d.judge([alive], state(), "a", "", ["n1"], d.BudgetLimit(count=1), 60, NOW).fits


def test_give_and_renew_touch_only_the_holder() -> None:
    claims = [claim("a", "n1", "n3"), claim("b", "n2")]
    after = d.after_give(claims, "a", ["n1"])
    assert [(c.holder, c.nodes) for c in after] == [("a", ("n3",)), ("b", ("n2",))]
    assert [c.holder for c in d.after_give(after, "a", ["n3"])] == ["b"]
    later = NOW + timedelta(seconds=5)
    renewed = d.after_renew(claims, "a", later)
    assert renewed is not None and renewed[0].renewed == later and renewed[1].renewed == NOW
    assert d.after_renew([claim("b", "n2")], "a", later) is None


def test_claims_round_trip_and_unreadable_ones_fail_closed() -> None:
    claims = [claim("a", "n1")]
    assert d.parse_claims(d.dump_claims(claims), "lease") == claims
    for bad in ("{", "{}", '[{"holder": "a"}]'):
        with pytest.raises(OperationFailed, match="lease"):
            d.parse_claims(bad, "lease")


def test_kured_single_and_multi_lock() -> None:
    # the JSON of kured 1.23.0 pkg/daemonsetlock: created RFC 3339, TTL a Go duration (ns)
    single = {
        "nodeID": "n1",
        "metadata": {"unschedulable": False},
        "created": "2026-12-02T04:59:00Z",
        "TTL": 0,
    }
    assert d.kured_nodes(json.dumps(single), NOW) == {"n1"}
    expired = {**single, "TTL": 30 * 10**9}
    assert d.kured_nodes(json.dumps(expired), NOW) == frozenset()
    fresh = {**single, "TTL": 120 * 10**9}
    assert d.kured_nodes(json.dumps(fresh), NOW) == {"n1"}
    multi = {"maxOwners": 2, "locks": [single, {**single, "nodeID": "n2"}]}
    assert d.kured_nodes(json.dumps(multi), NOW) == {"n1", "n2"}
    assert d.kured_nodes(json.dumps({"maxOwners": 2, "locks": []}), NOW) == frozenset()
    assert d.kured_nodes(None, NOW) == frozenset()
    for bad in ("nope", "[]", '{"locks": 3}', '{"created": "x"}'):
        with pytest.raises(OperationFailed, match="kured-node-lock"):
            d.kured_nodes(bad, NOW)


def test_the_lease_body_carries_class_and_holders() -> None:
    body = d.lease_body(A100, [claim("a", "n1", lease_s=20)], NOW, resource_version="7")
    meta = body["metadata"]
    assert meta["namespace"] == "gpuops-system" and meta["resourceVersion"] == "7"
    assert meta["annotations"][d.CLASS_ANNOTATION] == A100
    assert json.loads(meta["annotations"][d.HOLDERS_ANNOTATION])[0]["nodes"] == ["n1"]
    assert body["spec"]["leaseDurationSeconds"] == 20
