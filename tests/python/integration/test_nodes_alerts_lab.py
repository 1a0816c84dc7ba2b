"""Firing alerts hold a rollout (issue 21), against the lab's real Alertmanager (Debian
``prometheus-alertmanager`` 0.25, started by the lab in the nodes lab's directory).

Alerts reach it through its API v2 (``POST /api/v2/alerts``, what Prometheus' notifier sends):
the lab's Prometheus evaluates no alerting rule, so the test posts the alerts itself; silences
are real Alertmanager silences. Nothing here is a stand-in but the GPU fleet's hosts (the
nodes lab's).
"""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from integration.conftest_nodes import NodesLab

from gpuops.core import alertmatchers
from gpuops.usecases.nodes import alerts as alertsgate
from gpuops.usecases.nodes.gates import GateContext
from gpuops_lab import alertmanager as labam
from gpuops_lab import proc

pytestmark = pytest.mark.timeout(300)
H1, H2 = "gpu-h800-01", "gpu-h800-02"
SELECTOR = 'severity="critical",alertname=~"Gpu.*"'


@pytest.fixture(scope="module")
def alertmanager(nodes_lab: NodesLab) -> Iterator[str]:
    """The lab's Alertmanager in the nodes lab (started for this module, stopped after: the
    process the lab recorded, pid and start time, is gone, and so are its files)."""
    lab = nodes_lab.lab
    record = None
    try:
        lab.up(["alertmanager"])
        record = proc.recorded(labam.PROC, lab.dir)
        yield str(lab.facts("alertmanager")["url"])
    finally:
        lab.stop(["alertmanager"])
    assert record is not None and not record.is_running(), record
    assert not (lab.dir / "alertmanager").exists() and not lab.facts("alertmanager")


def _silence(url: str, matchers: dict[str, str], lasts_s: float = 60) -> None:
    now = datetime.now(UTC)
    doc = {
        "matchers": [{"name": k, "value": v, "isRegex": False} for k, v in matchers.items()],
        "startsAt": now.isoformat(),
        "endsAt": (now + timedelta(seconds=lasts_s)).isoformat(),
        "createdBy": "gpuops-lab-test",
        "comment": "a muted alert holds nothing",
    }
    req = urllib.request.Request(  # noqa: S310 (the lab's loopback URL)
        f"{url}/api/v2/silences",
        data=json.dumps(doc).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310
        assert resp.status == 200


def driver(nl: NodesLab, host: str) -> str:
    """The driver the host runs, as its nvidia-smi's header line says."""
    out = str(nl.fleet.ssh(host, "nvidia-smi").stdout)
    return next(line for line in out.splitlines() if "Driver Version:" in line)


def _gate(url: str, wait_s: float, said: list[str]) -> alertsgate.AlertsGate:
    spec = alertsgate.AlertsSpec(
        url=url, matchers=alertmatchers.parse(SELECTOR), wait_s=wait_s, recheck_s=0.5
    )
    ctx = GateContext(kube=None, inventory=None, rollout=None, say=said.append)  # type: ignore[arg-type]
    gate = spec.open(ctx)
    assert isinstance(gate, alertsgate.AlertsGate)
    return gate


def test_the_gate_asks_the_real_alertmanager_waits_for_a_resolve_and_fails_closed(
    nodes_lab: NodesLab, alertmanager: str
) -> None:
    """The gate in-process against the real Alertmanager: what does not match or is silenced
    holds nothing; an alert that resolves within the wait lets the batch start; an
    Alertmanager that is down holds (fail closed); the lab's status and stop see it."""
    said: list[str] = []
    gate = _gate(alertmanager, 20, said)
    # each resolves by itself within 20 s: no later test sees them
    labam.post_alert(alertmanager, {"alertname": "GpuHot", "severity": "warning"}, lasts_s=20)
    labam.post_alert(alertmanager, {"alertname": "DiskFull", "severity": "critical"}, lasts_s=20)
    silenced = {"alertname": "GpuSilenced", "severity": "critical"}
    _silence(alertmanager, silenced, lasts_s=30)
    labam.post_alert(alertmanager, silenced, lasts_s=20)
    t0 = time.monotonic()
    assert gate.admit(None, []) is None  # type: ignore[arg-type]
    assert said == [] and time.monotonic() - t0 < 2  # asked once, nothing fires for it

    labam.post_alert(alertmanager, {"alertname": "GpuXid", "severity": "critical"}, lasts_s=2)
    t0 = time.monotonic()
    assert gate.admit(None, []) is None  # type: ignore[arg-type]
    waited = time.monotonic() - t0
    assert 1.0 < waited < 8, waited  # it held until Alertmanager resolved the alert
    assert "1 alert(s) fire: 'GpuXid'{severity='critical'}" in said[0], said
    assert said[-1].startswith("[alerts] no matching alert fires any more after"), said

    with socket.socket() as s:  # a port nobody listens on: Alertmanager is down
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}"
    hold = _gate(down, 1, []).admit(None, [])  # type: ignore[arg-type]
    assert hold is not None and hold.gate == "alerts"
    assert "held (fail closed): cannot reach Alertmanager" in hold.message, hold.message

    status = nodes_lab.lab.status()["components"]["alertmanager"]
    record = proc.recorded(labam.PROC, nodes_lab.lab.dir)
    assert status["healthy"] and record is not None and record.is_running()
    assert status["pid"] == record.pid and record.argv[0] == "/usr/bin/prometheus-alertmanager"


def test_a_firing_alert_holds_the_next_batch_naming_it_and_touches_nothing(
    nodes_lab: NodesLab, alertmanager: str, tmp_path: Path
) -> None:
    """``nodes update`` with the alerts gate while a matching alert fires: the next batch
    (here the canary, the first batch that would start) is held after --alerts-wait, exit 3,
    the hold names the alert; no host was cordoned or changed; the node history record says
    the run was held."""
    labels = {"alertname": "GpuXidErrors", "severity": "critical", "instance": H1}
    labam.post_alert(alertmanager, labels, lasts_s=900)  # resolved by the test at its end
    inv = nodes_lab.inventory(tmp_path, gpu_h800="570.133.20")
    before = [driver(nodes_lab, h) for h in (H1, H2)]
    run = nodes_lab.gpuops(
        "nodes", "update", "-i", str(inv), "-l", "gpu_h800",
        "--alerts-url", alertmanager, "--alerts-selector", SELECTOR, "--alerts-wait", "2",
        tmp=tmp_path / "held",
    )  # fmt: skip
    try:
        assert run.rc == 3, run.stderr
        assert run.doc is not None
        error = run.doc["error"]
        assert error["category"] == "gate-refused" and error["exit_code"] == 3, error
        message = error["message"]
        assert message.startswith("rollout held: alerts held batch 0: 1 alert(s) matching "), (
            message
        )
        assert "'GpuXidErrors'{instance='gpu-h800-01', severity='critical'}" in message
        result = run.result
        assert result["held"]["gate"] == "alerts"
        details = result["held"]["details"]
        assert details["url"] == alertmanager and details["firing"] == 1
        assert details["selector"] == 'severity="critical",alertname=~"Gpu.*"'
        assert [a["labels"] for a in details["alerts"]] == [labels]
        assert details["waited_s"] >= 2
        assert [b["status"] for b in result["batches"]] == ["held", "not-started"]
        assert result["changed"] == [] and result["not_started"] == [H1, H2]
        assert "[alerts] 1 alert(s) fire: 'GpuXidErrors'" in run.stderr
        assert "[canary 1/2] held by the alerts" in run.stderr
        assert result["record"], result  # the node history record of the held run
        for h in (H1, H2):  # nothing touched
            assert not nodes_lab.node(h).spec.unschedulable
        assert [driver(nodes_lab, h) for h in (H1, H2)] == before
        assert "Driver Version: 550.90.07" in before[0]
    finally:
        labam.post_alert(alertmanager, labels, lasts_s=0)  # resolved
