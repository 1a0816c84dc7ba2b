"""How an analysis step's measurements add up (core/analysis.py, issue 20): the failure limit,
the count, each inconclusive policy, and how a value is judged against its threshold."""

from __future__ import annotations

import json
import math

import pytest

from gpuops.core.analysis import (
    FAILED,
    INCONCLUSIVE,
    PASSED,
    Measurement,
    Tally,
    judge_value,
    number_text,
)
from gpuops.core.releasestrategy import AnalysisStep, GpuCheck, PrometheusCheck

P, F, N = PASSED, FAILED, INCONCLUSIVE  # N: no answer


def _step(count: int, limit: int = 0, inconclusive: str = "fail") -> AnalysisStep:
    check = PrometheusCheck("http://p:9090", "up", max=0.5)
    return AnalysisStep("error-rate", check, 10, count, limit, inconclusive)


def _feed(tally: Tally, verdicts: list[str]) -> list[str | None]:
    """Add each verdict; the tally's verdict after each."""
    out = []
    for n, v in enumerate(verdicts):
        tally.add(Measurement(f"2026-01-01T00:00:0{n % 10}Z", v, 0.1, f"m{n}"))
        out.append(tally.verdict)
    return out


@pytest.mark.parametrize("limit", [0, 1, 2, 3])
def test_the_step_fails_exactly_at_the_failure_limit_plus_one_th_failure(limit: int) -> None:
    tally = Tally(_step(count=10, limit=limit))
    seen = _feed(tally, [P] + [F] * (limit + 1))
    assert seen == [None] * (limit + 1) + [FAILED]
    assert tally.done and tally.failures == limit + 1 and len(tally.measurements) == limit + 2
    with pytest.raises(ValueError, match="is done"):
        tally.add(Measurement("t", P, 0.0, ""))


def test_count_measurements_with_failures_within_the_limit_pass() -> None:
    tally = Tally(_step(count=5, limit=1))
    assert _feed(tally, [P, F, P, P, P]) == [None, None, None, None, PASSED]
    assert tally.done and tally.failures == 1
    doc = tally.to_dict()
    assert (doc["name"], doc["provider"], doc["verdict"], doc["failures"]) == (
        "error-rate",
        "prometheus",
        "passed",
        1,
    )
    assert [m["verdict"] for m in doc["measurements"]] == [P, F, P, P, P]
    assert doc["reason"] == "5 of 5 measurements, 1 failed (limit 1)"
    json.dumps(doc, allow_nan=False)  # a record: plain JSON


def test_a_fresh_tally_is_running() -> None:
    tally = Tally(_step(count=1))
    assert tally.verdict is None and not tally.done and tally.to_dict()["verdict"] is None


def test_inconclusive_fail_counts_as_a_failure() -> None:
    tally = Tally(_step(count=5, limit=1, inconclusive="fail"))
    assert _feed(tally, [N, P, N]) == [None, None, FAILED]
    assert tally.failures == 2 and tally.inconclusive == 2
    assert tally.reason == "2 failed measurement(s), more than the limit of 1: m2"


def test_inconclusive_pass_counts_as_a_pass() -> None:
    tally = Tally(_step(count=3, limit=0, inconclusive="pass"))
    assert _feed(tally, [N, N, N]) == [None, None, PASSED]
    assert tally.failures == 0 and tally.counted == 3


def test_inconclusive_ignore_counts_toward_nothing() -> None:
    tally = Tally(_step(count=2, limit=0, inconclusive="ignore"))
    assert _feed(tally, [N, P, N, N, P]) == [None, None, None, None, PASSED]
    assert tally.counted == 2 and tally.inconclusive == 3 and len(tally.measurements) == 5


@pytest.mark.parametrize("count", [1, 2, 5])
def test_inconclusive_ignore_fails_after_three_times_count_without_count_conclusive(
    count: int,
) -> None:
    tally = Tally(_step(count=count, limit=0, inconclusive="ignore"))
    # count - 1 conclusive ones among 3 * count: not enough
    answers = [P] * (count - 1) + [N] * (2 * count + 1)
    seen = _feed(tally, answers)
    assert seen[:-1] == [None] * (3 * count - 1) and seen[-1] == FAILED
    assert tally.failures == 0 and tally.counted == count - 1
    assert tally.reason == (
        f"{3 * count} measurements with only {count - 1} conclusive of the {count} needed "
        "(inconclusive: ignore)"
    )


def test_inconclusive_ignore_still_fails_on_a_failure() -> None:
    tally = Tally(_step(count=3, limit=0, inconclusive="ignore"))
    assert _feed(tally, [N, F]) == [None, FAILED]


def test_job_and_gpu_steps_name_their_provider() -> None:
    tally = Tally(AnalysisStep("gpu-3", GpuCheck("inv")))
    assert tally.to_dict()["provider"] == "gpu"


@pytest.mark.parametrize(
    ("value", "lo", "hi", "want"),
    [
        (None, None, 0.05, INCONCLUSIVE),
        (math.nan, None, 0.05, INCONCLUSIVE),
        (math.nan, 0.0, None, INCONCLUSIVE),
        (math.inf, None, 0.05, FAILED),
        (math.inf, 0.0, None, PASSED),
        (-math.inf, 0.0, None, FAILED),
        (-math.inf, None, 0.05, PASSED),
        (0.05, None, 0.05, PASSED),  # the bound itself passes
        (0.0500001, None, 0.05, FAILED),
        (0.99, 0.99, None, PASSED),
        (0.98, 0.99, None, FAILED),
        (0.5, 0.1, 0.9, PASSED),
        (0.95, 0.1, 0.9, FAILED),
        (0.05, 0.1, 0.9, FAILED),
    ],
)
def test_judge_value(value: float | None, lo: float | None, hi: float | None, want: str) -> None:
    assert judge_value(value, lo, hi) == want


def test_a_measurement_keeps_no_value_json_cannot_carry() -> None:
    for v in (math.nan, math.inf, -math.inf):
        m = Measurement("t", FAILED, v, f"value {number_text(v)}")
        assert m.value is None
        json.dumps(m.to_dict(), allow_nan=False)
    assert [number_text(v) for v in (math.nan, math.inf, -math.inf, None, 0.05, 3.0)] == [
        "NaN",
        "+Inf",
        "-Inf",
        "none",
        "0.05",
        "3",
    ]
    with pytest.raises(ValueError, match="verdict 'ok'"):
        Measurement("t", "ok", None, "")
