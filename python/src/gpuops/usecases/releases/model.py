"""Typed requests and outcomes of the release use cases, and the shapes of their documents
(``TypedDict``s beside the ``to_dict`` that builds them: ``gpuops describe`` lists them as
JSON Schema, :mod:`gpuops.schema`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired, TypedDict, cast

from gpuops.core.deploywatch import Problem
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasehistory import Release
from gpuops.schema import open_items
from gpuops.usecases.releases.gates import Gate, GateDocument
from gpuops.usecases.releases.watch import WatchResult

PLANNED = "planned"  # a dry run: every gate passed, nothing changed
UNCHANGED = "unchanged"  # the environment already runs exactly this
SUCCEEDED = "succeeded"
FAILED = "failed"  # the rollout failed; the previous release was restored
ABORTED = "aborted"  # someone else changed a Deployment during the release; left as it is
REFUSED = "refused"  # a gate, the approval or the lock said no; nothing changed
INTERRUPTED = "interrupted"  # stopped midway (the API server gone); the next release finishes
PAUSED = "paused"  # waiting on an approval step: ``release resume`` goes on, or --reject
STATES = [PLANNED, UNCHANGED, SUCCEEDED, FAILED, ABORTED, REFUSED, INTERRUPTED, PAUSED]
#: The kinds of a progressive release's steps (issue 20), "all" the stable's own rollout
STEP_KINDS = ["replicas", "pause", "analysis", "approval", "all"]
STEP_STATES = ["passed", "failed", "paused", "skipped", "running"]


@dataclass(frozen=True)
class Who:
    """Who asked, who approved, why, and from which build."""

    reason: str | None = None
    approved_by: str | None = None
    requested_by: str | None = None
    git_revision: str | None = None
    link: str | None = None
    node_change: str | None = None  # the node change record made in the same build (S-24)


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
class ResumeRequest:
    """``release resume``: go on with a release paused on an approval step, or reject it."""

    target: Target
    who: Who  # approved_by: who answered (approved or rejected); requested_by: who asked
    reject: bool = False


@dataclass(frozen=True)
class NodesScope:
    """``release rollback --with-nodes``: the fleet whose nodes go back with the release."""

    inventory: str
    limit: str | None = None
    known_hosts: str | None = None  # None: the inventory's known_hosts, else ssh's own
    artifacts_dir: str | None = None  # the nodes rollback's reports
    gpu_pods_timeout_s: int = 3600  # how long a cordoned node's GPU pods may run on
    on_timeout: str = "fail"  # then: fail the host, or evict them (a serving pod never ends)


@dataclass(frozen=True)
class RollbackRequest:
    target: Target
    to: str  # "previous" or a tag from the history
    who: Who = field(default_factory=Who)
    dry_run: bool = False
    with_nodes: NodesScope | None = None  # restore the nodes to the release's node record first
    expect: int | None = None  # the release it must restore (set after the nodes went back)


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
    #: rollback --with-nodes: node -> the driver it will run (the compat gate judges these)
    drivers: Mapping[str, str] | None = None

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


class NodesRollbackDocument(TypedDict):
    """``release rollback --with-nodes``: the nodes' part, done before the image's."""

    record: str  # the node change record the target release ran with
    inventory: str
    limit: str | None
    state: Annotated[str, {"enum": ["planned", "succeeded", "failed", "unchanged"]}]
    drivers: dict[str, str]  # node -> the driver it will run (what the compat gate checked)
    new_record: str | None  # the node change record the rollback itself wrote
    message: str
    summary: NotRequired[dict[str, int]]  # the nodes rollback's hosts by status
    failed: NotRequired[list[str]]  # hosts whose rollback failed (any failure status)
    stopped: NotRequired[str]  # why the nodes rollback stopped early
    artifacts: NotRequired[dict[str, str]]  # its files (update.json, JUnit, the page)


class MeasurementDocument(TypedDict):
    at: str  # when (UTC)
    verdict: Annotated[str, {"enum": ["passed", "failed", "inconclusive"]}]
    value: float | None  # what was judged; None: no (finite) value
    detail: str  # the pod or series, and why


class StepDocument(TypedDict):
    """One step of a progressive release, as the release record and the result keep it."""

    index: int  # its place in the environment's strategy.steps; "all" comes after the last
    kind: Annotated[str, {"enum": STEP_KINDS}]
    state: Annotated[str, {"enum": STEP_STATES}]
    started: str | None
    finished: str | None
    detail: str  # what it did, or why it stopped
    replicas: NotRequired[int]  # replicas: the canary's pods; all: the stable's
    mode: NotRequired[Annotated[str, {"enum": ["surge", "in-place"]}]]
    seconds: NotRequired[int]  # pause
    approvers: NotRequired[list[str]]  # approval
    approved_by: NotRequired[str]  # approval: who answered
    # analysis: the tally (gpuops.core.analysis.Tally.to_dict)
    name: NotRequired[str]
    provider: NotRequired[Annotated[str, {"enum": ["prometheus", "http", "job", "gpu"]}]]
    measurements: NotRequired[list[MeasurementDocument]]
    failures: NotRequired[int]
    verdict: NotRequired[str | None]


open_items(StepDocument)  # an analysis carries the settings it was judged by, too


class PausedDocument(TypedDict):
    """A release waiting on an approval step (state ``paused``)."""

    step: int  # the approval step's index
    approvers: list[str]
    timeout_minutes: int
    record: int  # the release record's number


class StrategyDocument(TypedDict):
    """How a progressive release runs: pods beside the stable's (surge) or in their place."""

    mode: Annotated[str, {"enum": ["surge", "in-place"]}]
    canary: str | None  # the canary Deployment; None without replicas steps
    stable_replicas: int  # the stable's replicas when the release began
    max_unavailable: int | None  # in place: replicas down at most at any moment
    message: str  # why this mode (the headroom gate's finding)


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
    nodes: NotRequired[NodesRollbackDocument]
    steps: NotRequired[list[StepDocument]]  # a progressive release's steps (issue 20)
    paused: NotRequired[PausedDocument]  # state paused: the approval it waits on
    strategy: NotRequired[StrategyDocument]


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
    nodes: NodesRollbackDocument | None = None  # rollback --with-nodes: the nodes' part
    steps: list[StepDocument] | None = None  # a progressive release: its steps so far
    paused: PausedDocument | None = None  # waiting on an approval step
    strategy: StrategyDocument | None = None  # surge or in place, and why
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
        if self.nodes is not None:
            doc["nodes"] = self.nodes
        if self.steps is not None:
            doc["steps"] = [cast(StepDocument, dict(x)) for x in self.steps]
        if self.paused is not None:
            doc["paused"] = self.paused
        if self.strategy is not None:
            doc["strategy"] = self.strategy
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
