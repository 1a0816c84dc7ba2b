"""INTERIM: plain HTTP registry access until the image branch (issue 10) is merged; replaced
by gpuops.usecases.images.registryops right after the merge."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuops.adapters.kube import KubeClient
from gpuops.core.releaseconfig import Environment
from gpuops.errors import Unreachable
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.releases.gates import Gate

TYPES = ", ".join(
    [
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    ]
)


@dataclass(frozen=True)
class TempRegistry:
    def _req(
        self,
        method: str,
        repository: str,
        ref: str,
        data: bytes | None = None,
        ctype: str | None = None,
    ) -> tuple[int, Any, bytes]:
        host, _, path = repository.partition("/")
        req = urllib.request.Request(
            f"http://{host}/v2/{path}/manifests/{ref}", method=method, data=data
        )
        req.add_header("Accept", TYPES)
        if ctype:
            req.add_header("Content-Type", ctype)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310 - interim
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, b""
        except (urllib.error.URLError, OSError):
            raise Unreachable(f"cannot reach the registry {host}") from None

    def resolve(self, repository: str, tag: str) -> str | None:
        s, h, _ = self._req("HEAD", repository, tag)
        return h.get("Docker-Content-Digest") if s == 200 else None

    def has_digest(self, repository: str, digest: str) -> bool:
        return self.resolve(repository, digest) == digest

    def move_tag(self, repository: str, digest: str, tag: str) -> None:
        _, h, body = self._req("GET", repository, digest)
        self._req("PUT", repository, tag, body, h["Content-Type"])

    def compat(
        self,
        env: Environment,
        digest: str,
        cluster: Cluster,
        connect: Callable[[Cluster], KubeClient],
    ) -> Gate:
        return Gate("compat", True, "temporary")


def registry_for(env: Environment) -> TempRegistry:
    return TempRegistry()
