"""Under ``make test`` a skipped test fails the run, with its reason (strict_outcomes.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]  # tests/python, where strict_outcomes lives

SAMPLE = """
import pytest

def test_passes():
    pass

def test_skips():
    pytest.skip("needs the frobnicator")

@pytest.fixture
def tool():
    pytest.skip("tool missing in fixture")

def test_skips_in_fixture(tool):
    pass

@pytest.mark.skipif(True, reason="marked away")
def test_marked():
    pass

@pytest.mark.xfail(reason="bug 42 still open")
def test_xpasses():
    pass

@pytest.mark.xfail(reason="bug 43 still open")
def test_xfails():
    assert False
"""

MODULE_SKIP = """
import pytest
pytest.skip("whole module needs root", allow_module_level=True)

def test_never():
    pass
"""


def _pytest(
    tmp_path: Path, strict: str | None, sample: str = SAMPLE
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_sample.py").write_text(sample)
    env = {k: v for k, v in os.environ.items() if k != "GPUOPS_STRICT_TESTS"}
    env["PYTHONPATH"] = str(HERE)
    if strict is not None:
        env["GPUOPS_STRICT_TESTS"] = strict
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "strict_outcomes", "-p", "no:cacheprovider",
         "-q", "-rA", "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False,
    )  # fmt: skip


def test_strict_run_fails_on_every_skip_and_xpass_naming_the_reason(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "1")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    for reason in (
        "needs the frobnicator",
        "tool missing in fixture",
        "marked away",
        "bug 42 still open",
    ):
        assert reason in out, (reason, out)
    assert "GPUOPS_STRICT_TESTS=1" in out
    # the passing test still passes; an expected failure stays an expected failure
    assert "PASSED test_sample.py::test_passes" in out
    assert "XFAIL test_sample.py::test_xfails" in out
    assert " skipped" not in out.splitlines()[-1], out.splitlines()[-1]


def test_strict_run_fails_on_a_module_level_skip(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "1", MODULE_SKIP)
    assert done.returncode != 0
    assert "SKIPPED at collection: Skipped: whole module needs root" in done.stdout


@pytest.mark.parametrize("value", [None, "0"])
def test_targeted_run_still_sees_skips_as_skips(tmp_path: Path, value: str | None) -> None:
    done = _pytest(tmp_path, value)
    last = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 skipped" in last and "1 xpassed" in last, last


def test_make_test_switches_strict_mode_on() -> None:
    root = HERE.parents[1]
    script = (root / "scripts" / "test.sh").read_text()
    assert "export GPUOPS_STRICT_TESTS=1" in script


def test_setup_installs_what_the_fleet_tests_need() -> None:
    """The fleet tests fail (never skip) without these tools: set-up must install them."""
    from integration.fleetlab import FLEET_TOOLS

    setup = (HERE.parents[1] / "scripts" / "setup.sh").read_text()
    packages = setup.split("APT_PACKAGES=(", 1)[1].split(")", 1)[0].split()
    assert set(FLEET_TOOLS.values()) <= set(packages)
    assert "mkdir -p /run/sshd" in setup
