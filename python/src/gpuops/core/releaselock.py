"""The release lock of one target, as a Kubernetes Lease: its semantics, pure.

A Lease (coordination.k8s.io/v1) per Deployment, ``gpuops-release-lock.<deployment>`` in the
Deployment's namespace. Whoever holds it writes its identity, when it started, what it is doing
and when it last renewed; it is taken and given back with optimistic concurrency (the API
server's resourceVersion: a second writer gets 409 Conflict and reads who won). A holder renews
while it works; one that has not renewed for the lease's duration is gone (a killed process, a
lost agent), and its lock may be taken over, which is said plainly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

LEASE_PREFIX = "gpuops-release-lock."
HOLDER_ANNOTATION = "gpuops.io/lock-operation"
_MAX_NAME = 253

FREE = "free"  # no holder: take it
MINE = "mine"  # held by this very identity
STALE = "stale"  # held, but not renewed for longer than its duration: take it over
HELD = "held"  # held by someone alive: refuse


def lease_name(deployment: str) -> str:
    name = LEASE_PREFIX + deployment
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(deployment.encode()).hexdigest()[:10]
    return f"{name[: _MAX_NAME - 11]}-{digest}"


def micro_time(at: datetime) -> str:
    """A Kubernetes MicroTime."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    text = value.replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class Holder:
    identity: str
    operation: str  # e.g. "promote infer 1.4.0 to production"
    acquired: datetime | None
    renewed: datetime | None
    duration_s: int

    def describe(self) -> str:
        since = self.acquired.strftime("%Y-%m-%d %H:%M:%S UTC") if self.acquired else "unknown"
        what = f" ({self.operation})" if self.operation else ""
        return f"{self.identity}{what}, since {since}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "holder": self.identity,
            "operation": self.operation,
            "acquired": micro_time(self.acquired) if self.acquired else None,
            "renewed": micro_time(self.renewed) if self.renewed else None,
            "lease_seconds": self.duration_s,
        }


def holder_of(lease: Mapping[str, Any]) -> Holder | None:
    spec = lease.get("spec") or {}
    who = spec.get("holderIdentity") or ""
    if not who:
        return None
    annotations = (lease.get("metadata") or {}).get("annotations") or {}
    duration = spec.get("leaseDurationSeconds")
    return Holder(
        identity=str(who),
        operation=str(annotations.get(HOLDER_ANNOTATION, "")),
        acquired=parse_time(spec.get("acquireTime")),
        renewed=parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime")),
        duration_s=duration if isinstance(duration, int) and duration > 0 else 60,
    )


def decide(holder: Holder | None, me: str, now: datetime) -> str:
    if holder is None:
        return FREE
    if holder.identity == me:
        return MINE
    if holder.renewed is None:
        return STALE
    age = (now - holder.renewed).total_seconds()
    return STALE if age > holder.duration_s else HELD


def lease_body(
    name: str,
    namespace: str,
    me: str,
    operation: str,
    duration_s: int,
    now: datetime,
    *,
    resource_version: str | None = None,
    acquired: datetime | None = None,
) -> dict[str, Any]:
    """The Lease as this holder writes it (create, take over, or renew with
    ``resource_version`` as the precondition)."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": "gpuops"},
        "annotations": {HOLDER_ANNOTATION: operation},
    }
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": me,
            "leaseDurationSeconds": duration_s,
            "acquireTime": micro_time(acquired or now),
            "renewTime": micro_time(now),
        },
    }
