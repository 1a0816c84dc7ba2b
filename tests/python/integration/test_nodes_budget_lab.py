"""The cluster's disruption budget on the lab (real kube-apiserver, kwok nodes, the SSH fleet):
two ``gpuops nodes update`` processes of two inventories (the two A100 hosts, one class) forced
to overlap never have more than ``max_unavailable`` A100 nodes unschedulable at once, counted
by a watcher of its own on the API server's node watch events; the first is paused (SIGSTOP)
while it holds the budget with its node cordoned (waiting for a training pod), the second
waits; the first is then killed (SIGKILL: a lost Jenkins agent), an operator uncordons its node
and the second recovers the dead holder's share once its lease has passed, and finishes.
In-process against the same API server: a fresh holder is named by a refusal, Kured's lock
annotation (kured 1.23.0's JSON, on a DaemonSet the test makes: a lab stand-in for Kured,
whose pods do not run here) counts its node, and a run that lost its share while stopped is
stopped by the gate's confirm before it would cordon anything.

One test (the nodes lab is the session's): one driver update of one host is the main cost.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_kube import wait_until
from integration.conftest_nodes import GPUOPS, NodesLab
from kubernetes import watch
from kubernetes.client import AppsV1Api, CoordinationV1Api
from kubernetes.client.exceptions import ApiException

from gpuops.adapters.kube import KubeClient
from gpuops.core import disruption
from gpuops.core.disruption import BudgetLimit
from gpuops.errors import OperationFailed
from gpuops.usecases.nodes import budget
from gpuops.usecases.nodes.gates import GateContext, Hold
from gpuops_lab import kube as labkube

pytestmark = pytest.mark.timeout(600)
A1, A2 = "gpu-a100-01", "gpu-a100-02"
NS = "budget-test"
LEASE_S = 6


class Watcher:
    """Counts the class's unschedulable nodes from node watch events (not from gpuops)."""

    def __init__(self, nl: NodesLab, cls: str) -> None:
        self.nl, self.selector = nl, f"{disruption.CLASS_LABEL}={cls}"
        self.down: set[str] = set()
        self.most = 0
        self.seen: set[str] = set()  # every node seen unschedulable
        self.ready = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(30)

    def _count(self, node: Any) -> None:
        name = node.metadata.name
        if node.spec.unschedulable:
            self.down.add(name)
            self.seen.add(name)
        else:
            self.down.discard(name)
        self.most = max(self.most, len(self.down))

    def _run(self) -> None:
        core = self.nl.kube.core
        listed = core.list_node(label_selector=self.selector)
        for node in listed.items:
            self._count(node)
        version = listed.metadata.resource_version
        self.ready.set()
        while not self.stop.is_set():
            w = watch.Watch()
            for event in w.stream(
                core.list_node,
                label_selector=self.selector,
                resource_version=version,
                timeout_seconds=2,
            ):
                self._count(event["object"])
                version = event["object"].metadata.resource_version
                if self.stop.is_set():
                    w.stop()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)


class Run:
    """``gpuops nodes update`` in its own session (SIGSTOP/SIGKILL reach its whole group);
    its stderr lines are kept as they come."""

    def __init__(self, nl: NodesLab, tmp: Path, inv: Path, host: str, *extra: str) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.result = tmp / "result.json"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("GPUOPS_")},
            "KUBECONFIG": str(nl.kube.kubeconfig),
            "GPUOPS_RESULT_FILE": str(self.result),
            "GPUOPS_ERROR_FILE": str(tmp / "error.json"),
            "GPUOPS_KNOWN_HOSTS": nl.fleet.facts["known_hosts"],
        }
        args = [GPUOPS, "nodes", "update", "-i", str(inv), "-l", host, "--change", "driver"]
        args += ["--canary", "0", "--budget-max-unavailable", "1", "--budget-lease", str(LEASE_S)]
        self.proc = subprocess.Popen(
            [*args, *extra, "--artifacts-dir", str(tmp / "art")],
            env=env,
            cwd=tmp,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def signal(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)

    def wait(self, timeout: float) -> int:
        rc = self.proc.wait(timeout)
        self.reader.join(10)
        return rc


def _holders(nl: NodesLab, cls: str) -> list[dict[str, Any]]:
    lease = CoordinationV1Api(nl.kube.api).read_namespaced_lease(
        disruption.lease_name(cls), disruption.NAMESPACE
    )
    return list(json.loads(lease.metadata.annotations[disruption.HOLDERS_ANNOTATION]))


def test_two_updates_share_the_budget_a_stopped_holder_waits_a_killed_one_is_recovered(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    core = nodes_lab.kube.core
    cls = nodes_lab.node(A1).metadata.labels[disruption.CLASS_LABEL]
    assert nodes_lab.node(A2).metadata.labels[disruption.CLASS_LABEL] == cls
    inv1 = nodes_lab.inventory(tmp_path / "one", gpu_a100="550.90.07")
    inv2 = nodes_lab.inventory(tmp_path / "two", gpu_a100="550.90.07")
    try:
        core.create_namespace({"metadata": {"name": NS}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    # a training pod on A1: the first run, once it cordoned A1, waits for it (a fixed point)
    core.create_namespaced_pod(NS, labkube.pod_body("trainer", namespace=NS, node=A1, gpus=4))
    wait_until(lambda: core.read_namespaced_pod("trainer", NS).status.phase == "Running", "pod")
    kube = KubeClient.connect(str(nodes_lab.kube.kubeconfig))
    watcher = Watcher(nodes_lab, cls)
    try:
        _two_runs(nodes_lab, kube, cls, tmp_path, inv1, inv2)
    finally:
        watcher.close()
        try:
            core.delete_namespaced_pod("trainer", NS, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:
                raise
        nodes_lab.restore(A1, A2)
    # the independent count: each node went down, never both at once
    assert watcher.seen == {A1, A2}, watcher.seen
    assert watcher.most == 1, watcher.most

    _kured_counts(nodes_lab, kube, cls)
    _a_stopped_gate_that_lost_its_share_does_not_cordon(nodes_lab, kube, cls)


def _two_runs(
    nodes_lab: NodesLab, kube: KubeClient, cls: str, tmp_path: Path, inv1: Path, inv2: Path
) -> None:
    core = nodes_lab.kube.core
    one1 = {"*": BudgetLimit(count=1)}
    first = second = None
    try:
        first = Run(nodes_lab, tmp_path / "r1", inv1, A1)
        wait_until(lambda: first.said("waiting for 1 running GPU pod"), "A1 cordoned", 300)
        first.signal(signal.SIGSTOP)  # paused while holding the budget, A1 cordoned
        stopped = time.monotonic()
        (held,) = _holders(nodes_lab, cls)
        assert held["nodes"] == [A1] and str(inv1) in held["run"], held

        # a fresh holder is named by a refusal (wait 0)
        refused = budget.take(kube, "probe", {cls: [A2]}, one1, 0, print)
        assert isinstance(refused, Hold) and refused.gate == "budget", refused
        assert f"{held['holder']} (nodes update {inv1}) holds {A1}" in refused.message
        assert [h["holder"] for h in refused.details["holders"]] == [held["holder"]]

        second = Run(nodes_lab, tmp_path / "r2", inv2, A2, "--budget-wait", "120")
        wait_until(lambda: second.said("[budget] waiting up to"), "the second waits", 120)
        # the first is silent for longer than its lease: its share is dead, but A1 is still
        # cordoned and so still unavailable: the second keeps waiting
        time.sleep(max(0.0, LEASE_S + 1.5 - (time.monotonic() - stopped)))
        assert second.proc.poll() is None and not second.said("[budget] took")
        assert not nodes_lab.node(A2).spec.unschedulable

        first.signal(signal.SIGKILL)  # a lost agent: A1 left cordoned, its claim left behind
        first.signal(signal.SIGCONT)
        assert first.wait(30) == -signal.SIGKILL
        assert [h["holder"] for h in _holders(nodes_lab, cls)] == [held["holder"]]
        # the operator looks at A1 and puts it back (what `kubectl uncordon` does)
        core.delete_namespaced_pod("trainer", NS, grace_period_seconds=0)
        core.patch_node(
            A1,
            {
                "spec": {"unschedulable": None},
                "metadata": {"annotations": {"gpuops.io/cordoned-by": None}},
            },
        )
        assert second.wait(300) == 0, "\n".join(second.lines)
        doc = json.loads(second.result.read_text())["result"]
        assert doc["changed"] == [A2]
        (taken,) = [b["budget"] for b in doc["batches"]]
        assert taken["nodes"] == {cls: [A2]} and taken["waited_s"] > 0
        # where the time went: the wait for the budget is in the batch's gate admission
        (phases,) = [b["phases_s"] for b in doc["batches"]]
        assert phases["gates_admit"] >= taken["waited_s"], phases
        assert "gates_done" in phases, phases
        (recovered,) = taken["recovered"]
        assert recovered["holder"] == held["holder"] and recovered["nodes"] == [A1]
        assert recovered["silent_for_s"] >= LEASE_S
        assert second.said(f"[budget] recovered {A1} of class {cls} from {held['holder']}")
        assert _holders(nodes_lab, cls) == []  # the second gave its share back
    finally:
        for run in (first, second):
            if run is not None and run.proc.poll() is None:
                run.signal(signal.SIGKILL)
                run.signal(signal.SIGCONT)
                run.wait(30)


def _kured_counts(nl: NodesLab, kube: KubeClient, cls: str) -> None:
    """Kured's lock on its DaemonSet (a stand-in: no Kured pods run) names A1: A2 may not go."""
    apps = AppsV1Api(nl.kube.api)
    lock = {
        "nodeID": A1,
        "metadata": {"unschedulable": False},
        "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "TTL": 0,
    }
    body = {
        "metadata": {
            "name": "kured",
            "namespace": "kube-system",
            "annotations": {disruption.KURED_ANNOTATION: json.dumps(lock)},
        },
        "spec": {
            "selector": {"matchLabels": {"app": "kured-stand-in"}},
            "template": {
                "metadata": {"labels": {"app": "kured-stand-in"}},
                "spec": {
                    "nodeSelector": {"gpuops.io/no-such-node": "true"},
                    "containers": [{"name": "kured", "image": "127.0.0.1:5000/gpuops/pause:lab"}],
                },
            },
        },
    }
    apps.create_namespaced_daemon_set("kube-system", body)
    try:
        got = budget.take(kube, "probe", {cls: [A2]}, {"*": BudgetLimit(count=1)}, 0, print)
        assert isinstance(got, Hold) and f"Kured's lock: {A1}" in got.message, got
        assert got.details["kured"] == [A1]
        apart = budget.Where(kured=None)
        got = budget.take(
            kube, "probe", {cls: [A2]}, {"*": BudgetLimit(count=1)}, 0, print, where=apart
        )
        assert isinstance(got, budget.Taken), got
        budget.give(kube, got)
    finally:
        apps.delete_namespaced_daemon_set("kured", "kube-system")


def _a_stopped_gate_that_lost_its_share_does_not_cordon(
    nl: NodesLab, kube: KubeClient, cls: str
) -> None:
    """The gate took A2; while it was 'stopped' another taker dropped its share as dead: the
    gate's confirm (asked right before the cordon) raises and gives nothing back."""
    spec = budget.BudgetSpec({"*": BudgetLimit(count=1)}, 0, budget.Where(kured=None, lease_s=30))
    ctx = GateContext(kube, None, None, print)  # type: ignore[arg-type]
    gate = spec.open(ctx)

    class Host:
        node = A2

    class Batch:
        budget: Any = None

    said: list[str] = []
    other = budget.BudgetSpec({"NVIDIA-H800": BudgetLimit(count=1)}, 0, budget.Where(kured=None))
    elsewhere = other.open(GateContext(kube, None, None, said.append))  # type: ignore[arg-type]
    try:  # a class the limits do not name is not asked for, and said so
        assert elsewhere.admit(Batch(), [Host()]) is None  # type: ignore[arg-type, list-item]
        assert said == [f"[budget] class {cls} has no limit given: not asked for it"]
        assert _holders(nl, cls) == []
    finally:
        elsewhere.close()
    try:
        assert gate.admit(Batch(), [Host()]) is None  # type: ignore[arg-type, list-item]
        (mine,) = _holders(nl, cls)
        assert mine["nodes"] == [A2]
        # another run found it silent for longer than its lease and recovered it
        leases = CoordinationV1Api(nl.kube.api)
        lease = leases.read_namespaced_lease(disruption.lease_name(cls), disruption.NAMESPACE)
        lease.metadata.annotations[disruption.HOLDERS_ANNOTATION] = "[]"
        leases.replace_namespaced_lease(lease.metadata.name, disruption.NAMESPACE, lease)
        with pytest.raises(OperationFailed, match="lost the disruption budget"):
            gate.confirm(Batch(), [Host()])  # type: ignore[attr-defined]
        assert not nl.node(A2).spec.unschedulable
    finally:
        gate.close()
    assert _holders(nl, cls) == []
