"""The gates a release passes before anything changes: the image exists in the registry and
resolves to a digest, it is compatible with the environment's node class, and the GPUs for the
rollout's surge pods are free. Each returns a :class:`Gate`: what it checked and whether it
passed, with a hint when it did not; the release (:mod:`.engine`) decides what a gate that did
not pass means (the release is refused)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, Protocol, TypedDict

from gpuops.adapters.kube import KubeClient
from gpuops.adapters.kube.decode import placement_from_spec, pod_from_api
from gpuops.core import headroom as headroom_core
from gpuops.core.releaseconfig import Environment
from gpuops.errors import GateRefused
from gpuops.schema import open_items
from gpuops.usecases import headroom
from gpuops.usecases.cluster import Cluster


class Registry(Protocol):
    """What a release needs of the registry."""

    def resolve(self, repository: str, tag: str) -> str | None:
        """The digest ``repository:tag`` points at, or None when there is no such tag."""

    def has_digest(self, repository: str, digest: str) -> bool:
        """Whether the manifest ``repository@digest`` exists."""

    def move_tag(self, repository: str, digest: str, tag: str) -> None:
        """Point ``repository:tag`` at ``digest`` (by manifest; no layer moves)."""

    def compat(
        self,
        env: Environment,
        digest: str,
        cluster: Cluster,
        connect: Callable[[Cluster], KubeClient],
        drivers: Mapping[str, str] | None = None,
    ) -> Gate:
        """The compat gate: the image's CUDA version against the drivers of the environment's
        node class (not ok when they do not suit it); ``drivers`` (node -> driver version)
        stands for what those nodes' labels say: the drivers they will run."""


class GateDocument(TypedDict):
    """A gate in a release's document: its name, verdict and message, then its details."""

    gate: str  # image | compat | headroom
    ok: bool
    message: str
    digest: NotRequired[str]  # image: what the tag resolves to
    deployments: NotRequired[list[dict[str, Any]]]  # headroom: per Deployment


open_items(GateDocument)  # each gate adds its own details (compat: the nodes it checked)


@dataclass
class Gate:
    """One gate's finding; ``hint``: what to do when it did not pass (not in the document:
    the refusal carries it)."""

    name: str
    ok: bool
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"gate": self.name, "ok": self.ok, "message": self.message, **self.details}

    def refusal(self) -> GateRefused:
        """The refusal of a release this gate did not pass."""
        return GateRefused(self.message, hint=self.hint)


def first_closed(gates: Sequence[Gate]) -> Gate | None:
    """The first gate that did not pass, or None."""
    return next((g for g in gates if not g.ok), None)


def image_gate(registry: Registry, env: Environment, tag: str) -> tuple[Gate, str | None]:
    """The tag must exist: the gate and the digest it resolves to (None: it does not)."""
    digest = registry.resolve(env.image, tag)
    if digest is None:
        message = f"tag {tag} does not exist in {env.image}"
        hint = "build and push it first (buildImage), or check the tag"
        return Gate("image", False, message, hint=hint), None
    return Gate("image", True, f"{env.image}:{tag} is {digest}", {"digest": digest}), digest


def digest_gate(registry: Registry, env: Environment, tag: str | None, digest: str) -> Gate:
    """For a rollback: the recorded digest must still be in the registry (no rebuild)."""
    if not registry.has_digest(env.image, digest):
        message = f"{env.image}@{digest} ({tag}) is no longer in the registry"
        hint = "it was deleted (retention or garbage collection); rebuild it"
        return Gate("image", False, message, hint=hint)
    return Gate("image", True, f"{env.image}@{digest} ({tag}) is still in the registry")


def surge_pods(deployment: Mapping[str, Any]) -> int:
    """How many pods above ``replicas`` a rolling update may create at once (maxSurge)."""
    spec = deployment.get("spec") or {}
    replicas = spec.get("replicas", 1)
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate" or not replicas:
        return 0
    surge = (strategy.get("rollingUpdate") or {}).get("maxSurge", "25%")
    if isinstance(surge, str) and surge.endswith("%"):
        return math.ceil(int(surge[:-1] or 0) * int(replicas) / 100)
    return int(surge)


def headroom_gate(
    env: Environment,
    cluster: Cluster,
    deployments: Sequence[Mapping[str, Any]],
    link: str | None,
    connect: Callable[[Cluster], KubeClient] | None = None,
    *,
    extra_pods: int = 0,
) -> Gate:
    """GPU headroom for the surge pods of every Deployment's rollout, with the environment's
    reserve (``gpuops headroom check`` with the pods' own selector, affinity, tolerations);
    ``extra_pods``: more pods of the same template beside them (a progressive release's
    largest canary, whose pods still run while the stable rolls)."""
    checked: list[dict[str, Any]] = []
    for obj in deployments:
        name = (obj.get("metadata") or {}).get("name", "")
        template = (obj.get("spec") or {}).get("template") or {}
        pod = pod_from_api({"metadata": {"namespace": env.namespace}, "spec": template.get("spec")})
        gpus = pod.requests.get(headroom_core.DEFAULT_RESOURCE, 0)
        surge = surge_pods(obj) + extra_pods
        if gpus <= 0 or surge <= 0:
            why = (
                "its pods request no GPUs" if gpus <= 0 else "its rollout adds no pods (maxSurge 0)"
            )
            checked.append({"deployment": name, "skipped": why})
            continue
        shape = headroom_core.Shape(
            gpus_per_pod=gpus,
            pods=surge,
            placement=placement_from_spec(template.get("spec") or {}),
            namespace=env.namespace,
        )
        policy = headroom_core.Policy(env.reserve, dict(env.reserve_per_class), env.group_by)
        outcome = headroom.check(
            headroom.CheckRequest(shape, policy, cluster, headroom.Notify(link=link)), connect
        )
        result = outcome.result
        entry = {
            "deployment": name,
            "surge_pods": surge,
            "gpus_per_pod": gpus,
            "fits": result.fits,
            "message": result.message,
        }
        checked.append(entry)
        if not result.fits:  # the first Deployment that does not fit closes the gate
            return Gate(
                "headroom",
                False,
                f"{name}: {result.message}",
                {"deployments": checked},
                hint="free GPUs on the node class or lower maxSurge; 'gpuops headroom check' "
                "shows the numbers",
            )
    fitting = [c for c in checked if c.get("fits")]
    message = "; ".join(f"{c['deployment']}: {c['message']}" for c in fitting) or "; ".join(
        f"{c['deployment']}: skipped, {c['skipped']}" for c in checked
    )
    return Gate("headroom", True, message, {"deployments": checked})
