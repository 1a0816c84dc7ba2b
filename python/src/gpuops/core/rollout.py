"""A rolling change of GPU nodes (S-3, S-35): canary first, then batches, a failure budget,
and before each batch the headroom gate: can the cluster lose this batch's GPUs?

The state machine of a rollout, pure: the use case (:mod:`gpuops.usecases.nodes.update`)
does the I/O (Ansible, Kubernetes) and asks this module each decision:

- the order (:func:`rollout_order`): the inventory's order, as Ansible lists the hosts it
  loaded (the order the inventory files name them), never regrouped;
- the canary: the first ``Policy.canary`` hosts of that order that will change
  (:func:`plan`); a failed canary counts against the failure budget like any host (with the
  default budget 0 it stops the run);
- the stop rules (:class:`Run`): a failure in the plan stops the run before any batch; the
  headroom gate refusing a batch stops it there; failed hosts over the failure budget stop it
  after their batch. A stopped run starts no later batch; a host rolled back (or whose
  rollback failed) counts as failed;
- the rollback decision (:func:`wants_rollback`) and the cordon after a rollback
  (:class:`AfterRollback`);
- the statuses of hosts (:class:`HostStatus`) and batches (:class:`BatchStatus`): the words
  of the JSON result.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

from gpuops.core import headroom
from gpuops.core.kubemodel import Node, Pod
from gpuops.core.values import shown
from gpuops.errors import InvalidInput

CANARY, BATCH = "canary", "batch"


class HostStatus(StrEnum):
    """What happened to a host (``hosts[].status`` of the result)."""

    CHANGED = "changed"
    UNCHANGED = "unchanged"  # nothing to change (the plan said so), or changed nothing
    FAILED = "failed"
    NOT_STARTED = "not-started"  # in a batch the run never started
    PLANNED = "planned"  # --check: would change
    ROLLED_BACK = "rolled-back"  # its change failed; it runs its previous driver again
    ROLLBACK_FAILED = "rollback-failed"  # its change failed and so did the rollback: broken


class BatchStatus(StrEnum):
    """What happened to a batch (``batches[].status`` of the result)."""

    NOT_STARTED = "not-started"
    PLANNED = "planned"  # --check
    DONE = "done"  # every host changed (or had nothing to change)
    FAILED = "failed"  # a host of it failed
    REFUSED = "refused"  # the headroom gate said no: not started
    HELD = "held"  # a batch gate (window, disruption budget, alerts) held it: not started


#: the host statuses by their short names (as the records and tests use them)
CHANGED, UNCHANGED, FAILED = HostStatus.CHANGED, HostStatus.UNCHANGED, HostStatus.FAILED
NOT_STARTED, PLANNED = HostStatus.NOT_STARTED, HostStatus.PLANNED
ROLLED_BACK, ROLLBACK_FAILED = HostStatus.ROLLED_BACK, HostStatus.ROLLBACK_FAILED
#: the statuses that count against the failure budget
FAILURES = frozenset({FAILED, ROLLED_BACK, ROLLBACK_FAILED})
#: the Ansible task of the GPU validation (role nvidia_driver, tasks/validate.yml)
VALIDATION_TASK = "Validate the GPUs"
_SIZE = re.compile(r"^(?P<n>[0-9]{1,6})(?P<pct>%?)$")


@dataclass(frozen=True)
class BatchSize:
    """A count of hosts, or a percentage of the hosts the rollout changes."""

    value: int
    percent: bool = False

    def hosts(self, total: int) -> int:
        if self.percent:
            return max(1, math.ceil(total * self.value / 100))
        return self.value

    def __str__(self) -> str:
        return f"{self.value}%" if self.percent else str(self.value)


def parse_batch_size(text: Any) -> BatchSize:
    """``5`` or ``"5"`` (hosts) or ``"20%"`` (of the hosts to change)."""
    if isinstance(text, int) and not isinstance(text, bool):
        text = str(text)
    m = _SIZE.fullmatch(text) if isinstance(text, str) else None  # as given: nothing stripped
    if not m:
        raise InvalidInput(
            f"batch size {shown(text)} is not a count like 5 or a percentage like 20%"
        )
    size = BatchSize(int(m.group("n")), bool(m.group("pct")))
    if size.value < 1 or (size.percent and size.value > 100):
        raise InvalidInput(f"batch size {size} must be at least 1 (and at most 100%)")
    return size


@dataclass(frozen=True)
class Policy:
    canary: int = 1
    batch_size: BatchSize = field(default_factory=lambda: BatchSize(20, percent=True))
    failure_budget: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "canary": self.canary,
            "batch_size": str(self.batch_size),
            "failure_budget": self.failure_budget,
        }


@dataclass(frozen=True)
class Batch:
    index: int  # 0 is the canary when there is one
    kind: str
    hosts: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "hosts": list(self.hosts)}


def rollout_order(hosts: Iterable[str]) -> list[str]:
    """The order hosts are changed in: the inventory's order (``hosts`` as the inventory
    lists them), each host once. The first host of it that will change is the canary.

    Not regrouped by GPU model or any other group: operators order their inventory (a rack,
    a site, a model first) and a host's first group is often not its model's."""
    return list(dict.fromkeys(hosts))


def plan(hosts: Sequence[str], policy: Policy) -> list[Batch]:
    """The canary (the first ``policy.canary`` hosts), then batches of the batch size.
    ``hosts``: those that will change, in :func:`rollout_order`."""
    batches: list[Batch] = []
    rest = list(hosts)
    if policy.canary and rest:
        batches.append(Batch(0, CANARY, tuple(rest[: policy.canary])))
        rest = rest[policy.canary :]
    size = policy.batch_size.hosts(len(hosts))
    for start in range(0, len(rest), size):
        batches.append(Batch(len(batches), BATCH, tuple(rest[start : start + size])))
    return batches


class AfterRollback(StrEnum):
    """The cordon of a node after its successful rollback (``--after-rollback``).

    ``keep-cordoned`` (the default): the node ran its previous driver and passed verification
    and validation again, but why the change failed is not known yet; a person looks before
    it takes work (``kubectl uncordon``, or the next run that changes it uncordons it).
    ``uncordon``: it takes work again at once and gpuops' taint goes."""

    UNCORDON = "uncordon"
    KEEP_CORDONED = "keep-cordoned"


@dataclass(frozen=True)
class RollbackPolicy:
    """Whether a host whose change failed is put back to what it ran (``--no-rollback``)."""

    enabled: bool = True
    after: AfterRollback = AfterRollback.KEEP_CORDONED

    def to_dict(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "after": str(self.after)}


def wants_rollback(
    policy: RollbackPolicy, *, failed_in_change: bool, before: str | None, wanted: str
) -> bool:
    """Whether a failed host is rolled back: rollback on, its change had begun (install,
    verification or validation failed: not a failed drain or an unreachable host) and what it
    ran before is known and differs from what it was to run."""
    return policy.enabled and failed_in_change and bool(before) and before != wanted


def is_validation(failed_task: str) -> bool:
    """Whether a failed task is the GPU validation (Ansible names it ``role : task``)."""
    return failed_task.rpartition(" : ")[2] == VALIDATION_TASK


def over_budget(failed: int, policy: Policy) -> bool:
    return failed > policy.failure_budget


def not_started(why: str) -> str:
    """The reason recorded on a host of a batch a stopped run did not start."""
    return f"not started: {why}"


@dataclass
class Run:
    """Where a rollout stands between batches, and its stop rules. ``stopped`` says why later
    batches are not started ("" while the run goes on); ``refused``: the headroom gate stopped
    it."""

    policy: Policy
    failed: int = 0  # hosts failed in the batches run so far
    stopped: str = ""
    refused: bool = False
    held: str = ""  # the batch gate that held the run ("" when none did)

    def plan_failed(self, hosts: Sequence[str]) -> None:
        """The plan (the driver role's reading, node_init's check mode) failed on ``hosts``: no
        batch starts."""
        if hosts:
            self.stopped = "the plan failed on " + ", ".join(hosts)

    def refuse(self, index: int, message: str) -> BatchStatus:
        """The headroom gate refused batch ``index``: neither it nor a later batch starts."""
        self.refused = True
        self.stopped = f"headroom gate refused batch {index}: {message}"
        return BatchStatus.REFUSED

    def hold(self, index: int, gate: str, message: str) -> BatchStatus:
        """Batch gate ``gate`` held batch ``index``: neither it nor a later batch starts; the
        run ends cleanly and a later run resumes where it stopped."""
        self.held = gate
        self.stopped = f"{gate} held batch {index}: {message}"
        return BatchStatus.HELD

    def finish(self, statuses: Iterable[str]) -> BatchStatus:
        """A batch ran and its hosts ended with ``statuses``: its status. The run stops when
        the failed hosts so far (rolled back or not) are over the failure budget."""
        failed = sum(1 for s in statuses if s in FAILURES)
        self.failed += failed
        if over_budget(self.failed, self.policy):
            self.stopped = (
                f"{self.failed} host(s) failed, over the failure budget of "
                f"{self.policy.failure_budget}"
            )
        return BatchStatus.FAILED if failed else BatchStatus.DONE


@dataclass(frozen=True)
class BatchHeadroom:
    """Whether the cluster can lose a batch's nodes now, with the reserve honoured."""

    fits: bool
    nodes: tuple[str, ...]
    gpus_removed: int
    gpus_to_move: int
    free_after: int
    reserve: int
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def batch_headroom(
    nodes: Sequence[Node],
    pods: Iterable[Pod],
    batch_nodes: Iterable[str],
    *,
    resource: str = headroom.DEFAULT_RESOURCE,
    reserve: int = 0,
) -> BatchHeadroom:
    """The headroom core's verdict on the cluster without the batch: the batch's nodes count
    as cordoned, the GPUs their pods hold must fit elsewhere, and ``reserve`` GPUs must stay
    free after that."""
    batch = frozenset(batch_nodes)
    pods = list(pods)
    removed = sum(n.allocatable.get(resource, 0) for n in nodes if n.name in batch)
    to_move = sum(p.requests.get(resource, 0) for p in pods if p.node_name in batch)
    without = [replace(n, unschedulable=True) if n.name in batch else n for n in nodes]
    shape = headroom.Shape(gpus_per_pod=1, pods=max(1, to_move), resource=resource)
    result = headroom.check(without, pods, shape, headroom.Policy(reserve=reserve))
    free_after = result.free_total
    fits = free_after - to_move >= reserve and (to_move == 0 or result.pods_placeable >= to_move)
    names = ", ".join(sorted(batch)) or "no Kubernetes node"
    if fits:
        message = (
            f"without {names} ({removed} {resource}) {free_after} stay free"
            f"{f', {to_move} of them for pods to move' if to_move else ''}; reserve {reserve}"
        )
    else:
        message = (
            f"without {names} ({removed} {resource}) only {free_after} {resource} stay free: "
            f"{to_move} needed for pods to move and a reserve of {reserve}"
        )
    return BatchHeadroom(fits, tuple(sorted(batch)), removed, to_move, free_after, reserve, message)
