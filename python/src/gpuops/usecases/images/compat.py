"""Use case ``image compat``: can every node of a class run the image's CUDA version?

The image's CUDA version comes from its config in the registry (NVIDIA's label or
``CUDA_VERSION``), or from the request when the image declares none; the class's drivers come
from the node labels (``gpu-driver``, GPU feature discovery's ``nvidia.com/cuda.driver*``);
the verdicts from :mod:`gpuops.core.cuda`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuops.adapters.kube import KubeClient
from gpuops.core.cuda import CompatResult, Version, check_class, node_driver
from gpuops.core.imageref import ImageRef
from gpuops.errors import InvalidInput
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.images.registryops import ImageInfo, RegistryAccess, inspect


@dataclass(frozen=True)
class CompatRequest:
    node_selector: Mapping[str, str]  # the node class, e.g. {"accelerator": "nvidia-h800"}
    image: ImageRef | None = None  # a tag or digest; None when cuda_version is given
    cuda_version: Version | None = None  # overrides what the image declares
    strict: bool = False  # no minor-version compatibility: the table's exact minimum
    platform: str = "linux/amd64"
    access: RegistryAccess = field(default_factory=RegistryAccess)
    cluster: Cluster = field(default_factory=Cluster)


@dataclass
class CompatOutcome:
    request: CompatRequest
    image: ImageInfo | None
    cuda_version: str  # "unknown" when neither the image nor the request gives one
    cuda_source: str
    result: CompatResult | None  # None when the CUDA version is unknown
    nodes: list[tuple[str, Mapping[str, str]]]
    server: str
    unreadable: str = ""  # the image declares a CUDA version that cannot be read: refused

    @property
    def ok(self) -> bool:
        if self.unreadable:
            return False
        return self.result is None or self.result.ok

    @property
    def message(self) -> str:
        if self.unreadable:
            return (
                f"{self.request.image} declares a CUDA version the gate cannot read "
                f"({self.unreadable}): it is refused, not taken for an image without CUDA"
            )
        if self.result is not None:
            return self.result.message
        return (
            f"{self.request.image} declares no CUDA version (no {'com.nvidia.cuda.version'} "
            "label, no CUDA_VERSION): the driver gate does not apply; pass --cuda-version "
            "to check it anyway"
        )

    def to_dict(self) -> dict[str, Any]:
        base: dict[str, Any] = {
            "image": str(self.request.image) if self.request.image else None,
            "digest": self.image.digest if self.image else None,
            "node_selector": dict(self.request.node_selector),
            "cuda_version": self.cuda_version,
            "cuda_source": self.cuda_source,
            "server": self.server,
        }
        if self.result is not None:
            return {**base, **self.result.to_dict()}
        if self.unreadable:
            return {
                **base,
                "ok": False,
                "strict": self.request.strict,
                "cuda_problem": self.unreadable,
                "min_driver": None,
                "drivers": [],
                "nodes": [],
                "offending": [],
                "message": self.message,
            }
        drivers: dict[str, int] = {}
        for _, labels in self.nodes:
            version = node_driver(labels).version
            drivers[str(version) if version else "none"] = (
                drivers.get(str(version) if version else "none", 0) + 1
            )
        return {
            **base,
            "ok": True,
            "strict": self.request.strict,
            "min_driver": None,
            "drivers": [
                {"driver": k, "nodes": v, "verdict": "not-applicable"}
                for k, v in sorted(drivers.items())
            ],
            "nodes": [{"node": n, "verdict": "not-applicable"} for n, _ in self.nodes],
            "offending": [],
            "message": self.message,
        }


def _class_nodes(
    kube: KubeClient, selector: Mapping[str, str]
) -> list[tuple[str, Mapping[str, str]]]:
    nodes = kube.list_nodes(frozenset())  # labels only: no resource is decoded
    return [
        (n.name, n.labels) for n in nodes if all(n.labels.get(k) == v for k, v in selector.items())
    ]


def compat(
    request: CompatRequest, connect: Callable[[Cluster], KubeClient] | None = None
) -> CompatOutcome:
    """The gate's verdict for every node the selector picks (sorted by name)."""
    if request.image is None and request.cuda_version is None:
        raise InvalidInput("give an image or --cuda-version", field="image")
    if not request.node_selector:
        raise InvalidInput(
            "give the node class as --node-selector key=value (e.g. accelerator=nvidia-h800)",
            field="node_selector",
        )
    info = inspect(request.image, request.access, request.platform) if request.image else None
    if request.cuda_version is not None:
        cuda: Version | None = request.cuda_version
        source = "--cuda-version"
    elif info is not None and info.cuda_problem:
        # refused before the cluster is asked: no driver can be checked against it
        return CompatOutcome(
            request, info, "unreadable", info.cuda_source, None, [], "", info.cuda_problem
        )
    elif info is not None and info.cuda_version != "unknown":
        cuda, source = Version.parse(info.cuda_version), info.cuda_source
    else:
        cuda, source = None, "unknown"
    kube = (connect or Cluster.connect)(request.cluster)
    try:
        nodes = _class_nodes(kube, request.node_selector)
    finally:
        kube.close()
    if not nodes:
        shown = ",".join(f"{k}={v}" for k, v in request.node_selector.items())
        raise InvalidInput(
            f"no node on {kube.server} matches the node selector {shown}",
            hint="check the class label (kubectl get nodes --show-labels)",
            field="node_selector",
        )
    result = check_class(nodes, cuda, strict=request.strict) if cuda is not None else None
    return CompatOutcome(
        request, info, str(cuda) if cuda else "unknown", source, result, nodes, kube.server
    )
