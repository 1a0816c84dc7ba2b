"""A progressive release's steps as people read them: the history page's rows (pure context;
the page itself in a browser: tests/python/integration/test_reports_releases.py) and the
terminal's lines."""

from __future__ import annotations

from typing import Any

from gpuops.core.releasehistory import Release
from gpuops.render import release as text
from gpuops.render.html import releases

STEPS: list[dict[str, Any]] = [
    {"index": 0, "kind": "replicas", "state": "passed", "replicas": 1, "mode": "in-place",
     "detail": "the canary runs 1 pod(s) in the stable's place (the stable 3)",
     "started": "t0", "finished": "t1"},
    {"index": 1, "kind": "analysis", "state": "failed", "name": "error-rate",
     "provider": "prometheus", "detail": "error-rate: failed: 2 failed measurement(s)",
     "measurements": [
         {"at": "t2", "verdict": "failed", "value": 0.3012345, "detail": "series {}"},
         {"at": "t3", "verdict": "inconclusive", "value": None, "detail": "empty"},
     ], "started": "t1", "finished": "t4"},
]  # fmt: skip


def test_the_history_page_lists_each_step_with_its_measurements() -> None:
    record = {
        "number": 2,
        "action": "promote",
        "status": "failed",
        "tag": "43",
        "started": "t0",
        "steps": STEPS,
        "note": "put the stable back",
        "failure": {"kind": "analysis", "message": "x", "step": 1},
    }
    ctx = releases.context(
        {
            "environment": "production",
            "namespace": "ai",
            "current": 1,
            "rollback_choices": [],
            "releases": [record],
        }
    )
    [row] = ctx["rows"]
    assert row["note"] == "put the stable back"
    first, second = row["steps"]
    assert (first["n"], first["what"], first["mode"], first["state_class"]) == (
        "1",
        "replicas 1",
        "in-place",
        "ok",
    )
    assert (second["n"], second["what"], second["state"], second["state_class"]) == (
        "2",
        "analysis error-rate (prometheus)",
        "failed",
        "bad",
    )
    assert [(m["value"], m["verdict"]) for m in second["measurements"]] == [
        ("0.3012", "failed"),
        ("", "inconclusive"),
    ]


def test_the_history_table_prints_a_records_steps_under_it() -> None:
    lines = text.step_lines(STEPS, "       ")
    assert lines[0].startswith("       step 1   replicas")
    assert "passed" in lines[0] and "in the stable's place" in lines[0]
    assert "analysis error-rate (prometheus)" in lines[1] and "failed" in lines[1]
    record = Release(2, "production", "promote", "failed", "t0", tag="43", steps=STEPS)
    assert record.steps is not None and len(text.step_lines(record.steps)) == 2
