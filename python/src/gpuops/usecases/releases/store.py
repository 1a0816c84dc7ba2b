"""Where a release keeps its state in the cluster: the history ConfigMap and the Lease lock."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gpuops.adapters.kube import Conflict, KubeClient
from gpuops.adapters.kube import apps as kubeapps
from gpuops.core import releasehistory as hist
from gpuops.core import releaselock as core_lock
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasehistory import Release
from gpuops.errors import GateRefused, GpuOpsError, OperationFailed

log = logging.getLogger(__name__)
_RETRIES = 5


class HistoryStore:
    """The environment's release history: one ConfigMap in its namespace, key
    ``releases.json``, written read-modify-write with the ConfigMap's resourceVersion as the
    precondition (a concurrent writer makes the write fail with 409 and it is redone)."""

    def __init__(self, kube: KubeClient, env: Environment) -> None:
        self.kube, self.env = kube, env
        self.where = f"ConfigMap {env.namespace}/{env.history_name}"
        self._cm: Any = None  # the ConfigMap as last read or written
        self._known = False

    def read(self) -> list[Release]:
        self._cm = kubeapps.get_configmap(self.kube, self.env.namespace, self.env.history_name)
        self._known = True
        return self._records(self._cm)

    def _records(self, cm: Any) -> list[Release]:
        if cm is None:
            return []
        return hist.decode((cm.get("data") or {}).get(hist.HISTORY_KEY), self.where)

    def update(
        self, change: Callable[[list[Release]], list[Release]], current: int | None = None
    ) -> list[Release]:
        """Apply ``change`` to the records and write them; on a concurrent write (409) the
        ConfigMap is read again and the change applied again."""
        for _ in range(_RETRIES):
            if not self._known:
                self.read()
            cm = self._cm
            records = hist.trim(change(self._records(cm)), self.env.keep, current)
            data = {hist.HISTORY_KEY: hist.encode(records)}
            try:
                if cm is None:
                    self._cm = kubeapps.create_configmap(
                        self.kube, self.env.namespace, self.env.history_name, data
                    )
                else:
                    self._cm = kubeapps.replace_configmap_data(
                        self.kube, cm, {**(cm.get("data") or {}), **data}
                    )
            except Conflict:
                log.info("%s changed while writing; reading it again", self.where)
                self._known = False
                continue
            return records
        raise OperationFailed(f"{self.where} kept changing while gpuops wrote the release history")

    def put(self, record: Release, current: int | None = None) -> list[Release]:
        return self.update(lambda records: hist.upsert(records, record), current)


def identity() -> str:
    """Who takes a lock: host, process and a random part, unique while this process lives."""
    return f"{socket.gethostname()}/pid-{os.getpid()}-{os.urandom(3).hex()}"


@dataclass
class _Held:
    name: str
    uid: str
    version: str
    acquired: datetime


@dataclass
class TargetLock:
    """The Leases of an environment's Deployments, taken in name order (so two releases
    that share a Deployment cannot deadlock), renewed while working, given back at the end."""

    kube: KubeClient
    env: Environment
    operation: str
    me: str = field(default_factory=identity)
    held: list[_Held] = field(default_factory=list)
    taken_over: list[dict[str, Any]] = field(default_factory=list)
    renewed_at: float = 0.0

    @property
    def names(self) -> list[str]:
        return sorted(core_lock.lease_name(d) for d in self.env.deployments)

    def acquire(self) -> None:
        try:
            for name in self.names:
                self.held.append(self._take(name))
        except BaseException:
            self.release()
            raise
        self.renewed_at = time.monotonic()

    def _take(self, name: str) -> _Held:
        ns = self.env.namespace
        lease: Any = None
        for attempt in range(_RETRIES):
            now = datetime.now(UTC)
            body = core_lock.lease_body(name, ns, self.me, self.operation, self.env.lease_s, now)
            try:
                if attempt == 0 or lease is None:
                    # most of the time nobody holds it: create it without reading first
                    made = kubeapps.create_lease(self.kube, body)
                    return _Held(name, _uid(made), _version(made), now)
                holder = core_lock.holder_of(lease)
                verdict = core_lock.decide(holder, self.me, now)
                if verdict == core_lock.HELD and holder is not None:
                    raise _held_error(self.env, name, holder)
                if verdict == core_lock.STALE and holder is not None:
                    age = (now - holder.renewed).total_seconds() if holder.renewed else None
                    self.taken_over.append(
                        {**holder.to_dict(), "lease": name, "silent_for_s": round(age or 0)}
                    )
                body["metadata"]["resourceVersion"] = _version(lease)
                made = kubeapps.replace_lease(self.kube, body)
                return _Held(name, _uid(made), _version(made), now)
            except Conflict:
                # it exists (create) or moved since we read it (replace): read it and decide
                lease = kubeapps.get_lease(self.kube, ns, name)
        holder = core_lock.holder_of(lease) if lease else None
        if holder is not None:
            raise _held_error(self.env, name, holder)
        raise OperationFailed(f"Lease {ns}/{name} kept changing; try again")

    def renew(self, every_s: float | None = None) -> None:
        """Renew every held Lease (at most every ``every_s`` seconds; default a third of its
        duration). Losing a Lease to someone else stops the release."""
        period = every_s if every_s is not None else self.env.lease_s / 3
        if time.monotonic() - self.renewed_at < period:
            return
        ns = self.env.namespace
        for held in self.held:
            body = core_lock.lease_body(
                held.name,
                ns,
                self.me,
                self.operation,
                self.env.lease_s,
                datetime.now(UTC),
                resource_version=held.version,
                acquired=held.acquired,
            )
            try:
                made = kubeapps.replace_lease(self.kube, body)
            except Conflict:
                lease = kubeapps.get_lease(self.kube, ns, held.name)
                holder = core_lock.holder_of(lease) if lease else None
                who = holder.describe() if holder else "nobody"
                raise OperationFailed(
                    f"lost the release lock {ns}/{held.name}: it is now held by {who}",
                    hint="this run stalled for longer than the lock's lease; check the target",
                ) from None
            held.version = _version(made)
        self.renewed_at = time.monotonic()

    def release(self) -> list[str]:
        """Give every held Lease back; returns problems (the lock then expires by itself)."""
        problems = []
        for held in reversed(self.held):
            try:
                kubeapps.delete_lease(
                    self.kube, self.env.namespace, held.name, held.uid, held.version
                )
            except GpuOpsError as exc:
                problems.append(
                    f"could not give back the lock {held.name} ({exc.category}); it expires "
                    f"{self.env.lease_s}s after its last renewal"
                )
        self.held.clear()
        return problems

    def to_dict(self) -> dict[str, Any]:
        return {"leases": self.names, "holder": self.me, "taken_over": self.taken_over}


def read_holders(kube: KubeClient, env: Environment) -> list[dict[str, Any]]:
    """Who holds the environment's locks now (for ``release status``)."""
    out = []
    now = datetime.now(UTC)
    for name in sorted(core_lock.lease_name(d) for d in env.deployments):
        lease = kubeapps.get_lease(kube, env.namespace, name)
        holder = core_lock.holder_of(lease) if lease else None
        if holder is not None:
            state = core_lock.decide(holder, "", now)
            out.append({**holder.to_dict(), "lease": name, "stale": state == core_lock.STALE})
    return out


def _held_error(env: Environment, name: str, holder: core_lock.Holder) -> GateRefused:
    return GateRefused(
        f"{env.name} ({env.target}) is being released by {holder.describe()}: lock "
        f"{env.namespace}/{name}",
        hint=f"wait for it to finish; a holder that stops renewing is taken over after "
        f"{holder.duration_s}s",
    )


def _uid(obj: Any) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


def _version(obj: Any) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))
