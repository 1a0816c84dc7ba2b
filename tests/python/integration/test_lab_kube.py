"""The lab's Kubernetes is real: kwok GPU nodes, the real scheduler and controllers."""

from __future__ import annotations

import json
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_kube import KubeLab, down_kube_only, wait_until
from kubernetes import client

from gpuops.cli.main import run
from gpuops_lab import Lab, LabConfig, proc
from gpuops_lab import kube as labkube

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def namespace(kube_lab: KubeLab) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    kube_lab.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    wait_until(
        lambda: any(
            sa.metadata.name == "default"
            for sa in kube_lab.core.list_namespaced_service_account(name).items
        ),
        "default ServiceAccount in the new namespace",
    )
    yield name
    kube_lab.core.delete_namespace(name)


def gpu_container(gpus: int) -> dict[str, Any]:
    return {
        "name": "main",
        "image": "127.0.0.1:5000/gpuops/cuda-smoke:lab",
        "resources": {
            "requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)},
            "limits": {"nvidia.com/gpu": str(gpus)},
        },
    }


#: What GPU feature discovery and our class label say for each lab model.
ACCELERATOR = {"a100-80g": "nvidia-a100-80g", "h800": "nvidia-h800", "l40s": "nvidia-l40s"}
PRODUCT = {"a100-80g": "NVIDIA-A100-SXM4-80GB", "h800": "NVIDIA-H800", "l40s": "NVIDIA-L40S"}


def test_fleet_nodes_are_ready_gpu_nodes(kube_lab: KubeLab) -> None:
    nodes = {n.metadata.name: n for n in kube_lab.core.list_node().items}
    fleet = kube_lab.lab.fleet()
    assert set(nodes) == {h.name for h in fleet}
    for host in fleet:
        node = nodes[host.name]
        ready = [c for c in node.status.conditions if c.type == "Ready"]
        assert ready and ready[0].status == "True", host.name
        assert node.status.capacity["nvidia.com/gpu"] == "8"
        assert node.status.allocatable["nvidia.com/gpu"] == ("7" if host.faulty else "8")
        labels = node.metadata.labels
        assert labels["accelerator"] == ACCELERATOR[host.model]
        assert labels["nvidia.com/gpu.product"] == PRODUCT[host.model]
        assert labels["nvidia.com/gpu.count"] == "8"
        assert labels["gpu-driver"] == host.driver
    products = {nodes[h.name].metadata.labels["nvidia.com/gpu.product"] for h in fleet}
    assert products == {"NVIDIA-A100-SXM4-80GB", "NVIDIA-H800", "NVIDIA-L40S"}
    # the kubeconfig for the CLI works with kubectl too
    kubectl = Path(kube_lab.facts["bin_dir"]) / "kubectl"
    out = subprocess.run(
        [str(kubectl), "--kubeconfig", str(kube_lab.kubeconfig), "get", "nodes", "-o", "name"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert sorted(out.split()) == sorted(f"node/{h.name}" for h in fleet)


def test_deployment_rolls_out_on_kwok_gpu_nodes(kube_lab: KubeLab, namespace: str) -> None:
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "infer"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "infer"}},
            "template": {
                "metadata": {"labels": {"app": "infer"}},
                "spec": {
                    "nodeSelector": {"accelerator": "nvidia-h800"},
                    "containers": [gpu_container(2)],
                },
            },
        },
    }
    kube_lab.apps.create_namespaced_deployment(namespace, dep)

    def available() -> bool:
        st = kube_lab.apps.read_namespaced_deployment_status("infer", namespace).status
        return st.available_replicas == 3 and st.updated_replicas == 3

    wait_until(available, "Deployment infer available", timeout=90)
    pods = kube_lab.core.list_namespaced_pod(namespace, label_selector="app=infer").items
    assert len(pods) == 3
    h800 = {h.name for h in kube_lab.lab.fleet() if h.model == "h800"}
    for pod in pods:
        assert pod.status.phase == "Running"
        assert pod.spec.node_name in h800
    # 3 pods x 2 GPUs on 2 H800 nodes: the scheduler really placed them
    # (a rollout of a new template replaces them, also through the scheduler)
    kube_lab.apps.patch_namespaced_deployment(
        "infer", namespace, {"spec": {"template": {"metadata": {"annotations": {"rev": "2"}}}}}
    )

    def rolled() -> bool:
        d = kube_lab.apps.read_namespaced_deployment("infer", namespace)
        st = d.status
        return (
            st.observed_generation == d.metadata.generation
            and st.updated_replicas == 3
            and st.available_replicas == 3
            and (st.replicas or 0) == 3
        )

    wait_until(rolled, "rolling update of Deployment infer", timeout=90)


def test_job_runs_to_completion(kube_lab: KubeLab, namespace: str) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {
            "completions": 2,
            "parallelism": 2,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"accelerator": "nvidia-a100-80g"},
                    "containers": [gpu_container(4)],
                }
            },
        },
    }
    kube_lab.batch.create_namespaced_job(namespace, job)

    def complete() -> bool:
        st = kube_lab.batch.read_namespaced_job_status("train", namespace).status
        return any(c.type == "Complete" and c.status == "True" for c in st.conditions or [])

    wait_until(complete, "Job train Complete", timeout=90)
    st = kube_lab.batch.read_namespaced_job_status("train", namespace).status
    assert st.succeeded == 2
    assert not st.failed


def test_a_pod_the_node_controller_marked_not_ready_is_ready_again(
    kube_lab: KubeLab, namespace: str
) -> None:
    """What a kubelet does once its node reports again after an outage (the API server
    away, node leases unrenewed): kube-controller-manager marked the node's pods not Ready
    (Ready False, containers still ready); the kubelet sets them Ready again. kwok alone
    leaves them not Ready for ever (kubernetes-sigs/kwok#1464); the lab's stage does not."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "serve"},
        "spec": {"nodeSelector": {"accelerator": "nvidia-l40s"}, "containers": [gpu_container(1)]},
    }
    kube_lab.core.create_namespaced_pod(namespace, pod)

    def ready() -> str | None:
        conds = kube_lab.core.read_namespaced_pod_status("serve", namespace).status.conditions
        return next((c.status for c in conds or [] if c.type == "Ready"), None)

    wait_until(lambda: ready() == "True", "pod serve Ready", timeout=60)
    # exactly the node lifecycle controller's mark (MarkPodsNotReady): Ready False, only
    marked = kube_lab.core.patch_namespaced_pod_status(
        "serve",
        namespace,
        {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
    )
    conds = {c.type: c.status for c in marked.status.conditions}
    assert conds["Ready"] == "False" and conds["ContainersReady"] == "True", conds

    wait_until(lambda: ready() == "True", "pod serve Ready again", timeout=60)
    after = kube_lab.core.read_namespaced_pod_status("serve", namespace).status
    assert after.phase == "Running"
    assert {c.type: c.status for c in after.conditions} == {
        "Initialized": "True",
        "Ready": "True",
        "ContainersReady": "True",
        "PodScheduled": "True",
    }


def test_too_many_gpus_gets_real_failed_scheduling(kube_lab: KubeLab, namespace: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "greedy"},
        "spec": {"containers": [gpu_container(9)]},
    }
    n = len(kube_lab.core.list_node().items)
    kube_lab.core.create_namespaced_pod(namespace, pod)

    def event() -> Any:
        evs = kube_lab.core.list_namespaced_event(
            namespace, field_selector="involvedObject.name=greedy,reason=FailedScheduling"
        ).items
        return evs[0] if evs else None

    ev = wait_until(event, "FailedScheduling event for pod greedy", timeout=60)
    source = ev.source.component if ev.source else None
    assert "default-scheduler" in (ev.reporting_component, source)
    assert f"0/{n} nodes are available" in ev.message
    assert "Insufficient nvidia.com/gpu" in ev.message
    assert kube_lab.core.read_namespaced_pod("greedy", namespace).status.phase == "Pending"


def test_bulk_creators_bind_pods_to_many_nodes(kube_lab: KubeLab, namespace: str) -> None:
    nodes = labkube.synthetic_nodes(30, prefix=f"bulk-{namespace}")
    try:
        assert labkube.create_gpu_nodes(kube_lab.api, nodes) == 30
        assert labkube.create_gpu_nodes(kube_lab.api, nodes) == 0  # idempotent
        pods = [
            labkube.pod_body(f"p{i}", namespace=namespace, node=nodes[i % 30].name, gpus=1)
            for i in range(120)
        ]
        assert labkube.bulk_create_pods(kube_lab.api, pods, concurrency=8) == 120

        def running() -> bool:
            items = kube_lab.core.list_namespaced_pod(namespace).items
            return len(items) == 120 and all(p.status.phase == "Running" for p in items)

        wait_until(running, "120 bound pods Running", timeout=90)
    finally:
        for n in nodes:
            kube_lab.core.delete_node(n.name)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _local_routes() -> list[str]:
    out = subprocess.run(
        ["ip", "-j", "-4", "route", "show", "table", "local"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [str(r.get("dst")) for r in json.loads(out)]


def test_down_leaves_no_process_listener_or_file(tmp_path: Path) -> None:
    lab = Lab(LabConfig(dir=tmp_path / "lab", hosts=1))
    try:
        lab.up(["kube"])
        facts = lab.facts("kube")
        pids = [int(p) for p in facts["pids"].values()]
        ports = [int(p) for p in facts["ports"].values() if p]
        assert len(pids) == len(labkube.PROCESSES)
        assert all(proc.alive(p) for p in pids)
        assert _listening(facts["ports"]["apiserver"])
        assert lab.status()["components"]["kube"]["healthy"]
        podnet = facts["pod_network"]  # kwok's pod IPs: a real local network of the lab's
        assert Path(f"/sys/class/net/{podnet['interface']}").exists()
        assert podnet["cidr"] in _local_routes()
    finally:
        down_kube_only(lab)
    assert not any(proc.alive(p) for p in pids)
    assert not any(_listening(p) for p in ports)
    assert not (tmp_path / "lab").exists()
    assert not Path(f"/sys/class/net/{podnet['interface']}").exists()
    assert podnet["cidr"] not in _local_routes()
    # nothing anywhere still runs from the lab's dir
    leftovers = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(tmp_path).encode() in cmd:
                leftovers.append(entry.name)
    assert leftovers == []


def test_apiserver_restart_fault(kube_lab: KubeLab, tmp_path: Path) -> None:
    """While kube-apiserver is down, gpuops says the cluster is unreachable (exit 4, naming
    the server) instead of computing a verdict; restarted, the same cluster answers again."""
    check = [
        "--error-file", str(tmp_path / "error.json"),
        "--result-file", str(tmp_path / "result.json"),
        "headroom", "check", "--gpus-per-pod", "1", "--kubeconfig", str(kube_lab.kubeconfig),
    ]  # fmt: skip
    labkube.stop_apiserver(kube_lab.lab)
    try:
        assert not proc.tcp_open("127.0.0.1", kube_lab.facts["ports"]["apiserver"])
        assert run(check) == 4
        error = json.loads((tmp_path / "error.json").read_text())["error"]
        assert error["category"] == "unreachable"
        assert kube_lab.facts["server"] in error["message"]
        assert not (tmp_path / "result.json").exists()
    finally:
        labkube.start_apiserver(kube_lab.lab)
    names = {n.metadata.name for n in kube_lab.core.list_node().items}
    assert {h.name for h in kube_lab.lab.fleet()} <= names
    assert run(check) == 0
    assert json.loads((tmp_path / "result.json").read_text())["ok"] is True
