"""``gpuops image gc``: distribution's garbage collection after a prune, where gpuops may run
it: on the registry's host, given the registry's config file (that is the permission: the
operator names the config of a registry gpuops may collect), and only while that registry is
read-only (``storage.maintenance.readonly.enabled`` in the config, and the running registry
refuses a delete probe) or stopped (nothing answers on its ``http.addr``). Garbage collection
of a registry that takes pushes can delete the blobs of a push in progress.

``--delete-untagged`` also deletes manifests no tag names, and gpuops deploys by digest: a
history's digest whose tag has moved on is untagged, and so are the platform manifests of an
index. So it is used only when a dry-run prune of the environments file shows every digest
that must stay (protected, or kept) held by a tag; otherwise refused.

The bytes freed are measured on disk (allocated blocks under the storage root)."""

from __future__ import annotations

import http.client
import re
import time
from dataclasses import dataclass, field
from typing import TypedDict

from gpuops.adapters import registrygc
from gpuops.adapters.registry import Registry, RegistryConfig
from gpuops.errors import GateRefused, InvalidInput
from gpuops.usecases.outcome import Outcome
from gpuops.usecases.retention import prune as prune_usecase


@dataclass(frozen=True)
class GcRequest:
    registry_config: str
    delete_untagged: bool = False
    prune: prune_usecase.PruneRequest | None = None  # the environments, for delete_untagged


class GcDocument(TypedDict):
    """The ``result`` of ``gpuops image gc``."""

    config: str
    root: str
    registry: str  # read-only | stopped | writable
    delete_untagged: bool
    collected: bool
    bytes_before: int
    bytes_after: int
    bytes_freed: int
    blobs_deleted: int
    manifests_deleted: int
    timings_s: dict[str, float]


@dataclass
class GcResult:
    config: str
    root: str = ""
    registry: str = "stopped"
    delete_untagged: bool = False
    collected: bool = False
    bytes_before: int = 0
    bytes_after: int = 0
    blobs_deleted: int = 0
    manifests_deleted: int = 0
    timings_s: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> GcDocument:
        return {
            "config": self.config,
            "root": self.root,
            "registry": self.registry,
            "delete_untagged": self.delete_untagged,
            "collected": self.collected,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "bytes_freed": max(0, self.bytes_before - self.bytes_after),
            "blobs_deleted": self.blobs_deleted,
            "manifests_deleted": self.manifests_deleted,
            "timings_s": self.timings_s,
        }


def registry_state(storage: registrygc.RegistryStorage) -> str:
    """``stopped`` (nothing answers on its address), ``read-only`` (the config says so and a
    delete probe is refused) or ``writable``. A TLS registry is judged by its config alone
    (the probe would need its CA)."""
    if storage.addr is None:
        return "read-only" if storage.readonly else "writable"
    host = storage.addr.replace("0.0.0.0", "127.0.0.1")  # noqa: S104 - where to ask, not bind
    if host.startswith(":"):
        host = "127.0.0.1" + host
    conn = http.client.HTTPConnection(host, timeout=5)
    try:
        conn.connect()
    except OSError:
        return "stopped"
    finally:
        conn.close()
    if not storage.readonly:
        return "writable"
    if storage.tls:
        return "read-only"
    with Registry(host, RegistryConfig(plain_http=True, timeout_s=10)) as reg:
        return "writable" if reg.deletes_enabled("gpuops-probe/read-only") else "read-only"


_BLOB_DELETE = re.compile(r"^blob eligible for deletion", re.MULTILINE | re.IGNORECASE)
_MANIFEST_DELETE = re.compile(r"manifest eligible for deletion", re.IGNORECASE)


def collect(request: GcRequest, connect: prune_usecase.Connect | None = None) -> Outcome[GcResult]:
    t0 = time.monotonic()
    storage = registrygc.read_config(request.registry_config)
    result = GcResult(
        request.registry_config, storage.root, delete_untagged=request.delete_untagged
    )
    result.registry = registry_state(storage)
    if result.registry == "writable":
        return Outcome(
            result,
            GateRefused(
                f"the registry of {request.registry_config} takes writes: garbage-collect needs "
                "it read-only (storage.maintenance.readonly.enabled, then restart it) or stopped",
                hint="restart the registry read-only, run gpuops image gc, restart it writable",
            ),
        )
    if request.delete_untagged:
        if request.prune is None or connect is None:
            raise InvalidInput(
                "--delete-untagged needs --environments: gpuops must see that every protected "
                "digest is held by a tag first",
                field="delete_untagged",
            )
        dry = prune_usecase.PruneRequest(**{**request.prune.__dict__, "dry_run": True})
        seen = prune_usecase.prune(dry, connect)
        if seen.problem is not None:
            return Outcome(result, seen.problem)
        untagged = {r: d for r, d in prune_usecase.kept_untagged(seen.result).items() if d}
        if untagged:
            named = "; ".join(f"{r}: {', '.join(d[:3])}" for r, d in untagged.items())
            return Outcome(
                result,
                GateRefused(
                    f"--delete-untagged would delete digests that must stay and that no tag "
                    f"holds ({named})",
                    hint="run without --delete-untagged (the deleted manifests' blobs are "
                    "collected all the same)",
                ),
            )
    result.bytes_before = registrygc.disk_bytes(storage.root)
    if not registrygc.stores_repositories(storage.root):  # nothing stored: nothing to collect
        result.bytes_after = result.bytes_before
        result.timings_s["total"] = round(time.monotonic() - t0, 3)
        return Outcome(result)
    output = registrygc.garbage_collect(storage.config, request.delete_untagged)
    result.bytes_after = registrygc.disk_bytes(storage.root)
    result.collected = True
    result.blobs_deleted = len(_BLOB_DELETE.findall(output))
    result.manifests_deleted = len(_MANIFEST_DELETE.findall(output))
    result.timings_s["total"] = round(time.monotonic() - t0, 3)
    return Outcome(result)
