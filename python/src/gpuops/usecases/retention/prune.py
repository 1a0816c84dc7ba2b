"""``gpuops image prune``: registry retention that never deletes what a rollback may need.

For each repository the environments file names (and only those), in this order:

1. take the release Lease of every environment using the repository (:class:`TargetLock`,
   the lock a release holds from after its gates to its end): a release in flight makes
   prune refuse (exit 3) before anything is read or deleted, and no release can start
   between prune's reading and its deleting;
2. read what is protected: every digest of every environment's release history (what a
   rollback may ask for), every digest a ReplicaSet of the environment's Deployments names
   (running now, or a ``kubectl rollout undo`` target), the environment's registry tag;
   a history or a cluster that cannot be read is a refusal before anything is deleted;
3. list the tags, read each manifest once (and an image's config for its creation date), and
   decide (:mod:`gpuops.core.retention`, pure);
4. unless ``dry_run``: ask the registry whether it deletes (a probe that deletes nothing;
   refused, exit 3, when it does not), then delete the manifests by digest.

The locks are given back however it ends. Garbage collection is :func:`collect`, a separate
step: distribution's ``garbage-collect`` needs the registry read-only or stopped, which
deletes through the API cannot be.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypedDict

from gpuops.adapters.kube import KubeClient
from gpuops.adapters.kube import apps as kubeapps
from gpuops.adapters.registry import Manifest, ManifestUnknown, Registry
from gpuops.core import retention
from gpuops.core.imagerecord import OCI_CREATED
from gpuops.core.imageref import parse_repository
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasepatch import split_image
from gpuops.core.retention import DecisionDocument, Image, Policy
from gpuops.errors import GateRefused, GpuOpsError, InvalidInput, OperationFailed, Unreachable
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.images.registryops import RegistryAccess
from gpuops.usecases.outcome import Outcome
from gpuops.usecases.releases import config as release_config
from gpuops.usecases.releases.store import HistoryStore, TargetLock, identity

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PruneRequest:
    config: str  # the environments file
    policy: Policy
    repositories: tuple[str, ...] = ()  # only these (each named by the file); () = all
    dry_run: bool = False
    kubeconfig: str | None = None  # override the environments' kubeconfig / context
    context: str | None = None
    now: datetime | None = None


class RepositoryDocument(TypedDict):
    repository: str
    environments: list[str]
    tags: int
    manifests: int
    protected: dict[str, list[str]]
    decisions: list[DecisionDocument]
    deleted: list[str]
    not_found: list[str]
    requests: dict[str, int]


class PruneDocument(TypedDict):
    """The ``result`` of ``gpuops image prune``."""

    dry_run: bool
    state: str  # planned | pruned | refused | failed | partial
    repositories: list[RepositoryDocument]
    locks: list[str]
    deleted: int
    kept: int
    timings_s: dict[str, float]


@dataclass
class RepositoryResult:
    repository: str
    environments: list[str]
    tags: int = 0
    protected: dict[str, list[str]] = field(default_factory=dict)
    decisions: list[retention.Decision] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)
    images: list[Image] = field(default_factory=list)

    def to_dict(self) -> RepositoryDocument:
        return {
            "repository": self.repository,
            "environments": self.environments,
            "tags": self.tags,
            "manifests": len(self.decisions),
            "protected": {k: self.protected[k] for k in sorted(self.protected)},
            "decisions": [d.to_dict() for d in self.decisions],
            "deleted": self.deleted,
            "not_found": self.not_found,
            "requests": dict(sorted(self.requests.items())),
        }


@dataclass
class PruneResult:
    dry_run: bool
    state: str = "planned"
    repositories: list[RepositoryResult] = field(default_factory=list)
    locks: list[str] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> PruneDocument:
        return {
            "dry_run": self.dry_run,
            "state": self.state,
            "repositories": [r.to_dict() for r in self.repositories],
            "locks": self.locks,
            "deleted": sum(len(r.deleted) for r in self.repositories),
            "kept": sum(
                1 for r in self.repositories for d in r.decisions if d.action == retention.KEEP
            ),
            "timings_s": self.timings_s,
        }


Connect = Callable[[Cluster], KubeClient]


def _repositories(request: PruneRequest) -> dict[str, list[Environment]]:
    """The repositories the environments file names, with the environments using each."""
    envs = release_config.load(request.config).environments
    by_repo: dict[str, list[Environment]] = {}
    for env in envs.values():
        by_repo.setdefault(env.image, []).append(env)
    for repo in request.repositories:
        if repo not in by_repo:
            known = ", ".join(sorted(by_repo)) or "none"
            raise InvalidInput(
                f"{request.config} names no environment with the repository {repo} "
                f"(repositories: {known})",
                hint="prune acts only on repositories the environments file names",
                field="repository",
            )
    wanted = request.repositories or tuple(sorted(by_repo))
    return {repo: by_repo[repo] for repo in wanted}


def _cluster(env: Environment, request: PruneRequest) -> Cluster:
    return Cluster(request.kubeconfig or env.kubeconfig, request.context or env.context)


def _access(envs: Sequence[Environment]) -> RegistryAccess:
    env = envs[0]
    return RegistryAccess(env.registry_plain_http, env.registry_ca_file)


class _Locks:
    """The release Leases of every environment, one holder id for all of them; an
    environment whose cluster/namespace/Deployments another already covers is not taken
    twice (staging and production of one Deployment share its Lease)."""

    def __init__(self, connect: Connect) -> None:
        self.connect = connect
        self.me = identity()
        self.held: list[TargetLock] = []
        self.kubes: dict[Cluster, KubeClient] = {}
        self._seen: set[tuple[Cluster, str, tuple[str, ...]]] = set()

    def kube(self, cluster: Cluster) -> KubeClient:
        if cluster not in self.kubes:
            self.kubes[cluster] = self.connect(cluster)
        return self.kubes[cluster]

    def take(self, env: Environment, cluster: Cluster) -> None:
        key = (cluster, env.namespace, tuple(sorted(env.deployments)))
        if key in self._seen:
            return
        self._seen.add(key)
        lock = TargetLock(self.kube(cluster), env, "image prune", me=self.me)
        lock.acquire()  # GateRefused: a release (or another prune) holds it
        self.held.append(lock)

    def renew(self) -> None:
        """Keep every Lease fresh while listing and deleting take long (a third of each
        Lease's duration); losing one stops the prune (OperationFailed)."""
        for lock in self.held:
            lock.renew()

    def names(self) -> list[str]:
        return [f"{lock.env.namespace}/{name}" for lock in self.held for name in lock.names]

    def release(self) -> list[str]:
        problems: list[str] = []
        for lock in reversed(self.held):
            problems.extend(lock.release())
        self.held.clear()
        for kube in self.kubes.values():
            kube.close()
        return problems


def _protect(into: dict[str, list[str]], digest: str | None, why: str) -> None:
    if digest and digest.startswith("sha256:") and why not in into.setdefault(digest, []):
        into[digest].append(why)


def _cluster_facts(
    kube: KubeClient, env: Environment, repo: str, reg: Registry, protected: dict[str, list[str]]
) -> None:
    """What the environment's history and cluster protect (raises on what cannot be read)."""
    for record in HistoryStore(kube, env).read():
        _protect(protected, record.digest, f"{env.name} release #{record.number} ({record.status})")
    repo_path = parse_repository(repo).repository
    for name in env.deployments:
        obj = kubeapps.get_deployment(kube, env.namespace, name, env.source)
        sources = [
            ("Deployment", obj),
            *(("ReplicaSet", rs) for rs in kubeapps.replicasets(kube, obj)),
        ]
        for kind, item in sources:
            meta = item.get("metadata") or {}
            for container in kubeapps.containers_of(item):
                image, tag, digest = split_image(str(container.get("image", "")))
                if image != repo:
                    continue
                where = f"{env.name}: {kind} {env.namespace}/{meta.get('name')}"
                if digest is None and tag is not None:  # by tag: whatever it names now
                    digest = reg.head_manifest(repo_path, tag)
                    where += f" (by tag {tag})"
                _protect(protected, digest, f"{where} runs or can roll back to it")
    if env.registry_tag:
        digest = reg.head_manifest(repo_path, env.registry_tag)
        _protect(protected, digest, f"{env.name}'s registry tag {env.registry_tag}")


def _created(reg: Registry, repo_path: str, manifest: Manifest) -> datetime | None:
    doc = manifest.doc()
    text = (doc.get("annotations") or {}).get(OCI_CREATED)
    if text is None and not manifest.is_index:
        config = doc.get("config") or {}
        digest = config.get("digest")
        if isinstance(digest, str):
            import json  # noqa: PLC0415

            try:
                cfg = json.loads(reg.get_blob(repo_path, digest))
            except ValueError:
                cfg = {}
            labels = (
                ((cfg.get("config") or {}).get("Labels") or {}) if isinstance(cfg, dict) else {}
            )
            text = labels.get(OCI_CREATED) or (
                cfg.get("created") if isinstance(cfg, dict) else None
            )
    return _parse_time(text)


def _parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def list_images(
    reg: Registry, repo_path: str, tick: Callable[[], None] = lambda: None
) -> tuple[int, list[Image]]:
    """(tags, images): every tag resolved, each manifest read once (an index's children)."""
    tags = reg.list_tags(repo_path)
    by_digest: dict[str, list[str]] = {}
    manifests: dict[str, Manifest] = {}
    for tag in tags:
        tick()
        try:
            manifest = reg.get_manifest(repo_path, tag)
        except ManifestUnknown:  # deleted since the listing
            continue
        by_digest.setdefault(manifest.digest, []).append(tag)
        manifests.setdefault(manifest.digest, manifest)
    images = []
    for digest, manifest in manifests.items():
        children = tuple(
            str(c["digest"]) for c in manifest.children() if isinstance(c.get("digest"), str)
        )
        images.append(
            Image(digest, tuple(by_digest[digest]), _created(reg, repo_path, manifest), children)
        )
    for image in list(images):  # untagged children of an index: listed so they are judged
        for child in image.children:
            if child not in manifests:
                manifests[child] = Manifest("", child, b"")
                images.append(Image(child, (), image.created))
    return len(tags), images


def prune(request: PruneRequest, connect: Connect) -> Outcome[PruneResult]:
    """The prune (see the module's docstring): refused with nothing deleted, planned
    (``dry_run``), pruned, or failed part way (partial when some manifests were deleted)."""
    t0 = time.monotonic()
    run = _Prune(request, _Locks(connect), PruneResult(request.dry_run))
    try:
        refused = run.take_locks() or run.read()
        run.result.timings_s["read"] = round(time.monotonic() - t0, 3)
        if refused is not None:
            run.result.state = "refused"
            return Outcome(run.result, refused)
        doomed = [
            (res, d)
            for res in run.result.repositories
            for d in res.decisions
            if d.action == retention.DELETE
        ]
        if request.dry_run or not doomed:
            run.result.state = "planned" if request.dry_run else "pruned"
            return Outcome(run.result)
        refused = run.deletes_allowed()
        if refused is not None:
            run.result.state = "refused"
            return Outcome(run.result, refused)
        return run.delete(doomed)
    finally:
        run.close()
        run.result.timings_s["total"] = round(time.monotonic() - t0, 3)


@dataclass
class _Prune:
    request: PruneRequest
    locks: _Locks
    result: PruneResult
    registries: dict[str, Registry] = field(default_factory=dict)

    def take_locks(self) -> GpuOpsError | None:
        try:
            for envs in _repositories(self.request).values():
                for env in envs:
                    self.locks.take(env, _cluster(env, self.request))
        except GateRefused as exc:
            return GateRefused(f"{exc.message}; nothing deleted", hint=exc.hint)
        self.result.locks = self.locks.names()
        return None

    def read(self) -> GpuOpsError | None:
        """Everything prune decides on; any failure is a refusal with nothing deleted."""
        now = self.request.now or datetime.now(UTC)
        for repo, envs in _repositories(self.request).items():
            ref = parse_repository(repo)
            reg = self.registries.setdefault(repo, _access(envs).open(ref.registry))
            res = RepositoryResult(repo, [e.name for e in envs])
            self.result.repositories.append(res)
            for env in envs:
                kube = self.locks.kube(_cluster(env, self.request))
                try:
                    _cluster_facts(kube, env, repo, reg, res.protected)
                except Unreachable as exc:
                    return Unreachable(
                        f"cannot read what {env.name} protects: {exc.message}; nothing deleted",
                        hint=exc.hint,
                    )
                except GpuOpsError as exc:
                    return GateRefused(
                        f"cannot read what {env.name} protects ({exc.message}); nothing "
                        "deleted: a history prune cannot read may name a rollback target",
                        hint=exc.hint,
                    )
            res.tags, res.images = list_images(reg, ref.repository, self.locks.renew)
            res.decisions = retention.decide(res.images, self.request.policy, res.protected, now)
        return None

    def deletes_allowed(self) -> GpuOpsError | None:
        for res in self.result.repositories:
            reg = self.registries[res.repository]
            path = parse_repository(res.repository).repository
            if any(d.action == retention.DELETE for d in res.decisions) and not (
                reg.deletes_enabled(path)
            ):
                return GateRefused(
                    f"the registry of {res.repository} does not allow deletes (distribution: "
                    "storage.delete.enabled; or it is read-only); nothing deleted",
                    hint="enable deletes on the registry, or run with --dry-run",
                )
        return None

    def delete(
        self, doomed: list[tuple[RepositoryResult, retention.Decision]]
    ) -> Outcome[PruneResult]:
        for res, decision in doomed:
            self.locks.renew()
            reg = self.registries[res.repository]
            path = parse_repository(res.repository).repository
            try:
                gone = reg.delete_manifest(path, decision.digest)
            except GpuOpsError as exc:
                partial = any(r.deleted for r in self.result.repositories)
                self.result.state = "partial" if partial else "failed"
                return Outcome(
                    self.result,
                    OperationFailed(f"deleting {decision.digest} failed: {exc.message}"),
                    partial=partial,
                )
            (res.deleted if gone else res.not_found).append(decision.digest)
        self.result.state = "pruned"
        return Outcome(self.result)

    def close(self) -> None:
        for res in self.result.repositories:
            reg = self.registries.get(res.repository)
            if reg is not None:
                res.requests = dict(reg.requests)
        for reg in self.registries.values():
            reg.close()
        for problem in self.locks.release():
            log.warning("%s", problem)


def kept_untagged(result: PruneResult) -> Mapping[str, list[str]]:
    """Digests that must stay but no tag holds, per repository (``--delete-untagged`` would
    delete them)."""
    return {
        res.repository: retention.untagged_kept(res.images, res.protected, res.decisions)
        for res in result.repositories
    }
