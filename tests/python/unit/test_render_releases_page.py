"""The release history page's context: the headline, rows and links (pure; the page itself is
checked in a browser by tests/python/integration/test_reports_releases.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuops.errors import InvalidInput
from gpuops.render.html import releases


def _result(*records: dict[str, Any], current: int | None = 1) -> dict[str, Any]:
    return {
        "environment": "production",
        "namespace": "ai",
        "current": current,
        "rollback_choices": ["41"],
        "releases": list(records),
    }


def _rec(number: int, status: str, tag: str, **extra: Any) -> dict[str, Any]:
    return {"number": number, "action": "promote", "status": status, "tag": tag,
            "started": "2026-11-30T10:00:00Z", **extra}  # fmt: skip


def test_a_running_release_is_the_headline() -> None:
    ctx = releases.context(
        _result(_rec(2, "succeeded", "42"), _rec(1, "succeeded", "41"), current=2)
    )
    assert (ctx["verdict"], ctx["verdict_class"]) == ("running", "ok")
    assert ctx["message"] == "production runs #2 42"
    assert [r["current"] for r in ctx["rows"]] == [True, False]
    assert ctx["counts"] == [("succeeded", 2)]


def test_a_failed_last_release_names_what_runs_instead() -> None:
    failed = _rec(
        2, "failed", "43", rolled_back_to=1, failure={"kind": "crash-loop", "message": "x"}
    )
    ctx = releases.context(_result(failed, _rec(1, "succeeded", "42")))
    assert (ctx["verdict"], ctx["verdict_class"]) == ("last release failed", "bad")
    assert ctx["message"] == "production runs #1 42; the last release #2 43 failed"
    assert ctx["rows"][0]["after"] == "restored #1"
    assert ctx["rows"][0]["failure_kind"] == "crash-loop"


def test_only_http_links_are_links() -> None:
    ctx = releases.context(
        _result(
            _rec(3, "succeeded", "a", link="javascript:alert(1)"),
            _rec(2, "succeeded", "b", link="https://ci.example/1"),
            _rec(1, "succeeded", "c", link="file:///etc/passwd"),
        )
    )
    assert [r["link"] for r in ctx["rows"]] == [None, "https://ci.example/1", None]


@pytest.mark.parametrize(
    "doc",
    [{}, {"environment": "x", "namespace": "y", "rollback_choices": [], "releases": 5},
     {"environment": "x", "namespace": "y", "rollback_choices": [], "releases": [1]}],
)  # fmt: skip
def test_another_document_is_refused(doc: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput, match="not a 'gpuops release history' result"):
        releases.context(doc)


def test_an_aborted_release_says_who_changed_the_deployment_and_what_runs(tmp_path: Path) -> None:
    """A release someone else's change ended (``kubectl set image`` during it): its status
    names the field manager, when, and what runs; the headline says no gpuops release runs
    because of it."""
    by = {"manager": "kubectl-set", "time": "2026-12-01T08:00:07Z", "image": "reg/infer:1.3.0"}
    aborted = _rec(
        2, "aborted", "43", failure={"kind": "foreign-change", "message": "m", "changed_by": by}
    )
    never = _rec(3, "aborted", "44", note="it never reached the cluster")
    ctx = releases.context(_result(aborted, _rec(1, "succeeded", "42"), current=None))
    said = "changed by kubectl-set at 2026-12-01T08:00:07Z: runs reg/infer:1.3.0"
    assert ctx["rows"][0]["status_by"] == said
    assert (ctx["verdict"], ctx["verdict_class"]) == ("last release aborted", "warn")
    assert (
        ctx["message"]
        == f"production runs no gpuops release: the last release #2 43 aborted, {said}"
    )
    assert releases.context(_result(never, current=1))["rows"][0]["status_by"] == ""
    html = releases.write(_result(aborted, current=None), tmp_path).page.read_text()
    assert f'<span class="note" data-key="status-by">{said}</span>' in html
