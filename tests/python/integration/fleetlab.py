"""Helpers for tests against the lab's SSH fleet (the ``fleet_lab`` fixture is in conftest)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpuops_lab import Lab, proc
from gpuops_lab import fleet as labfleet

VENV_BIN = Path(sys.executable).parent


def fleet_down(lab: Lab) -> None:
    """What ``Lab.down`` does for a lab that runs only the fleet."""
    labfleet.down(lab)
    proc.stop_all(lab.dir)
    shutil.rmtree(lab.dir, ignore_errors=True)


def short_lab_dir() -> Path:
    # ssh ControlPath sockets live under the lab dir: keep it short (sun_path is 108 bytes);
    # so does Podman's run root, <dir>/builder/run, at most 50 characters (gpuops_lab.builder).
    # The caller removes the parent folder (mkdtemp's, ours alone) when done.
    return Path(tempfile.mkdtemp(prefix="gol-", dir="/tmp")) / "lab"


#: What the fleet needs on this machine, and the Debian package that has it (scripts/setup.sh).
FLEET_TOOLS = {
    "sshd": "openssh-server",
    "ssh": "openssh-client",
    "nc": "netcat-openbsd",
    "nsenter": "util-linux",
    "unshare": "util-linux",
    "ip": "iproute2",
}


def missing_fleet_tools() -> list[str]:
    return [
        f"{tool} (Debian package {package})"
        for tool, package in FLEET_TOOLS.items()
        if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists()
    ]


def need_root_tools() -> None:
    """Fail (never skip) when the fleet cannot start here: a skipped fleet test is not a pass."""
    if os.geteuid() != 0:
        pytest.fail(
            "the lab fleet needs root (network namespaces, mounts): run the tests as root, "
            "as make test does on the CI machine",
            pytrace=False,
        )
    missing = missing_fleet_tools()
    if missing:
        pytest.fail(
            f"the lab fleet needs {', '.join(missing)}: run scripts/setup.sh system",
            pytrace=False,
        )


@dataclass
class FleetLab:
    lab: Lab
    facts: dict[str, Any]
    startup_s: float

    @property
    def hosts(self) -> list[dict[str, Any]]:
        return list(self.facts["hosts"])

    def host(self, group: str, n: int = 0) -> str:
        return str([h for h in self.hosts if h["group"] == group][n]["name"])

    def ssh(self, host: str, command: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return labfleet.ssh(self.lab, host, command, timeout=timeout)

    def _env(self) -> dict[str, str]:
        return {**os.environ, "ANSIBLE_CONFIG": self.facts["ansible_cfg"], "ANSIBLE_NOCOLOR": "1"}

    def ansible(self, *args: str, timeout: float = 120) -> dict[str, dict[str, Any]]:
        """The real ``ansible`` CLI with the lab's inventory and ansible.cfg; the result of
        each host (ansible-core's ``tree`` callback writes one JSON document per host)."""
        with tempfile.TemporaryDirectory(prefix="gol-tree-") as tree:
            env = {
                **self._env(),
                "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
                "ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.tree",
                "ANSIBLE_CALLBACK_TREE_DIR": tree,
            }
            res = subprocess.run(
                [str(VENV_BIN / "ansible"), *args],
                capture_output=True,
                text=True,
                env=env,
                timeout=timeout,
                check=False,
            )
            results = {p.name: json.loads(p.read_text()) for p in Path(tree).iterdir()}
        if not results:
            raise AssertionError(f"ansible reported no host: {res.stdout}\n{res.stderr}")
        return results

    def playbook(self, path: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(VENV_BIN / "ansible-playbook"), str(path)],
            capture_output=True,
            text=True,
            env=self._env(),
            timeout=timeout,
            check=False,
        )
