"""Typed requests and outcomes of the release use cases, and the shapes of their documents
(``TypedDict``s beside the ``to_dict`` that builds them: ``gpuops describe`` lists them as
JSON Schema, :mod:`gpuops.schema`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired, TypedDict

from gpuops.core.deploywatch import Problem
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasehistory import Release
from gpuops.usecases.releases.gates import Gate, GateDocument
from gpuops.usecases.releases.watch import WatchResult

PLANNED = "planned"  # a dry run: every gate passed, nothing changed
UNCHANGED = "unchanged"  # the environment already runs exactly this
SUCCEEDED = "succeeded"
FAILED = "failed"  # the rollout failed; the previous release was restored
ABORTED = "aborted"  # someone else changed a Deployment during the release; left as it is
REFUSED = "refused"  # a gate, the approval or the lock said no; nothing changed
INTERRUPTED = "interrupted"  # stopped midway (the API server gone); the next release finishes
STATES = [PLANNED, UNCHANGED, SUCCEEDED, FAILED, ABORTED, REFUSED, INTERRUPTED]


@dataclass(frozen=True)
class Who:
    """Who asked, who approved, why, and from which build."""

    reason: str | None = None
    approved_by: str | None = None
    requested_by: str | None = None
    git_revision: str | None = None
    link: str | None = None


@dataclass(frozen=True)
class Target:
    """Where a request goes: the environments file, the environment, the cluster override."""

    config: str
    environment: str
    kubeconfig: str | None = None
    context: str | None = None


@dataclass(frozen=True)
class PromoteRequest:
    target: Target
    tag: str | None = None
    model: str | None = None
    who: Who = field(default_factory=Who)
    dry_run: bool = False


@dataclass(frozen=True)
class RollbackRequest:
    target: Target
    to: str  # "previous" or a tag from the history
    who: Who = field(default_factory=Who)
    dry_run: bool = False


class WantedDocument(TypedDict):
    tag: str | None
    digest: str | None
    image: str
    model: str | None
    restores: NotRequired[int]  # a rollback: the number of the release it restores


@dataclass(frozen=True)
class Wanted:
    """The content a release puts on the cluster."""

    tag: str | None
    digest: str | None
    image: str
    model: str | None
    source: Release | None = None  # for a rollback: the release it restores

    def to_dict(self) -> WantedDocument:
        doc: WantedDocument = {
            "tag": self.tag,
            "digest": self.digest,
            "image": self.image,
            "model": self.model,
        }
        if self.source is not None:
            doc["restores"] = self.source.number
        return doc


class ApprovalDocument(TypedDict):
    required: bool
    approvers: list[str]
    timeout_minutes: int
    approved_by: str | None
    requested_by: str | None  # who asked ("alice" or "alice, carol"); never the approver


class LockDocument(TypedDict):
    resource: str  # the Jenkins lock resource of the target
    leases: NotRequired[list[str]]  # the rest once the release took the lock
    holder: NotRequired[str]
    taken_over: NotRequired[list[dict[str, Any]]]


class WatchDocument(TypedDict):
    state: str  # complete | failed | aborted
    seconds: float
    problem: Annotated[dict[str, Any] | None, Problem]
    progress: list[str]


class ReleaseDocument(TypedDict):
    """The ``result`` of ``gpuops release promote`` and ``rollback``."""

    environment: str
    action: Annotated[str, {"enum": ["promote", "rollback"]}]
    state: Annotated[str, {"enum": STATES}]
    namespace: str
    deployments: list[str]
    server: str
    approval: Annotated[dict[str, Any], ApprovalDocument]
    lock: Annotated[dict[str, Any], LockDocument]
    gates: list[Annotated[dict[str, Any], GateDocument]]
    wanted: WantedDocument | None
    previous: Annotated[dict[str, Any] | None, Release]  # what ran before
    release: Annotated[dict[str, Any] | None, Release]  # this release's record
    reconciled: list[dict[str, Any]]
    notes: list[str]
    timings_s: dict[str, float]
    rollout: NotRequired[WatchDocument]
    restore: NotRequired[WatchDocument]
    explanation: NotRequired[dict[str, Any]]


@dataclass
class ReleaseOutcome:
    env: Environment
    action: str
    state: str
    server: str
    wanted: Wanted | None = None
    current: Release | None = None  # what ran before
    record: Release | None = None
    gates: list[Gate] = field(default_factory=list)
    approval: dict[str, Any] = field(default_factory=dict)
    lock: dict[str, Any] = field(default_factory=dict)
    rollout: WatchResult | None = None
    restore: WatchResult | None = None
    explanation: dict[str, Any] | None = None
    reconciled: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)
    t0: float = field(default_factory=time.monotonic, repr=False)

    def to_dict(self) -> ReleaseDocument:
        e = self.env
        doc: ReleaseDocument = {
            "environment": e.name,
            "action": self.action,
            "state": self.state,
            "namespace": e.namespace,
            "deployments": list(e.deployments),
            "server": self.server,
            "approval": self.approval,
            "lock": self.lock,
            "gates": [g.to_dict() for g in self.gates],
            "wanted": self.wanted.to_dict() if self.wanted else None,
            "previous": self.current.to_dict() if self.current else None,
            "release": self.record.to_dict() if self.record else None,
            "reconciled": self.reconciled,
            "notes": self.notes,
            "timings_s": self.timings_s,
        }
        if self.rollout is not None:
            doc["rollout"] = _watch_dict(self.rollout)
        if self.restore is not None:
            doc["restore"] = _watch_dict(self.restore)
        if self.explanation is not None:
            doc["explanation"] = self.explanation
        return doc


def _watch_dict(w: WatchResult) -> WatchDocument:
    return {
        "state": w.state,
        "seconds": w.seconds,
        "problem": w.problem.to_dict() if w.problem else None,
        "progress": w.lines[-20:],
    }


def lock_resource(server: str, env: Environment) -> str:
    """The name of the Jenkins ``lock`` resource for this target (one per target, whatever
    the job): the cluster, the namespace and the Deployments."""
    host = server.split("://", 1)[-1].rstrip("/")
    return f"gpuops-release {host}/{env.namespace}/{','.join(env.deployments)}"
