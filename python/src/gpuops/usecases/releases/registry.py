"""The registry side of a release, through the image use cases (issue 10) in-process: a tag
resolves with :func:`registryops.resolve`, the environment's registry tag moves with
:func:`registryops.copy_tag` (by manifest, read back), the compat gate is
:func:`compat.compat` for the environment's node class. No registry code of its own.

Credentials come from ``GPUOPS_REGISTRY_USERNAME`` / ``GPUOPS_REGISTRY_PASSWORD`` (what the
``promoteTag`` step binds); the environments file says plain HTTP (a lab) or a CA file."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpuops.adapters.kube import KubeClient
from gpuops.core.imageref import ImageRef, parse_repository
from gpuops.core.releaseconfig import Environment
from gpuops.errors import InvalidInput
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.images import compat as compat_usecase
from gpuops.usecases.images import registryops
from gpuops.usecases.images.registryops import RegistryAccess
from gpuops.usecases.releases.gates import Gate


@dataclass
class ImageRegistry:
    """What a release needs of an environment's registry (:class:`gates.Registry`)."""

    access: RegistryAccess

    def _repository(self, repository: str) -> ImageRef:
        return parse_repository(repository, "image repository")

    def resolve(self, repository: str, tag: str) -> str | None:
        ref = self._repository(repository).with_tag(tag)
        try:
            return registryops.resolve(ref, self.access)
        except InvalidInput:  # the only InvalidInput resolve raises: no such tag
            return None

    def has_digest(self, repository: str, digest: str) -> bool:
        ref = self._repository(repository).with_digest(digest)
        try:
            return registryops.resolve(ref, self.access) == digest
        except InvalidInput:
            return False

    def move_tag(self, repository: str, digest: str, tag: str) -> None:
        repo = self._repository(repository)
        registryops.copy_tag(repo.with_digest(digest), repo.with_tag(tag), self.access)

    def compat(
        self,
        env: Environment,
        digest: str,
        cluster: Cluster,
        connect: Callable[[Cluster], KubeClient],
        drivers: Mapping[str, str] | None = None,
    ) -> Gate:
        if env.node_class is None:
            return Gate("compat", True, "the environment names no node class: not checked")
        request = compat_usecase.CompatRequest(
            {env.group_by: env.node_class},
            image=self._repository(env.image).with_digest(digest),
            access=self.access,
            cluster=cluster,
            planned_drivers=dict(drivers or {}),
        )
        outcome = compat_usecase.compat(request, connect).result
        details: dict[str, Any] = {
            "node_class": env.node_class,
            "cuda_version": outcome.cuda_version,
            "cuda_source": outcome.cuda_source,
        }
        if outcome.result is not None:
            details["offending"] = [n.node for n in outcome.result.offending]
        if drivers:
            details["planned_drivers"] = dict(sorted(drivers.items()))
        hint = (
            None
            if outcome.ok
            else "the nodes' drivers are older than the image's CUDA needs: update the drivers "
            "(updateGpuNodes) or build on an older CUDA base"
        )
        return Gate("compat", outcome.ok, outcome.message, details, hint=hint)


def registry_for(env: Environment) -> ImageRegistry:
    """The environment's registry, as its environments file says to reach it."""
    return ImageRegistry(RegistryAccess(env.registry_plain_http, env.registry_ca_file))
