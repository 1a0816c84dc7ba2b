"""The maintenance window gate (usecases/nodes/window.py) on a test clock, and the resumable
record it leaves (core/nodehistory.py Resume, usecases/nodes/historystore.py): pure units.
The lab test (integration/test_nodes_window_lab.py) runs it on real hosts."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from gpuops.core import nodehistory as nh
from gpuops.core import rollout
from gpuops.errors import InvalidInput
from gpuops.usecases.nodes import gates, historystore
from gpuops.usecases.nodes.records import BatchRecord, HostRecord, Rollout
from gpuops.usecases.nodes.window import WindowSpec

#: Sunday 29 March 2026, the spring-forward night: the window closes 06:00 CEST = 04:00 UTC
NIGHT = "Sat 22:00-Sun 06:00 Europe/Berlin"


def utc(h: int, m: int = 0) -> datetime:
    return datetime(2026, 3, 29, h, m, tzinfo=UTC)


class Clock:
    """Read once at each admit and once at each done: the times given, in order."""

    def __init__(self, *times: datetime) -> None:
        self.times: Iterator[datetime] = iter(times)

    def __call__(self) -> datetime:
        return next(self.times)


def gate(clock: Clock, estimate: str | None = "40m") -> gates.BatchGate:
    spec = WindowSpec.of(NIGHT, estimate)
    spec = WindowSpec(spec.window, spec.estimate_s, clock)
    said: list[str] = []
    ctx = gates.GateContext(None, None, None, said.append)  # type: ignore[arg-type]
    return spec.open(ctx)


def batch(i: int) -> BatchRecord:
    return BatchRecord(i, rollout.CANARY if i == 0 else rollout.BATCH, [f"h{i}"])


def test_a_batch_that_would_not_fit_before_the_window_closes_is_held() -> None:
    # canary admitted at 02:30 UTC (04:30 CEST, 90 min left; estimate 40 min), took 50 min;
    # batch 1 at 03:20 UTC: 40 min left, needs 50 (the run's mean): held
    g = gate(Clock(utc(2, 30), utc(3, 20), utc(3, 20)))
    assert g.admit(batch(0), []) is None
    g.done(batch(0), [])
    hold = g.admit(batch(1), [])
    assert hold is not None and hold.gate == "window"
    assert hold.message == (
        "batch 1 needs about 50m (the mean of this run's 1 batch(es)); the window "
        f"{NIGHT} closes in 40m, at 2026-03-29T06:00+02:00"
    )
    assert hold.details == {
        "window": NIGHT,
        "now": "2026-03-29T05:20+02:00",
        "closes_at": "2026-03-29T06:00+02:00",
        "left_s": 2400.0,
        "needs_s": 3000.0,
        "estimate_from": "the mean of this run's 1 batch(es)",
    }


def test_the_first_batch_is_judged_by_the_estimate_and_outside_is_held() -> None:
    assert gate(Clock(utc(3, 30))).admit(batch(0), []) is not None  # 30 min left < 40
    assert gate(Clock(utc(3, 30)), estimate=None).admit(batch(0), []) is None  # no estimate
    outside = gate(Clock(utc(4, 0))).admit(batch(0), [])  # 06:00 CEST: closed
    assert outside is not None
    assert outside.message == (
        f"outside the maintenance window {NIGHT}: it opens at 2026-04-04T22:00+02:00"
    )


def test_an_estimate_needs_a_window_and_bad_values_are_input_errors() -> None:
    with pytest.raises(InvalidInput, match="not a duration"):
        WindowSpec.of(NIGHT, "forty minutes")
    with pytest.raises(InvalidInput, match="unknown time zone"):
        WindowSpec.of("Sat 22:00-Sun 06:00 Europe/Atlantis")


def rollout_of(statuses: dict[str, str], held: bool = True) -> Rollout:
    ro = Rollout(
        "/inv/hosts.yml", "gpu_h800", "test", ["nvidia_driver"], rollout.Policy(), False, "k"
    )
    for i, (name, status) in enumerate(statuses.items()):
        ro.hosts[name] = HostRecord(name, "gpu_h800", name, "570.133.20", i)
        ro.hosts[name].status = status  # type: ignore[assignment]
        ro.batches.append(BatchRecord(i, rollout.BATCH, [name]))
    if held:
        ro.held = {"gate": "window", "message": "closes", "details": {}}
        ro.stopped = "held by the window: closes"
    return ro


def test_a_held_run_is_resumable_and_its_record_round_trips() -> None:
    from gpuops.usecases.nodes.update import _resumable

    ro = rollout_of({"h0": rollout.CHANGED, "h1": rollout.FAILED, "h2": rollout.NOT_STARTED})
    ro.resume = {"reason": "", "done": ["h9"], "left": [], "failed": []}  # resumed from a run
    ro.resumed_from = "test-4"
    _resumable(ro, [])
    assert ro.resume == {
        "reason": "held by the window: closes",
        "done": ["h9", "h0"],
        "left": ["h2"],
        "failed": ["h1"],
    }
    from test_nodehistory import inventory

    made = historystore.new_record(5, inventory("h0", "h1", "h2"), ro)
    assert made.status == nh.FAILED  # a host failed: not a plain "refused"
    assert made.resume == nh.Resume("held by the window: closes", ["h9", "h0"], ["h2"], ["h1"])
    assert made.resumed_from == 4
    assert nh.decode(nh.encode([made]), "w") == [made]
    clean = rollout_of({"h0": rollout.CHANGED, "h1": rollout.NOT_STARTED})
    _resumable(clean, [])
    assert historystore.new_record(6, inventory("h0", "h1"), clean).status == nh.REFUSED
    finished = rollout_of({"h0": rollout.CHANGED}, held=False)
    _resumable(finished, [])
    assert finished.resume is None  # nothing left: nothing to resume


def test_a_damaged_resume_block_is_named() -> None:
    doc = (
        '{"version":1,"records":[{"number":1,"fleet":"t","action":"update","status":"refused",'
        '"started":"x","resume":{"left":"h1"}}]}'
    )
    with pytest.raises(Exception, match="resume: field 'left' must be a list of host names"):
        nh.decode(doc, "w")


def test_an_older_record_without_the_resume_block_reads_as_not_resumable() -> None:
    doc = (
        '{"version":1,"records":[{"number":1,"fleet":"t","action":"update","status":"refused",'
        '"started":"x"}]}'
    )
    (r,) = nh.decode(doc, "w")
    assert r.resume is None and r.resumed_from is None


def test_durations_of_the_clock_are_never_negative() -> None:
    g = gate(Clock(utc(1), utc(1) - timedelta(seconds=5), utc(1)))
    assert g.admit(batch(0), []) is None
    g.done(batch(0), [])
    assert g.admit(batch(1), []) is None  # a clock that went back counts 0 s


def stored(monkeypatch: pytest.MonkeyPatch, *records: nh.NodeRecord) -> None:
    monkeypatch.setattr(historystore.Store, "read", lambda self: list(records))


def update_record(
    number: int, resume: nh.Resume | None, limit: str | None = "gpu_h800"
) -> nh.NodeRecord:
    return nh.NodeRecord(
        number, "test", "update", nh.REFUSED, "2026-12-02T05:00:00Z", inventory="/inv/hosts.yml",
        limit=limit, change=["nvidia_driver"], resume=resume,
    )  # fmt: skip


def test_resume_continues_the_newest_record_of_the_same_inventory_limit_and_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from test_nodehistory import inventory

    from gpuops.usecases.nodes.update import _resumed

    inv = inventory("h0", "h1", "h2")
    held = nh.Resume("held by the window", ["h0"], ["h1", "h2"], [])
    other = nh.Resume("held", [], ["h0"], [])
    stored(monkeypatch, update_record(1, held), update_record(2, other, limit="gpu_a100"))
    point = historystore.resume_point(None, inv, "gpu_h800", ["nvidia_driver"])  # type: ignore[arg-type]
    assert (point.record, point.done, point.left) == ("test-1", ["h0"], ["h1", "h2"])
    assert _resumed(inv, point).names() == ["h1", "h2"]
    with pytest.raises(
        InvalidInput, match=r"left host\(s\) the inventory and limit no longer name: h2"
    ):
        _resumed(inventory("h0", "h1"), point)
    # a later run of the same inventory, limit and change that finished: nothing to resume
    stored(monkeypatch, update_record(1, held), update_record(3, None))
    with pytest.raises(InvalidInput, match=r"test-3, refused.*left nothing") as err:
        historystore.resume_point(None, inv, "gpu_h800", ["nvidia_driver"])  # type: ignore[arg-type]
    assert err.value.exit_code == 2 and err.value.field == "resume"
    stored(monkeypatch)
    with pytest.raises(InvalidInput, match=r"no run of inventory /inv/hosts\.yml, limit gpu_h800"):
        historystore.resume_point(None, inv, "gpu_h800", ["nvidia_driver"])  # type: ignore[arg-type]
