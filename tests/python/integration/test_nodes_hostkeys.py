"""Host keys of the GPU nodes, checked for real against the lab fleet's sshd: a host whose key
differs from the known-hosts file is refused, an unknown one too unless keys are learned (and
then they land in the artifacts folder for review), a known_hosts beside the inventory is
found, and a site's own ansible.cfg is honoured while gpuops' host-key settings still apply."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fleetlab import FleetLab
from result_documents import load_document

pytestmark = pytest.mark.timeout(600)
GPUOPS = str(Path(sys.executable).parent / "gpuops")


def host_key(fleet_lab: FleetLab, name: str) -> str:
    """The public key the lab host ``name`` presents (``ssh-ed25519 AAAA...``), from its own
    host key file (read only: the overlay stays as it is)."""
    private = Path(fleet_lab.facts["dir"]) / "hosts" / name / "etc" / "ssh" / "ssh_host_ed25519_key"
    key = serialization.load_ssh_private_key(private.read_bytes(), password=None)
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return public.decode()


def other_key() -> str:
    public = Ed25519PrivateKey.generate().public_key()
    return public.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ).decode()


def known_hosts(fleet_lab: FleetLab, path: Path, *, wrong: tuple[str, ...] = ()) -> Path:
    """A known-hosts file with every lab host's real key, except those in ``wrong``."""
    lines = [
        f"{h['name']},{h['ip']} "
        + (other_key() if h["name"] in wrong else host_key(fleet_lab, h["name"]))
        + "\n"
        for h in fleet_lab.hosts
    ]
    path.write_text("".join(lines))
    return path


def close_masters(fleet_lab: FleetLab) -> None:
    """End the ssh master connections earlier Ansible runs of the session left (ControlPersist):
    a new connection must meet each host's key."""
    cp = Path(fleet_lab.facts["dir"]) / "cp"
    for h in fleet_lab.hosts:
        subprocess.run(
            ["ssh", "-o", f"ControlPath={cp}/%C", "-O", "exit", "-l", "root", h["ip"]],
            capture_output=True,
            timeout=30,
            check=False,
        )


def gpuops(tmp: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, Any, str]:
    """The installed CLI as Jenkins runs it (result/error file); (rc, document, stderr)."""
    tmp.mkdir(parents=True, exist_ok=True)
    out = tmp / "out.json"
    out.unlink(missing_ok=True)
    full = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("GPUOPS_", "ANSIBLE_"))},
        "GPUOPS_RESULT_FILE": str(out),
        "GPUOPS_ERROR_FILE": str(out),
        **(env or {}),
    }
    done = subprocess.run(
        [GPUOPS, *args], capture_output=True, text=True, env=full, timeout=500, check=False, cwd=tmp
    )
    doc = load_document(out) if out.exists() else None
    return done.returncode, doc, done.stderr


def by_host(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["host"]: h for h in doc["result"]["hosts"]}


def test_lab_known_hosts_holds_every_hosts_key(fleet_lab: FleetLab) -> None:
    text = Path(fleet_lab.facts["known_hosts"]).read_text()
    for h in fleet_lab.hosts:
        assert f"{h['name']},{h['ip']} {host_key(fleet_lab, h['name'])}" in text
    # the lab's own ssh_config checks them too
    res = fleet_lab.ssh(fleet_lab.hosts[0]["name"], "true")
    assert res.returncode == 0, res.stderr


def test_inspect_refuses_a_host_whose_key_differs(fleet_lab: FleetLab, tmp_path: Path) -> None:
    victim = fleet_lab.host("gpu_h800", 0)
    keys = known_hosts(fleet_lab, tmp_path / "known_hosts", wrong=(victim,))
    rc, doc, err = gpuops(
        tmp_path / "run",
        "nodes",
        "inspect",
        "-i",
        fleet_lab.facts["inventory"],
        env={"GPUOPS_KNOWN_HOSTS": str(keys)},
    )
    assert doc is not None, err
    hosts = by_host(doc)
    assert hosts[victim]["status"] == "unreachable", hosts[victim]
    reason = json.dumps(hosts[victim])
    assert f"host key of {victim}" in reason and "differs from the one in" in reason, reason
    assert str(keys) in reason, reason
    # every other host was inspected: their keys match
    assert all(h["status"] != "unreachable" for n, h in hosts.items() if n != victim), hosts
    assert rc in (3, 4), err  # the lab's faulty card (3) or the refused host (4)


def test_unknown_hosts_are_refused_without_learning(fleet_lab: FleetLab, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    folder = tmp_path / "artifacts"
    host = fleet_lab.host("gpu_l40s", 0)
    rc, doc, err = gpuops(
        tmp_path / "run",
        "nodes", "update", "-i", fleet_lab.facts["inventory"], "-l", host, "--no-kube",
        "--check", "--known-hosts", str(empty), "--artifacts-dir", str(folder),
    )  # fmt: skip
    assert rc == 4, err
    message = doc["error"]["message"]
    assert f"host key of {host}" in message and f"is not in {empty}" in message, message
    assert "--learn-host-keys" in message, message
    assert not (folder / "known_hosts.learned").exists()
    assert empty.read_text() == ""  # the given file is never written


def test_learned_keys_land_in_the_artifacts_folder(fleet_lab: FleetLab, tmp_path: Path) -> None:
    host = fleet_lab.host("gpu_l40s", 0)
    known = known_hosts(fleet_lab, tmp_path / "known_hosts")
    lines = [line for line in known.read_text().splitlines() if not line.startswith(host + ",")]
    known.write_text("\n".join(lines) + "\n")  # every host but one is known
    folder = tmp_path / "artifacts"
    rc, doc, err = gpuops(
        tmp_path / "run",
        "nodes", "update", "-i", fleet_lab.facts["inventory"], "-l", "gpu_l40s", "--no-kube",
        "--check", "--known-hosts", str(known), "--learn-host-keys",
        "--artifacts-dir", str(folder),
    )  # fmt: skip
    assert rc == 0, err
    learned = folder / "known_hosts.learned"
    assert doc["result"]["artifacts"]["known_hosts_learned"] == str(learned)
    entries = [line for line in learned.read_text().splitlines() if not line.startswith("#")]
    address = next(h["ip"] for h in fleet_lab.hosts if h["name"] == host)
    # the new host's real key, under the address ssh connected to; no host already known
    assert entries == [f"{address} {host_key(fleet_lab, host)}"], entries
    assert "\n".join(lines) + "\n" == known.read_text()  # the given file is never written


def test_known_hosts_beside_the_inventory_is_used(fleet_lab: FleetLab, tmp_path: Path) -> None:
    victim = fleet_lab.host("gpu_a100", 0)
    inventory = tmp_path / "inventory"
    source = Path(fleet_lab.facts["inventory"]).parent
    (inventory / "group_vars").mkdir(parents=True)
    for path in (source / "group_vars").iterdir():
        (inventory / "group_vars" / path.name).write_text(path.read_text())
    (inventory / "hosts.yml").write_text((source / "hosts.yml").read_text())
    known_hosts(fleet_lab, inventory / "known_hosts", wrong=(victim,))
    rc, doc, err = gpuops(
        tmp_path / "run", "nodes", "inspect", "-i", str(inventory / "hosts.yml"), "-l", victim
    )
    assert rc == 4, err
    reason = json.dumps(by_host(doc)[victim])
    assert "differs from the one in" in reason and str(inventory / "known_hosts") in reason


def test_site_ansible_cfg_is_honoured_and_host_keys_still_checked(
    fleet_lab: FleetLab, tmp_path: Path
) -> None:
    """A site's ansible.cfg (ANSIBLE_CONFIG) that writes a log and turns host keys off: the log
    is written (the site's config is the one Ansible read), the host whose key differs is
    unreachable anyway (gpuops' settings apply over it)."""
    from gpuops import fsio
    from gpuops.adapters import ansible, hostkeys

    victim, fine = fleet_lab.host("gpu_h800", 0), fleet_lab.host("gpu_h800", 1)
    close_masters(fleet_lab)
    keys = known_hosts(fleet_lab, tmp_path / "known_hosts", wrong=(victim,))
    log = tmp_path / "site-ansible.log"
    cfg = tmp_path / "site.cfg"
    cfg.write_text(
        "[defaults]\n"
        f"log_path = {log}\n"
        "host_key_checking = False\n"
        f"local_tmp = {tmp_path / 'ansible-tmp'}\n"
        "[ssh_connection]\n"
        "ssh_args = -o StrictHostKeyChecking=no -o ControlMaster=no\n"
        "pipelining = True\n"
    )
    before = os.environ.get("ANSIBLE_CONFIG")
    os.environ["ANSIBLE_CONFIG"] = str(cfg)
    try:
        run = ansible.run_playbook(
            "gpu_inspect",
            fleet_lab.facts["inventory"],
            [victim, fine],
            data_dir=fsio.OutDir(tmp_path / "data", option="artifacts_dir"),
            ident="site-cfg",
            extravars={"gpu_inspect_report": str(tmp_path / "report.json")},
            host_keys=hostkeys.HostKeys(str(keys)),
            timeout_s=300,
        )
    finally:
        if before is None:
            os.environ.pop("ANSIBLE_CONFIG", None)
        else:
            os.environ["ANSIBLE_CONFIG"] = before
    assert run.hosts[victim].unreachable, run.hosts[victim]
    said = run.hosts[victim].message
    assert said.startswith(f"host key of {victim} differs from the one in {keys}"), said
    assert not run.hosts[fine].unreachable and not run.hosts[fine].failed, run.hosts[fine]
    assert log.exists() and fine in log.read_text()  # the site's log_path was honoured


def test_known_hosts_inside_a_folder_inventory_is_used_not_parsed(
    fleet_lab: FleetLab, tmp_path: Path
) -> None:
    """The README's ``-i ansible/inventory/production``: the folder's own known_hosts is the
    host keys, never an inventory source (Ansible tried to parse it: exit 2), both when gpuops
    reads the inventory and in the playbook run (check mode)."""
    host = fleet_lab.host("gpu_l40s", 0)
    inventory = tmp_path / "inventory"
    shutil.copytree(Path(fleet_lab.facts["inventory"]).parent, inventory)
    known_hosts(fleet_lab, inventory / "known_hosts")
    (inventory / "known_hosts.learned").write_text("# not an inventory either\n")
    rc, doc, err = gpuops(
        tmp_path / "run",
        "nodes", "update", "-i", str(inventory), "-l", host, "--no-kube", "--check",
        "--artifacts-dir", str(tmp_path / "artifacts"),
    )  # fmt: skip
    assert rc == 0, (err, doc)
    assert by_host(doc)[host]["status"] in ("planned", "unchanged"), by_host(doc)[host]
    stdout = (tmp_path / "artifacts" / "ansible" / "artifacts" / "plan" / "stdout").read_text()
    assert "known_hosts" not in stdout  # Ansible said nothing about parsing it
