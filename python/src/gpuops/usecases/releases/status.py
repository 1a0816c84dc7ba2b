"""Reading an environment: its release history (``gpuops release history``) and what it runs
now (``gpuops release status``). Nothing is written: a release left open by an interrupted run
is shown with what the cluster says about it; the next release finishes its record."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuops.adapters import kubeapps
from gpuops.adapters.kube import KubeClient
from gpuops.core import deploywatch
from gpuops.core import releasehistory as hist
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasehistory import Release
from gpuops.errors import GpuOpsError
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.releases import config, steps
from gpuops.usecases.releases import model as m
from gpuops.usecases.releases.engine import Deps, cluster_of
from gpuops.usecases.releases.store import HistoryStore, read_holders
from gpuops.usecases.releases.watch import observe


@dataclass
class HistoryOutcome:
    env: Environment
    server: str
    records: list[Release]  # newest first
    current: Release | None
    previous: Release | None
    choices: list[Release]
    open: dict[int, str] = field(default_factory=dict)  # pending number -> what it would be

    def to_dict(self) -> dict[str, Any]:
        return {
            "environment": self.env.name,
            "namespace": self.env.namespace,
            "deployments": list(self.env.deployments),
            "server": self.server,
            "current": self.current.number if self.current else None,
            "previous": self.previous.to_dict() if self.previous else None,
            "rollback_choices": [r.tag for r in self.choices],
            "open": {str(k): v for k, v in self.open.items()},
            "releases": [r.to_dict() for r in self.records],
        }


def history(
    target: m.Target, limit: int, connect: Callable[[Cluster], KubeClient] = Cluster.connect
) -> HistoryOutcome:
    env = config.load(target.config).environment(target.environment)
    kube = connect(cluster_of(env, target))
    try:
        live = steps.read_live(kube, env)
        records = HistoryStore(kube, env).read()
        holders = read_holders(kube, env) if any(r.status == hist.PENDING for r in records) else []
    finally:
        kube.close()
    current = hist.by_number(records, live[0].release)
    open_ = _open(records, live, bool([h for h in holders if not h["stale"]]))
    newest = sorted(records, key=lambda r: r.number, reverse=True)[:limit]
    return HistoryOutcome(
        env,
        kube.server,
        newest,
        current,
        hist.previous(records, current),
        hist.rollback_choices(records, current),
        open_,
    )


def _open(records: list[Release], live: list[steps.Live], locked: bool) -> dict[int, str]:
    pending = [r for r in records if r.status == hist.PENDING]
    if not pending:
        return {}
    if locked:
        return {r.number: "in progress (its release holds the lock)" for r in pending}
    complete = all(deploywatch.is_complete(kubeapps.deployment_state(x.obj)) for x in live)
    fixed = hist.reconcile(pending, live[0].release, live[0].rolled_back, complete, hist.now_iso())
    return {
        f.record.number: f"left open by an interrupted run; the cluster says {f.record.status}: "
        f"{f.record.note}"
        for f in fixed
    }


@dataclass
class StatusOutcome:
    env: Environment
    server: str
    current: Release | None
    deployments: list[dict[str, Any]]
    locks: list[dict[str, Any]]
    open: dict[int, str]
    registry_tag: dict[str, Any] | None = None

    @property
    def complete(self) -> bool:
        return all(d["complete"] for d in self.deployments)

    def to_dict(self) -> dict[str, Any]:
        return {
            "environment": self.env.name,
            "namespace": self.env.namespace,
            "server": self.server,
            "current": self.current.to_dict() if self.current else None,
            "deployments": self.deployments,
            "complete": self.complete,
            "locks": self.locks,
            "open": {str(k): v for k, v in self.open.items()},
            "registry_tag": self.registry_tag,
        }


def status(target: m.Target, deps: Deps) -> StatusOutcome:
    env = config.load(target.config).environment(target.environment)
    kube = deps.connect(cluster_of(env, target))
    try:
        live = steps.read_live(kube, env)
        records = HistoryStore(kube, env).read()
        locks = read_holders(kube, env)
        rows = []
        for x in live:
            obs = observe(kube, env.namespace, x.name)
            d = obs.deployment
            rows.append(
                {
                    "name": x.name,
                    "image": x.content.image,
                    "model": x.content.model,
                    "release": x.release,
                    "replicas": d.replicas,
                    "updated": d.updated,
                    "ready": d.ready,
                    "available": d.available,
                    "complete": deploywatch.is_complete(d),
                    "progress": deploywatch.progress_line(obs),
                }
            )
    finally:
        kube.close()
    current = hist.by_number(records, live[0].release)
    out = StatusOutcome(
        env,
        kube.server,
        current,
        rows,
        locks,
        _open(records, live, any(not h["stale"] for h in locks)),
    )
    if env.registry_tag:
        out.registry_tag = _registry_tag(env, current, deps.for_env(env))
    return out


def _registry_tag(env: Environment, current: Release | None, deps: Deps) -> dict[str, Any]:
    doc: dict[str, Any] = {"tag": env.registry_tag, "repository": env.image}
    try:
        digest = deps.registry.resolve(env.image, str(env.registry_tag))
    except GpuOpsError as exc:
        return {**doc, "digest": None, "problem": exc.message}
    doc["digest"] = digest
    doc["matches_current"] = bool(current and current.digest == digest)
    return doc
