"""The GPU stack moves with the driver on the lab fleet: Fabric Manager (HGX H800) upgraded
with the driver and verified as real hosts run it (the ``nvidia-fabricmanager`` unit through
``systemctl``, ``nv-fabricmanager --version``), a Fabric Manager that does not run failing
verification, and a group whose Fabric Manager pin disagrees with its driver refused before
any cordon.

Lab stand-ins (gpuops_lab): lab hosts have no systemd, so ``systemctl`` is the lab's stand-in
for the one unit it models; ``nv-fabricmanager`` and ``nvidia-ctk`` are stand-ins printing the
real tools' text; the Fabric Manager archive in the lab repository is the lab's (NVIDIA's
layout). The GPU validation is off in the playbook runs here (``gpu_nodes_validation: none``):
these tests are about Fabric Manager, test_nodes_roles.py covers the validation.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fleetlab import VENV_BIN
from integration.conftest_nodes import NodesLab

from gpuops_lab import fmstandin, hoststate

pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parents[3]
PLAYBOOK = REPO / "ansible" / "playbooks" / "update_gpu_nodes.yml"
RECAP = re.compile(
    r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE
)
HOST = "gpu-h800-02"


def play(
    nodes_lab: NodesLab, inventory: Path, host: str, **extra: Any
) -> tuple[dict[str, int], str]:
    """update_gpu_nodes.yml (nvidia_driver only, no validation) on one host."""
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": nodes_lab.fleet.facts["ansible_cfg"],
        "ANSIBLE_NOCOLOR": "1",
    }
    extra = {"update_gpu_nodes_roles": ["nvidia_driver"], "gpu_nodes_validation": "none", **extra}
    res = subprocess.run(
        [
            str(VENV_BIN / "ansible-playbook"),
            str(PLAYBOOK),
            "-i",
            str(inventory),
            "--limit",
            host,
            "-e",
            json.dumps(extra),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    found = {m[0]: m for m in RECAP.findall(res.stdout)}
    assert host in found, res.stdout + res.stderr
    keys = ("ok", "changed", "unreachable", "failed")
    return dict(zip(keys, map(int, found[host][1:]), strict=True)), res.stdout


def test_driver_upgrade_moves_fabric_manager_and_verification_reads_the_unit(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    before = hoststate.fabricmanager(nodes_lab.lab, HOST)
    assert before["version"] == "Fabric Manager version is : 550.90.07"
    assert before["ActiveState"] == "active" and int(before["ExecMainPID"]) > 0
    inv = nodes_lab.inventory(tmp_path, gpu_h800="570.133.20")
    nodes_lab.fleet.ssh(HOST, ": > /var/log/fabricmanager.log")
    try:
        recap, out = play(nodes_lab, inv, HOST)
        assert recap["failed"] == 0, out
        assert hoststate.gpu_state(nodes_lab.lab, HOST)["driver"] == "570.133.20"
        after = hoststate.fabricmanager(nodes_lab.lab, HOST)
        assert after["version"] == "Fabric Manager version is : 570.133.20"
        assert (after["ActiveState"], after["SubState"]) == ("active", "running")
        assert int(after["ExecMainPID"]) > 0 and after["ExecMainPID"] != before["ExecMainPID"]
        assert re.search(r"TASK \[nvidia_driver : Verify Fabric Manager\][^\n]*\nok: ", out), out
        assert re.search(
            r"TASK \[nvidia_driver : Verify the container toolkit\][^\n]*\nok: ", out
        ), out
        # after the reboot the old Fabric Manager refused the new driver, as the real one does;
        # the role's restart brought up the new one
        log = nodes_lab.fleet.ssh(HOST, "cat /var/log/fabricmanager.log").stdout
        assert fmstandin.MISMATCH in log
        # the installed files are where the archive's layout puts them, the unit enabled
        unit = nodes_lab.fleet.ssh(
            HOST,
            "systemctl is-enabled nvidia-fabricmanager; "
            "test -f /usr/share/nvidia/nvswitch/fabricmanager.cfg && echo cfg",
        )
        assert unit.stdout.split() == ["enabled", "cfg"], unit.stderr
    finally:
        nodes_lab.restore(HOST)
    assert hoststate.fabricmanager(nodes_lab.lab, HOST)["version"].endswith(": 550.90.07")


def test_fabric_manager_not_running_fails_verification(nodes_lab: NodesLab, tmp_path: Path) -> None:
    inv = Path(nodes_lab.fleet.facts["inventory"])
    try:
        # S-28: a host whose Fabric Manager runs at its driver's version changes nothing
        again, out = play(nodes_lab, inv, HOST)
        assert (again["changed"], again["failed"]) == (0, 0), out
        # Fabric Manager stopped, and it fails to start again (an NVSwitch init failure)
        hoststate.set_fabricmanager(nodes_lab.lab, HOST, start_error=True, running=False)
        assert hoststate.fabricmanager(nodes_lab.lab, HOST)["ActiveState"] == "inactive"
        recap, out = play(nodes_lab, inv, HOST)
        assert recap["failed"] == 1, out
        assert (
            f"verification failed on {HOST}: Fabric Manager (nvidia-fabricmanager) must run "
            "at 550.90.07" in out
        )
        assert "the unit is failed/failed (result exit-code, main PID 0)" in out
        verify = out.split("TASK [nvidia_driver : Verify Fabric Manager]", 1)[1].split("TASK [", 1)[
            0
        ]
        assert f"fatal: [{HOST}]: FAILED!" in verify, out
    finally:
        nodes_lab.restore(HOST)
    assert hoststate.fabricmanager(nodes_lab.lab, HOST)["ActiveState"] == "active"


def test_update_whose_fabric_manager_pin_disagrees_is_refused_before_any_cordon(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    inv = nodes_lab.inventory(tmp_path, gpu_h800="570.133.20")
    vars_file = inv.parent / "group_vars" / "gpu_h800.yml"
    vars_file.write_text(
        vars_file.read_text().replace(
            'gpu_nodes_fabricmanager_version: "{{ gpu_nodes_driver_version }}"',
            'gpu_nodes_fabricmanager_version: "550.90.07"',
        )
    )
    assert 'gpu_nodes_fabricmanager_version: "550.90.07"' in vars_file.read_text()
    run = nodes_lab.gpuops("nodes", "update", "-i", str(inv), "-l", "gpu_h800", tmp=tmp_path)
    assert run.rc == 2, run.stderr
    error = run.doc["error"]  # type: ignore[index]
    assert error["field"] == "inventory"
    assert "group gpu_h800" in error["message"]
    assert "Fabric Manager 550.90.07 disagrees with driver 570.133.20" in error["message"]
    for host in ("gpu-h800-01", HOST):
        assert not nodes_lab.node(host).spec.unschedulable  # never cordoned
        assert hoststate.gpu_state(nodes_lab.lab, host)["driver"] == "550.90.07"
