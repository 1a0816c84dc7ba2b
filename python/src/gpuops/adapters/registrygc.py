"""distribution's garbage collection, run on the registry's own host: its config file (where
the storage is, whether it is read-only), ``docker-registry garbage-collect`` (arguments as a
list, never through a shell) and the bytes its storage holds on disk."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpuops import fsio
from gpuops.errors import InvalidInput, OperationFailed

BINARY = "docker-registry"
#: a distribution config is a page of YAML
CONFIG_CAP = 1 << 20


@dataclass(frozen=True)
class RegistryStorage:
    config: str
    root: str  # storage.filesystem.rootdirectory
    addr: str | None  # http.addr
    readonly: bool  # storage.maintenance.readonly.enabled
    deletes: bool  # storage.delete.enabled
    tls: bool


def read_config(path: str) -> RegistryStorage:
    """The parts of a distribution config gpuops needs; InvalidInput when it is not one with
    filesystem storage."""
    text = fsio.read_text(  # a user file: a FIFO or a device is exit 2, never a hang
        path, cap=CONFIG_CAP, what="the registry config", option="registry_config"
    )
    try:
        doc: Any = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError):  # PyYAML recurses per level of nesting
        raise InvalidInput(
            f"the registry config {path} is not YAML", field="registry_config"
        ) from None
    storage = doc.get("storage") if isinstance(doc, dict) else None
    fs = storage.get("filesystem") if isinstance(storage, dict) else None
    root = fs.get("rootdirectory") if isinstance(fs, dict) else None
    if not isinstance(root, str) or not root:
        raise InvalidInput(
            f"the registry config {path} has no storage.filesystem.rootdirectory",
            hint="gpuops runs garbage-collect only for filesystem storage it can measure",
            field="registry_config",
        )
    assert isinstance(storage, dict)  # noqa: S101 - checked above
    maintenance = storage.get("maintenance") or {}
    readonly = (maintenance.get("readonly") or {}) if isinstance(maintenance, dict) else {}
    delete = storage.get("delete") or {}
    http = doc.get("http") or {}
    return RegistryStorage(
        path,
        root,
        str(http.get("addr")) if isinstance(http, dict) and http.get("addr") else None,
        bool(isinstance(readonly, dict) and readonly.get("enabled") is True),
        bool(isinstance(delete, dict) and delete.get("enabled") is True),
        bool(isinstance(http, dict) and http.get("tls")),
    )


def stores_repositories(root: str) -> bool:
    """Whether the storage holds any repository (garbage-collect fails on one that does not:
    "Path not found: /docker/registry/v2/repositories", distribution 2.8)."""
    return Path(root, "docker", "registry", "v2", "repositories").is_dir()


def disk_bytes(root: str) -> int:
    """Bytes the files under ``root`` hold on disk (allocated blocks, as ``du`` counts)."""
    total = 0
    for base, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(base, name)).st_blocks * 512  # noqa: PTH118
            except OSError:
                continue
    return total


def garbage_collect(config: str, delete_untagged: bool, timeout_s: float = 3600) -> str:
    """Run ``docker-registry garbage-collect``; its output (what it marked and deleted)."""
    binary = shutil.which(BINARY)
    if binary is None:
        raise OperationFailed(
            f"{BINARY} is not installed here",
            hint="run 'gpuops image gc' on the registry's host (Debian package docker-registry)",
        )
    argv = [binary, "garbage-collect"]
    if delete_untagged:
        argv.append("--delete-untagged")
    argv.append(config)
    try:
        done = subprocess.run(
            argv, capture_output=True, check=False, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise OperationFailed(f"{BINARY} garbage-collect ran longer than {timeout_s}s") from None
    output = (done.stdout + done.stderr).decode(errors="replace")
    if done.returncode != 0:
        last = output.strip().splitlines()[-1:] or ["no output"]
        raise OperationFailed(f"{BINARY} garbage-collect exited {done.returncode}: {last[0][:300]}")
    return output
