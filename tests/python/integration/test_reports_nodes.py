"""The GPU node pages (issue 12 for issue 9's commands), from real ``gpuops nodes inspect`` and
``gpuops nodes update --check`` runs on the lab fleet, opened in headless Chromium under
Jenkins' default CSP.

Checked as a person sees them: no console errors, no CSP violations, nothing fetched from
outside the folder, the key facts in the DOM equal to the JSON result, a screenshot kept in
reports/screenshots/. A failed rollout with hostile strings is rendered from the same records
the use case writes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from integration.browser import open_page
from integration.conftest_nodes import NodesLab
from junitcheck import assert_junit_well_formed

from gpuops.core import rollout
from gpuops.render.html import fleet, nodeupdate
from gpuops.usecases.nodes.records import BatchRecord, HostRecord, Rollout
from gpuops_lab import fleet as labfleet
from gpuops_lab import hoststate

pytestmark = pytest.mark.timeout(900)
FAULTY = "gpu-a100-03"


def test_fleet_health_page_shows_the_faulty_host_and_its_xid(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    hoststate.inject_xid(nodes_lab.lab, FAULTY, 5, 79, "GPU has fallen off the bus.")
    out = tmp_path / "report"
    try:
        run = nodes_lab.gpuops(
            "nodes",
            "inspect",
            "-i",
            nodes_lab.fleet.facts["inventory"],
            "--report-dir",
            str(out),
            tmp=tmp_path,
        )
    finally:
        labfleet.restart(nodes_lab.lab, FAULTY)  # a reboot clears the kernel log
    assert run.rc == 3, run.stderr
    result = run.result
    assert result["report"]["status"] == "written", result["report"]
    assert {Path(f).name for f in result["report"]["files"]} == {"fleet.html", "report.css"}
    assert {p.name for p in out.iterdir()} >= {"fleet.html", "inspect.json", "inspect-junit.xml"}
    assert_junit_well_formed((out / "inspect-junit.xml").read_text())

    seen = open_page(out, "fleet.html", "fleet-lab-critical")
    seen.assert_clean()
    assert seen.one("status") == result["status"] == "critical"
    for key in ("ok", "warning", "critical", "unreachable"):
        assert seen.one(key) == str(result["summary"][key]), key
    assert seen.one("hosts_total") == str(result["hosts_total"]) == "6"
    # every host listed, the faulty one first; the statuses are the result's
    by_host = {h["host"]: h["status"] for h in result["hosts"]}
    assert seen.data["host"][0] == FAULTY
    assert sorted(seen.data["host"]) == sorted(by_host)
    assert dict(zip(seen.data["host"], seen.data["host-status"], strict=True)) == by_host
    # per group: hosts and critical counts
    groups = sorted({h["group"] for h in result["hosts"]})
    assert seen.data["group"] == groups
    assert seen.data["group-hosts"] == [
        str(sum(1 for h in result["hosts"] if h["group"] == g)) for g in groups
    ]
    assert seen.data["group-critical"] == [
        str(sum(1 for h in result["hosts"] if h["group"] == g and h["status"] == "critical"))
        for g in groups
    ]
    # the Xid, on the faulty host only
    assert seen.data["xid-host"] == [FAULTY]
    assert seen.data["xid"] == ["79"]
    # hosts x GPUs: one cell per GPU the result lists, coloured by its worst finding
    assert seen.data["grid-host"] == seen.data["host"]
    worst = []
    for h in result["hosts"]:
        for g in h["gpus"]:
            sev = {f["severity"] for f in h["findings"] if f.get("gpu") == g["index"]}
            worst.append(next((s for s in ("critical", "warning") if s in sev), "ok"))
    for severity in ("critical", "warning", "ok"):
        assert len(seen.data.get(f"cell-{severity}", [])) == worst.count(severity), severity
    assert worst.count("critical") >= 1  # the faulty A100's GPU 5
    # the limits it was judged by, per group
    assert seen.data["threshold-group"] == groups
    assert sorted(seen.data["threshold"]) == sorted(
        {name for limits in result["thresholds"].values() for name in limits}
    )
    assert "temperature_critical_c" in seen.data["threshold"]


def test_node_update_page_of_a_check_run_shows_the_plan(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    inventory = nodes_lab.inventory(tmp_path, gpu_h800="570.133.20")
    folder = tmp_path / "update"
    run = nodes_lab.gpuops(
        "nodes",
        "update",
        "-i",
        str(inventory),
        "--limit",
        "gpu_h800",
        "--change",
        "driver",
        "--check",
        "--artifacts-dir",
        str(folder),
        tmp=tmp_path,
    )
    assert run.rc == 0, run.stderr
    result = run.result
    assert result["report"]["status"] == "written", result["report"]
    assert Path(result["report"]["page"]) == folder / "node-update.html"

    seen = open_page(folder, "node-update.html", "node-update-lab-plan")
    seen.assert_clean()
    assert seen.one("verdict") == "plan"
    assert seen.one("change") == "nvidia_driver"
    assert seen.one("changed") == "0" and seen.one("failed") == "0"
    by_host = {h["host"]: h["status"] for h in result["hosts"]}
    assert by_host == {"gpu-h800-01": "planned", "gpu-h800-02": "planned"}
    assert dict(zip(seen.data["host"], seen.data["host-status"], strict=True)) == by_host
    assert seen.data["batch-kind"] == [b["kind"] for b in result["batches"]]
    assert seen.data["batch-kind"][0] == rollout.CANARY
    # a plan's batches are planned, not "not started" (nothing was going to start)
    assert [b["status"] for b in result["batches"]] == [rollout.PLANNED] * len(result["batches"])
    assert seen.data["batch-status"] == [rollout.PLANNED] * len(result["batches"])


def test_a_failed_rollout_page_puts_failed_hosts_first_and_escapes_what_it_shows(
    tmp_path: Path,
) -> None:
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    ro = Rollout(
        inventory=f"inv/{hostile}",
        limit=None,
        environment="test",
        change=["nvidia_driver"],
        policy=rollout.Policy(canary=1),
        check=False,
        kube="https://127.0.0.1:6443",
        stopped=f"1 host(s) failed, over the failure budget of 0 {hostile}",
    )
    ro.hosts = {
        "gpu-h800-01": HostRecord(
            "gpu-h800-01",
            "gpu_h800",
            "gpu-h800-01",
            batch=0,
            status=rollout.FAILED,
            reason=f"installer exited 1: {hostile}",
            failed_task="nvidia_driver : Install the driver",
            cordoned=True,
        ),
        "gpu-h800-02": HostRecord(
            "gpu-h800-02", "gpu_h800", "gpu-h800-02", batch=1, status=rollout.NOT_STARTED
        ),
    }
    ro.timings_s = {"preflight": 2.5, "plan": 30.0}
    ro.batches = [
        BatchRecord(
            0,
            rollout.CANARY,
            ["gpu-h800-01"],
            status="failed",
            start_s=32.5,
            elapsed_s=12.5,
            phases_s={"kubernetes_before": 4.0, "ansible": 8.5, "kubernetes_after": 0.0},
        ),
        BatchRecord(1, rollout.BATCH, ["gpu-h800-02"]),
    ]
    nodeupdate.write_rollout(ro.to_dict(), tmp_path)
    seen = open_page(tmp_path, "node-update.html", "node-update-failed")
    seen.assert_clean()
    assert seen.one("verdict") == "failed"
    assert seen.one("failed") == "1" and seen.one("not-started") == "1"
    assert seen.data["host"] == ["gpu-h800-01", "gpu-h800-02"]
    assert seen.data["host-status"] == ["failed", "not-started"]
    assert seen.data["batch-status"] == ["failed", "not-started"]
    # the timeline (inline SVG under the CSP): every batch named, the unstarted one too
    timeline = seen.one("timeline")
    assert "canary 0: gpu-h800-01 (failed)" in timeline
    assert "batch 1: gpu-h800-02 (not-started)" in timeline
    assert "change (Ansible)" in timeline
    assert hostile in seen.one("message")  # shown as text, not run
    html = (tmp_path / "node-update.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_an_empty_fleet_and_a_host_waiting_for_its_reboot(tmp_path: Path) -> None:
    """The fleet page of an inventory without GPU nodes says so; a host whose new driver waits
    for a reboot (nvidia-smi: version mismatch, no GPU readings) is one critical cell across
    its row, the reason under its name, next to a healthy host's GPUs."""
    empty = {"inventory": "inv/empty", "status": "ok", "hosts_total": 0, "hosts": [],
             "summary": {"ok": 0, "warning": 0, "critical": 0, "unreachable": 0}}  # fmt: skip
    fleet.write_fleet(empty, tmp_path / "empty")
    seen = open_page(tmp_path / "empty", "fleet.html", "fleet-empty")
    seen.assert_clean()
    assert seen.one("hosts_total") == "0" and seen.one("empty") == "The inventory has no GPU node."

    reason = (
        "Driver/library version mismatch: an installed driver waits for a reboot: "
        "Failed to initialize NVML: Driver/library version mismatch"
    )
    hosts = [
        {"host": "gpu-h800-01", "group": "gpu_h800", "status": "critical", "gpus": [],
         "findings": [{"check": "reboot-pending", "severity": "critical", "gpu": None,
                       "message": reason}]},
        {"host": "gpu-h800-02", "group": "gpu_h800", "status": "ok",
         "gpus": [{"index": i, "temperature_c": 41} for i in range(8)], "findings": []},
    ]  # fmt: skip
    result = {"inventory": "inv/prod", "status": "critical", "hosts_total": 2, "hosts": hosts,
              "summary": {"ok": 1, "warning": 0, "critical": 1, "unreachable": 0}}  # fmt: skip
    fleet.write_fleet(result, tmp_path / "reboot")
    seen = open_page(tmp_path / "reboot", "fleet.html", "fleet-reboot-pending")
    seen.assert_clean()
    assert (
        seen.data["grid-host"][0].startswith("gpu-h800-01") and reason in seen.data["grid-host"][0]
    )
    assert seen.data["cell-critical"] == ["no GPU readings (critical)"]
    assert len(seen.data["cell-ok"]) == 8
