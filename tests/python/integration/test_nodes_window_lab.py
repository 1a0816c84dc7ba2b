"""Maintenance windows, aborts and ``--resume`` on the lab (SSH fleet + Kubernetes, same names),
for real: the two H800 hosts in batches of one (canary gpu-h800-01, then gpu-h800-02).

1. A window that closes mid-run (``Sat 22:00-Sun 06:00 Europe/Berlin``, real text through the
   real parser; the clock is the test's, injected through the gate's ``now``, the only fake):
   the canary fits its estimate, takes 50 minutes on that clock, and the next batch, needing
   50 of the 40 minutes left, is held (exit 3); the record names the host done and the one left.
2. ``--resume`` (in this process, where ansible-runner already ran the canary: it used to leave
   its own SIGTERM handler behind) is aborted by a SIGTERM as its first batch is admitted,
   between the rollout's canary and its next batch (sent by a test gate: a real signal at a
   known point, as a Jenkins abort): it ends cleanly (Aborted, exit 1) with a resumable record,
   the host left never cordoned.
3. The CLI's ``--resume`` continues from that record and finishes the last host.

Each run's hosts are read from its ansible-runner events (the playbook runs that changed
hosts), not from a check mode that would call finished hosts unchanged: each host touched
exactly once over the runs, in order. Two host changes in all (the suite's time).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_nodes import NodesLab

from gpuops.adapters.aborts import Aborted
from gpuops.core.rollout import BatchSize, Policy
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.nodes import gates
from gpuops.usecases.nodes import update as nodeupdate
from gpuops.usecases.nodes.window import WindowSpec

pytestmark = pytest.mark.timeout(900)
H1, H2 = "gpu-h800-01", "gpu-h800-02"
LIMIT = "gpu_h800"
NIGHT = "Sat 22:00-Sun 06:00 Europe/Berlin"
CONFIGMAP = "gpuops-node-history-test"


def utc(h: int, m: int = 0) -> datetime:
    return datetime(2026, 3, 29, h, m, tzinfo=UTC)  # the spring-forward night


class Clock:
    """The test's clock: the times given, one per reading (the gate reads it once at each
    admission and once at each batch's end)."""

    def __init__(self, *times: datetime) -> None:
        self.times = list(times)

    def __call__(self) -> datetime:
        return self.times.pop(0)


class AbortAt:
    """A test gate: at batch ``index``'s admission, SIGTERM to this process (what Jenkins sends
    on an abort), then up to 10 s for it to act; a swallowed signal lets the batch start."""

    name = "abort"

    def __init__(self, index: int) -> None:
        self.index = index

    def open(self, ctx: gates.GateContext) -> gates.BatchGate:
        return self

    def admit(self, batch: Any, hosts: Sequence[Any]) -> gates.Hold | None:
        if batch.index == self.index:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100):
                time.sleep(0.1)
        return None

    def done(self, batch: Any, hosts: Sequence[Any]) -> None:
        return None

    def close(self) -> None:
        return None


def touched(artifacts: Path) -> list[set[str]]:
    """The hosts of each ansible-runner run of an update, in order: the hosts its events name
    (a task started, ok, changed, failed, skipped or unreachable on them)."""
    runs = []
    folder = artifacts / "ansible" / "artifacts"
    for run in sorted(folder.iterdir()) if folder.exists() else []:
        hosts = set()
        for f in (run / "job_events").glob("*.json"):
            data = json.loads(f.read_text()).get("event_data") or {}
            if data.get("host"):
                hosts.add(data["host"])
        runs.append(hosts)
    return runs


def record(nl: NodesLab, record_id: str) -> dict[str, Any]:
    cm = nl.kube.core.read_namespaced_config_map(CONFIGMAP, "default")
    number = int(record_id.rpartition("-")[2])
    (found,) = [r for r in json.loads(cm.data["nodes.json"])["records"] if r["number"] == number]
    return dict(found)


def test_a_window_holds_mid_run_an_abort_ends_cleanly_and_resume_touches_each_host_once(
    nodes_lab: NodesLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inv = nodes_lab.inventory(tmp_path, gpu_h800="570.133.20")
    for key in [k for k in os.environ if k.startswith("GPUOPS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("KUBECONFIG", str(nodes_lab.kube.kubeconfig))

    def request(art: str, specs: tuple[Any, ...], resume: bool = False) -> Any:
        return nodeupdate.UpdateRequest(
            inventory=str(inv),
            limit=LIMIT,
            change=("nvidia_driver",),
            policy=Policy(1, BatchSize(1)),
            cluster=Cluster(str(nodes_lab.kube.kubeconfig)),
            artifacts_dir=str(tmp_path / art),
            known_hosts=nodes_lab.fleet.facts["known_hosts"],
            gates=specs,
            resume=resume,
        )

    try:
        # 1. the window: canary admitted at 04:30 CEST (90 min left, estimate 40 min), done at
        # 05:20 CEST; the next batch needs 50 min, 40 are left: held before it starts
        window = WindowSpec.of(NIGHT, "40m")
        clock = Clock(utc(2, 30), utc(3, 20), utc(3, 20))
        held = nodeupdate.update(
            request("one", (WindowSpec(window.window, window.estimate_s, clock),))
        )
        one = held.result.to_dict()
        assert held.problem is not None and held.problem.exit_code == 3, held.problem
        assert held.problem.message.startswith("rollout held: ")
        assert one["held"]["gate"] == "window"
        assert one["held"]["message"] == (
            "batch 1 needs about 50m (the mean of this run's 1 batch(es)); the window "
            f"{NIGHT} closes in 40m, at 2026-03-29T06:00+02:00"
        )
        assert (one["changed"], one["not_started"]) == ([H1], [H2])
        assert [b["status"] for b in one["batches"]] == ["done", "held"]
        assert one["resume"] == {"reason": one["stopped"], "done": [H1], "left": [H2], "failed": []}
        r1 = record(nodes_lab, one["record"])
        assert r1["status"] == "refused" and r1["resume"]["left"] == [H2]
        assert "570.133.20" in nodes_lab.fleet.ssh(H1, "nvidia-smi").stdout
        assert not clock.times  # the gate read the clock at each admission and end

        # 2. --resume: H2 alone, no canary (it passed); SIGTERM as its batch is admitted
        with pytest.raises(Aborted, match=r"aborted \(SIGTERM\)"):
            nodeupdate.update(request("two", (AbortAt(0),), resume=True))
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back as it was
        two = json.loads((tmp_path / "two" / "update.json").read_text())
        assert two["resumed_from"] == one["record"]
        assert [(b["kind"], b["hosts"]) for b in two["plan"]] == [("batch", [H2])]
        assert (two["changed"], two["not_started"], two["failed"]) == ([], [H2], [])
        assert two["stopped"] == "error: aborted (SIGTERM)"
        assert two["resume"]["done"] == [H1] and two["resume"]["left"] == [H2]
        r2 = record(nodes_lab, two["record"])
        assert r2["resumed_from"] == int(one["record"].rpartition("-")[2])
        assert r2["resume"]["left"] == [H2] and list(r2["hosts"]) == [H2]
        assert not nodes_lab.node(H2).spec.unschedulable  # never cordoned
        assert "550.90.07" in nodes_lab.fleet.ssh(H2, "nvidia-smi").stdout

        # 3. the CLI's --resume continues from the aborted run's record
        three = nodes_lab.gpuops(
            "nodes", "update", "-i", str(inv), "-l", LIMIT, "--change", "driver",
            "--batch-size", "1", "--resume", "--artifacts-dir", str(tmp_path / "three"),
            tmp=tmp_path / "cli",
        )  # fmt: skip
        assert three.rc == 0, three.stderr
        assert three.result["resumed_from"] == two["record"]
        assert three.result["changed"] == [H2] and three.result["resume"] is None
        assert [h["host"] for h in three.result["hosts"]] == [H2]
        assert record(nodes_lab, three.result["record"])["resume"] is None

        # what each run's playbooks touched: each host once, in order (run 2 ran none)
        runs = [touched(tmp_path / art) for art in ("one", "two", "three")]
        assert runs == [[{H1}], [], [{H2}]]
        for host in (H1, H2):
            assert "570.133.20" in nodes_lab.fleet.ssh(host, "nvidia-smi").stdout
            assert not nodes_lab.node(host).spec.unschedulable
    finally:
        nodes_lab.restore(H1, H2)
