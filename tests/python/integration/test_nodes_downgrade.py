"""The downgrade gate against the lab: a GPU pod (kwok, on the real kube-apiserver) runs an
image built as NVIDIA's CUDA 12.8 base is made (Podman, pushed to the real registry); a
downgrade of its H800 host to 535 is refused, naming the workload, and nothing is touched.

The first tests call ``downgrade.check`` directly (driver read from the host's ``nvidia-smi``
over ssh, the real cluster and registry); the last runs the real ``gpuops nodes update``, whose
pre-flight calls the gate: refused (exit 3) before any cordon, the host's driver unchanged.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from imagelab import CUDA_12_2_BASE, REQUIRE_12_2
from integration.conftest_kube import wait_until
from integration.conftest_nodes import NodesLab
from integration.conftest_registry import RegistryLab, pushed_digest
from integration.test_nodes_update import Cordons, driver
from kubernetes.client.exceptions import ApiException

from gpuops.core.nodestate import DriverChange
from gpuops.errors import GateRefused
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.images.registryops import RegistryAccess
from gpuops.usecases.nodes import downgrade
from gpuops_lab import kube as labkube

pytestmark = [pytest.mark.lab, pytest.mark.timeout(300)]

RUN = uuid.uuid4().hex[:6]
H1, H2 = "gpu-h800-01", "gpu-h800-02"
#: A lab stand-in for nvidia/cuda:12.8.1-base: the 12.2.2 base's environment (imagelab.py,
#: from NVIDIA's Dockerfile) with the CUDA version of 12.8.1; only CUDA_VERSION is read.
CUDA_12_8_BASE = (
    CUDA_12_2_BASE.replace("CUDA_VERSION=12.2.2", "CUDA_VERSION=12.8.1")
    .replace("12.2.140-1", "12.8.90-1")
    .replace("cuda-compat-12-2", "cuda-compat-12-8")
)


def _image(registry_lab: RegistryLab, cuda: str, dockerfile: str) -> str:
    ref = f"{registry_lab.url}/test/train-{cuda}-{RUN}:1"
    registry_lab.build(ref, dockerfile)
    pushed_digest(registry_lab.push(ref))
    return ref


@pytest.fixture(scope="module")
def images(registry_lab: RegistryLab) -> dict[str, str]:
    """The two images, built once for the module: CUDA 12.8.1 and CUDA 12.2.2."""
    base = registry_lab.base_image
    new = CUDA_12_8_BASE.format(base=base, require=REQUIRE_12_2.replace("12.2", "12.8"))
    return {
        "trainer": _image(registry_lab, "12.8", new),
        "infer": _image(
            registry_lab, "12.2", CUDA_12_2_BASE.format(base=base, require=REQUIRE_12_2)
        ),
    }


@pytest.fixture
def pods(nodes_lab: NodesLab, images: dict[str, str]) -> Iterator[dict[str, str]]:
    """A CUDA 12.8 training pod on H1 and a CUDA 12.2 one on H2 (the same class), running."""
    new, old = images["trainer"], images["infer"]
    core = nodes_lab.kube.core
    ns = f"downgrade-{RUN}-{uuid.uuid4().hex[:4]}"  # a namespace being deleted takes no pods
    core.create_namespace({"metadata": {"name": ns}})
    try:
        for name, node, image in (("trainer", H1, new), ("infer", H2, old)):
            body = labkube.pod_body(name, namespace=ns, node=node, gpus=2, image=image)
            core.create_namespaced_pod(ns, body)
        for name in ("trainer", "infer"):
            wait_until(
                lambda n=name: core.read_namespaced_pod(n, ns).status.phase == "Running", name
            )
        yield {"trainer": new, "infer": old, "namespace": ns}
    finally:
        try:
            for name in ("trainer", "infer"):
                core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
            core.delete_namespace(ns, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:
                raise


def _driver(nodes_lab: NodesLab, host: str) -> str:
    out = nodes_lab.fleet.ssh(host, "nvidia-smi --query-gpu=driver_version --format=csv,noheader")
    return str(out.stdout.splitlines()[0].strip())


def test_a_cuda_12_8_pod_refuses_a_downgrade_of_its_host_to_535(
    nodes_lab: NodesLab, registry_lab: RegistryLab, pods: dict[str, str]
) -> None:
    before = _driver(nodes_lab, H1)
    assert before == "550.90.07"
    change = DriverChange(H1, H1, "gpu_h800", before, "535.161.08")
    access = RegistryAccess(plain_http=True)
    kube = Cluster(str(nodes_lab.kube.kubeconfig)).connect()
    try:
        with pytest.raises(GateRefused) as refused:
            downgrade.check(kube, [change], access)
        # the same class going up is no downgrade: not refused, no workload judged
        up = downgrade.check(kube, [DriverChange(H1, H1, "gpu_h800", before, "570.133.20")], access)
    finally:
        kube.close()
    message, ns = refused.value.message, pods["namespace"]
    assert refused.value.exit_code == 3
    assert (
        f"{ns}/trainer ({pods['trainer']}, CUDA 12.8.1) needs driver >= 570.26, "
        f"target 535.161.08 ({H1})" in message
    )
    assert f"{ns}/infer" not in message  # CUDA 12.2.2 needs 535.54.03: it runs on 535.161.08
    assert up.ok and up.judged == []


def test_an_image_the_gate_cannot_read_refuses(
    nodes_lab: NodesLab, registry_lab: RegistryLab, pods: dict[str, str]
) -> None:
    """Fail-closed: the same pods, read without plain HTTP (TLS to an HTTP registry)."""
    change = DriverChange(H1, H1, "gpu_h800", "550.90.07", "535.161.08")
    kube = Cluster(str(nodes_lab.kube.kubeconfig)).connect()
    try:
        with pytest.raises(GateRefused) as refused:
            downgrade.check(kube, [change], RegistryAccess(plain_http=False, timeout_s=5))
    finally:
        kube.close()
    message, ns = refused.value.message, pods["namespace"]
    assert f"{ns}/trainer ({pods['trainer']}, CUDA unreadable)" in message
    assert f"{ns}/infer ({pods['infer']}, CUDA unreadable)" in message
    assert "the image config cannot be read" in message


@pytest.mark.timeout(120)
def test_nodes_update_refuses_the_downgrade_in_preflight(
    nodes_lab: NodesLab, registry_lab: RegistryLab, pods: dict[str, str], tmp_path: Path
) -> None:
    """End to end: the CLI's pre-flight reads H1's driver, sees 550 -> 535 and refuses on the
    CUDA 12.8 pod, before anything is cordoned or installed."""
    inv = nodes_lab.inventory(tmp_path, gpu_h800="535.161.08")
    checked = False
    try:
        with Cordons(nodes_lab, [H1]) as cordons:
            run = nodes_lab.gpuops(
                "nodes", "update", "-i", str(inv), "-l", H1, "--change", "driver",
                "--plain-http", tmp=tmp_path, timeout=90,
            )  # fmt: skip
        assert run.rc == 3, run.stderr
        error = run.doc["error"]  # type: ignore[index]
        ns = pods["namespace"]
        assert (
            f"{ns}/trainer ({pods['trainer']}, CUDA 12.8.1) needs driver >= 570.26, "
            f"target 535.161.08 ({H1})" in error["message"]
        )
        assert f"{ns}/infer" not in error["message"]  # on H2, not in the run
        assert cordons.seen == {H1: {False}}  # never cordoned during the run
        rc, header = driver(nodes_lab, H1)
        assert rc == 0 and "Driver Version: 550.90.07" in header
        assert not nodes_lab.node(H1).spec.unschedulable
        checked = True
    finally:  # a run that was not refused may have changed H1: put it back for the next tests
        if not checked:
            nodes_lab.restore(H1)
