"""The maintenance window gate of ``gpuops nodes update --window`` (issue 21).

Before each batch: the run must be inside the window, and the batch's expected time must fit
before the window closes. The expected time is the mean of this run's batches so far (each
timed from its admission to its end, on the gate's clock), else ``--batch-estimate``; with
neither (the first batch, no estimate) only "inside the window" is asked. A batch that would
not fit, or a run outside the window, is held: the run ends cleanly (exit 3) and its node
history record names the hosts done and the hosts left for ``nodes update --resume``.

The clock (``now``) is injectable for tests; it is read once when a batch is admitted and once
when it is done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gpuops.core import window as corewindow
from gpuops.core.window import Window, duration_text
from gpuops.usecases.nodes.gates import BatchGate, GateContext, Hold

if TYPE_CHECKING:
    from gpuops.usecases.nodes.records import BatchRecord, HostRecord


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class WindowSpec:
    window: Window
    estimate_s: int | None = None  # --batch-estimate
    now: Callable[[], datetime] = field(default=_now, compare=False)

    @classmethod
    def of(cls, text: str, estimate: str | None = None) -> WindowSpec:
        """From the options' text (exit 2 naming what is wrong)."""
        seconds = corewindow.parse_duration(estimate) if estimate is not None else None
        return cls(corewindow.parse(text), seconds)

    def open(self, ctx: GateContext) -> BatchGate:
        return WindowGate(self, ctx)


class WindowGate:
    name = "window"

    def __init__(self, spec: WindowSpec, ctx: GateContext) -> None:
        self.spec, self.ctx = spec, ctx
        self.admitted: dict[int, datetime] = {}
        self.took: list[float] = []  # seconds each batch of this run took, on the gate's clock

    def _details(self, t: datetime, **more: Any) -> dict[str, Any]:
        return {"window": self.spec.window.text, "now": self.spec.window.local(t), **more}

    def admit(self, batch: BatchRecord, hosts: Sequence[HostRecord]) -> Hold | None:
        w, t = self.spec.window, self.spec.now()
        closes = w.closes(t)
        if closes is None:
            opens = w.opens(t)
            return Hold(
                "window",
                f"outside the maintenance window {w.text}: it opens at {w.local(opens)}",
                self._details(t, opens_at=w.local(opens)),
            )
        left = (closes - t).total_seconds()
        if self.took:
            need: float | None = sum(self.took) / len(self.took)
            source = f"the mean of this run's {len(self.took)} batch(es)"
        else:
            need, source = self.spec.estimate_s, "--batch-estimate"
        if need is not None and need > left:
            return Hold(
                "window",
                f"{batch.kind} {batch.index} needs about {duration_text(need)} ({source}); the "
                f"window {w.text} closes in {duration_text(left)}, at {w.local(closes)}",
                self._details(
                    t,
                    closes_at=w.local(closes),
                    left_s=round(left, 3),
                    needs_s=round(need, 3),
                    estimate_from=source,
                ),
            )
        self.admitted[batch.index] = t
        self.ctx.say(
            f"[gpuops] window {w.text}: {batch.kind} {batch.index} starts, the window closes at "
            f"{w.local(closes)}"
            + (f" (needs about {duration_text(need)}, {source})" if need is not None else "")
        )
        return None

    def done(self, batch: BatchRecord, hosts: Sequence[HostRecord]) -> None:
        started = self.admitted.pop(batch.index, None)
        if started is not None:
            self.took.append(max(0.0, (self.spec.now() - started).total_seconds()))

    def close(self) -> None:
        return None
