"""The node change history on the lab (SSH fleet + Kubernetes, same names), for real: each
``nodes update`` run is a record in the fleet's ConfigMap in the lab's kube-apiserver;
``nodes history`` shows them; ``nodes rollback`` puts a host back to an earlier driver through
the same rolling update (seen in the host's ``nvidia-smi``, the lab's stand-in that prints what
the real one prints)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_nodes import NodesLab

pytestmark = pytest.mark.timeout(1200)  # a guard: on an idle machine it takes far less
H1 = "gpu-h800-01"
CONFIGMAP = "gpuops-node-history-test"  # the test inventory's gpuops_environment is "test"


def smi(nl: NodesLab, host: str) -> str:
    res = nl.fleet.ssh(host, "nvidia-smi")
    assert res.returncode == 0, res.stdout
    return str(res.stdout.splitlines()[2])


def records(nl: NodesLab) -> dict[int, dict[str, Any]]:
    """The records as stored in the ConfigMap (read with the lab's own client)."""
    cm = nl.kube.core.read_namespaced_config_map(CONFIGMAP, "default")
    doc = json.loads(cm.data["nodes.json"])
    assert doc["version"] == 1
    return {r["number"]: r for r in doc["records"]}


def number(record_id: str) -> int:
    fleet, _, n = record_id.rpartition("-")
    assert fleet == "test", record_id
    return int(n)


def test_each_update_is_recorded_and_rollback_restores_the_driver(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    inv = nodes_lab.inventory(tmp_path / "570", gpu_h800="570.133.20")
    assert "Driver Version: 550.90.07" in smi(nodes_lab, H1)
    jenkins = {"BUILD_USER_ID": "alice", "BUILD_URL": "https://ci.example/job/nodes/7/"}
    # the driver only: node_init's first run on a lab host takes longer than the test may
    update = ("nodes", "update", "-i", str(inv), "-l", H1, "--change", "driver")
    try:
        up = nodes_lab.gpuops(*update, tmp=tmp_path / "up", env=jenkins)
        assert up.rc == 0, up.stderr
        assert up.result["changed"] == [H1]
        assert "Driver Version: 570.133.20" in smi(nodes_lab, H1)
        again = nodes_lab.gpuops(*update, tmp=tmp_path / "2")
        assert again.rc == 0, again.stderr
        assert again.result["changed"] == [] and again.result["unchanged"] == [H1]
        first, second = number(up.result["record"]), number(again.result["record"])
        assert second == first + 1

        stored = records(nodes_lab)
        r1, r2 = stored[first], stored[second]
        assert (r1["who"], r1["who_from"]) == ("alice", "jenkins")
        assert r1["link"] == "https://ci.example/job/nodes/7/"
        assert r1["inventory_revision"] is None  # a copy in a temporary folder: no git
        assert (r1["action"], r1["status"], r1["limit"]) == ("update", "succeeded", H1)
        assert r1["change"] == ["nvidia_driver"] and r1["finished"] >= r1["started"]
        assert r1["hosts"][H1] == {
            "status": "changed",
            "group": "gpu_h800",
            "node": H1,
            "driver_before": "550.90.07",
            "cuda_before": "12.4",
            "driver_after": "570.133.20",
            "cuda_after": "12.8",
            "rolled_back": False,
            "reason": "",
        }
        assert r1["groups"] == {
            "gpu_h800": {"before": {"550.90.07": 1}, "after": {"570.133.20": 1}}
        }
        assert r2["hosts"][H1]["status"] == "unchanged"
        assert r2["groups"] == {
            "gpu_h800": {"before": {"570.133.20": 1}, "after": {"570.133.20": 1}}
        }
        assert r2["who_from"] == "os-user" and r2["link"] is None

        shown = nodes_lab.gpuops(
            "--output",
            "json",
            "nodes",
            "history",
            "-i",
            str(inv),
            "--last",
            "2",
            "--report-dir",
            str(tmp_path / "page"),
            tmp=tmp_path / "h",
        )
        assert shown.rc == 0, shown.stderr
        assert [r["number"] for r in shown.result["records"]] == [second, first]  # newest first
        assert shown.result["configmap"] == CONFIGMAP and shown.result["namespace"] == "default"
        page = (tmp_path / "page" / "node-history.html").read_text()
        assert f'data-key="record">test-{first}<' in page and shown.result["report"]["status"] == (
            "written"
        )

        # --to the second record: what it left is what runs, so the plan changes nothing
        same = nodes_lab.gpuops(
            "nodes",
            "rollback",
            "-i",
            str(inv),
            "-l",
            H1,
            "--to",
            f"test-{second}",
            "--check",
            tmp=tmp_path / "same",
        )
        assert same.rc == 0, same.stderr
        assert same.result["planned"] == [] and same.result["record"] is None

        # undo the upgrade: back to what H1 ran before it (550), through the rolling update
        back = nodes_lab.gpuops(
            "nodes",
            "rollback",
            "-i",
            str(inv),
            "-l",
            H1,
            "--before",
            str(first),
            tmp=tmp_path / "back",
        )
        assert back.rc == 0, back.stderr
        assert back.result["changed"] == [H1]
        assert [b["kind"] for b in back.result["batches"]] == ["canary"]
        assert "Driver Version: 550.90.07      CUDA Version: 12.4" in smi(nodes_lab, H1)
        rb = records(nodes_lab)[number(back.result["record"])]
        assert (rb["action"], rb["rollback_of"], rb["status"]) == ("rollback", first, "succeeded")
        assert rb["rollback_before"] is True
        assert rb["hosts"][H1]["driver_after"] == "550.90.07"
        assert not nodes_lab.node(H1).spec.unschedulable
    finally:
        nodes_lab.restore(H1)
