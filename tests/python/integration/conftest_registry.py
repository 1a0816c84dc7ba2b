"""Session fixtures: the lab's registry and image builder (real docker-registry, real Podman
API service), in a plain lab and in an authenticated (htpasswd + TLS) lab.

Wire it from tests/python/conftest.py with
``pytest_plugins = ["integration.conftest_registry"]``. Each lab lives in its own pytest temp
dir, so it never touches a lab started with ``gpuops lab up``.
"""

from __future__ import annotations

import base64
import io
import re
import shutil
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from integration.fleetlab import short_lab_dir

from gpuops_lab import Lab, LabConfig, proc
from gpuops_lab import builder as labbuilder
from gpuops_lab import registry as labregistry

#: The Accept header of the retag recipe (LAB.md): without it the registry down-converts.
MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    ]
)


@dataclass
class Response:
    status: int
    headers: Message  # case-insensitive, as HTTP header names are
    body: bytes


@dataclass
class RegistryLab:
    lab: Lab
    registry: dict[str, Any]  # the registry component's facts
    builder: dict[str, Any]  # the builder component's facts
    docker: Any  # docker.DockerClient on the lab's Podman socket
    startup_s: float

    @property
    def url(self) -> str:
        return str(self.registry["url"])

    @property
    def base_image(self) -> str:
        return str(self.builder["base_image"])

    @property
    def auth_config(self) -> dict[str, str] | None:
        return labregistry.auth_config(self.lab)

    def ref(self, name: str) -> str:
        """A fresh, unique reference ``<registry>/test/<name>:<random tag>``."""
        return f"{self.url}/test/{name}:{uuid.uuid4().hex[:10]}"

    def http(
        self,
        method: str,
        path: str,
        *,
        headers: dict[str, str] | None = None,
        data: bytes | None = None,
        credentials: tuple[str, str] | bool | None = True,
    ) -> Response:
        """One request to the registry's HTTP API. ``credentials``: True for the lab's own
        (in auth mode), False/None for none, or an explicit (user, password)."""
        req = urllib.request.Request(  # noqa: S310  (the lab's loopback registry)
            f"{self.registry['endpoint']}{path}", method=method, data=data
        )
        for key, value in (headers or {}).items():
            req.add_header(key, value)
        if credentials is True and self.registry["auth"]:
            credentials = (str(self.registry["username"]), labregistry.password(self.lab))
        if isinstance(credentials, tuple):
            token = base64.b64encode(":".join(credentials).encode()).decode()
            req.add_header("Authorization", f"Basic {token}")
        context = labregistry.ssl_context(self.registry)
        try:
            with urllib.request.urlopen(req, timeout=10, context=context) as resp:  # noqa: S310
                return Response(resp.status, resp.headers, resp.read())
        except urllib.error.HTTPError as exc:
            return Response(exc.code, exc.headers, exc.read())

    def manifest_digest(self, repo: str, reference: str) -> str | None:
        resp = self.http(
            "HEAD", f"/v2/{repo}/manifests/{reference}", headers={"Accept": MANIFEST_TYPES}
        )
        return resp.headers.get("Docker-Content-Digest") if resp.status == 200 else None

    def build(self, ref: str, dockerfile: str) -> Any:
        """Build ``ref`` from a Dockerfile through the Podman API; return the image."""
        image, _ = self.docker.images.build(
            fileobj=io.BytesIO(dockerfile.encode()), tag=ref, rm=True, forcerm=True
        )
        return image

    def push(self, ref: str, *, auth: bool = True) -> list[dict[str, Any]]:
        """Push through the Podman API; return the decoded progress events."""
        repo, tag = ref.rsplit(":", 1)
        auth_config = self.auth_config if auth else None
        return list(
            self.docker.api.push(repo, tag=tag, auth_config=auth_config, stream=True, decode=True)
        )


def split_ref(ref: str) -> tuple[str, str]:
    """``127.0.0.1:5000/test/x:tag`` -> (``test/x``, ``tag``)."""
    name, tag = ref.rsplit(":", 1)
    return name.split("/", 1)[1], tag


def pushed_digest(events: list[dict[str, Any]]) -> str:
    errors = [e["error"] for e in events if "error" in e]
    assert not errors, f"push failed: {errors}"
    for event in events:
        found = re.search(r"digest: (sha256:[0-9a-f]{64})", str(event.get("status", "")))
        if found:
            return found.group(1)
    raise AssertionError(f"no digest in push output: {events}")


def down_registry_only(lab: Lab) -> None:
    """What ``Lab.down`` does for a lab that runs only the registry and the builder."""
    labbuilder.down(lab)
    labregistry.down(lab)
    proc.stop_all(lab.dir)
    shutil.rmtree(lab.dir, ignore_errors=True)


def start_registry_lab(lab_dir: Path, *, auth: bool) -> RegistryLab:
    lab = Lab(LabConfig(dir=lab_dir, registry_auth=auth))
    started = time.monotonic()
    try:
        lab.up(["registry", "builder"])
    except BaseException:
        down_registry_only(lab)
        raise
    startup = time.monotonic() - started
    return RegistryLab(
        lab,
        lab.facts("registry"),
        lab.facts("builder"),
        labbuilder.client(lab),
        startup,
    )


def _session_lab(auth: bool) -> Iterator[RegistryLab]:
    # pytest's own tmp folders are too long for Podman's run root (gpuops_lab.builder)
    lab_dir = short_lab_dir()
    try:
        rlab = start_registry_lab(lab_dir, auth=auth)
        try:
            yield rlab
        finally:
            rlab.docker.close()
            down_registry_only(rlab.lab)
    finally:
        shutil.rmtree(lab_dir.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def registry_lab() -> Iterator[RegistryLab]:
    """Plain registry (HTTP, no auth) + Podman builder with the busybox base pushed."""
    yield from _session_lab(auth=False)


@pytest.fixture(scope="session")
def auth_registry_lab() -> Iterator[RegistryLab]:
    """Registry with TLS (lab CA) and htpasswd basic auth + its own Podman builder."""
    yield from _session_lab(auth=True)
