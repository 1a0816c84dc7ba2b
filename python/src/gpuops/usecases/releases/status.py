"""Reading an environment: its release history (``gpuops release history``) and what it runs
now (``gpuops release status``). Nothing is written: a release left open by an interrupted run
is shown with what the cluster says about it; the next release finishes its record. Both
return an ok :class:`~gpuops.usecases.outcome.Outcome`: reading has no verdict of its own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NotRequired, TypedDict

from gpuops.adapters.kube import KubeClient
from gpuops.adapters.kube import apps as kubeapps
from gpuops.core import deploywatch
from gpuops.core import releasehistory as hist
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasehistory import Release
from gpuops.errors import GpuOpsError
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.outcome import Outcome
from gpuops.usecases.releases import config, steps
from gpuops.usecases.releases import model as m
from gpuops.usecases.releases.engine import Deps, cluster_of
from gpuops.usecases.releases.store import HistoryStore, read_holders
from gpuops.usecases.releases.watch import observe
from gpuops.usecases.reportdoc import ReportDocument

if TYPE_CHECKING:
    from gpuops.usecases.reports import BesideReport


class HistoryDocument(TypedDict):
    """The ``result`` of ``gpuops release history``."""

    environment: str
    namespace: str
    deployments: list[str]
    server: str
    current: int | None  # the number of the release that runs now
    previous: Annotated[dict[str, Any] | None, Release]
    rollback_choices: list[str | None]
    open: dict[str, str]  # a pending release's number -> what it would be
    releases: list[Annotated[dict[str, Any], Release]]  # newest first
    report: NotRequired[ReportDocument]  # with --report-dir


@dataclass
class HistoryOutcome:
    env: Environment
    server: str
    records: list[Release]  # newest first
    current: Release | None
    previous: Release | None
    choices: list[Release]
    open: dict[int, str] = field(default_factory=dict)  # pending number -> what it would be
    report: BesideReport | None = None  # the page asked for with --report-dir

    def to_dict(self) -> HistoryDocument:
        doc: HistoryDocument = {
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
        if self.report is not None:
            doc["report"] = self.report.to_dict()
        return doc


def history(
    target: m.Target,
    limit: int,
    connect: Callable[[Cluster], KubeClient] = Cluster.connect,
    *,
    report_dir: Path | None = None,
) -> Outcome[HistoryOutcome]:
    """The newest ``limit`` releases; with ``report_dir``, the history page written there (a
    page that cannot be written is said in the result and changes no verdict)."""
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
    out = HistoryOutcome(
        env,
        kube.server,
        newest,
        current,
        hist.previous(records, current),
        hist.rollback_choices(records, current),
        open_,
    )
    if report_dir is None:
        return Outcome(out)
    from gpuops.usecases import reports  # noqa: PLC0415 - the pages only when asked

    out.report = reports.write_beside("releases", report_dir, out.to_dict)
    return Outcome(out, files=out.report.files)


def _open(records: list[Release], live: list[steps.Live], locked: bool) -> dict[int, str]:
    pending = [r for r in records if r.status == hist.PENDING]
    if not pending:
        return {}
    waiting = {
        r.number: f"waits on its approval step {int(r.paused.get('step', -1)) + 1} "
        f"({', '.join(str(a) for a in r.paused.get('approvers') or [])}): 'gpuops release "
        "resume' goes on, --reject restores the previous release"
        for r in pending
        if r.paused is not None
    }
    pending = [r for r in pending if r.paused is None]
    if not pending:
        return waiting
    if locked:
        return {
            **waiting,
            **{r.number: "in progress (its release holds the lock)" for r in pending},
        }
    complete = all(deploywatch.is_complete(kubeapps.deployment_state(x.obj)) for x in live)
    fixed = hist.reconcile(pending, live[0].release, live[0].rolled_back, complete, hist.now_iso())
    return {
        **waiting,
        **{
            f.record.number: f"left open by an interrupted run; the cluster says "
            f"{f.record.status}: {f.record.note}"
            for f in fixed
        },
    }


class DeploymentRow(TypedDict):
    name: str
    image: str
    model: str | None
    release: int | None
    replicas: int
    updated: int
    ready: int
    available: int
    complete: bool
    progress: str


class RegistryTagDocument(TypedDict):
    tag: str
    repository: str
    digest: str | None
    problem: NotRequired[str]  # the registry could not be asked
    matches_current: NotRequired[bool]


class StatusDocument(TypedDict):
    """The ``result`` of ``gpuops release status``."""

    environment: str
    namespace: str
    server: str
    current: Annotated[dict[str, Any] | None, Release]
    deployments: list[Annotated[dict[str, Any], DeploymentRow]]
    complete: bool
    locks: list[dict[str, Any]]
    open: dict[str, str]
    registry_tag: Annotated[dict[str, Any] | None, RegistryTagDocument]


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

    def to_dict(self) -> StatusDocument:
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


def status(target: m.Target, deps: Deps) -> Outcome[StatusOutcome]:
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
    return Outcome(out)


def _registry_tag(env: Environment, current: Release | None, deps: Deps) -> dict[str, Any]:
    doc: dict[str, Any] = {"tag": env.registry_tag, "repository": env.image}
    try:
        digest = deps.registry.resolve(env.image, str(env.registry_tag))
    except GpuOpsError as exc:
        return {**doc, "digest": None, "problem": exc.message}
    doc["digest"] = digest
    doc["matches_current"] = bool(current and current.digest == digest)
    return doc
