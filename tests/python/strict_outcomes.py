"""Under the README's test command a skipped test is a failure, not a pass.

``make test`` (``scripts/test.sh``) sets ``GPUOPS_STRICT_TESTS=1``. Then every skip (at
collection, in a fixture or in the test) and every unexpectedly passing ``xfail`` is turned
into a failure whose text says why the test did not run, so a missing tool or a missing
privilege can never pass as green. A developer's targeted ``pytest`` run leaves the variable
unset and sees skips as skips.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

STRICT_ENV = "GPUOPS_STRICT_TESTS"


def strict() -> bool:
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


def _skip_reason(longrepr: Any) -> str:
    # a skip's longrepr is (file, line, "Skipped: reason")
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        path, line, reason = longrepr
        return f"{reason} ({path}:{line})"
    return str(longrepr)


def _failed(report: pytest.TestReport | pytest.CollectReport, text: str) -> None:
    report.outcome = "failed"
    report.longrepr = f"{text}\n[{STRICT_ENV}=1: a test that did not run or pass is a failure]"


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not strict():
        return
    if report.skipped and not hasattr(report, "wasxfail"):
        _failed(report, f"SKIPPED: {_skip_reason(report.longrepr)}")
    elif report.passed and hasattr(report, "wasxfail"):
        _failed(report, f"XPASS (expected to fail, but passed): {report.wasxfail}")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.CollectReport = outcome.get_result()
    if strict() and report.skipped:
        _failed(report, f"SKIPPED at collection: {_skip_reason(report.longrepr)}")
