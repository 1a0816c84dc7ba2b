"""The GPU node pages' contexts (pure): what the fleet health and node update pages say for
a result, and that other documents are refused as input (exit 2), never half-rendered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuops.core import rollout
from gpuops.errors import InvalidInput
from gpuops.render.html import fleet, nodeupdate
from gpuops.usecases.nodes.records import BatchRecord, HostRecord, Rollout


def _inspect(*hosts: dict[str, Any]) -> dict[str, Any]:
    summary = {s: sum(1 for h in hosts if h["status"] == s) for s in fleet._STATUS_ORDER}
    worst = "critical" if summary["critical"] else "ok"
    return {
        "inventory": "inv/hosts.yml",
        "status": worst,
        "summary": summary,
        "hosts_total": len(hosts),
        "hosts": list(hosts),
    }


def _host(name: str, group: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"host": name, "group": group, "status": status, **extra}


def test_fleet_lists_the_worst_hosts_first_and_counts_per_group() -> None:
    result = _inspect(
        _host("a1", "gpu_a100", "ok", gpus=[{"temperature_c": 41}, {"temperature_c": 57}]),
        _host("a2", "gpu_a100", "critical", xids=[{"xid": 79, "needs_reset": True}]),
        _host("h1", "gpu_h800", "unreachable"),
        _host("h2", "gpu_h800", "warning"),
    )
    ctx = fleet.fleet_context(result)
    assert [h["host"] for h in ctx["hosts"]] == ["a2", "h1", "h2", "a1"]
    assert ctx["hosts"][3]["temp"] == "57"
    groups = {g["name"]: g for g in ctx["groups"]}
    assert (groups["gpu_a100"]["hosts"], groups["gpu_a100"]["critical"]) == (2, 1)
    assert (groups["gpu_h800"]["unreachable"], groups["gpu_h800"]["warning"]) == (1, 1)
    assert [(x["host"], x["xid"], x["needs_reset"]) for x in ctx["xids"]] == [("a2", "79", True)]
    assert ctx["verdict_class"] == "bad"


def test_a_large_fleet_lists_a_capped_number_of_hosts() -> None:
    many = [_host(f"n{i:04d}", "g", "ok") for i in range(fleet.HOSTS_LISTED + 7)]
    ctx = fleet.fleet_context(_inspect(*many))
    assert len(ctx["hosts"]) == fleet.HOSTS_LISTED and ctx["hosts_more"] == 7


def _rollout(**kw: Any) -> Rollout:
    ro = Rollout("inv", None, "test", ["nvidia_driver"], rollout.Policy(), False, None, **kw)
    ro.hosts = {
        "b": HostRecord("b", "g", None, batch=1, status=rollout.CHANGED, changed_tasks=["x"]),
        "a": HostRecord("a", "g", None, batch=0, status=rollout.FAILED, reason="boom"),
        "c": HostRecord("c", "g", None, batch=2, status=rollout.NOT_STARTED),
    }
    ro.batches = [BatchRecord(0, rollout.CANARY, ["a"], status="failed")]
    return ro


@pytest.mark.parametrize(
    ("changes", "verdict"),
    [
        ({}, "failed"),
        ({"refused": True}, "refused"),
        ({"check": True}, "plan"),
    ],
)
def test_the_rollout_verdict(changes: dict[str, Any], verdict: str) -> None:
    doc = {**_rollout().to_dict(), **changes}
    assert nodeupdate.rollout_context(doc)["verdict"] == verdict


def test_a_rollout_without_failures_is_done_and_hosts_are_ordered_failed_first() -> None:
    doc = _rollout().to_dict()
    assert [h["host"] for h in nodeupdate.rollout_context(doc)["hosts"]] == ["a", "c", "b"]
    doc["summary"]["failed"] = 0
    assert nodeupdate.rollout_context(doc)["verdict"] == "done"
    assert nodeupdate.rollout_context({**doc, "stopped": "why"})["verdict"] == "stopped"


@pytest.mark.parametrize(
    "doc",
    [
        {"verdict": "fits", "classes": []},  # a headroom result
        {"inventory": "x", "status": "ok", "summary": {}, "hosts_total": 1, "hosts": "h"},
        {"inventory": "x", "status": "ok", "summary": {}, "hosts_total": 1, "hosts": [1]},
    ],
)
def test_other_documents_are_refused_as_input(doc: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput) as err:
        fleet.fleet_context(doc)
    assert err.value.field == "input"
    with pytest.raises(InvalidInput):
        nodeupdate.rollout_context(doc)


def test_each_gpu_cell_takes_its_worst_finding_and_names_its_values() -> None:
    gpus = [
        {"index": i, "temperature_c": 40 + i, "ecc": {"uncorrected_volatile": 0}} for i in range(3)
    ]
    gpus.append({"index": 3, "lost": True})
    findings = [
        {"check": "temperature", "severity": "warning", "message": "GPU 1: 86 C", "gpu": 1},
        {"check": "fan", "severity": "warning", "message": "GPU 2: fan", "gpu": 2},
        {"check": "ecc-uncorrected", "severity": "critical", "gpu": 2,
         "message": "GPU 2: 3 uncorrected ECC errors"},
        {"check": "disk-free", "severity": "warning", "message": "disk 10 % free", "gpu": None},
    ]  # fmt: skip
    ctx = fleet.fleet_context(_inspect(_host("a", "g", "critical", gpus=gpus, findings=findings)))
    cells = ctx["hosts"][0]["cells"]
    assert [c["severity"] for c in cells] == ["ok", "warning", "critical", "critical"]
    assert cells[0]["readings"][0] == "40 °C" and cells[0]["findings"] == []
    assert cells[2]["findings"] == ["GPU 2: fan", "GPU 2: 3 uncorrected ECC errors"]
    assert cells[3]["findings"] == ["lost"] and cells[3]["readings"][0] == "- °C"
    assert ctx["gpu_columns"] == 4
    assert ctx["thresholds"] == []  # a result without limits shows none
    # a full disk is the host's, not its GPUs': named in the host list, no GPU coloured by it
    assert ctx["hosts"][0]["wide"] == {"severity": "ok", "findings": []}


def test_a_host_wide_gpu_finding_colours_every_gpu_of_the_host() -> None:
    gpus = [{"index": i, "temperature_c": 40} for i in range(2)]
    missing = {"check": "gpu-missing", "severity": "critical", "gpu": None,
               "message": "nvidia-smi lists 2 GPUs, 8 expected"}  # fmt: skip
    ctx = fleet.fleet_context(_inspect(_host("a", "g", "critical", gpus=gpus, findings=[missing])))
    [h] = ctx["hosts"]
    assert [c["severity"] for c in h["cells"]] == ["critical", "critical"]
    assert h["wide"] == {"severity": "critical", "findings": [missing["message"]]}
    assert all(c["findings"] == [] for c in h["cells"])  # named once, under the host


def test_a_host_waiting_for_its_reboot_is_one_critical_cell_saying_so(tmp_path: Path) -> None:
    """nvidia-smi fails with the version mismatch: no GPU readings at all, one row cell."""
    pending = {"check": "reboot-pending", "severity": "critical", "gpu": None,
               "message": "Driver/library version mismatch: an installed driver waits for a "
               "reboot: Failed to initialize NVML: Driver/library version mismatch"}  # fmt: skip
    ok = _host("b", "g", "ok", gpus=[{"index": 0, "temperature_c": 40}])
    result = _inspect(_host("a", "g", "critical", gpus=[], findings=[pending]), ok)
    ctx = fleet.fleet_context(result)
    by = {h["host"]: h for h in ctx["hosts"]}
    assert by["a"]["cells"] == [] and by["a"]["wide"]["severity"] == "critical"
    assert by["a"]["wide"]["findings"] == [pending["message"]]
    assert by["b"]["wide"] == {"severity": "ok", "findings": []}
    html = fleet.write_fleet(result, tmp_path).page.read_text()
    assert 'colspan="1"' in html and "no GPU readings (critical)" in html
    assert "waits for a reboot" in html


def test_thresholds_are_shown_per_group() -> None:
    result = _inspect(_host("a", "g1", "ok"), _host("b", "g2", "ok"))
    result["thresholds"] = {"g2": {"fan_warning_pct": 90, "xid_ignore": [13]},
                            "g1": {"fan_warning_pct": 95, "xid_ignore": []}}  # fmt: skip
    ctx = fleet.fleet_context(result)
    assert ctx["threshold_groups"] == ["g1", "g2"]
    assert ctx["thresholds"] == [
        {"name": "fan_warning_pct", "limits": ["95", "90"]},
        {"name": "xid_ignore", "limits": ["none", "13"]},
    ]


def test_the_timeline_puts_each_batch_at_its_time_and_names_the_unstarted() -> None:
    ro = _rollout()
    ro.check = False
    ro.timings_s = {"preflight": 2.0, "plan": 10.0}
    ro.batches = [
        BatchRecord(0, rollout.CANARY, ["a"], status="done", start_s=12.0,
                    phases_s={"kubernetes_before": 1.0, "ansible": 5.0, "kubernetes_after": 0.5}),
        BatchRecord(1, rollout.BATCH, ["b", "c", "d", "e"], status="failed", start_s=18.5,
                    phases_s={"kubernetes_before": 2.0, "ansible": 3.0}),
        BatchRecord(2, rollout.BATCH, ["f"]),
    ]  # fmt: skip
    rows = nodeupdate.timeline_rows(ro.to_dict())
    assert [r["label"] for r in rows] == [
        "pre-flight and plan",
        "canary 0: a (done)",
        "batch 1: b, c, d +1 (failed)",
        "batch 2: f (not-started)",
    ]
    assert [r["start"] for r in rows] == [0.0, 12.0, 18.5, 0.0]
    assert [r["phases"] for r in rows] == [
        [12.0, 0.0, 0.0, 0.0],
        [0.0, 1.0, 5.0, 0.5],
        [0.0, 2.0, 3.0, 0.0],
        [0.0, 0.0, 0.0, 0.0],  # never started: a label, no bar
    ]
    chart = nodeupdate._timeline_chart(ro.to_dict())
    assert chart is not None and "batch 2: f (not-started)" in chart.svg
    assert "<script" not in chart.svg and "style=" not in chart.svg.replace("pg-hidden", "")
    ro.check = True
    assert nodeupdate._timeline_chart(ro.to_dict()) is None  # a plan has no times to draw
