"""The lab's SSH fleet of GPU nodes, for real: sshd in network namespaces, Ansible over ssh,
a per-host nvidia-smi, a driver installed from the lab driver repository, faults, teardown."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fleetlab import FleetLab, fleet_down, need_root_tools, short_lab_dir

from gpuops_lab import Lab, LabConfig, hoststate, netns
from gpuops_lab import fleet as labfleet

pytestmark = pytest.mark.timeout(300)

#: what the real nvidia-smi prints per model (shared/docs/NVIDIA_SMI.md)
EXPECTED_ROWS = {
    "gpu_a100": "NVIDIA A100-SXM4-80GB, 81920 MiB, 535.161.08",
    "gpu_h800": "NVIDIA H800, 81559 MiB, 550.90.07",
    "gpu_l40s": "NVIDIA L40S, 46068 MiB, 550.90.07",
}


def test_fleet_starts_fast_and_reports_healthy(fleet_lab: FleetLab) -> None:
    assert fleet_lab.startup_s < 15, f"6 hosts took {fleet_lab.startup_s:.1f}s"
    status = labfleet.status(fleet_lab.lab)
    assert status == {"healthy": True, "hosts_up": 6, "hosts_down": [], "driver_repo": True}
    groups = sorted({h["group"] for h in fleet_lab.hosts})
    assert groups == ["gpu_a100", "gpu_h800", "gpu_l40s"]


def test_ansible_ping_every_host(fleet_lab: FleetLab) -> None:
    out = fleet_lab.ansible("gpu_nodes", "-m", "ansible.builtin.ping")
    assert sorted(out) == sorted(h["name"] for h in fleet_lab.hosts)
    assert all(r.get("ping") == "pong" for r in out.values()), out


def test_inventory_groups_follow_the_seed(fleet_lab: FleetLab) -> None:
    out = fleet_lab.ansible("gpu_h800", "-m", "ansible.builtin.ping")
    assert sorted(out) == ["gpu-h800-01", "gpu-h800-02"]


def test_each_host_has_its_own_hostname_and_clean_root(fleet_lab: FleetLab) -> None:
    out = fleet_lab.ansible("gpu_nodes", "-m", "ansible.builtin.command", "-a", "hostname")
    results = {h: r["stdout"] for h, r in out.items()}
    assert results == {h["name"]: h["name"] for h in fleet_lab.hosts}
    res = fleet_lab.ssh(
        fleet_lab.host("gpu_a100"), "echo $HOME; cat /proc/1/comm; ls /proc | wc -l"
    )
    home, init, nproc = res.stdout.split()
    assert (home, init) == ("/root", "sshd")  # PID 1 of its own PID namespace
    assert int(nproc) < 120  # a fresh /proc: only this host's processes


def test_nvidia_smi_query_differs_per_model(fleet_lab: FleetLab) -> None:
    query = "nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv"
    out = fleet_lab.ansible("gpu_nodes", "-m", "ansible.builtin.command", "-a", query)
    for host in fleet_lab.hosts:
        lines = out[host["name"]]["stdout"].splitlines()
        assert lines[0] == "name, memory.total [MiB], driver_version"
        assert lines[1:] == [EXPECTED_ROWS[host["group"]]] * 8, host["name"]


def test_faulty_host_shows_ecc_errors(fleet_lab: FleetLab) -> None:
    query = (
        "nvidia-smi --query-gpu=index,temperature.gpu,ecc.errors.uncorrected.volatile.total,"
        "remapped_rows.pending --format=csv,noheader,nounits"
    )
    faulty = [h["name"] for h in fleet_lab.hosts if h["faulty"]]
    assert faulty == ["gpu-a100-03"]
    for host in fleet_lab.hosts:
        rows = [r.split(", ") for r in fleet_lab.ssh(host["name"], query).stdout.splitlines()]
        bad = [r for r in rows if int(r[2]) > 0]
        if host["faulty"]:
            assert len(bad) == 1 and int(bad[0][1]) >= 90 and bad[0][3] == "Yes"
        else:
            assert bad == [] and all(int(r[1]) < 60 for r in rows)


def _install_playbook(tmp_path: Path, host: str, url: str, version: str) -> Path:
    run = f"NVIDIA-Linux-x86_64-{version}.run"
    book = [
        {
            "hosts": host,
            "gather_facts": False,
            "tasks": [
                {
                    "name": "fetch the driver from the lab repository",
                    "ansible.builtin.get_url": {
                        "url": f"{url}/{run}",
                        "dest": f"/tmp/{run}",
                        "mode": "0755",
                    },
                },
                {
                    "name": "install it",
                    "ansible.builtin.command": f"sh /tmp/{run} --silent --dkms",
                    "changed_when": True,
                },
            ],
        }
    ]
    path = tmp_path / "install.yml"
    path.write_text(json.dumps(book))
    return path


def test_driver_upgrade_waits_for_a_reboot_then_nvidia_smi_shows_it(
    fleet_lab: FleetLab, tmp_path: Path
) -> None:
    host = fleet_lab.host("gpu_h800", 1)
    before = fleet_lab.ssh(host, "nvidia-smi").stdout.splitlines()[2]
    assert "Driver Version: 550.90.07      CUDA Version: 12.4" in before
    url = fleet_lab.facts["driver_repo_url"]
    try:
        res = fleet_lab.playbook(_install_playbook(tmp_path, host, url, "570.133.20"))
        assert res.returncode == 0, res.stdout + res.stderr
        assert f"{host}                : ok=2    changed=2    unreachable=0    failed=0" in (
            res.stdout
        )
        # the old module is still loaded: the real message and exit code (NVIDIA_SMI.md)
        pending = fleet_lab.ssh(host, "nvidia-smi")
        assert pending.returncode == 18
        assert pending.stdout == (
            "Failed to initialize NVML: Driver/library version mismatch\n"
            "NVML library version: 570.133\n"
        )
        assert hoststate.reboot_pending(fleet_lab.lab, host)
        boot = hoststate.boot_id(fleet_lab.lab, host)
        # the host reboots itself, inside its namespaces, as Ansible's reboot module asks
        out = fleet_lab.ansible(host, "-m", "ansible.builtin.reboot", "-a", "reboot_timeout=120")
        assert out[host].get("rebooted") is True, out[host]
        assert hoststate.boot_id(fleet_lab.lab, host) != boot
        assert not hoststate.reboot_pending(fleet_lab.lab, host)
        header = fleet_lab.ssh(host, "nvidia-smi").stdout.splitlines()[2]
        assert header == (
            "| NVIDIA-SMI 570.133.20             Driver Version: 570.133.20     "
            "CUDA Version: 12.8     |"
        )
        install = hoststate.gpu_state(fleet_lab.lab, host)["install"]
        assert (install["silent"], install["dkms"], install["previous"]) == (
            True,
            True,
            "550.90.07",
        )
        assert "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.133.20" in (
            hoststate.kernel_log(fleet_lab.lab, host)
        )
        other = fleet_lab.ssh(fleet_lab.host("gpu_h800", 0), "nvidia-smi").stdout
        assert "Driver Version: 550.90.07" in other  # the other H800 keeps its own /etc
    finally:
        hoststate.set_gpu_state(fleet_lab.lab, host, driver="550.90.07")


def test_a_reboot_resets_kernel_parameters_to_the_sysctl_d_files(fleet_lab: FleetLab) -> None:
    host = fleet_lab.host("gpu_h800", 1)
    conf = "/etc/sysctl.d/95-lab-test.conf"
    machine = Path("/proc/sys/vm/swappiness").read_text()
    try:
        res = fleet_lab.ssh(
            host,
            f"sysctl -q -w vm.swappiness=10 && echo 'net.core.somaxconn = 8192' > {conf} "
            "&& sysctl -n vm.swappiness net.core.somaxconn",
        )
        assert res.stdout.split() == ["10", "4096"], res.stderr
        assert Path("/proc/sys/vm/swappiness").read_text() == machine  # not the machine's
        labfleet.restart(fleet_lab.lab, host)
        res = fleet_lab.ssh(host, "sysctl -n vm.swappiness net.core.somaxconn")
        assert res.stdout.split() == ["60", "8192"]  # the default again; the file applied
    finally:
        fleet_lab.ssh(host, f"rm -f {conf}")
        labfleet.restart(fleet_lab.lab, host)


def test_nouveau_blocks_install_until_blacklisted_and_rebooted(fleet_lab: FleetLab) -> None:
    host = fleet_lab.host("gpu_a100", 1)
    url = fleet_lab.facts["driver_repo_url"] + "/NVIDIA-Linux-x86_64-550.90.07.run"
    fetch_and_install = f"curl -sf -o /tmp/d.run {url} && sh /tmp/d.run --silent --dkms"
    hoststate.set_gpu_state(fleet_lab.lab, host, driver=None, nouveau=True)
    try:
        smi = fleet_lab.ssh(host, "nvidia-smi")
        assert smi.returncode == 9
        assert smi.stdout.startswith("NVIDIA-SMI has failed because it couldn't communicate")
        res = fleet_lab.ssh(host, fetch_and_install)
        assert res.returncode == 1
        assert res.stderr.startswith(
            "ERROR: The Nouveau kernel driver is currently in use by your system.  This driver "
            "is incompatible with the NVIDIA driver, and must be disabled before proceeding."
        )
        # S-14: blacklist (the installer wrote its modprobe file), rebuild initramfs, reboot
        assert fleet_lab.ssh(host, "update-initramfs -u").returncode == 0
        labfleet.restart(fleet_lab.lab, host)
        assert "nouveau" not in fleet_lab.ssh(host, "lsmod").stdout
        res = fleet_lab.ssh(host, fetch_and_install)
        assert res.returncode == 0, res.stderr
        out = fleet_lab.ssh(host, "nvidia-smi --query-gpu=driver_version --format=csv,noheader")
        assert out.stdout.splitlines() == ["550.90.07"] * 8
    finally:
        hoststate.set_gpu_state(fleet_lab.lab, host, driver="535.161.08", nouveau=False)


def test_missing_kernel_headers_fail_the_install(fleet_lab: FleetLab) -> None:
    host = fleet_lab.host("gpu_l40s")
    url = fleet_lab.facts["driver_repo_url"] + "/NVIDIA-Linux-x86_64-570.133.20.run"
    hoststate.set_gpu_state(fleet_lab.lab, host, kernel_headers=False)
    try:
        res = fleet_lab.ssh(host, f"curl -sf -o /tmp/d.run {url} && sh /tmp/d.run --silent --dkms")
        assert res.returncode == 1
        assert "ERROR: Unable to find the kernel source tree for the currently running kernel." in (
            res.stderr
        )
        assert hoststate.gpu_state(fleet_lab.lab, host)["driver"] == "550.90.07"
    finally:
        hoststate.set_gpu_state(fleet_lab.lab, host, kernel_headers=True)


def test_sshd_stop_and_start(fleet_lab: FleetLab) -> None:
    host = fleet_lab.host("gpu_h800")
    labfleet.stop_sshd(fleet_lab.lab, host)
    try:
        assert labfleet.status(fleet_lab.lab)["hosts_down"] == [host]
        out = fleet_lab.ansible("gpu_h800", "-m", "ansible.builtin.ping")
        assert out[host].get("unreachable") is True, out[host]
        assert out[fleet_lab.host("gpu_h800", 1)].get("ping") == "pong"
    finally:
        labfleet.start_sshd(fleet_lab.lab, host)
    assert fleet_lab.ansible(host, "-m", "ansible.builtin.ping")[host].get("ping") == "pong"
    assert labfleet.status(fleet_lab.lab)["healthy"]


def test_unreachable_host_times_out_then_recovers(fleet_lab: FleetLab) -> None:
    host = fleet_lab.host("gpu_a100", 0)
    assert fleet_lab.ssh(host, "true").returncode == 0
    labfleet.disconnect(fleet_lab.lab, host)
    try:
        started = time.monotonic()
        res = fleet_lab.ssh(host, "true")  # ssh_config: ConnectTimeout 5
        assert res.returncode == 255
        assert "timed out" in res.stderr
        assert time.monotonic() - started >= 4  # it hung: packets vanish, nothing refuses
    finally:
        labfleet.reconnect(fleet_lab.lab, host)
    assert fleet_lab.ssh(host, "hostname").stdout.strip() == host


def _leftovers(lab_dir: Path, prefix: str) -> list[str]:
    found = [f"netns {n}" for n in netns.existing(prefix)]
    needles = (str(lab_dir).encode(), f"/run/netns/{prefix}".encode())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            mounts = (entry / "mountinfo").read_text()
        except OSError:
            continue
        if any(n in cmd for n in needles):
            found.append(f"process {entry.name}: {cmd!r}")
        if str(lab_dir) in mounts:
            found.append(f"mount seen by {entry.name}")
    if lab_dir.exists():
        found.append(f"dir {lab_dir}")
    return found


def test_down_leaves_nothing_behind() -> None:
    need_root_tools()
    lab = Lab(LabConfig(dir=short_lab_dir(), hosts=3))
    prefix = netns.prefix_for(lab.dir)
    try:
        lab.up(["fleet"])
        env = {**os.environ, "ANSIBLE_CONFIG": lab.facts("fleet")["ansible_cfg"]}
        ansible = str(Path(sys.executable).parent / "ansible")
        res = subprocess.run(
            [ansible, "all", "-m", "ansible.builtin.ping"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert res.returncode == 0, res.stdout + res.stderr
        assert list((lab.dir / "fleet" / "cp").iterdir()), "no ControlPersist master to clean"
        labfleet.disconnect(lab, "gpu-a100-01")  # a hung host must not block teardown
        assert _leftovers(lab.dir, prefix)  # the check sees a running fleet
        fleet_down(lab)
        assert _leftovers(lab.dir, prefix) == []
        fleet_down(lab)  # idempotent
    finally:
        fleet_down(lab)
        shutil.rmtree(lab.dir.parent, ignore_errors=True)


def test_down_without_state_still_cleans_up() -> None:
    need_root_tools()
    lab = Lab(LabConfig(dir=short_lab_dir(), hosts=2))
    prefix = netns.prefix_for(lab.dir)
    try:
        lab.up(["fleet"])
        shutil.rmtree(lab.dir / "pids")
        (lab.dir / "state.json").unlink()
        labfleet.down(lab)
        assert _leftovers(lab.dir / "fleet", prefix) == []
    finally:
        fleet_down(lab)
        shutil.rmtree(lab.dir.parent, ignore_errors=True)


def test_ansible_connections_stay_in_the_lab_whatever_the_config(
    fleet_lab: FleetLab, tmp_path: Path
) -> None:
    """Labs reuse host addresses (each in its own namespaces) and ssh's %C does not include
    the ProxyCommand: the inventory pins ControlPath into the lab, ahead of any config's."""
    shared = tmp_path / "shared-cp"
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(Path(__file__).resolve().parents[3] / "ansible" / "ansible.cfg"),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(shared),
    }
    res = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible"),
            "-i",
            fleet_lab.facts["inventory"],
            fleet_lab.host("gpu_h800"),
            "-m",
            "ansible.builtin.ping",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert not shared.exists() or not list(shared.iterdir())
    assert list((fleet_lab.lab.dir / "fleet" / "cp").iterdir())
