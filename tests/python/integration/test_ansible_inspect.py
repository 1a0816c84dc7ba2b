"""The gpu_inspect playbook and role (ansible/) against the lab's SSH fleet, for real: the
inspection script over ssh on 6 hosts (no Python on them), one JSON report on the controller
judged as `gpuops nodes inspect` judges, findings for the faulty card only, a second run that
changes nothing on the nodes (S-28), an unreachable host left to Ansible."""

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

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[3]
PLAYBOOK = REPO / "ansible" / "playbooks" / "gpu_inspect.yml"
#: model names as the real nvidia-smi prints them (shared/docs/NVIDIA_SMI.md)
MODEL_NAMES = {
    "gpu_a100": "NVIDIA A100-SXM4-80GB",
    "gpu_h800": "NVIDIA H800",
    "gpu_l40s": "NVIDIA L40S",
}
RECAP = re.compile(
    r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE
)


def _inspect(fleet_lab: FleetLab, report: Path) -> tuple[subprocess.CompletedProcess[str], Any]:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": fleet_lab.facts["ansible_cfg"],
        "ANSIBLE_ROLES_PATH": str(REPO / "ansible" / "roles"),
        "ANSIBLE_NOCOLOR": "1",
    }
    inventory = fleet_lab.facts["inventory"]
    res = subprocess.run(
        [
            str(VENV_BIN / "ansible-playbook"),
            str(PLAYBOOK),
            *("-i", str(inventory)),
            *("-e", f"gpu_inspect_report={report}"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    doc = json.loads(report.read_text()) if report.exists() else None
    return res, doc


def _recap(stdout: str) -> dict[str, dict[str, int]]:
    keys = ("ok", "changed", "unreachable", "failed")
    return {m[0]: dict(zip(keys, map(int, m[1:]), strict=True)) for m in RECAP.findall(stdout)}


def test_report_lists_every_gpu_and_flags_the_faulty_card(
    fleet_lab: FleetLab, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    res, doc = _inspect(fleet_lab, report)
    assert res.returncode == 0, res.stdout + res.stderr
    assert doc is not None, res.stdout
    names = sorted(h["name"] for h in fleet_lab.hosts)
    assert sorted(doc["hosts"]) == names and len(names) == 6
    for host in fleet_lab.hosts:
        entry = doc["hosts"][host["name"]]
        assert entry["nvidia_smi"]["failure"] is None, entry
        assert [g["index"] for g in entry["gpus"]] == list(range(8))
        assert {g["name"] for g in entry["gpus"]} == {MODEL_NAMES[host["group"]]}
        assert len({g["uuid"] for g in entry["gpus"]}) == 8
        if host["faulty"]:
            checks = {f["check"]: f["severity"] for f in entry["findings"]}
            assert checks["temperature"] == checks["ecc-uncorrected"] == "critical"
            assert checks["remapped-rows-pending"] == "warning"
            hot = [f for f in entry["findings"] if f["check"] == "temperature"]
            assert hot[0]["value"] == 92 and hot[0]["limit"] == 90 and hot[0]["gpu"] == 5
            assert entry["status"] == "critical"
        else:
            assert entry["findings"] == [], (host["name"], entry["findings"])
            assert entry["status"] == "ok"
    faulty = [h["name"] for h in fleet_lab.hosts if h["faulty"]]
    assert doc["hosts_with_findings"] == doc["critical_hosts"] == faulty == ["gpu-a100-03"]
    assert doc["hosts_without_result"] == []
    recap = _recap(res.stdout)
    assert sorted(recap) == names
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in recap.values()), recap

    # S-28: a second run changes nothing on the nodes; only the controller's report is
    # written again (run_once, counted against the first host), with the same verdicts
    res2, doc2 = _inspect(fleet_lab, report)
    assert res2.returncode == 0, res2.stdout + res2.stderr
    recap2 = _recap(res2.stdout)
    assert sorted(recap2) == names
    assert {h: r["changed"] for h, r in recap2.items() if h != names[0]} == dict.fromkeys(
        names[1:], 0
    ), res2.stdout
    assert recap2[names[0]]["changed"] <= 1
    assert {h: (e["status"], e["findings"]) for h, e in doc2["hosts"].items()} == {
        h: (e["status"], e["findings"]) for h, e in doc["hosts"].items()
    }


def test_unreachable_host_is_reported_by_ansible_and_the_rest_inspected(
    fleet_lab: FleetLab, tmp_path: Path
) -> None:
    host = fleet_lab.host("gpu_l40s")
    labfleet.stop_sshd(fleet_lab.lab, host)
    try:
        res, doc = _inspect(fleet_lab, tmp_path / "report.json")
    finally:
        labfleet.start_sshd(fleet_lab.lab, host)
    assert res.returncode == 4, res.stdout + res.stderr  # ansible-playbook: hosts unreachable
    recap = _recap(res.stdout)
    assert recap[host]["unreachable"] == 1
    assert all(r["unreachable"] == 0 and r["failed"] == 0 for h, r in recap.items() if h != host)
    assert doc is not None, res.stdout
    assert doc["hosts_without_result"] == [host]
    assert doc["hosts"][host] == {"status": "no result", "gpus": [], "findings": []}
    assert doc["critical_hosts"] == ["gpu-a100-03"]
    assert all(len(e["gpus"]) == 8 for h, e in doc["hosts"].items() if h != host)
