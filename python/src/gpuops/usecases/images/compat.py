"""Use case ``image compat``: can every node of a class run the image's CUDA version?

The image's CUDA version comes from its config in the registry (NVIDIA's label or
``CUDA_VERSION``), or from the request when the image declares none; the class's drivers come
from the node labels (``gpu-driver``, GPU feature discovery's ``nvidia.com/cuda.driver*``);
the verdicts from :mod:`gpuops.core.cuda`. A node that cannot run it, or a CUDA declaration
that cannot be read, is *refused* here (exit 3), with what to do about it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired, TypedDict, cast

from gpuops.adapters.kube import KubeClient
from gpuops.core.cuda import DRIVER_LABEL, CompatResult, Version, check_class, node_driver
from gpuops.core.imageref import ImageRef
from gpuops.errors import GateRefused, InvalidInput
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.images.registryops import ImageInfo, RegistryAccess, inspect
from gpuops.usecases.outcome import Outcome

#: What to do about an image whose CUDA declaration the gate cannot read.
UNREADABLE_HINT = (
    "fix the image's com.nvidia.cuda.version label / CUDA_VERSION (e.g. 12.8.1), "
    "or state the version with --cuda-version"
)
#: What to do about nodes whose drivers are older than the image's CUDA needs.
DRIVERS_HINT = (
    "upgrade the drivers of the nodes named (gpuops nodes update), pick another "
    "class, or build on an older CUDA base image"
)


@dataclass(frozen=True)
class CompatRequest:
    node_selector: Mapping[str, str]  # the node class, e.g. {"accelerator": "nvidia-h800"}
    image: ImageRef | None = None  # a tag or digest; None when cuda_version is given
    cuda_version: Version | None = None  # overrides what the image declares
    strict: bool = False  # no minor-version compatibility: the table's exact minimum
    platform: str = "linux/amd64"
    access: RegistryAccess = field(default_factory=RegistryAccess)
    cluster: Cluster = field(default_factory=Cluster)
    #: node -> driver version it will run (a release rollback with its nodes): judged instead
    #: of that node's driver labels
    planned_drivers: Mapping[str, str] = field(default_factory=dict)


_VERDICTS = ["ok", "minor-compat", "too-old", "no-driver", "unknown", "not-applicable"]
_Verdict = Annotated[str, {"enum": _VERDICTS}]


class RequirementDocument(TypedDict):
    """What the CUDA version needs from the driver (NVIDIA's table)."""

    cuda: str
    full_min_driver: str | None
    table_row: str  # which row of the table gave it, or why none did
    minor_compat_min_driver: str | None


class DriverDocument(TypedDict):
    """A driver version of the class: how many nodes run it and their verdict."""

    driver: str  # a version or "none"
    nodes: int
    verdict: _Verdict


class NodeVerdictDocument(TypedDict):
    """One node's verdict when the CUDA version is known."""

    node: str
    driver: str | None
    driver_source: str  # the label(s) that gave the driver
    verdict: _Verdict
    reason: str
    note: NotRequired[str]  # labels that disagree or do not parse


class NodeNotCheckedDocument(TypedDict):
    """One node when the image declares no CUDA version (the gate does not apply)."""

    node: str
    verdict: Annotated[str, {"const": "not-applicable"}]


class CompatDocument(TypedDict):
    """The ``result`` of ``gpuops image compat``."""

    image: str | None  # None: only --cuda-version was given
    digest: str | None
    node_selector: dict[str, str]
    cuda_version: str  # the version checked, or "unknown"
    cuda_source: str
    server: str
    ok: bool
    strict: bool
    min_driver: str | None
    requirement: NotRequired[RequirementDocument]  # when the CUDA version is known
    cuda_problem: NotRequired[str]  # the declared CUDA version cannot be read (refused)
    drivers: list[Annotated[dict[str, Any], DriverDocument]]
    nodes: list[Annotated[dict[str, Any], NodeVerdictDocument] | NodeNotCheckedDocument]
    offending: list[str]  # the nodes that cannot run it
    message: str


@dataclass
class CompatCheck:
    """The gate's findings: the image, its CUDA version and where it was read, every node's
    verdict (None when the version is unknown: the gate does not apply)."""

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

    def to_dict(self) -> CompatDocument:
        return cast("CompatDocument", self._document())

    def _document(self) -> dict[str, Any]:
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
) -> Outcome[CompatCheck]:
    """The gate's verdict for every node the selector picks (sorted by name): refused when a
    node cannot run the image's CUDA or the image's declaration cannot be read."""
    found = _check(request, connect)
    if found.ok:
        return Outcome(found)
    hint = UNREADABLE_HINT if found.unreadable else DRIVERS_HINT
    return Outcome(found, GateRefused(found.message, hint=hint))


def _check(request: CompatRequest, connect: Callable[[Cluster], KubeClient] | None) -> CompatCheck:
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
        return CompatCheck(
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
    planned = request.planned_drivers
    nodes = [(n, {DRIVER_LABEL: planned[n]} if n in planned else labels) for n, labels in nodes]
    if not nodes:
        shown = ",".join(f"{k}={v}" for k, v in request.node_selector.items())
        raise InvalidInput(
            f"no node on {kube.server} matches the node selector {shown}",
            hint="check the class label (kubectl get nodes --show-labels)",
            field="node_selector",
        )
    result = check_class(nodes, cuda, strict=request.strict) if cuda is not None else None
    return CompatCheck(
        request, info, str(cuda) if cuda else "unknown", source, result, nodes, kube.server
    )
