"""The batch gates' seam (usecases/nodes/gates.py): opened in order, closed last first, every
gate closed even when one fails to open or to close."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from gpuops.usecases.nodes import gates


@dataclass
class Probe:
    name: str
    log: list[str]
    fail_close: bool = False

    def admit(self, batch: Any, hosts: Sequence[Any]) -> gates.Hold | None:
        return None

    def done(self, batch: Any, hosts: Sequence[Any]) -> None:
        return None

    def close(self) -> None:
        self.log.append(f"close {self.name}")
        if self.fail_close:
            raise RuntimeError(f"{self.name} would not close")


@dataclass
class Spec:
    name: str
    log: list[str]
    fail_open: bool = False
    fail_close: bool = False

    def open(self, ctx: gates.GateContext) -> gates.BatchGate:
        self.log.append(f"open {self.name}")
        if self.fail_open:
            raise RuntimeError(f"{self.name} would not open")
        return Probe(self.name, self.log, self.fail_close)


CTX = gates.GateContext(kube=None, inventory=None, rollout=None, say=print)  # type: ignore[arg-type]


def test_gates_open_in_order_and_close_last_first() -> None:
    log: list[str] = []
    opened = gates.open_all([Spec("window", log), Spec("budget", log)], CTX)
    gates.close_all(opened)
    assert log == ["open window", "open budget", "close budget", "close window"]


def test_a_gate_that_fails_to_open_closes_those_opened_before() -> None:
    log: list[str] = []
    with pytest.raises(RuntimeError, match="alerts would not open"):
        gates.open_all([Spec("window", log), Spec("budget", log), Spec("alerts", log, True)], CTX)
    assert log == ["open window", "open budget", "open alerts", "close budget", "close window"]


def test_every_gate_is_closed_and_the_first_error_raised() -> None:
    log: list[str] = []
    opened = gates.open_all(
        [Spec("window", log, fail_close=True), Spec("budget", log, fail_close=True)], CTX
    )
    with pytest.raises(RuntimeError, match="budget would not close"):
        gates.close_all(opened)
    assert log[-2:] == ["close budget", "close window"]


def test_a_hold_says_its_gate_reason_and_details() -> None:
    hold = gates.Hold("alerts", "2 alerts firing", {"alerts": ["GpuXid"]})
    assert hold.to_dict() == {
        "gate": "alerts",
        "message": "2 alerts firing",
        "details": {"alerts": ["GpuXid"]},
    }


def test_confirm_asks_only_the_gates_that_have_it_and_its_error_stops_the_run() -> None:
    log: list[str] = []

    class Confirming(Probe):
        def confirm(self, batch: Any, hosts: Sequence[Any]) -> None:
            log.append(f"confirm {self.name}")
            if self.name == "lost":
                raise RuntimeError("lost the disruption budget")

    gates.confirm_all([Probe("window", log), Confirming("budget", log)], None, [])  # type: ignore[arg-type]
    assert log == ["confirm budget"]
    with pytest.raises(RuntimeError, match="lost the disruption budget"):
        gates.confirm_all([Confirming("lost", log), Confirming("after", log)], None, [])  # type: ignore[arg-type]
    assert log == ["confirm budget", "confirm lost"]
