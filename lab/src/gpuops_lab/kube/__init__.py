"""The lab's Kubernetes: a real control plane on loopback, with kwok for fake kubelets.

Processes (binaries built from Go modules by ``scripts/build-kube.sh`` into
``<cache>/kube/<k8s version>/bin``): etcd, kube-apiserver (token auth, self-signed serving
certificate, RBAC), kube-controller-manager and kube-scheduler (each with its own identity and
kubeconfig), and the kwok controller, which plays the kubelet for nodes annotated
``kwok.x-k8s.io/node=fake`` using kwok's default "fast" stages (nodes become Ready, pods
Running, Job pods Succeeded).

Everything lives under ``<lab dir>/kube``; the admin kubeconfig is ``<lab dir>/kubeconfig``.
One kwok GPU node is created per fleet host (same name, ``nvidia.com/gpu`` capacity 8, labels as
NVIDIA's GPU feature discovery sets them), plus ``LabConfig.extra_nodes`` synthetic GPU nodes.
:func:`create_gpu_nodes`, :func:`bulk_create_nodes` and :func:`bulk_create_pods` make more.

Rooms: :mod:`.component` (up, down, status, the API server restart of fault injection),
:mod:`.controlplane` (the processes), :mod:`.binaries` (version, build), :mod:`.certs` (keys,
kubeconfigs), :mod:`.objects` (GPU nodes and pods as the lab creates them), :mod:`.api` (bulk
creation, waiting for Ready).
"""

from gpuops_lab.kube.api import (
    api_client,
    bulk_create_nodes,
    bulk_create_pods,
    create_gpu_nodes,
    wait_nodes_ready,
)
from gpuops_lab.kube.binaries import BINARIES, K8S_VERSION, bin_dir, ensure_binaries, k8s_version
from gpuops_lab.kube.component import (
    down,
    restart_apiserver,
    start_apiserver,
    status,
    stop_apiserver,
    up,
)
from gpuops_lab.kube.controlplane import (
    POD_CIDR,
    PROCESSES,
    SERVICE_CIDR,
    START_TIMEOUT_S,
    kube_dir,
    kubeconfig_path,
)
from gpuops_lab.kube.objects import (
    DEFAULT_DRIVER_LABELS,
    DRIVER_LABELS,
    GPU_RESOURCE,
    KWOK_ANNOTATION,
    NodeSpec,
    Taint,
    fleet_nodes,
    gpu_labels,
    gpu_node,
    pod_body,
    synthetic_nodes,
)

__all__ = [
    "BINARIES",
    "DEFAULT_DRIVER_LABELS",
    "DRIVER_LABELS",
    "GPU_RESOURCE",
    "K8S_VERSION",
    "KWOK_ANNOTATION",
    "POD_CIDR",
    "PROCESSES",
    "SERVICE_CIDR",
    "START_TIMEOUT_S",
    "NodeSpec",
    "Taint",
    "api_client",
    "bin_dir",
    "bulk_create_nodes",
    "bulk_create_pods",
    "create_gpu_nodes",
    "down",
    "ensure_binaries",
    "fleet_nodes",
    "gpu_labels",
    "gpu_node",
    "k8s_version",
    "kube_dir",
    "kubeconfig_path",
    "pod_body",
    "restart_apiserver",
    "start_apiserver",
    "status",
    "stop_apiserver",
    "synthetic_nodes",
    "up",
    "wait_nodes_ready",
]
