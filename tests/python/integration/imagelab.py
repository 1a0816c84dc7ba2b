"""Helpers for the ``gpuops image`` tests on the lab: run the real CLI as a process (as a
Jenkins agent does), read what the lab registry logged, and build images the way NVIDIA's CUDA
base images are made (their labels and environment, on the lab's busybox base: no image comes
from the internet)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from integration.conftest_registry import MANIFEST_TYPES, RegistryLab
from result_documents import load_document

from gpuops_lab import registry as labregistry

GPUOPS = str(Path(sys.executable).parent / "gpuops")

#: The environment and labels of NVIDIA's nvidia/cuda:12.2.2-base-ubuntu22.04 (its Dockerfile
#: from gitlab.com/nvidia/container-images/cuda), on the lab base instead of Ubuntu.
CUDA_12_2_BASE = """\
FROM {base}
ENV NVARCH=x86_64
ENV NVIDIA_REQUIRE_CUDA="{require}"
ENV NV_CUDA_CUDART_VERSION=12.2.140-1
ENV NV_CUDA_COMPAT_PACKAGE=cuda-compat-12-2
LABEL maintainer="NVIDIA CORPORATION <cudatools@nvidia.com>"
ENV CUDA_VERSION=12.2.2
ENV PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:${{PATH}}
ENV LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64
ENV NVIDIA_VISIBLE_DEVICES=all
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility
"""
REQUIRE_12_2 = "cuda>=12.2 brand=tesla,driver>=470,driver<471 brand=tesla,driver>=525,driver<526"


def cuda_12_2_base(base: str) -> str:
    return CUDA_12_2_BASE.format(base=base, require=REQUIRE_12_2)


#: An older NVIDIA base (CUDA 11.x and before) also labelled its version.
CUDA_11_8_LABELLED = """\
FROM {base}
LABEL maintainer="NVIDIA CORPORATION <cudatools@nvidia.com>"
ENV CUDA_VERSION=11.8.0
LABEL com.nvidia.volumes.needed="nvidia_driver"
LABEL com.nvidia.cuda.version="${{CUDA_VERSION}}"
ENV NVIDIA_VISIBLE_DEVICES=all
"""


@dataclass
class Run:
    returncode: int
    doc: dict[str, Any]  # the result document (exit 0) or the error document
    stdout: str
    stderr: str

    @property
    def result(self) -> dict[str, Any]:
        value: dict[str, Any] = self.doc.get("result") or {}
        return value

    @property
    def error(self) -> dict[str, Any]:
        value: dict[str, Any] = self.doc.get("error") or {}
        return value


def registry_flags(rlab: RegistryLab) -> list[str]:
    if rlab.registry["auth"]:
        return ["--registry-ca", str(rlab.registry["ca"])]
    return ["--plain-http"]


def cli_env(rlab: RegistryLab, home: Path, *, credentials: bool = True) -> dict[str, str]:
    """The agent's environment: the lab's daemon, a fresh HOME, registry credentials (auth lab)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GPUOPS_", "DOCKER_", "REGISTRY_")) and k != "KUBECONFIG"
    }
    env.update(DOCKER_HOST=str(rlab.builder["base_url"]), DOCKER_API_VERSION="1.41", HOME=str(home))
    if credentials and rlab.registry["auth"]:
        env["GPUOPS_REGISTRY_USERNAME"] = str(rlab.registry["username"])
        env["GPUOPS_REGISTRY_PASSWORD"] = labregistry.password(rlab.lab)
    return env


def gpuops(args: list[str], env: dict[str, str], workdir: Path, *, timeout: float = 300) -> Run:
    """``gpuops <args>`` as a process, with result and error files (as gpuopsExec runs it)."""
    files = workdir / f"call-{uuid.uuid4().hex[:8]}"
    files.mkdir(parents=True)
    call_env = {
        **env,
        "GPUOPS_RESULT_FILE": str(files / "result.json"),
        "GPUOPS_ERROR_FILE": str(files / "error.json"),
    }
    proc = subprocess.run(
        [GPUOPS, *args],
        env=call_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=workdir,
    )
    doc_file = files / ("result.json" if proc.returncode == 0 else "error.json")
    assert doc_file.is_file(), f"gpuops {shlex.join(args)} wrote no {doc_file.name}: {proc.stderr}"
    return Run(proc.returncode, load_document(doc_file), proc.stdout, proc.stderr)


def context(root: Path, dockerfile: str, files: dict[str, str] | None = None) -> Path:
    """A build context directory with a Dockerfile and files."""
    ctx = root / f"ctx-{uuid.uuid4().hex[:8]}"
    ctx.mkdir(parents=True)
    (ctx / "Dockerfile").write_text(dockerfile)
    for name, text in (files or {}).items():
        (ctx / name).write_text(text)
    return ctx


_FIELD = re.compile(r'([\w.]+)=("(?:[^"\\]|\\.)*"|\S+)')


@dataclass
class RegistryLog:
    """The lab registry's request log (``<lab>/logs/registry.log``), read from a mark on."""

    path: Path
    offset: int = 0
    seen: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, rlab: RegistryLab) -> RegistryLog:
        path = rlab.lab.dir / "logs" / "registry.log"
        return cls(path, path.stat().st_size)

    def requests(self, agent: str = "gpuops/") -> list[tuple[str, str, int]]:
        """(method, path, status) of each request completed since the mark, once each, made by
        a client whose User-Agent starts with ``agent`` (gpuops; "" for every client)."""
        out = []
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            text = fh.read().decode(errors="replace")
        for line in text.splitlines():
            if "response completed" not in line:
                continue
            fields = {k: v.strip('"') for k, v in _FIELD.findall(line)}
            if not fields.get("http.request.useragent", "").startswith(agent):
                continue
            rid = fields.get("http.request.id", "")
            if rid in self.seen:  # distribution logs one line per error of a request
                continue
            self.seen.add(rid)
            out.append(
                (
                    fields.get("http.request.method", ""),
                    fields.get("http.request.uri", ""),
                    int(fields.get("http.response.status", "0")),
                )
            )
        return out


def manifest_sizes(rlab: RegistryLab, repo: str, reference: str) -> int:
    """Config + layer sizes of an image manifest, read from the registry directly."""
    resp = rlab.http("GET", f"/v2/{repo}/manifests/{reference}", headers={"Accept": MANIFEST_TYPES})
    doc = json.loads(resp.body)
    return int(doc["config"]["size"]) + sum(int(layer["size"]) for layer in doc["layers"])
