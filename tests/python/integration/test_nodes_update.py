"""``gpuops nodes update`` on the lab (SSH fleet + Kubernetes, same names), for real: the
H800 group's driver upgraded batch by batch with cordon, wait for GPU pods, drain, reboot,
verify, uncordon; an administrator's cordon kept; the headroom gate; a failing canary
stopping the rollout with later hosts untouched and a re-run converging; a host killed
mid-batch; pre-flight refusals that touch nothing; a second run changing nothing."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.conftest_kube import wait_until
from integration.conftest_nodes import GPUOPS, NodesLab
from junitcheck import assert_junit_well_formed
from kubernetes.client.exceptions import ApiException

from gpuops_lab import fleet as labfleet
from gpuops_lab import hoststate
from gpuops_lab import kube as labkube

pytestmark = pytest.mark.timeout(1800)
H1, H2 = "gpu-h800-01", "gpu-h800-02"
A1, A2 = "gpu-a100-01", "gpu-a100-02"
L1 = "gpu-l40s-01"


def driver(nl: NodesLab, host: str) -> tuple[int, str]:
    res = nl.fleet.ssh(host, "nvidia-smi")
    line = res.stdout.splitlines()[2] if res.returncode == 0 else res.stdout.splitlines()[0]
    return res.returncode, line


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


@pytest.fixture
def gpu_pod(nodes_lab: NodesLab) -> Iterator[Any]:
    """A running 4-GPU training pod bound to H1 (no controller: nothing recreates it)."""
    ns = "nodes-update-test"
    core = nodes_lab.kube.core
    try:
        core.create_namespace({"metadata": {"name": ns}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    core.create_namespaced_pod(ns, labkube.pod_body("trainer", namespace=ns, node=H1, gpus=4))
    wait_until(
        lambda: core.read_namespaced_pod("trainer", ns).status.phase == "Running", "trainer up"
    )
    yield core.read_namespaced_pod("trainer", ns)
    try:
        core.delete_namespaced_pod("trainer", ns, grace_period_seconds=0)
    except ApiException as exc:
        if exc.status != 404:
            raise


def test_preflight_refusals_touch_nothing(nodes_lab: NodesLab, tmp_path: Path) -> None:
    absent = nodes_lab.inventory(tmp_path, sha256={"999.1.1": "0" * 64}, gpu_h800="999.1.1")
    run = nodes_lab.gpuops("nodes", "update", "-i", str(absent), "-l", "gpu_h800", tmp=tmp_path)
    assert run.rc == 2, run.stderr
    error = run.doc["error"]  # type: ignore[index]
    assert error["field"] == "inventory"
    assert "driver 999.1.1 (group gpu_h800) is not in the repository" in error["message"]
    inv = nodes_lab.inventory(tmp_path / "b", gpu_h800="570.133.20")
    labfleet.stop_sshd(nodes_lab.lab, H1)
    try:
        run = nodes_lab.gpuops("nodes", "update", "-i", str(inv), "-l", "gpu_h800", tmp=tmp_path)
    finally:
        labfleet.start_sshd(nodes_lab.lab, H1)
    assert run.rc == 4, run.stderr
    assert f"canary candidate {H1} unreachable" in run.doc["error"]["message"]  # type: ignore[index]
    for host in (H1, H2):
        rc, header = driver(nodes_lab, host)
        assert rc == 0 and "Driver Version: 550.90.07" in header
        assert not nodes_lab.node(host).spec.unschedulable


def test_missing_driver_checksum_is_refused_in_preflight(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    inv = nodes_lab.inventory(tmp_path, sha256={"550.90.07": "0" * 64}, gpu_h800="570.133.20")
    folder = tmp_path / "artifacts"
    run = nodes_lab.gpuops(
        "nodes", "update", "-i", str(inv), "-l", "gpu_h800", "--artifacts-dir", str(folder),
        tmp=tmp_path,
    )  # fmt: skip
    assert run.rc == 2, run.stderr
    error = run.doc["error"]  # type: ignore[index]
    assert error["field"] == "inventory"
    assert (
        "group gpu_h800 (host gpu-h800-01) has no sha256 for driver 570.133.20"
        in (error["message"])
    )
    assert not folder.exists()  # refused before anything was made or reached
    for host in (H1, H2):
        assert "Driver Version: 550.90.07" in driver(nodes_lab, host)[1]
        assert not nodes_lab.node(host).spec.unschedulable


#: the lab repository's driver checksums, as the shipped test inventory names them
LAB_SHA256: dict[str, str] = yaml.safe_load(
    (Path(__file__).parents[3] / "ansible/inventory/test/group_vars/all.yml").read_text()
)["gpu_nodes_driver_sha256"]


def test_wrong_driver_checksum_refuses_the_hosts_before_any_change(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    """The repository's .run is not the one the inventory names: the plan (check mode, on the
    node) refuses every H800 host; none is cordoned, drained or changed."""
    wrong = "0" * 64
    # the driver the hosts run keeps its real sha256: pre-flight refuses a host it could not
    # roll back (issue 19), and this test is about the plan's check of the wanted .run
    sums = {"570.133.20": wrong, "550.90.07": LAB_SHA256["550.90.07"]}
    inv = nodes_lab.inventory(tmp_path, sha256=sums, gpu_h800="570.133.20")
    with Cordons(nodes_lab, [H1, H2]) as seen:
        run = nodes_lab.gpuops("nodes", "update", "-i", str(inv), "-l", "gpu_h800", tmp=tmp_path)
    assert run.rc == 1, run.stderr
    hosts = {h["host"]: h for h in run.result["hosts"]}
    for host in (H1, H2):
        assert hosts[host]["status"] == "failed", hosts[host]
        assert (
            "sha256 of NVIDIA-Linux-x86_64-570.133.20.run is 9bb82887" in (hosts[host]["reason"])
        ), hosts[host]
        assert f"the inventory wants {wrong}" in hosts[host]["reason"]
        assert "Driver Version: 550.90.07" in driver(nodes_lab, host)[1]
        assert seen.seen[host] == {False}  # never cordoned
    assert run.result["batches"] == []


def _assert_timeline(doc: dict[str, Any]) -> None:
    """Each batch at its time in the run, one after the other, drawn on the page."""
    canary, batch = doc["batches"]
    timings = {k: round(v * 1000) for k, v in doc["timings_s"].items()}  # whole milliseconds
    assert round(canary["start_s"] * 1000) >= timings["preflight"] + timings["plan"]
    assert batch["start_s"] >= canary["start_s"] + canary["elapsed_s"] - 0.01
    page = Path(doc["report"]["page"]).read_text()
    assert f"canary 0: {H1} (done)" in page and f"batch 1: {H2} (done)" in page


def test_h800_group_upgrade_rolls_batch_by_batch(
    nodes_lab: NodesLab, tmp_path: Path, gpu_pod: Any
) -> None:
    inv = nodes_lab.inventory(tmp_path, gpu_h800="570.133.20")
    core = nodes_lab.kube.core
    core.patch_node(H2, {"spec": {"unschedulable": True}})  # an administrator's cordon
    assert [driver(nodes_lab, h) for h in (H1, H2)] == [
        (
            0,
            "| NVIDIA-SMI 550.90.07              Driver Version: 550.90.07      "
            "CUDA Version: 12.4     |",
        )
    ] * 2
    try:
        # the headroom gate: the cluster cannot lose H1's 8 GPUs with 1000 kept free
        refused = nodes_lab.gpuops(
            "nodes",
            "update",
            "-i",
            str(inv),
            "-l",
            "gpu_h800",
            "--reserve",
            "1000",
            tmp=tmp_path / "r",
        )
        assert refused.rc == 3, refused.stderr
        assert refused.result["refused"] is True and refused.result["changed"] == []
        assert refused.result["not_started"] == [H1, H2]
        assert not nodes_lab.node(H1).spec.unschedulable  # nothing touched
        assert "570" not in driver(nodes_lab, H1)[1]

        # the rollout: canary H1 (waits for its training pod), then H2 (admin-cordoned)
        args = [
            GPUOPS,
            "nodes",
            "update",
            "-i",
            str(inv),
            "-l",
            "gpu_h800",
            "--canary",
            "1",
            "--batch-size",
            "1",
            "--artifacts-dir",
            str(tmp_path / "art"),
        ]
        env = {
            **os.environ,
            "KUBECONFIG": str(nodes_lab.kube.kubeconfig),
            "GPUOPS_RESULT_FILE": str(tmp_path / "result.json"),
            "GPUOPS_KNOWN_HOSTS": nodes_lab.fleet.facts["known_hosts"],
        }
        with Cordons(nodes_lab, [H1, H2]) as cordons:
            proc = subprocess.Popen(args, env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
            wait_until(lambda: nodes_lab.node(H1).spec.unschedulable, "H1 cordoned", 600)
            time.sleep(2)
            assert proc.poll() is None and "570" not in driver(nodes_lab, H1)[1]  # waiting
            core.delete_namespaced_pod(
                "trainer", gpu_pod.metadata.namespace, grace_period_seconds=0
            )  # the training job finished
            _, stderr = proc.communicate(timeout=1500)
        assert proc.returncode == 0, stderr
        assert cordons.seen[H1] == {False, True} and cordons.seen[H2] == {True}
        assert "waiting for 1 running GPU pod(s) to finish: nodes-update-test/trainer" in stderr
        assert f"[canary 1/2] {H1}: changed nvidia_driver : Reboot to load the new driver" in (
            stderr
        )
        assert f"[batch 2/2] {H2}: changed" in stderr
        doc = json.loads((tmp_path / "result.json").read_text())["result"]
        assert doc["changed"] == [H1, H2] and doc["failed"] == []
        assert [b["hosts"] for b in doc["batches"]] == [[H1], [H2]]
        hosts = {h["host"]: h for h in doc["hosts"]}
        assert hosts[H1]["uncordoned"] and not hosts[H1]["cordoned_before"]
        assert hosts[H2]["cordoned_before"] and not hosts[H2]["uncordoned"]
        assert hosts[H1]["waited_for"] == ["nodes-update-test/trainer"]
        assert all(b["headroom"]["fits"] for b in doc["batches"])
        _assert_timeline(doc)
        junit = assert_junit_well_formed(Path(doc["artifacts"]["junit"]).read_text())
        assert len(junit.findall("testsuite/testcase")) == 2
        assert list(
            Path(doc["artifacts"]["folder"], "ansible/artifacts/batch-00/job_events").glob("*.json")
        )
        # after: the new driver (S-15), H1 schedulable again, H2 still cordoned (the admin's)
        for h in (H1, H2):
            assert driver(nodes_lab, h) == (
                0,
                "| NVIDIA-SMI 570.133.20             Driver Version: 570.133.20     "
                "CUDA Version: 12.8     |",
            )
        assert not nodes_lab.node(H1).spec.unschedulable
        assert nodes_lab.node(H2).spec.unschedulable
        assert "gpuops.io/cordoned-by" not in (nodes_lab.node(H1).metadata.annotations or {})

        # S-28: a second run changes nothing and cordons nothing
        with Cordons(nodes_lab, [H1]) as cordons:
            again = nodes_lab.gpuops(
                "nodes", "update", "-i", str(inv), "-l", "gpu_h800", tmp=tmp_path / "again"
            )
        assert again.rc == 0, again.stderr
        assert again.result["plan"] == [] and again.result["changed"] == []
        assert again.result["unchanged"] == [H1, H2]
        assert cordons.seen[H1] == {False}
    finally:
        nodes_lab.restore(H1, H2)


def test_failing_canary_stops_the_rollout_and_a_rerun_converges(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    inv = nodes_lab.inventory(tmp_path, gpu_a100="550.90.07")
    hoststate.set_gpu_state(nodes_lab.lab, A1, install_error="module-load")
    # A2's last install as the session left it (an earlier lab test may have changed A2)
    a2_install = hoststate.gpu_state(nodes_lab.lab, A2)["install"]
    try:
        run = nodes_lab.gpuops(
            "nodes",
            "update",
            "-i",
            str(inv),
            "-l",
            f"{A1},{A2}",
            "--change",
            "driver",
            "--no-rollback",  # the fault stays: a rollback would fail too (test_nodes_rollback)
            "--artifacts-dir",
            str(tmp_path / "art"),
            tmp=tmp_path,
        )
        assert run.rc == 1, run.stderr
        result = run.result
        assert (result["failed"], result["not_started"], result["changed"]) == ([A1], [A2], [])
        (a1,) = [h for h in result["hosts"] if h["host"] == A1]
        assert "Install the driver" in a1["failed_task"]
        assert "Unable to load the kernel module 'nvidia.ko'" in a1["reason"]
        assert "over the failure budget of 0" in result["stopped"]
        assert "1 never started" in run.doc["error"]["message"]  # type: ignore[index]
        # A2 was never touched: its driver, its node
        assert hoststate.gpu_state(nodes_lab.lab, A2)["install"] == a2_install  # no install
        assert not nodes_lab.node(A2).spec.unschedulable
        assert nodes_lab.node(A1).spec.unschedulable  # the failed canary stays cordoned
        # fixed, run again: it resumes and converges (A1 was cordoned by gpuops: uncordoned)
        hoststate.set_gpu_state(nodes_lab.lab, A1, install_error=None)
        run = nodes_lab.gpuops(
            "nodes",
            "update",
            "-i",
            str(inv),
            "-l",
            f"{A1},{A2}",
            "--change",
            "driver",
            "--batch-size",
            "1",
            tmp=tmp_path / "again",
        )
        assert run.rc == 0, run.stderr
        assert run.result["changed"] == [A1, A2]
        for h in (A1, A2):
            assert "Driver Version: 550.90.07" in driver(nodes_lab, h)[1]
            assert not nodes_lab.node(h).spec.unschedulable
    finally:
        nodes_lab.restore(A1, A2)


def test_a_host_killed_mid_batch_fails_alone(nodes_lab: NodesLab, tmp_path: Path) -> None:
    inv = nodes_lab.inventory(tmp_path, gpu_h800="570.133.20", gpu_l40s="570.133.20")
    hoststate.set_gpu_state(nodes_lab.lab, L1, install_delay_s=15)
    log = hoststate.host_path(nodes_lab.lab, L1, "/var/log/nvidia-installer.log")
    log.unlink(missing_ok=True)
    args = [
        GPUOPS,
        "nodes",
        "update",
        "-i",
        str(inv),
        "-l",
        f"{H1},{L1}",
        "--canary",
        "0",
        "--batch-size",
        "2",
        "--failure-budget",
        "1",
        "--change",
        "driver",
        "--artifacts-dir",
        str(tmp_path / "art"),
    ]
    env = {
        **os.environ,
        "KUBECONFIG": str(nodes_lab.kube.kubeconfig),
        "GPUOPS_ERROR_FILE": str(tmp_path / "error.json"),
        "GPUOPS_KNOWN_HOSTS": nodes_lab.fleet.facts["known_hosts"],
    }
    try:
        proc = subprocess.Popen(args, env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
        wait_until(
            lambda: log.exists() and "Installing NVIDIA driver" in log.read_text(),
            "L1's installer started",
            900,
        )
        labfleet.stop_sshd(nodes_lab.lab, L1)  # the host dies mid-install
        _, stderr = proc.communicate(timeout=1500)
        assert proc.returncode == 1, stderr
        doc = json.loads((tmp_path / "error.json").read_text())
        result = doc["result"]
        assert (result["changed"], result["failed"]) == ([H1], [L1])
        (l1,) = [h for h in result["hosts"] if h["host"] == L1]
        assert l1["reason"].startswith("unreachable"), l1
        assert "570.133.20" in driver(nodes_lab, H1)[1]
        assert nodes_lab.node(L1).spec.unschedulable and not nodes_lab.node(H1).spec.unschedulable
        assert result["stopped"] == ""  # within the budget of 1
    finally:
        nodes_lab.restore(H1, L1)


def test_gpu_pods_that_outlive_the_wait_fail_the_host_and_keep_running(
    nodes_lab: NodesLab, tmp_path: Path, gpu_pod: Any
) -> None:
    inv = nodes_lab.inventory(tmp_path, gpu_h800="570.133.20")
    try:
        run = nodes_lab.gpuops(
            "nodes",
            "update",
            "-i",
            str(inv),
            "-l",
            H1,
            "--change",
            "driver",
            "--gpu-pods-timeout",
            "3",
            tmp=tmp_path,
        )
        assert run.rc == 1, run.stderr
        (h1,) = run.result["hosts"]
        assert h1["status"] == "failed" and "not evicted (--on-timeout fail)" in h1["reason"]
        pod = nodes_lab.kube.core.read_namespaced_pod("trainer", gpu_pod.metadata.namespace)
        assert pod.status.phase == "Running" and pod.metadata.deletion_timestamp is None
        assert "550.90.07" in driver(nodes_lab, H1)[1]  # never changed
        assert nodes_lab.node(H1).spec.unschedulable  # left cordoned for a person to decide
    finally:
        nodes_lab.restore(H1)


@pytest.mark.parametrize(
    ("name", "planted"),
    [
        # as -e @file it would win over the inventory: node_init's argument spec refuses the
        # value, and the plan runs node_init in check mode: every host would fail in the plan
        # (it planted a driver sha256 while the plan ran the driver role in check mode; the
        # plan reads that role over ssh since issue 19, where no extravar can reach it)
        ("extravars", {"node_init_hostname_strategy": "gpuops-planted"}),
        # applied over gpuops' own environment: no playbook would run at all
        ("envvars", {"ANSIBLE_STRATEGY": "gpuops_planted_strategy"}),
    ],
)
def test_files_planted_in_the_artifacts_folder_change_nothing_ansible_runs(
    nodes_lab: NodesLab, tmp_path: Path, name: str, planted: dict[str, Any]
) -> None:
    """ansible-runner reads ``<private_data_dir>/env/*``: the artifacts folder (which a Jenkins
    job archives and anyone with workspace access writes) is not its private data dir, and its
    artifacts are still copied there."""
    inv = nodes_lab.inventory(tmp_path, gpu_h800="570.133.20")
    folder = tmp_path / "artifacts"
    (folder / "ansible" / "env").mkdir(parents=True)
    (folder / "ansible" / "env" / name).write_text(json.dumps(planted))
    run = nodes_lab.gpuops(
        "nodes", "update", "-i", str(inv), "-l", "gpu_h800", "--check",
        "--artifacts-dir", str(folder), tmp=tmp_path,
    )  # fmt: skip
    assert run.rc == 0, (run.stderr, run.doc)
    hosts = {h["host"]: h for h in run.result["hosts"]}
    for host in (H1, H2):
        assert hosts[host]["status"] == "planned", hosts[host]
        assert "Driver Version: 550.90.07" in driver(nodes_lab, host)[1]
    copied = folder / "ansible" / "artifacts" / "plan"
    assert run.result["artifacts"]["plan"] == str(copied)
    assert "ok=" in (copied / "stdout").read_text()
    assert list((copied / "job_events").glob("*.json"))
    assert set(json.loads((copied / "command").read_text())) == {"command", "cwd"}
