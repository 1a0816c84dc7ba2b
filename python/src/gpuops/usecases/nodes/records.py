"""The records of a rolling update: per host, per batch, and the whole rollout, as the JSON
result (stable keys: a report page renders the update timeline from them) and JUnit XML.
The statuses are the core's (:class:`~gpuops.core.rollout.HostStatus`, ``BatchStatus``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, NotRequired, TypedDict

from gpuops.core import rollout
from gpuops.core.junit import Case, junit_xml
from gpuops.usecases.reportdoc import ReportDocument


@dataclass
class HostRecord:
    host: str
    group: str
    node: str | None  # the Kubernetes node, None when the host is none (or --no-kube)
    driver_wanted: str = ""
    batch: int | None = None
    status: rollout.HostStatus = rollout.UNCHANGED
    reason: str = ""
    planned_changes: list[str] = field(default_factory=list)
    changed_tasks: list[str] = field(default_factory=list)
    failed_task: str = ""
    cordoned_before: bool = False  # by an administrator: it stays cordoned
    cordoned: bool = False  # by this run
    uncordoned: bool = False
    waited_for: list[str] = field(default_factory=list)  # GPU pods it waited to finish
    evicted: list[str] = field(default_factory=list)
    started_at: str | None = None
    finished_at: str | None = None
    phases_s: dict[str, float] = field(default_factory=dict)
    slowest_tasks_s: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class AnsibleRunDocument(TypedDict):
    """A batch's playbook run."""

    ident: str  # the run's folder under ansible/
    rc: int
    status: str  # ansible-runner's word: successful, failed, timeout, ...
    artifacts: str  # its artifacts folder
    elapsed_s: float


@dataclass
class BatchRecord:
    index: int
    kind: Annotated[str, {"enum": [rollout.CANARY, rollout.BATCH]}]
    hosts: list[str]
    status: rollout.BatchStatus = rollout.BatchStatus.NOT_STARTED
    started_at: str | None = None
    finished_at: str | None = None
    start_s: float | None = None  # seconds after the run started (the timeline's x)
    elapsed_s: float = 0.0
    headroom: Annotated[dict[str, Any] | None, rollout.BatchHeadroom, "asdict"] = None
    ansible: Annotated[dict[str, Any] | None, AnsibleRunDocument] = None
    phases_s: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class PolicyDocument(TypedDict):
    canary: int  # hosts in the canary batch
    batch_size: str  # "20%" or "5"
    failure_budget: int


#: Hosts by status (every status counted, 0 too).
SummaryDocument = TypedDict(
    "SummaryDocument",
    {"changed": int, "unchanged": int, "failed": int, "not-started": int, "planned": int},
)


class PlannedBatchDocument(TypedDict):
    index: int
    kind: Annotated[str, {"enum": [rollout.CANARY, rollout.BATCH]}]
    hosts: list[str]


class RolloutDocument(TypedDict):
    """The ``result`` of ``gpuops nodes update`` (and ``update.json``)."""

    inventory: str
    limit: str | None
    environment: str
    change: list[str]
    policy: Annotated[dict[str, Any], PolicyDocument]
    check: bool
    kubernetes: str | None  # the API server; None without Kubernetes
    summary: Annotated[dict[str, int], SummaryDocument]
    changed: list[str]
    failed: list[str]
    not_started: list[str]
    planned: list[str]
    unchanged: list[str]
    stopped: str  # why later batches were not started
    refused: bool  # stopped by the headroom gate
    plan: list[PlannedBatchDocument]
    batches: list[Annotated[dict[str, Any], BatchRecord, "asdict"]]
    hosts: list[Annotated[dict[str, Any], HostRecord, "asdict"]]
    diffs: dict[str, list[dict[str, Any]]]  # --check: host -> Ansible's diffs
    started_at: str
    finished_at: str
    timings_s: dict[str, float]  # phase -> seconds
    artifacts: dict[str, str]  # role (json, junit, ...) -> file
    report: NotRequired[ReportDocument]  # the node update page beside update.json


@dataclass
class Rollout:
    inventory: str
    limit: str | None
    environment: str
    change: list[str]
    policy: rollout.Policy
    check: bool
    kube: str | None  # the API server, None without Kubernetes
    hosts: dict[str, HostRecord] = field(default_factory=dict)
    batches: list[BatchRecord] = field(default_factory=list)
    stopped: str = ""  # why later batches were not started
    refused: bool = False  # stopped by the headroom gate
    started_at: str = ""
    finished_at: str = ""
    timings_s: dict[str, float] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)
    diffs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: the node update page beside update.json: written (its files) or why not; None: no page
    report: ReportDocument | None = None

    def with_status(self, status: str) -> list[str]:
        return [h.host for h in self.hosts.values() if h.status == status]

    @property
    def failed(self) -> list[str]:
        return self.with_status(rollout.FAILED)

    def summary(self) -> dict[str, int]:
        return {
            s: len(self.with_status(s))
            for s in (
                rollout.CHANGED,
                rollout.UNCHANGED,
                rollout.FAILED,
                rollout.NOT_STARTED,
                rollout.PLANNED,
            )
        }

    def to_dict(self) -> RolloutDocument:
        doc: RolloutDocument = {
            "inventory": self.inventory,
            "limit": self.limit,
            "environment": self.environment,
            "change": list(self.change),
            "policy": self.policy.to_dict(),
            "check": self.check,
            "kubernetes": self.kube,
            "summary": self.summary(),
            "changed": self.with_status(rollout.CHANGED),
            "failed": self.failed,
            "not_started": self.with_status(rollout.NOT_STARTED),
            "planned": self.with_status(rollout.PLANNED),
            "unchanged": self.with_status(rollout.UNCHANGED),
            "stopped": self.stopped,
            "refused": self.refused,
            "plan": [
                {"index": b.index, "kind": b.kind, "hosts": list(b.hosts)} for b in self.batches
            ],
            "batches": [b.to_dict() for b in self.batches],
            "hosts": [h.to_dict() for h in self.hosts.values()],
            "diffs": self.diffs if self.check else {},
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "timings_s": dict(self.timings_s),
            "artifacts": dict(self.artifacts),
        }
        if self.report is not None:
            doc["report"] = self.report.copy()
        return doc

    def junit(self) -> str:
        cases = []
        for h in self.hosts.values():
            total = round(sum(h.phases_s.values()), 3)
            out = "\n".join(
                [f"batch {h.batch}" if h.batch is not None else "not in any batch"]
                + [f"changed: {t}" for t in h.changed_tasks]
                + [f"{k}: {v}s" for k, v in h.phases_s.items()]
            )
            cases.append(
                Case(
                    name=h.host,
                    classname=f"gpu-update.{h.group}",
                    seconds=total,
                    failure=(h.reason or "failed") if h.status == rollout.FAILED else None,
                    skipped=(h.reason or "not started")
                    if h.status == rollout.NOT_STARTED
                    else None,
                    output=out,
                )
            )
        return junit_xml("gpuops nodes update", cases)
