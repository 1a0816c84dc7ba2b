"""``gpuops nodes inspect`` on the lab fleet, for real: one ssh session per host running the
shipped script, the faulty host and its Xid flagged and nothing else, exit 3, the JSON and
JUnit reports, and one alert per incident to a local webhook receiver."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_nodes import NodesLab
from junitcheck import assert_junit_well_formed

from gpuops_lab import fleet as labfleet
from gpuops_lab import hoststate

pytestmark = pytest.mark.timeout(600)
FAULTY = "gpu-a100-03"


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []  # noqa: RUF012 - test collector

    def do_POST(self) -> None:
        _Hook.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[str]:
    _Hook.received.clear()
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/incident"
    server.shutdown()
    server.server_close()


def test_inspection_flags_the_faulty_host_and_its_xid_once(
    nodes_lab: NodesLab, tmp_path: Path, hook: str
) -> None:
    inv = nodes_lab.fleet.facts["inventory"]
    line = hoststate.inject_xid(
        nodes_lab.lab,
        FAULTY,
        5,
        48,
        "Ch 00000008, An uncorrectable double bit error (DBE) has been detected on GPU in the "
        "framebuffer at partition 2, subpartition 0.",
    )
    assert "NVRM: Xid (PCI:0000:90:00): 48, pid='<unknown>'" in line
    args = [
        "nodes",
        "inspect",
        "-i",
        inv,
        "--report-dir",
        str(tmp_path / "report"),
        "--alert-state",
        str(tmp_path / "alerts.json"),
        "--link",
        "https://jenkins.example.invalid/job/inspect/7/",
    ]
    env = {"GPUOPS_WEBHOOK_URL": hook}
    try:
        run = nodes_lab.gpuops(*args, tmp=tmp_path, env=env)
        assert run.rc == 3, run.stderr
        doc = run.result
        assert doc["critical_hosts"] == [FAULTY] and doc["unreachable_hosts"] == []
        assert doc["summary"] == {"ok": 5, "warning": 0, "critical": 1, "unreachable": 0}
        hosts = {h["host"]: h for h in doc["hosts"]}
        for name, h in hosts.items():
            assert len(h["gpus"]) == 8 and h["gpus_expected"] == 8, name
            if name != FAULTY:
                assert h["findings"] == [] and h["xids"] == [], name
        bad = hosts[FAULTY]
        (xid,) = bad["xids"]
        assert (xid["xid"], xid["name"], xid["needs_reset"]) == (48, "Double-bit ECC error", True)
        gpu5 = bad["gpus"][5]
        assert gpu5["worst"] == "critical" and "xid-48" in gpu5["findings"]
        assert gpu5["temperature_c"] == 92 and gpu5["ecc"]["uncorrected_volatile"] == 3
        assert {f["gpu"] for f in bad["findings"]} == {5}
        # one alert for the incident, with what an on-call person needs
        (alert,) = _Hook.received
        assert alert["event"] == "gpu-node-incident" and alert["host"] == FAULTY
        assert alert["group"] == "gpu_a100" and alert["environment"] == "test"
        assert "Xid 48" in alert["text"] and alert["link"].endswith("/inspect/7/")
        assert doc["alerts"] == [
            {
                "host": FAULTY,
                "fingerprint": alert["fingerprint"],
                "status": "sent",
                "detail": "HTTP 204",
            }
        ]
        # reports: the JSON result and one JUnit test case per host
        assert json.loads(Path(doc["reports"]["json"]).read_text())["critical_hosts"] == [FAULTY]
        junit = assert_junit_well_formed(Path(doc["reports"]["junit"]).read_text())
        suite = junit.find("testsuite")
        assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("6", "1")
        failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
        assert failed == [FAULTY]
        # the same incident on the next run is not alerted again
        again = nodes_lab.gpuops(*args, tmp=tmp_path, env=env)
        assert again.rc == 3 and len(_Hook.received) == 1
        assert again.result["alerts"][0]["status"] == "suppressed"
    finally:
        labfleet.restart(nodes_lab.lab, FAULTY)  # a reboot clears the kernel log
    assert "Xid" not in hoststate.kernel_log(nodes_lab.lab, FAULTY)


def test_reboot_pending_and_unreachable_hosts(nodes_lab: NodesLab, tmp_path: Path) -> None:
    inv = nodes_lab.fleet.facts["inventory"]
    hoststate.set_reboot_pending(nodes_lab.lab, "gpu-h800-01", "570.133.20")
    labfleet.stop_sshd(nodes_lab.lab, "gpu-l40s-01")
    try:
        run = nodes_lab.gpuops(
            "nodes", "inspect", "-i", inv, "-l", "gpu_h800:gpu_l40s", tmp=tmp_path
        )
        assert run.rc == 3, run.stderr
        hosts = {h["host"]: h for h in run.result["hosts"]}
        assert hosts["gpu-h800-01"]["nvidia_smi"]["failure"] == "reboot-pending"
        assert hosts["gpu-h800-01"]["nvidia_smi"]["rc"] == 18
        assert hosts["gpu-l40s-01"]["status"] == "unreachable"
        assert hosts["gpu-h800-02"]["status"] == "ok"
        labfleet.start_sshd(nodes_lab.lab, "gpu-l40s-01")
        hoststate.set_gpu_state(nodes_lab.lab, "gpu-h800-01", driver="550.90.07")
        labfleet.stop_sshd(nodes_lab.lab, "gpu-l40s-01")
        only_down = nodes_lab.gpuops(
            "nodes", "inspect", "-i", inv, "-l", "gpu_h800:gpu_l40s", tmp=tmp_path
        )
        assert only_down.rc == 4, only_down.stderr  # nothing critical, a host not inspected
        assert only_down.doc["error"]["category"] == "unreachable"  # type: ignore[index]
    finally:
        labfleet.start_sshd(nodes_lab.lab, "gpu-l40s-01")
        hoststate.set_gpu_state(nodes_lab.lab, "gpu-h800-01", driver="550.90.07")


def test_a_mount_the_hosts_lack_is_a_finding_and_a_relative_one_is_refused(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    """``--mount /no-such-mount`` was silently left out (df's complaint skipped as an
    unparsable line): now each host says it could not check it (a warning)."""
    inv = nodes_lab.fleet.facts["inventory"]
    missing = "/no-such-mount-gpuops"
    run = nodes_lab.gpuops("nodes", "inspect", "-i", inv, "-l", "gpu_h800", "--mount", "/",
                           "--mount", missing, "--report-dir", str(tmp_path / "r"),
                           tmp=tmp_path)  # fmt: skip
    assert run.rc == 0, run.stderr
    for h in run.result["hosts"]:
        assert [d["mount"] for d in h["disks"]] == ["/"], h["host"]
        (finding,) = [f for f in h["findings"] if f["check"] == "disk-unchecked"]
        assert finding["severity"] == "warning" and finding["value"] == missing, finding
        assert h["status"] == "warning"
    assert_junit_well_formed(Path(run.result["reports"]["junit"]).read_text())
    for bad in ("var", "./var", "", "~/x"):
        refused = nodes_lab.gpuops("nodes", "inspect", "-i", inv, "--mount", bad, tmp=tmp_path)
        assert refused.doc is not None, refused.stderr
        assert refused.rc == 2 and refused.doc["error"]["field"] == "mounts", refused.stderr
