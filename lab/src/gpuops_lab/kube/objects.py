"""The objects the lab creates in its cluster: kwok GPU nodes and plain pods.

A GPU node carries the labels NVIDIA's GPU feature discovery sets (model, memory, CUDA,
driver version) and ``nvidia.com/gpu`` capacity; the kwok annotation makes kwok play its
kubelet. A pod body is minimal and may be bound to a node directly. Pure data: nothing here
talks to the API (:mod:`.api` creates them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuops.errors import InvalidInput
from gpuops_lab.gpus import MODELS as GPU_MODELS
from gpuops_lab.nvsmi import cuda_version

if TYPE_CHECKING:
    from gpuops_lab.spec import GpuHost

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
GPU_RESOURCE = "nvidia.com/gpu"
#: nvidia.com/gpu.family by compute capability, as GPU feature discovery names it.
_FAMILY = {"8.0": "ampere", "8.6": "ampere", "8.9": "ada-lovelace", "9.0": "hopper"}


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def to_dict(self) -> dict[str, str]:
        doc = {"key": self.key, "effect": self.effect}
        if self.value:
            doc["value"] = self.value
        return doc


@dataclass(frozen=True)
class NodeSpec:
    """A kwok node as the lab creates it (kwok plays its kubelet)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    gpus: int = 8  # capacity of ``gpu_resource``
    allocatable_gpus: int | None = None  # defaults to ``gpus``; lower for a faulty card
    gpu_resource: str = GPU_RESOURCE
    extra_resources: Mapping[str, str] = field(default_factory=dict)  # e.g. MIG profiles
    cpu: str = "128"
    memory: str = "2064Gi"
    pods: int = 110
    taints: Sequence[Taint] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    kwok_managed: bool = True  # False: nobody heartbeats it, so it stays NotReady

    def to_body(self) -> dict[str, Any]:
        gpus = str(self.gpus)
        alloc_gpus = str(self.gpus if self.allocatable_gpus is None else self.allocatable_gpus)
        capacity = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": str(self.pods),
            "ephemeral-storage": "7Ti",
            self.gpu_resource: gpus,
            **self.extra_resources,
        }
        allocatable = {**capacity, self.gpu_resource: alloc_gpus}
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            **self.labels,
        }
        annotations = {"node.alpha.kubernetes.io/ttl": "0", **self.annotations}
        if self.kwok_managed:
            annotations[KWOK_ANNOTATION] = "fake"
        spec: dict[str, Any] = {}
        if self.taints:
            spec["taints"] = [t.to_dict() for t in self.taints]
        if self.unschedulable:
            spec["unschedulable"] = True
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels, "annotations": annotations},
            "spec": spec,
            "status": {"capacity": capacity, "allocatable": allocatable},
        }


#: Who labels a node with its driver version: ``gpu-driver`` is the operators' own label
#: (S-30), ``gfd`` GPU feature discovery's current ``nvidia.com/cuda.driver-version.*``,
#: ``gfd-legacy`` its older ``nvidia.com/cuda.driver.*`` (which real GFD still sets).
DRIVER_LABELS: tuple[str, ...] = ("gpu-driver", "gfd", "gfd-legacy")
DEFAULT_DRIVER_LABELS: tuple[str, ...] = ("gpu-driver", "gfd-legacy")


def gpu_labels(
    model: str,
    driver: str,
    gpus: int = 8,
    *,
    driver_labels: Sequence[str] = DEFAULT_DRIVER_LABELS,
) -> dict[str, str]:
    """Node labels as GPU feature discovery (and our ``accelerator`` class label) set them;
    ``driver_labels`` picks which of :data:`DRIVER_LABELS` carry the driver version."""
    if model not in GPU_MODELS:
        raise InvalidInput(
            f"unknown GPU model {model!r}", hint=f"choose from {', '.join(sorted(GPU_MODELS))}"
        )
    parts = driver.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise InvalidInput(f"driver version {driver!r} is not like 535.161.08")
    gm = GPU_MODELS[model]
    family = _FAMILY[gm.compute_cap]
    compute_major, compute_minor = gm.compute_cap.split(".")
    unknown = sorted(set(driver_labels) - set(DRIVER_LABELS))
    if unknown:
        raise InvalidInput(f"unknown driver label kind(s) {unknown}; choose from {DRIVER_LABELS}")
    cuda_major, cuda_minor = cuda_version(driver).split(".")
    labels = {
        "accelerator": f"nvidia-{gm.key}",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": gm.name.replace(" ", "-"),
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.memory": str(gm.memory_mib),
        "nvidia.com/gpu.family": family,
        "nvidia.com/gpu.compute.major": compute_major,
        "nvidia.com/gpu.compute.minor": compute_minor,
        "nvidia.com/gpu.machine": "SYS-821GE-TNHR" if family == "hopper" else "DGXA100",
        "nvidia.com/mig.capable": "true" if gm.mig else "false",
        "nvidia.com/cuda.runtime.major": cuda_major,
        "nvidia.com/cuda.runtime.minor": cuda_minor,
    }
    if "gpu-driver" in driver_labels:
        labels["gpu-driver"] = driver
    if "gfd" in driver_labels:
        labels.update(
            {
                "nvidia.com/cuda.driver-version.full": driver,
                "nvidia.com/cuda.driver-version.major": parts[0],
                "nvidia.com/cuda.driver-version.minor": parts[1],
                "nvidia.com/cuda.driver-version.revision": parts[2],
            }
        )
    if "gfd-legacy" in driver_labels:
        labels.update(
            {
                "nvidia.com/cuda.driver.major": parts[0],
                "nvidia.com/cuda.driver.minor": parts[1],
                "nvidia.com/cuda.driver.rev": parts[2],
            }
        )
    return labels


def gpu_node(
    name: str,
    model: str,
    driver: str,
    *,
    gpus: int = 8,
    faulty: bool = False,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    driver_labels: Sequence[str] = DEFAULT_DRIVER_LABELS,
) -> NodeSpec:
    """A GPU node; a ``faulty`` one (a card with uncorrected ECC errors) offers one GPU less,
    as the NVIDIA device plugin does when it marks a device unhealthy."""
    return NodeSpec(
        name=name,
        labels={**gpu_labels(model, driver, gpus, driver_labels=driver_labels), **(labels or {})},
        gpus=gpus,
        allocatable_gpus=gpus - 1 if faulty else gpus,
        taints=taints,
    )


def fleet_nodes(hosts: Iterable[GpuHost]) -> list[NodeSpec]:
    """One kwok node per SSH fleet host, with the host's name, model and driver."""
    return [
        gpu_node(
            h.name,
            h.model,
            h.driver,
            gpus=h.gpus,
            faulty=h.faulty,
            labels={"gpuops.io/fleet-group": h.group},
        )
        for h in hosts
    ]


def synthetic_nodes(count: int, *, prefix: str = "syn", start: int = 0) -> list[NodeSpec]:
    """``count`` synthetic GPU nodes for scale tests, cycling A100 / H800 / L40S."""
    models = (("a100-80g", "535.161.08"), ("h800", "550.90.07"), ("l40s", "550.90.07"))
    out = []
    for i in range(start, start + count):
        model, driver = models[i % len(models)]
        out.append(gpu_node(f"{prefix}-{model}-{i:05d}", model, driver))
    return out


def pod_body(
    name: str,
    *,
    namespace: str = "default",
    node: str | None = None,
    gpus: int = 0,
    gpu_resource: str = GPU_RESOURCE,
    labels: Mapping[str, str] | None = None,
    cpu: str = "100m",
    memory: str = "128Mi",
    image: str = "127.0.0.1:5000/gpuops/pause:lab",
) -> dict[str, Any]:
    """A minimal pod; with ``node`` it is bound directly (``spec.nodeName``), bypassing the
    scheduler, as the scale benchmark needs."""
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}, "limits": {}}
    if gpus:
        resources["requests"][gpu_resource] = str(gpus)
        resources["limits"][gpu_resource] = str(gpus)
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": image, "resources": resources}],
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 0,
        "tolerations": [{"key": KWOK_ANNOTATION, "operator": "Exists"}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": spec,
    }
