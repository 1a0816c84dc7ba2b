"""The downgrade gate of ``nodes update`` (and of every rollback that reinstalls an older
driver): before any host's driver goes down, the GPU pods running on the nodes of its class,
their images' CUDA versions (read from the image config in the registry, as ``image compat``
reads them) and NVIDIA's minimum driver for each are checked against the target driver.
Refused (:class:`~gpuops.errors.GateRefused`, exit 3) naming every workload that could not run;
the judgement is core/downgrade.py's.

Read-only: it lists nodes and pods and reads image configs; it writes nothing. A run in which
no driver goes down asks neither the cluster nor a registry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuops.adapters.kube import KubeClient
from gpuops.adapters.kube import apps as kubeapps
from gpuops.adapters.kube.decode import pod_from_api
from gpuops.core import downgrade
from gpuops.core.downgrade import DowngradeVerdict, Workload
from gpuops.core.headroom import DEFAULT_RESOURCE
from gpuops.core.imageref import parse_reference
from gpuops.core.nodestate import DriverChange
from gpuops.errors import GateRefused, GpuOpsError
from gpuops.usecases.images.registryops import RegistryAccess, inspect
from gpuops.usecases.nodes.records import HostRecord

HINT = (
    "move the workloads named off the class first (or wait until they end), keep the driver, "
    "or rebuild them on a CUDA base the target driver supports; an image the gate cannot "
    "read: make it readable with the registry access given (--plain-http, "
    "GPUOPS_REGISTRY_USERNAME/PASSWORD)"
)


def check(
    kube: KubeClient,
    changes: Sequence[DriverChange],
    access: RegistryAccess,
    *,
    strict: bool = True,
    resource: str = DEFAULT_RESOURCE,
    platform: str = "linux/amd64",
    replaced: Sequence[tuple[str, str]] = (),
) -> DowngradeVerdict:
    """The gate's verdict; raises GateRefused when a workload cannot run on its class's
    target driver, when an image's CUDA version cannot be read, or when a driver version
    cannot be compared.

    ``replaced``: Deployments (namespace, name) whose pods the caller replaces itself right
    after the nodes (``release rollback --with-nodes`` rolls their image back, its compat gate
    judged against the drivers to come): their pods are not judged here."""
    down, problems = downgrade.downgrades(changes)
    if not down and not problems:
        return DowngradeVerdict([], [], [], strict)
    nodes = {n.name: n.labels for n in kube.list_nodes(frozenset())}
    targets = downgrade.class_targets(down, nodes)
    found: list[tuple[str, str, str, str, str]] = []  # namespace, pod, node, container, image
    for node in sorted(targets):
        found.extend(_gpu_containers(kube, node, resource))
    found.extend(_pending_for_classes(kube, nodes, targets, resource))
    skip = _pods_of(kube, replaced)
    found = [f for f in found if (f[0], f[1]) not in skip]
    images = {image: _cuda(image, access, platform) for *_, image in found}
    workloads = [
        Workload(ns, pod, node, container, image, *images[image])
        for ns, pod, node, container, image in found
    ]
    verdict = downgrade.judge(changes, nodes, workloads, strict=strict)
    if not verdict.ok:
        raise GateRefused(verdict.message, hint=HINT)
    return verdict


def _pods_of(kube: KubeClient, deployments: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
    """The pods (namespace, name) of ``deployments``, through their ReplicaSets."""
    pods: set[tuple[str, str]] = set()
    for namespace, name in deployments:
        deployment = kubeapps.get_deployment(kube, namespace, name)
        for rs in kubeapps.replicasets(kube, deployment):
            for pod in kubeapps.pods_of_replicaset(kube, rs):
                pods.add((namespace, (pod.get("metadata") or {}).get("name", "")))
    return pods


def changes_of(
    records: Iterable[HostRecord],
    module_before: Mapping[str, str] | None = None,
    installed: Mapping[str, str | None] | None = None,
) -> list[DriverChange]:
    """What ``nodes update``'s pre-flight knows of each host as the gate's driver changes.

    Reads ``HostRecord.driver_before`` (the driver read from the host; None: none or not
    readable) and ``driver_wanted``. A None driver is "no driver" only when the host's kernel
    module state (``HostBefore.module``) is ``none``; any other state (``unknown``,
    ``mismatch``) or none given is "cannot be read", which the gate refuses. The state comes
    from ``module_before`` (host -> state, e.g. ``{h: b.module for h, b in
    probe.before.items()}``), else from a record field ``module_before`` where one exists.

    A ``mismatch`` host (a driver installed, the old module still loaded: the reboot is
    pending) is judged by ``installed`` (host -> the version the role recorded,
    ``HostBefore.installed``): the wanted one is no change at all (a re-run finishes the
    reboot) and left out; another is the driver it goes from; none readable still refuses.
    """
    states, versions = module_before or {}, installed or {}
    out = []
    for r in records:
        if not r.driver_wanted:
            continue
        state = states.get(r.host, getattr(r, "module_before", None))
        before, known = r.driver_before, r.driver_before is not None or state == "none"
        if before is None and state == "mismatch" and versions.get(r.host):
            if versions[r.host] == r.driver_wanted:
                continue
            before, known = versions[r.host], True
        out.append(DriverChange(r.host, r.node, r.group, before, r.driver_wanted, known))
    return out


#: NVIDIA's device plugin's resources besides the whole GPU: MIG slices (mixed strategy)
MIG_PREFIX = "nvidia.com/mig-"


def _holds_gpu(container: Mapping[str, Any], resource: str) -> bool:
    res = container.get("resources") or {}
    return any(
        (name == resource or str(name).startswith(MIG_PREFIX)) and str(qty).strip() not in ("", "0")
        for part in ("requests", "limits")
        for name, qty in (res.get(part) or {}).items()
    )


def _running_images(status: Mapping[str, Any]) -> dict[str, str]:
    """Container name -> the image it runs by digest (``repo@sha256:...``), where the kubelet
    reports one (``imageID``; a bare ``sha256:`` image id names no repository: not used)."""
    out = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for st in status.get(key) or ():
            image_id = str(st.get("imageID") or "")
            image_id = image_id.split("://", 1)[1] if "://" in image_id else image_id
            if "@sha256:" in image_id and not image_id.startswith("sha256:"):
                out[str(st.get("name", ""))] = image_id
    return out


def _gpu_containers(
    kube: KubeClient, node: str, resource: str
) -> list[tuple[str, str, str, str, str]]:
    """The GPU containers (:func:`_judged_containers`) of the pods on ``node`` that have not
    finished."""
    doc = kube.request(
        "GET",
        "/api/v1/pods",
        what=f"list pods on node {node}",
        query={
            "fieldSelector": f"spec.nodeName={node},status.phase!=Succeeded,status.phase!=Failed"
        },
    )
    return [c for obj in doc.get("items") or () for c in _judged_containers(obj, node, resource)]


def _pending_for_classes(
    kube: KubeClient,
    nodes: Mapping[str, Mapping[str, str]],
    targets: Mapping[str, downgrade.Target],
    resource: str,
) -> list[tuple[str, str, str, str, str]]:
    """The GPU containers of the pods not yet bound to a node that ask for a downgraded class
    by its label (``nodeSelector`` ``accelerator: X``, or a required node affinity term
    ``accelerator In [X, ...]``); each judged as if on the class's first node. A pending pod
    that does not name the class is not judged (it may land on any node)."""
    first: dict[str, str] = {}  # class label value -> its first node with a target
    for name in sorted(targets):
        if cls := (nodes.get(name) or {}).get(downgrade.CLASS_LABEL):
            first.setdefault(cls, name)
    if not first:
        return []
    doc = kube.request(
        "GET",
        "/api/v1/pods",
        what="list pods not yet scheduled",
        query={"fieldSelector": "spec.nodeName=,status.phase=Pending"},
    )
    out = []
    for obj in doc.get("items") or ():
        for cls in sorted(_classes_asked(obj.get("spec") or {}) & set(first)):
            out.extend(_judged_containers(obj, first[cls], resource))
    return out


def _classes_asked(spec: Mapping[str, Any]) -> set[str]:
    """The values of the class label a pod's scheduling constraints name."""
    label = downgrade.CLASS_LABEL
    asked = set()
    if value := (spec.get("nodeSelector") or {}).get(label):
        asked.add(str(value))
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or ():
        for expr in term.get("matchExpressions") or ():
            if expr.get("key") == label and expr.get("operator") == "In":
                asked.update(str(v) for v in expr.get("values") or ())
    return asked


def _judged_containers(
    obj: Mapping[str, Any], node: str, resource: str
) -> list[tuple[str, str, str, str, str]]:
    """(namespace, pod, node, container, image) of a pod that holds GPUs (``resource`` or a
    MIG slice, in any container or init container): every container, and the init containers
    that are sidecars (``restartPolicy: Always``) or hold GPUs themselves; each by the digest
    it runs where the kubelet reports it, else by its spec's reference. None for other pods."""
    pod = pod_from_api(obj, resources=frozenset({resource}))  # checks what it reads
    spec: Mapping[str, Any] = obj.get("spec") or {}
    containers = list(spec.get("containers") or ())
    inits = list(spec.get("initContainers") or ())
    if not any(_holds_gpu(c, resource) for c in containers + inits):
        return []
    running = _running_images(obj.get("status") or {})
    judged = containers + [
        c for c in inits if c.get("restartPolicy") == "Always" or _holds_gpu(c, resource)
    ]
    out = []
    for c in judged:
        name = str(c.get("name", ""))
        image = running.get(name) or str(c.get("image", ""))
        out.append((pod.namespace, pod.name, node, name, image))
    return out


def _cuda(image: str, access: RegistryAccess, platform: str) -> tuple[str | None, str, str]:
    """(declared CUDA version or None, where it was read, why it cannot be read or "")."""
    try:
        info = inspect(parse_reference(image, "image"), access, platform)
    except GpuOpsError as exc:  # gpuops' own words only (no third-party text)
        return None, "registry", f"the image config cannot be read: {exc.message}"
    if info.cuda_problem:
        return None, info.cuda_source, info.cuda_problem
    if info.cuda_version == "unknown":
        return None, info.cuda_source, ""
    return info.cuda_version, info.cuda_source, ""
