"""The records of a rolling update: per host, per batch, and the whole rollout, as the JSON
result (stable keys: a report page renders the update timeline from them) and JUnit XML.
The statuses are the core's (:class:`~gpuops.core.rollout.HostStatus`, ``BatchStatus``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, NotRequired, TypedDict

from gpuops.core import downgrade as dg
from gpuops.core import rollout
from gpuops.core.junit import Case, junit_xml
from gpuops.usecases.reportdoc import ReportDocument


class ValidationDocument(TypedDict):
    """A failed GPU validation (the role's task ``Validate the GPUs``)."""

    task: str
    message: str  # its fail_msg: ``validation failed on <host>: <test> ...: <GPU> ...``


class RollbackDocument(TypedDict):
    """A failed host's rollback to the driver it ran before."""

    to: str  # the driver version it was put back to
    cuda: str  # the CUDA version with it ("" not checked)
    status: Annotated[str, {"enum": ["rolled-back", "rollback-failed"]}]
    reason: str  # why it was rolled back; on failure also why that failed
    ident: str  # the rollback's playbook run (its folder under ansible/)


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
    tainted: bool = False  # gpuops.io/gpu-unhealthy set by this use case (nodes-update)
    waited_for: list[str] = field(default_factory=list)  # GPU pods it waited to finish
    evicted: list[str] = field(default_factory=list)
    started_at: str | None = None
    finished_at: str | None = None
    phases_s: dict[str, float] = field(default_factory=dict)
    slowest_tasks_s: dict[str, float] = field(default_factory=dict)
    driver_before: str | None = None  # what it ran before the run (pre-flight; None: unknown)
    cuda_before: str | None = None
    driver_after: str | None = None  # what it runs when the run ends (None: unknown, broken)
    #: nvidia-ctk's version before the run (None: none or not read): what a rollback reinstalls
    container_toolkit_before: str | None = None
    #: the failed GPU validation: {"task", "message"}; None: it did not fail
    validation: Annotated[dict[str, Any] | None, ValidationDocument] = None
    #: the rollback of a failed change: {"to", "status", "reason"}; None: none was tried
    rollback: Annotated[dict[str, Any] | None, RollbackDocument] = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class AnsibleRunDocument(TypedDict):
    """A batch's playbook run."""

    ident: str  # the run's folder under ansible/
    rc: int
    status: str  # ansible-runner's word: successful, failed, timeout, ...
    artifacts: str  # its artifacts folder
    elapsed_s: float


class BudgetTakenDocument(TypedDict):
    """What the cluster's disruption budget gave a batch (usecases/nodes/budget.py)."""

    holder: str  # this run's identity in the budget's Leases
    nodes: dict[str, list[str]]  # GPU class -> the nodes taken
    waited_s: float  # how long the batch waited for the budget
    recovered: list[dict[str, Any]]  # dead holders' claims this take dropped
    lease: dict[str, str]  # GPU class -> namespace/name of its Lease


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
    #: the playbook run that rolled its failed hosts back (None: none)
    rollback: Annotated[dict[str, Any] | None, AnsibleRunDocument] = None
    phases_s: dict[str, float] = field(default_factory=dict)
    #: what the disruption budget gave it (--budget-max-unavailable); None: not asked
    budget: Annotated[dict[str, Any] | None, BudgetTakenDocument] = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class PolicyDocument(TypedDict):
    canary: int  # hosts in the canary batch
    batch_size: str  # "20%" or "5"
    failure_budget: int


#: Hosts by status (every status counted, 0 too).
SummaryDocument = TypedDict(
    "SummaryDocument",
    {
        "changed": int,
        "unchanged": int,
        "failed": int,
        "not-started": int,
        "planned": int,
        "rolled-back": int,
        "rollback-failed": int,
    },
)


class RollbackPolicyDocument(TypedDict):
    enabled: bool  # False: --no-rollback
    after: Annotated[str, {"enum": ["uncordon", "keep-cordoned"]}]  # --after-rollback


class PlannedBatchDocument(TypedDict):
    index: int
    kind: Annotated[str, {"enum": [rollout.CANARY, rollout.BATCH]}]
    hosts: list[str]


class DowngradeHostDocument(TypedDict):
    """A host whose driver goes down."""

    host: str
    node: str | None
    group: str
    before: str | None  # the driver it runs (or, waiting for a reboot, the one installed)
    after: str  # the driver it goes to


class DowngradeWorkloadDocument(TypedDict):
    """One GPU container of the class, judged against the target driver."""

    workload: str  # namespace/pod
    container: str
    node: str
    image: str
    cuda: str | None  # the CUDA version its image declares; None: none
    cuda_source: str
    needed_driver: str | None
    target_driver: str
    target_host: str
    verdict: Annotated[str, {"enum": [dg.OK, dg.NO_CUDA, dg.TOO_OLD, dg.UNREADABLE, dg.UNKNOWN]}]
    reason: str


class DowngradeDocument(TypedDict):
    """The downgrade gate's verdict in pre-flight (core/downgrade.py), when it judged any."""

    ok: bool
    strict: bool  # minor-version compatibility not assumed
    downgrades: list[DowngradeHostDocument]
    workloads: list[DowngradeWorkloadDocument]
    refused: list[str]  # the workloads that could not run (namespace/pod)
    problems: list[str]  # what could not be judged
    message: str


class HoldDocument(TypedDict):
    gate: str  # window, budget, alerts
    message: str
    details: dict[str, Any]


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
    rolled_back: list[str]  # failed, then put back to their previous driver
    rollback_failed: list[str]  # failed, and so did their rollback: left cordoned and tainted
    rollback: Annotated[dict[str, Any], RollbackPolicyDocument]
    validation_level: int | None  # --validation-level; None: each group's
    stopped: str  # why later batches were not started
    refused: bool  # stopped by the headroom gate
    held: Annotated[dict[str, Any] | None, HoldDocument]  # the batch gate that held the run
    plan: list[PlannedBatchDocument]
    batches: list[Annotated[dict[str, Any], BatchRecord, "asdict"]]
    hosts: list[Annotated[dict[str, Any], HostRecord, "asdict"]]
    diffs: dict[str, list[dict[str, Any]]]  # --check: host -> Ansible's diffs
    started_at: str
    finished_at: str
    timings_s: dict[str, float]  # phase -> seconds
    artifacts: dict[str, str]  # role (json, junit, ...) -> file
    record: str | None  # its node history record id (gpuops nodes history); None: none written
    #: the downgrade gate's verdict when a driver goes down (None: none goes down, or no kube)
    downgrade: Annotated[dict[str, Any] | None, DowngradeDocument]
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
    rollback: rollout.RollbackPolicy = field(default_factory=rollout.RollbackPolicy)
    validation_level: int | None = None
    hosts: dict[str, HostRecord] = field(default_factory=dict)
    batches: list[BatchRecord] = field(default_factory=list)
    stopped: str = ""  # why later batches were not started
    refused: bool = False  # stopped by the headroom gate
    held: dict[str, Any] | None = None  # the batch gate's hold that stopped the run (Hold)
    started_at: str = ""
    finished_at: str = ""
    timings_s: dict[str, float] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)
    diffs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: the node update page beside update.json: written (its files) or why not; None: no page
    report: ReportDocument | None = None
    record: str | None = None  # the node history record of this run (None: --check, no kube)
    #: the downgrade gate's verdict (:meth:`DowngradeVerdict.to_dict`); None: nothing judged
    downgrade: dict[str, Any] | None = None

    def with_status(self, status: str) -> list[str]:
        return [h.host for h in self.hosts.values() if h.status == status]

    @property
    def failed(self) -> list[str]:
        return self.with_status(rollout.FAILED)

    @property
    def failures(self) -> list[str]:
        """Every host whose change failed: failed, rolled back or rollback failed."""
        return [h.host for h in self.hosts.values() if h.status in rollout.FAILURES]

    def summary(self) -> dict[str, int]:
        return {
            s: len(self.with_status(s))
            for s in (
                rollout.CHANGED,
                rollout.UNCHANGED,
                rollout.FAILED,
                rollout.NOT_STARTED,
                rollout.PLANNED,
                rollout.ROLLED_BACK,
                rollout.ROLLBACK_FAILED,
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
            "rolled_back": self.with_status(rollout.ROLLED_BACK),
            "rollback_failed": self.with_status(rollout.ROLLBACK_FAILED),
            "rollback": self.rollback.to_dict(),
            "validation_level": self.validation_level,
            "stopped": self.stopped,
            "refused": self.refused,
            "held": self.held,
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
            "record": self.record,
            "downgrade": self.downgrade,
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
                + (
                    [f"rollback: {h.rollback['status']} to {h.rollback['to']}"]
                    if h.rollback
                    else []
                )
            )
            cases.append(
                Case(
                    name=h.host,
                    classname=f"gpu-update.{h.group}",
                    seconds=total,
                    failure=(h.reason or str(h.status)) if h.status in rollout.FAILURES else None,
                    skipped=(h.reason or "not started")
                    if h.status == rollout.NOT_STARTED
                    else None,
                    output=out,
                )
            )
        return junit_xml("gpuops nodes update", cases)
