"""The plan of ``nodes update`` picks the hosts Ansible's check mode picks (issue 19): on the lab
fleet (real sshd, real Ansible), host states set one by one, the plan (the driver role's state
script read over ssh and decided by the role's own decision) against the playbook run in check
mode on the same hosts with the same pins: per host the same verdict (changes, none, fails),
the same tasks named, the same diffs, the same failure message.

States, two rounds on the six hosts: the driver at, below and above the wanted version, a host
pinned (``gpuops_driver_pins``) to the version it runs and one pinned below, the nouveau
blacklist absent, with other content, with another owner and mode, nouveau loaded, Fabric
Manager at another version and its unit stopped, the container toolkit missing, a host
mid-reboot (module mismatch) into the wanted driver and one into another, an unreadable
nvidia-smi (a GPU fallen off the bus), missing kernel headers. The lab's GPU programs are
stand-ins (gpuops_lab: nvidia-smi, nv-fabricmanager, nvidia-ctk, lsmod, systemctl) that print
what the real ones print."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fleetlab import FleetLab

from gpuops import fsio
from gpuops.adapters import ansible, hostkeys
from gpuops.core import rollout
from gpuops.core.nodestate import DriverPin, pins_extravars
from gpuops.usecases.nodes import update
from gpuops_lab import hoststate

pytestmark = pytest.mark.timeout(900)

A1, A2, A3 = "gpu-a100-01", "gpu-a100-02", "gpu-a100-03"
H1, H2, L1 = "gpu-h800-01", "gpu-h800-02", "gpu-l40s-01"
HOSTS = [A1, A2, H1, H2, L1, A3]
DEFAULT = {A1: "535.161.08", A2: "535.161.08", A3: "535.161.08", H1: "550.90.07", H2: "550.90.07"}
DEFAULT[L1] = "550.90.07"
FACT = "/etc/ansible/facts.d/gpuops_nvidia_driver.fact"
CONF = "/etc/modprobe.d/blacklist-nouveau.conf"
BLACKLISTED = (
    "mkdir -p /etc/modprobe.d && chmod 755 /etc/modprobe.d && chown 0:0 /etc/modprobe.d && "
    f"printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' > {CONF} && "
    f"chmod 644 {CONF} && chown 0:0 {CONF}"
)


def on(lab: FleetLab, host: str, command: str) -> str:
    done = lab.ssh(host, command)
    assert done.returncode == 0, done.stderr
    return done.stdout


def fact(lab: FleetLab, host: str, version: str) -> None:
    on(lab, host, f'mkdir -p {Path(FACT).parent} && echo \'{{"version": "{version}"}}\' > {FACT}')


@pytest.fixture
def hosts_put_back(fleet_lab: FleetLab) -> Iterator[None]:
    """Each host as it was: its driver, the GPU stack, the role's fact and the blacklist
    (a tar of what there was, put back; what was not there is removed)."""
    saved = {
        h: on(fleet_lab, h, f"tar -cf - {FACT} /etc/modprobe.d 2>/dev/null | base64 -w0; true")
        for h in HOSTS
    }
    try:
        yield
    finally:
        lab = fleet_lab.lab
        for h in HOSTS:
            hoststate.set_card(lab, h, 0, lost=False)
            hoststate.set_gpu_state(lab, h, driver=DEFAULT[h], nouveau=False, kernel_headers=True)
            hoststate.restore_stack(lab, h, DEFAULT[h])
            if h != L1:
                hoststate.set_fabricmanager(lab, h, running=True)
            on(fleet_lab, h, f"rm -rf {FACT} /etc/modprobe.d")
            if saved[h]:
                on(fleet_lab, h, f"echo {saved[h]} | base64 -d | tar -xf - -C /")


def inventory(lab: FleetLab, tmp: Path) -> Path:
    """The lab's inventory, the H800 group wanting 570.133.20."""
    folder = tmp / "inventory"
    shutil.copytree(Path(lab.facts["inventory"]).parent, folder)
    path = folder / "group_vars" / "gpu_h800.yml"
    text = path.read_text().replace('"550.90.07"', '"570.133.20"').replace('"12.4"', '"12.8"')
    path.write_text(text)
    return folder / "hosts.yml"


def compare(lab: FleetLab, inv: Path, tmp: Path, pins: dict[str, DriverPin]) -> dict[str, str]:
    """The plan and check mode on every host; each host's verdict (they must agree)."""
    keys = hostkeys.HostKeys(lab.facts["known_hosts"])
    request = update.UpdateRequest(
        inventory=str(inv),
        change=("nvidia_driver",),
        cluster=None,
        check=True,
        artifacts_dir=str(tmp / "plan"),
        known_hosts=lab.facts["known_hosts"],
        pins=pins,
        rollback=rollout.RollbackPolicy(enabled=False),  # an unreadable driver is not refused
    )
    planned = update.update(request).result
    checked = ansible.run_playbook(
        "update_gpu_nodes",
        str(inv),
        HOSTS,
        data_dir=fsio.OutDir(tmp / "check-mode", option="artifacts_dir"),
        ident="check",
        extravars={"update_gpu_nodes_roles": ["nvidia_driver"], **pins_extravars(pins)},
        check=True,
        host_keys=keys,
    )
    verdicts = {}
    for host in HOSTS:
        rec, hr = planned.hosts[host], checked.hosts[host]
        seen = "failed" if hr.status in ("failed", "unreachable") else hr.status
        verdicts[host] = {"changed": "planned"}.get(seen, seen)
        said = (rec.status, rec.planned_changes, planned.diffs[host], rec.failed_task)
        assert said == (verdicts[host], hr.changed_tasks, hr.diffs, hr.failed_task), (host, said)
        if seen == "failed":
            assert rec.reason == f"plan: {hr.failed_task}: {hr.message}", (host, rec.reason)
    return verdicts


def test_the_plan_picks_the_hosts_check_mode_picks(
    fleet_lab: FleetLab, tmp_path: Path, hosts_put_back: None
) -> None:
    lab = fleet_lab.lab
    inv = inventory(fleet_lab, tmp_path)
    # round 1
    for host in HOSTS:
        on(fleet_lab, host, BLACKLISTED)
    hoststate.set_card(lab, A1, 0, lost=True)  # nvidia-smi exits 15: the driver unreadable
    hoststate.set_gpu_state(lab, A2, driver="550.90.07")
    hoststate.set_reboot_pending(lab, A2, "535.161.08")  # mid-reboot into the wanted driver
    fact(fleet_lab, A2, "535.161.08")
    hoststate.set_gpu_state(lab, A3, driver="550.90.07", nouveau=True)  # above it, nouveau
    on(fleet_lab, A3, f"rm -f {CONF}")  # the blacklist absent
    on(fleet_lab, H1, f"echo 'blacklist nouveau' > {CONF}")  # below it, another blacklist
    hoststate.host_path(lab, L1, "/usr/bin/nvidia-ctk").unlink()  # the toolkit missing
    pins = {H2: DriverPin("550.90.07", "12.4")}  # pinned to what it runs: nothing to do
    assert compare(fleet_lab, inv, tmp_path / "1", pins) == {
        A1: "planned",
        A2: "planned",
        H1: "planned",
        H2: "unchanged",
        L1: "planned",
        A3: "planned",
    }
    # round 2
    hoststate.set_card(lab, A1, 0, lost=False)
    hoststate.set_fabricmanager(lab, A1, installed="550.90.07")  # Fabric Manager differs
    hoststate.set_gpu_state(lab, A2, driver="550.90.07")
    hoststate.set_reboot_pending(lab, A2, "570.133.20")  # mid-reboot into another driver
    fact(fleet_lab, A2, "570.133.20")
    hoststate.set_gpu_state(lab, A3, driver="535.161.08", nouveau=False)
    on(fleet_lab, A3, BLACKLISTED)
    hoststate.set_fabricmanager(lab, A3, running=False)  # its unit stopped
    hoststate.set_gpu_state(lab, H2, kernel_headers=False)  # below it, no headers: fails
    hoststate.restore_stack(lab, L1, DEFAULT[L1])
    on(fleet_lab, L1, f"chmod 600 {CONF} && chown 1 {CONF}")  # another owner and mode
    pins = {H1: DriverPin("535.161.08", "12.2")}  # pinned below what it runs
    assert compare(fleet_lab, inv, tmp_path / "2", pins) == {
        A1: "planned",
        A2: "planned",
        H1: "planned",
        H2: "failed",
        L1: "planned",
        A3: "planned",
    }
