"""Offline install (S-5, S-10): a wheelhouse built by scripts/wheelhouse.sh (the session
fixture ``wheelhouse`` in conftest_agent.py) installs with ``pip install --no-index
--find-links`` into a fresh virtualenv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gpuops

ROOT = Path(__file__).resolve().parents[3]


def test_wheelhouse_holds_gpuops_and_every_locked_dependency(wheelhouse: Path) -> None:
    wheels = {p.name.split("-")[0].lower().replace("_", "-") for p in wheelhouse.glob("*.whl")}
    locked = {
        line.split("==")[0].strip().lower()
        for line in (ROOT / "python" / "requirements.lock").read_text().splitlines()
        if line and not line.startswith((" ", "#"))
    }
    assert "gpuops" in wheels
    assert locked <= wheels, f"missing wheels: {sorted(locked - wheels)}"
    assert (wheelhouse / "GPUOPS_VERSION").read_text().strip() == gpuops.__version__


def test_offline_install_into_fresh_venv(wheelhouse: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [
            str(venv / "bin" / "pip"),
            "install",
            "-q",
            "--no-index",
            "--find-links",
            str(wheelhouse),
            "gpuops",
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "http://127.0.0.1:9/"},
    )
    out = subprocess.run(
        [str(venv / "bin" / "gpuops"), "--output", "json", "--version"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert json.loads(out) == {"version": gpuops.__version__}
    # the real libraries came along, importable offline
    subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import ansible, kubernetes, docker, jenkins, click"],
        check=True,
    )
