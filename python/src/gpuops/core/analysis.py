"""How an analysis step's measurements add up to its verdict, pure.

A measurement is ``passed``, ``failed`` or ``inconclusive`` (an empty answer, NaN, a source
that did not answer). The step's ``inconclusive`` policy says what an inconclusive one counts
as: a failure (``fail``), a pass (``pass``), or nothing at all (``ignore``: it does not count
toward ``count`` either; the step fails when ``3 * count`` measurements were taken without
``count`` conclusive ones, so a source that never answers cannot hold a release forever).
More than ``failure_limit`` failures fail the step at once; ``count`` counted measurements
with no more failures than that pass it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gpuops.core.releasestrategy import AnalysisStep

__all__ = [
    "FAILED",
    "IGNORE_FACTOR",
    "INCONCLUSIVE",
    "PASSED",
    "VERDICTS",
    "Measurement",
    "Tally",
    "judge_value",
    "number_text",
]

PASSED, FAILED, INCONCLUSIVE = "passed", "failed", "inconclusive"
VERDICTS = (PASSED, FAILED, INCONCLUSIVE)
#: ``ignore``: measurements taken, per ``count``, before the step fails for want of answers.
IGNORE_FACTOR = 3


@dataclass
class Measurement:
    """One measurement: when (ISO 8601, UTC), its verdict, the value judged (None when there
    was none or it was not a finite number), and a line naming the pod or series and why."""

    at: str
    verdict: str
    value: float | None
    detail: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")
        if self.value is not None and not math.isfinite(self.value):
            self.value = None  # JSON has no NaN or Infinity; the detail says what it was

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at, "verdict": self.verdict, "value": self.value, "detail": self.detail}


@dataclass
class Tally:
    """One analysis step's state: feed it measurements one by one with :meth:`add`."""

    step: AnalysisStep
    measurements: list[Measurement] = field(default_factory=list)

    def add(self, m: Measurement) -> None:
        if self.done:
            raise ValueError(
                f"analysis {self.step.name} is done ({self.verdict}); no more measurements"
            )
        self.measurements.append(m)

    def _counts(self, m: Measurement) -> str | None:
        """What ``m`` counts as under the step's policy: PASSED, FAILED, or None (ignored)."""
        if m.verdict != INCONCLUSIVE:
            return m.verdict
        return {"fail": FAILED, "pass": PASSED}.get(self.step.inconclusive)

    @property
    def failures(self) -> int:
        return sum(1 for m in self.measurements if self._counts(m) == FAILED)

    @property
    def counted(self) -> int:
        """Measurements that count toward ``count`` (all but ignored inconclusive ones)."""
        return sum(1 for m in self.measurements if self._counts(m) is not None)

    @property
    def inconclusive(self) -> int:
        return sum(1 for m in self.measurements if m.verdict == INCONCLUSIVE)

    @property
    def verdict(self) -> str | None:
        """None while running; PASSED or FAILED when done."""
        if self.failures > self.step.failure_limit:
            return FAILED
        if self.counted >= self.step.count:
            return PASSED
        if len(self.measurements) >= IGNORE_FACTOR * self.step.count:
            return FAILED  # "ignore": too few conclusive answers
        return None

    @property
    def done(self) -> bool:
        """Failed (more than ``failure_limit`` failures), or ``count`` measurements counted
        (or, ``ignore``, ``3 * count`` taken)."""
        return self.verdict is not None

    @property
    def reason(self) -> str:
        """Why the step ended (or where it stands), in one line."""
        step, verdict = self.step, self.verdict
        if verdict == FAILED and self.failures > step.failure_limit:
            last = next(
                (m for m in reversed(self.measurements) if self._counts(m) == FAILED),
                None,
            )
            why = f": {last.detail}" if last is not None and last.detail else ""
            limit = step.failure_limit
            return f"{self.failures} failed measurement(s), more than the limit of {limit}{why}"
        if verdict == FAILED:
            return (
                f"{len(self.measurements)} measurements with only {self.counted} conclusive of the "
                f"{step.count} needed (inconclusive: ignore)"
            )
        done = f"{self.counted} of {step.count} measurements"
        return f"{done}, {self.failures} failed (limit {step.failure_limit})"

    def to_dict(self) -> dict[str, Any]:
        """The step's analysis for the release record: ``name``, ``provider``,
        ``measurements``, ``failures``, ``verdict`` and the settings it was judged by."""
        step = self.step
        return {
            "name": step.name,
            "provider": step.kind,
            "count": step.count,
            "interval_seconds": step.interval_s,
            "failure_limit": step.failure_limit,
            "inconclusive_policy": step.inconclusive,
            "measurements": [m.to_dict() for m in self.measurements],
            "failures": self.failures,
            "inconclusive": self.inconclusive,
            "verdict": self.verdict,
            "reason": self.reason,
        }


def judge_value(value: float | None, lo: float | None, hi: float | None) -> str:
    """PASSED when ``lo <= value <= hi`` (either bound may be None), FAILED when outside,
    INCONCLUSIVE when there is no value or it is NaN. Infinities are numbers: +Inf fails a
    ``max``, -Inf a ``min``."""
    if value is None or math.isnan(value):
        return INCONCLUSIVE
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        return FAILED
    return PASSED


def number_text(value: float | None) -> str:
    """A measured value for a detail line: ``NaN``, ``+Inf``, ``-Inf`` as Prometheus writes
    them, else the shortest form (``0.05``, ``3``)."""
    if value is None:
        return "none"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.6g}"
