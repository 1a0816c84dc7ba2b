"""``gpuops nodes update`` undoes a failed host on the lab, for real (SSH hosts that are kwok
nodes; the L40S group listed first, so its one host, without Fabric Manager, is the canary):
the canary whose GPU validation fails is put back to the driver it ran (seen in its
``nvidia-smi``), kept cordoned and tainted by the default policy, and no later host is
cordoned; an install failure in batch 2 is rolled back and batch 3 never starts; a second run
changes nothing.

Lab stand-ins, labelled: the failing validation is the lab's ``dcgmi`` (gpuops_lab.dcgmi,
a fault in the host's gpus.json) and the failing install the lab's ``.run`` installer
(``install_error``). Both faults stay until the test clears them; the test clears each when
gpuops says it rolls back (its progress log), which models a fault that came with the new
driver and leaves with it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.conftest_nodes import DEFAULT_DRIVERS, NodesLab

from gpuops_lab import hoststate

pytestmark = pytest.mark.timeout(600)
A1, A2 = "gpu-a100-01", "gpu-a100-02"
L1 = "gpu-l40s-01"
TAINT, CLAIMS = "gpuops.io/gpu-unhealthy", "gpuops.io/gpu-unhealthy-by"


def smi_header(nl: NodesLab, host: str) -> str:
    res = nl.fleet.ssh(host, "nvidia-smi")
    assert res.returncode == 0, res.stdout
    return str(res.stdout.splitlines()[2])


class OnProgress:
    """Calls ``action`` once, as soon as ``text`` appears in the run's progress.log."""

    def __init__(self, log: Path, text: str, action: Callable[[], None]) -> None:
        self.log, self.text, self.action = log, text, action
        self.done = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            if self.log.exists() and self.text in self.log.read_text():
                self.action()
                self.done.set()
                return
            time.sleep(0.1)

    def __enter__(self) -> OnProgress:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)


class Cordons:
    """Samples spec.unschedulable of nodes while a rollout runs."""

    def __init__(self, nl: NodesLab, names: list[str]) -> None:
        self.nl, self.names = nl, names
        self.seen: dict[str, set[bool]] = {n: set() for n in names}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            for n in self.names:
                self.seen[n].add(bool(self.nl.node(n).spec.unschedulable))
            time.sleep(0.3)

    def __enter__(self) -> Cordons:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)


def l40s_first(inventory: Path) -> Path:
    """The inventory with the L40S group listed first: the rollout order is the inventory's."""
    doc = yaml.safe_load(inventory.read_text())
    groups = doc["all"]["children"]["gpu_nodes"]["children"]
    doc["all"]["children"]["gpu_nodes"]["children"] = {
        "gpu_l40s": groups.pop("gpu_l40s"),
        **groups,
    }
    inventory.write_text(yaml.safe_dump(doc, sort_keys=False))
    return inventory


def untaint(nl: NodesLab, *nodes: str) -> None:
    for name in nodes:
        node = nl.node(name)
        kept = [t for t in node.spec.taints or [] if t.key != TAINT]
        nl.kube.core.patch_node(
            name,
            {"spec": {"taints": kept or None}, "metadata": {"annotations": {CLAIMS: None}}},
        )


def restore(nl: NodesLab, *hosts: str) -> None:
    nl.restore(*hosts)
    for h in hosts:
        hoststate.set_dcgm(nl.lab, h, failing={})
        group = next(x["group"] for x in nl.fleet.hosts if x["name"] == h)
        hoststate.restore_stack(nl.lab, h, DEFAULT_DRIVERS[group])
    untaint(nl, *hosts)


def by_host(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["host"]: h for h in result["hosts"]}


def test_a_canary_failing_validation_is_rolled_back_and_kept_cordoned(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    """Canary L1 (no Fabric Manager), then A1, which never starts."""
    inv = l40s_first(nodes_lab.inventory(tmp_path, gpu_l40s="570.133.20", gpu_a100="550.90.07"))
    art = tmp_path / "art"
    hoststate.set_dcgm(nodes_lab.lab, L1, failing={0: ["memory"]})  # level 2 runs memory
    assert "Driver Version: 550.90.07" in smi_header(nodes_lab, L1)
    try:
        with (
            Cordons(nodes_lab, [L1, A1]) as cordons,
            OnProgress(
                art / "progress.log",
                f"rolling back {L1} to 550.90.07",
                lambda: hoststate.set_dcgm(nodes_lab.lab, L1, failing={}),
            ) as cleared,
        ):
            run = nodes_lab.gpuops(
                "nodes", "update", "-i", str(inv), "-l", f"{L1},{A1}", "--change", "driver",
                "--batch-size", "1", "--validation-level", "2", "--artifacts-dir", str(art),
                tmp=tmp_path,
            )  # fmt: skip
        assert cleared.done.is_set(), run.stderr
        assert run.rc == 1, run.stderr
        result = run.result
        assert (result["rolled_back"], result["not_started"], result["changed"]) == (
            [L1],
            [A1],
            [],
        )
        assert result["summary"]["rolled-back"] == 1 and result["failed"] == []
        assert result["rollback"] == {"enabled": True, "after": "keep-cordoned"}
        assert result["validation_level"] == 2
        assert "over the failure budget of 0" in result["stopped"]
        l1 = by_host(result)[L1]
        assert l1["status"] == "rolled-back" and l1["failed_task"].endswith("Validate the GPUs")
        assert l1["validation"]["message"].startswith(f"validation failed on {L1}:")
        assert "dcgmi diag -r 2" in l1["validation"]["message"]
        assert (l1["driver_before"], l1["cuda_before"], l1["driver_after"]) == (
            "550.90.07",
            "12.4",
            "550.90.07",
        )
        assert (l1["rollback"]["to"], l1["rollback"]["status"]) == ("550.90.07", "rolled-back")
        assert l1["rollback"]["ident"] == "batch-00-rollback" and l1["tainted"] is True
        assert "kept cordoned (--after-rollback keep-cordoned)" in l1["reason"]
        # the host runs its old driver again, as its own nvidia-smi says
        assert "Driver Version: 550.90.07" in smi_header(nodes_lab, L1)
        # the policy: cordoned, tainted with our reason; the later host never cordoned
        node = nodes_lab.node(L1)
        assert node.spec.unschedulable
        assert [t.key for t in node.spec.taints or []].count(TAINT) == 1
        assert "nodes-update" in node.metadata.annotations[CLAIMS]
        assert cordons.seen[A1] == {False} and not nodes_lab.node(A1).spec.taints
        assert hoststate.gpu_state(nodes_lab.lab, A1)["driver"] == "535.161.08"

        # a second run on the rolled-back host, the inventory wanting what it runs now:
        # nothing changes (the cordon stays: keep-cordoned is for a person to lift)
        again = nodes_lab.gpuops(
            "nodes", "update", "-i", str(nodes_lab.inventory(tmp_path / "b")), "-l", L1,
            "--change", "driver", tmp=tmp_path / "again",
        )  # fmt: skip
        assert again.rc == 0, again.stderr
        assert (again.result["changed"], again.result["batches"]) == ([], [])
        assert again.result["summary"]["unchanged"] == 1
        assert "Driver Version: 550.90.07" in smi_header(nodes_lab, L1)
        assert nodes_lab.node(L1).spec.unschedulable
    finally:
        restore(nodes_lab, L1, A1)


def test_an_install_failure_in_batch_2_is_rolled_back_and_batch_3_never_starts(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    """Canary L1, batch 2 A1 (its install fails), batch 3 A2."""
    inv = l40s_first(nodes_lab.inventory(tmp_path, gpu_l40s="570.133.20", gpu_a100="550.90.07"))
    art = tmp_path / "art"
    hoststate.set_gpu_state(nodes_lab.lab, A1, install_error="module-load")
    try:
        with (
            Cordons(nodes_lab, [A2]) as cordons,
            OnProgress(
                art / "progress.log",
                f"rolling back {A1} to 535.161.08",
                lambda: hoststate.set_gpu_state(nodes_lab.lab, A1, install_error=None),
            ),
        ):
            run = nodes_lab.gpuops(
                "nodes", "update", "-i", str(inv), "-l", f"{L1},{A1},{A2}", "--change",
                "driver", "--batch-size", "1", "--after-rollback", "uncordon",
                "--artifacts-dir", str(art), tmp=tmp_path,
            )  # fmt: skip
        assert run.rc == 1, run.stderr
        result = run.result
        assert [b["hosts"] for b in result["plan"]] == [[L1], [A1], [A2]]
        assert [b["status"] for b in result["batches"]] == ["done", "failed", "not-started"]
        assert result["changed"] == [L1] and result["rolled_back"] == [A1]
        assert result["not_started"] == [A2]
        a1 = by_host(result)[A1]
        assert "Install the driver" in a1["failed_task"] and a1["validation"] is None
        assert "Unable to load the kernel module 'nvidia.ko'" in a1["reason"]
        assert (a1["rollback"]["to"], a1["rollback"]["ident"]) == (
            "535.161.08",
            "batch-01-rollback",
        )
        assert a1["driver_after"] == "535.161.08" and a1["uncordoned"] is True
        assert "uncordoned (--after-rollback uncordon)" in a1["reason"]
        assert "Driver Version: 570.133.20" in smi_header(nodes_lab, L1)
        assert "Driver Version: 535.161.08" in smi_header(nodes_lab, A1)
        # the uncordon policy: the node takes work again and our taint went with the cordon
        node = nodes_lab.node(A1)
        assert not node.spec.unschedulable
        assert TAINT not in [t.key for t in node.spec.taints or []]
        # batch 3 never started: its host never cordoned, its driver untouched
        assert cordons.seen[A2] == {False}
        assert hoststate.gpu_state(nodes_lab.lab, A2)["driver"] == "535.161.08"
    finally:
        restore(nodes_lab, L1, A1, A2)
