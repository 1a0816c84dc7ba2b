"""Offline install (S-5, S-10): a wheelhouse built by scripts/wheelhouse.sh (the session
fixture ``wheelhouse`` in conftest_agent.py) installs with ``pip install --no-index
--find-links W --require-hashes -r W/requirements.txt`` into a fresh virtualenv; that file
pins the product (distribution gpu-ops-cli) and every locked dependency by the sha256 of its
wheel there."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
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
    assert "gpu-ops-cli" in wheels
    assert "gpuops" not in wheels  # the name on the public index is another project's
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
            "--require-hashes",
            "--only-binary",
            ":all:",
            "-r",
            str(wheelhouse / "requirements.txt"),
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
    # the product only: no lab module, no `lab` command, and its own Ansible content
    py = str(venv / "bin" / "python")
    probe = subprocess.run(
        [py, "-c", "import importlib.util as u; print(u.find_spec('gpuops_lab') is None)"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert probe.stdout.strip() == "True"
    help_text = subprocess.run(
        [str(venv / "bin" / "gpuops"), "--help"], check=True, capture_output=True, text=True
    ).stdout
    assert "headroom" in help_text
    assert "\n  lab " not in help_text
    lab = subprocess.run(
        [str(venv / "bin" / "gpuops"), "--output", "json", "lab", "status"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert lab.returncode == 2, lab.stderr
    assert "No such command 'lab'" in json.loads(lab.stderr)["error"]["message"]
    where = subprocess.run(
        [py, "-c", "from gpuops.content import ansible_dir; print(ansible_dir())"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(venv)
    assert _tree(Path(where)) == _tree(ROOT / "ansible")


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_product_wheel_has_no_lab_module_and_ships_the_ansible_content(wheelhouse: Path) -> None:
    (wheel,) = wheelhouse.glob("gpu_ops_cli-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        shipped = {
            n.removeprefix("gpuops/ansible/"): zf.read(n)
            for n in names
            if n.startswith("gpuops/ansible/") and not n.endswith("/")
        }
    assert not [n for n in names if "gpuops_lab" in n or n.startswith("gpuops/lab/")]
    assert shipped == _tree(ROOT / "ansible")
    assert not list(wheelhouse.glob("gpuops_lab-*.whl"))


def _pins(text: str) -> dict[str, tuple[str, set[str]]]:
    """name -> (version, sha256 hashes) of a hashed requirements file."""
    pins: dict[str, tuple[str, set[str]]] = {}
    for entry in re.split(r"\n(?=\S)", text):
        if entry.startswith("#") or "==" not in entry:
            continue
        name, version = entry.split(" ", 1)[0].split("==")
        pins[name.lower().replace("_", "-")] = (version, set(re.findall(r"sha256:(\w{64})", entry)))
    return pins


def test_the_install_file_pins_every_wheel_by_its_hash(wheelhouse: Path) -> None:
    pins = _pins((wheelhouse / "requirements.txt").read_text())
    locked = _pins((ROOT / "python" / "requirements.lock").read_text())
    on_disk: dict[tuple[str, str], str] = {}
    for wheel in wheelhouse.glob("*.whl"):
        name, version = wheel.name.split("-")[:2]
        on_disk[(name.lower().replace("_", "-"), version)] = hashlib.sha256(
            wheel.read_bytes()
        ).hexdigest()
    assert set(pins) == {"gpu-ops-cli", *locked}
    # the product: this version, by the hash of the wheel built from python/
    assert pins["gpu-ops-cli"] == (
        gpuops.__version__,
        {on_disk[("gpu-ops-cli", gpuops.__version__)]},
    )
    built_here = set()
    for name, (version, hashes) in locked.items():
        pinned_version, pinned = pins[name]
        assert pinned_version == version, name
        assert pinned == {on_disk[(name, version)]}, name
        if not pinned <= hashes:
            built_here.add(name)
    # a wheel whose hash is not in the lock was built here from the locked (hash-checked) sdist:
    # only the project published as source alone (README: offline install)
    assert built_here == {"multi-key-dict"}
