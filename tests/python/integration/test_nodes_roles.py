"""The node_init and nvidia_driver roles (playbooks/update_gpu_nodes.yml) on the lab fleet, for
real: each host's own /etc, kernel parameters and driver; the reboot-pending path with a
reboot inside the host's namespaces; prerequisites failing clearly; a second run changing
nothing (S-28); the GPU validation after the driver (the lab's dcgmi) and driver pins."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fleetlab import VENV_BIN, FleetLab

from gpuops_lab import fleet as labfleet
from gpuops_lab import hoststate

pytestmark = pytest.mark.timeout(900)

REPO = Path(__file__).resolve().parents[3]
PLAYBOOK = REPO / "ansible" / "playbooks" / "update_gpu_nodes.yml"
RECAP = re.compile(
    r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE
)


def play(lab: FleetLab, host: str, **extra: Any) -> tuple[dict[str, int], str]:
    """update_gpu_nodes.yml on one host; (its recap counts, the output)."""
    env = {**os.environ, "ANSIBLE_CONFIG": lab.facts["ansible_cfg"], "ANSIBLE_NOCOLOR": "1"}
    res = subprocess.run(
        [
            str(VENV_BIN / "ansible-playbook"),
            str(PLAYBOOK),
            "-i",
            lab.facts["inventory"],
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


def on(lab: FleetLab, host: str, command: str) -> str:
    res = lab.ssh(host, command)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_node_init_sets_the_node_up_once(fleet_lab: FleetLab) -> None:
    host = fleet_lab.host("gpu_l40s")
    machine = Path("/proc/sys/vm/max_map_count").read_text()
    on(fleet_lab, host, "echo wrong-name > /etc/hostname && hostname wrong-name")
    recap, out = play(fleet_lab, host, update_gpu_nodes_roles=["node_init"])
    assert recap["failed"] == 0 and recap["changed"] >= 6, out
    assert on(fleet_lab, host, "hostname; cat /etc/hostname").split() == [host, host]
    # S-12 through gpuops.gpu.sysctl: live on the host, persisted for the next boot
    live = on(fleet_lab, host, "sysctl -n vm.max_map_count net.core.rmem_max net.ipv4.tcp_rmem")
    assert live.split() == ["6553000", "134217728", "4096", "87380", "134217728"]
    conf = on(fleet_lab, host, "cat /etc/sysctl.d/90-gpuops-training.conf")
    assert "net.netfilter.nf_conntrack_max = 1048576\n" in conf
    assert Path("/proc/sys/vm/max_map_count").read_text() == machine  # never the machine's
    sshd = on(fleet_lab, host, "cat /etc/ssh/sshd_config")
    assert "\nPasswordAuthentication no\n" in sshd and "\nMaxAuthTries 3\n" in sshd
    assert on(fleet_lab, host, "id -un ops; test -d /home/ops && echo home").split() == [
        "ops",
        "home",
    ]
    assert on(fleet_lab, host, "cat /etc/sudoers.d/90-ops") == "ops ALL=(ALL) NOPASSWD: ALL\n"
    assert not Path("/home/ops").exists()  # the host's /home, not the machine's
    assert on(fleet_lab, host, "readlink /etc/localtime; cat /etc/timezone").split() == [
        "/usr/share/zoneinfo/UTC",
        "UTC",
    ]
    assert "server 10.200.0.1 iburst" in on(fleet_lab, host, "cat /etc/chrony/chrony.conf")
    assert on(fleet_lab, host, "cat /etc/resolv.conf").endswith(
        "search lab.gpuops.internal\nnameserver 10.200.0.1\n"
    )
    # S-28: a second run changes nothing
    again, out = play(fleet_lab, host, update_gpu_nodes_roles=["node_init"])
    assert (again["changed"], again["failed"]) == (0, 0), out
    # a reboot brings the kernel parameters back from the sysctl.d file
    labfleet.restart(fleet_lab.lab, host)
    assert on(fleet_lab, host, "sysctl -n vm.max_map_count").strip() == "6553000"


def test_driver_upgrade_with_the_reboot_pending_path(fleet_lab: FleetLab) -> None:
    host = fleet_lab.host("gpu_h800", 0)
    want = {"gpu_nodes_driver_version": "570.133.20", "gpu_nodes_cuda_version": "12.8"}
    try:
        # policy: no reboot -> installed, but "reboot pending" stops the host
        recap, out = play(
            fleet_lab,
            host,
            update_gpu_nodes_roles=["nvidia_driver"],
            gpu_nodes_driver_reboot=False,
            **want,
        )
        assert recap["failed"] == 1, out
        assert "reboot pending: NVIDIA driver 570.133.20 is installed" in out
        smi = fleet_lab.ssh(host, "nvidia-smi")
        assert (smi.returncode, smi.stdout.splitlines()[0]) == (
            18,
            "Failed to initialize NVML: Driver/library version mismatch",
        )
        install = hoststate.gpu_state(fleet_lab.lab, host)["install"]
        assert install["args"] == ["--silent", "--dkms"] and install["previous"] == "550.90.07"
        # policy: reboot -> the pending driver is loaded by a reboot, then verified (S-15)
        boot = hoststate.boot_id(fleet_lab.lab, host)
        recap, out = play(fleet_lab, host, update_gpu_nodes_roles=["nvidia_driver"], **want)
        # the reboot, then Fabric Manager moving to the driver's version (an HGX host); the
        # installer (changed_when: true) did not run again
        assert (recap["failed"], recap["changed"]) == (0, 5), out
        changed = re.findall(r"TASK \[nvidia_driver : ([^\]]+)\] \**\nchanged: ", out)
        assert changed == [
            "Reboot to load the new driver",
            "Download Fabric Manager from the local repository",
            "Unpack and install Fabric Manager's files",
            "Reload systemd's units",
            "Restart Fabric Manager after the driver",
        ], out
        assert hoststate.fabricmanager(fleet_lab.lab, host)["version"].endswith(": 570.133.20")
        assert hoststate.boot_id(fleet_lab.lab, host) != boot
        header = on(fleet_lab, host, "nvidia-smi").splitlines()[2]
        assert "Driver Version: 570.133.20     CUDA Version: 12.8" in header
        # S-28: the wanted driver is loaded: nothing to do
        again, out = play(fleet_lab, host, update_gpu_nodes_roles=["nvidia_driver"], **want)
        assert (again["changed"], again["failed"]) == (0, 0), out
    finally:
        hoststate.set_gpu_state(fleet_lab.lab, host, driver="550.90.07")
        hoststate.restore_stack(fleet_lab.lab, host, "550.90.07")
        fleet_lab.ssh(host, "rm -f /etc/ansible/facts.d/gpuops_nvidia_driver.fact")


def test_missing_kernel_headers_fail_before_the_installer(fleet_lab: FleetLab) -> None:
    host = fleet_lab.host("gpu_a100", 1)
    # what an earlier test of the session may have installed here: the installer must not add to it
    installed = hoststate.gpu_state(fleet_lab.lab, host)["install"]
    hoststate.set_gpu_state(fleet_lab.lab, host, kernel_headers=False)
    try:
        recap, out = play(
            fleet_lab,
            host,
            update_gpu_nodes_roles=["nvidia_driver"],
            gpu_nodes_driver_version="550.90.07",
        )
        assert recap["failed"] == 1, out
        release = os.uname().release
        assert f"prerequisite missing on {host}: no headers for the running kernel {release}" in (
            " ".join(out.split())
        )
        assert hoststate.gpu_state(fleet_lab.lab, host)["install"] == installed  # never ran
    finally:
        hoststate.set_gpu_state(fleet_lab.lab, host, kernel_headers=True)


def test_missing_build_tools_are_all_named_before_the_installer(fleet_lab: FleetLab) -> None:
    """One command looks for the headers and every build tool: each tool not on the node's
    PATH is named, in order, the ones present are not, and the installer never runs."""
    host = fleet_lab.host("gpu_a100", 1)
    installed = hoststate.gpu_state(fleet_lab.lab, host)["install"]
    recap, out = play(
        fleet_lab,
        host,
        update_gpu_nodes_roles=["nvidia_driver"],
        gpu_nodes_driver_version="550.90.07",
        nvidia_driver_required_tools=["gcc", "gpuops-no-such-tool", "make", "gpuops-no-cc"],
    )
    assert recap["failed"] == 1, out
    text = " ".join(out.split())
    assert f"prerequisite missing on {host}: gpuops-no-such-tool, gpuops-no-cc not found" in text
    assert hoststate.gpu_state(fleet_lab.lab, host)["install"] == installed  # never ran


def test_nouveau_is_blacklisted_and_rebooted_away_before_the_install(
    fleet_lab: FleetLab,
) -> None:
    host = fleet_lab.host("gpu_a100", 1)
    hoststate.set_gpu_state(fleet_lab.lab, host, driver=None, nouveau=True)
    try:
        recap, out = play(fleet_lab, host, update_gpu_nodes_roles=["nvidia_driver"])
        assert recap["failed"] == 0, out
        assert on(fleet_lab, host, "cat /etc/modprobe.d/blacklist-nouveau.conf") == (
            "blacklist nouveau\noptions nouveau modeset=0\n"
        )
        assert "nouveau" not in on(fleet_lab, host, "lsmod")
        versions = on(
            fleet_lab, host, "nvidia-smi --query-gpu=driver_version --format=csv,noheader"
        )
        assert versions.split() == ["535.161.08"] * 8
    finally:
        hoststate.set_gpu_state(fleet_lab.lab, host, driver="535.161.08", nouveau=False)
        fleet_lab.ssh(host, "rm -f /etc/ansible/facts.d/gpuops_nvidia_driver.fact")


def test_wrong_driver_checksum_refuses_the_host_before_any_change(fleet_lab: FleetLab) -> None:
    """The repository serves another .run than the inventory's sha256 names: the host fails
    before nouveau is blacklisted, before the download and the installer."""
    host = fleet_lab.host("gpu_l40s", 0)
    installed = hoststate.gpu_state(fleet_lab.lab, host)["install"]
    hoststate.set_gpu_state(fleet_lab.lab, host, nouveau=True)
    # the host as before any install (another test's install on it left its download)
    on(fleet_lab, host, "rm -rf /etc/modprobe.d/blacklist-nouveau.conf /root/.cache/gpuops/nvidia")
    wrong = "0" * 64
    try:
        recap, out = play(
            fleet_lab,
            host,
            update_gpu_nodes_roles=["nvidia_driver"],
            gpu_nodes_driver_version="570.133.20",
            gpu_nodes_cuda_version="12.8",
            gpu_nodes_driver_sha256={"570.133.20": wrong},
        )
        assert (recap["failed"], recap["changed"]) == (1, 0), out
        text = " ".join(out.split())
        real = "9bb82887b7b484a2ce2c88d8cb6b6459181749edf2c1d94760352c0601587ae8"
        assert (
            f"sha256 of NVIDIA-Linux-x86_64-570.133.20.run is {real}, the inventory wants {wrong}"
            in text
        ), out
        assert hoststate.gpu_state(fleet_lab.lab, host)["install"] == installed  # never ran
        left = on(
            fleet_lab,
            host,
            "ls /etc/modprobe.d/blacklist-nouveau.conf /root/.cache/gpuops/nvidia 2>&1; true",
        )
        assert left.count("No such file or directory") == 2, left
    finally:
        hoststate.set_gpu_state(fleet_lab.lab, host, nouveau=False)


def test_missing_driver_checksum_fails_the_role_before_any_change(fleet_lab: FleetLab) -> None:
    host = fleet_lab.host("gpu_l40s", 0)
    installed = hoststate.gpu_state(fleet_lab.lab, host)["install"]
    recap, out = play(
        fleet_lab,
        host,
        update_gpu_nodes_roles=["nvidia_driver"],
        gpu_nodes_driver_version="570.133.20",
        gpu_nodes_driver_sha256={},
    )
    assert (recap["failed"], recap["changed"]) == (1, 0), out
    assert f"no sha256 for driver 570.133.20 on {host}" in " ".join(out.split()), out
    assert hoststate.gpu_state(fleet_lab.lab, host)["install"] == installed


def task_block(out: str, task: str) -> str:
    """What ansible-playbook printed under ``TASK [task]``, up to the next task or the recap."""
    start = out.index(f"TASK [{task}]")
    ends = [i for i in (out.find("\nTASK [", start + 1), out.find("\nPLAY RECAP", start)) if i > 0]
    return out[start : min(ends)]


def test_a_gpu_failing_dcgm_diag_fails_the_host_at_validate_the_gpus(fleet_lab: FleetLab) -> None:
    """The lab's dcgmi (a stand-in for DCGM's, printing the JSON DCGM 3.3.9 prints, the layout
    with ``gpu_id``) reports the memory test failing on GPU 3: the host fails at `Validate the
    GPUs`, naming test and GPU. The memory test runs from level 2 on: its failure shows the
    group's level reached dcgmi. (A passing host, DCGM 4.1.1's layout: the pin test below.)"""
    host = fleet_lab.host("gpu_a100", 0)
    hoststate.set_dcgm(fleet_lab.lab, host, failing={3: ["memory"]})
    try:
        recap, out = play(
            fleet_lab, host, update_gpu_nodes_roles=["nvidia_driver"], gpu_nodes_validation_level=2
        )
        assert recap["failed"] == 1, out
        failed = " ".join(task_block(out, "nvidia_driver : Validate the GPUs").split())
        assert f"fatal: [{host}]: FAILED!" in failed, out
        assert (
            f'"msg": "validation failed on {host}: dcgmi diag -r 2 (DCGM 3.3.9): GPU Memory on '
            'GPU 3: Found 4 faulty memory elements on GPU 3"'
        ) in failed, out
    finally:
        hoststate.set_dcgm(fleet_lab.lab, host, failing={})


def test_a_pinned_host_installs_the_pinned_driver_and_passes_validation(
    fleet_lab: FleetLab,
) -> None:
    """gpuops_driver_pins (what gpuops sets for a rollback) makes one host's driver and CUDA
    version differ from its group's; the repository's .run is checked against the sha256 the
    group gives for the pinned version. The healthy host then passes `Validate the GPUs` (the
    lab's dcgmi prints DCGM 4.1.1's layout here)."""
    host = fleet_lab.host("gpu_l40s", 0)  # its group wants 550.90.07 / CUDA 12.4
    hoststate.set_gpu_state(fleet_lab.lab, host, driver=None)  # no driver: no reboot needed
    try:
        recap, out = play(
            fleet_lab,
            host,
            update_gpu_nodes_roles=["nvidia_driver"],
            gpuops_driver_pins={host: {"version": "535.161.08", "cuda": "12.2"}},
        )
        assert recap["failed"] == 0, out
        assert hoststate.gpu_state(fleet_lab.lab, host)["install"]["version"] == "535.161.08"
        header = " ".join(on(fleet_lab, host, "nvidia-smi").splitlines()[2].split())
        assert "Driver Version: 535.161.08 CUDA Version: 12.2" in header, header
        assert f"ok: [{host}]" in task_block(out, "nvidia_driver : Validate the GPUs"), out
    finally:
        hoststate.set_gpu_state(fleet_lab.lab, host, driver="550.90.07")
        hoststate.restore_stack(fleet_lab.lab, host, "550.90.07")
        fleet_lab.ssh(host, "rm -f /etc/ansible/facts.d/gpuops_nvidia_driver.fact")
