"""A registry of its own for the prune test and bench: the lab's Debian ``docker-registry``
(distribution 2.8) on loopback in a directory of the caller's, restarted with deletes off or
read-only as a test needs (the lab's shared registry keeps deletes on and is never restarted
read-only), and images pushed by manifest through the distribution API (tiny configs and
layers, no image builds)."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from gpuops_lab import proc

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class OwnRegistry:
    """A docker-registry process in ``base`` with deletes on/off and read-only on/off."""

    base: Path
    port: int = field(default_factory=proc.free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def config(self) -> Path:
        return self.base / "config.yml"

    def start(
        self, *, deletes: bool = True, readonly: bool = False, accesslog: bool = False
    ) -> None:
        self.stop()
        self.data.mkdir(parents=True, exist_ok=True)
        storage: dict[str, Any] = {
            "filesystem": {"rootdirectory": str(self.data)},
            "delete": {"enabled": deletes},
        }
        if readonly:
            storage["maintenance"] = {"readonly": {"enabled": True}}
        doc = {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": not accesslog}},
            "storage": storage,
            "http": {"addr": self.url},
        }
        self.config.write_text(yaml.safe_dump(doc, sort_keys=False))
        log = (self.base / "registry.log").open("ab")
        self.process = subprocess.Popen(
            ["docker-registry", "serve", str(self.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if self.request("GET", "/v2/")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"registry on {self.url} did not answer")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        conn = http.client.HTTPConnection(self.url, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()
        finally:
            conn.close()

    # -- pushing by manifest ----------------------------------------------------------------
    def blob(self, repo: str, data: bytes) -> dict[str, Any]:
        d = digest(data)
        status, headers, _ = self.request("POST", f"/v2/{repo}/blobs/uploads/")
        _expect(status, 202, "blob upload")
        location = headers["Location"]
        path = location.split(self.url, 1)[-1]
        sep = "&" if "?" in path else "?"
        status, _, body = self.request(
            "PUT",
            f"{path}{sep}digest={d}",
            data,
            {
                "Content-Type": "application/octet-stream",
                "Content-Length": str(len(data)),
            },
        )
        _expect(status, 201, "blob put", body)
        return {"digest": d, "size": len(data)}

    def manifest(self, repo: str, ref: str, doc: dict[str, Any], media_type: str) -> str:
        body = json.dumps(doc).encode()
        status, _, text = self.request(
            "PUT", f"/v2/{repo}/manifests/{ref}", body, {"Content-Type": media_type}
        )
        _expect(status, 201, "manifest put", text)
        return digest(body)

    def image(
        self,
        repo: str,
        tag: str | None,
        created: datetime,
        layer: bytes,
        shared: dict[str, Any],
    ) -> tuple[str, str]:
        """An image (config with the created label and a CUDA label, a shared and an own
        layer); returns (manifest digest, own layer digest)."""
        own = self.blob(repo, layer)
        stamp = created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        config = {
            "architecture": "amd64",
            "os": "linux",
            "created": stamp,
            "config": {
                "Labels": {
                    "org.opencontainers.image.created": stamp,
                    "org.opencontainers.image.version": tag or "untagged",
                    "com.nvidia.cuda.version": "12.2.2",
                }
            },
            "rootfs": {"type": "layers", "diff_ids": [shared["digest"], own["digest"]]},
        }
        cfg = self.blob(repo, json.dumps(config).encode())
        doc = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, **cfg},
            "layers": [
                {"mediaType": OCI_LAYER, **shared},
                {"mediaType": OCI_LAYER, **own},
            ],
        }
        d = self.manifest(repo, tag or digest(json.dumps(doc).encode()), doc, OCI_MANIFEST)
        return d, own["digest"]

    def index(self, repo: str, tag: str, children: list[str], created: datetime) -> str:
        manifests = []
        for child, arch in zip(children, ("amd64", "arm64"), strict=False):
            status, _, body = self.request(
                "GET", f"/v2/{repo}/manifests/{child}", headers={"Accept": OCI_MANIFEST}
            )
            _expect(status, 200, "manifest get")
            manifests.append(
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": child,
                    "size": len(body),
                    "platform": {"os": "linux", "architecture": arch},
                }
            )
        doc = {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": manifests,
            "annotations": {
                "org.opencontainers.image.created": created.strftime("%Y-%m-%dT%H:%M:%SZ")
            },
        }
        return self.manifest(repo, tag, doc, OCI_INDEX)

    def tags(self, repo: str) -> list[str]:
        status, _, body = self.request("GET", f"/v2/{repo}/tags/list?n=100000")
        if status == 404:
            return []
        return sorted(json.loads(body).get("tags") or [])

    def has_manifest(self, repo: str, d: str) -> bool:
        accept = f"{OCI_MANIFEST}, {OCI_INDEX}"
        return (
            self.request("HEAD", f"/v2/{repo}/manifests/{d}", headers={"Accept": accept})[0] == 200
        )

    def blob_on_disk(self, d: str) -> bool:
        hex_ = d.split(":", 1)[1]
        return (self.data / "docker/registry/v2/blobs/sha256" / hex_[:2] / hex_ / "data").exists()


def random_layer(size: int = 4096) -> bytes:
    return os.urandom(size)


def _expect(status: int, want: int, what: str, body: bytes = b"") -> None:
    if status != want:
        raise RuntimeError(f"{what}: HTTP {status} {body[:200]!r}")
