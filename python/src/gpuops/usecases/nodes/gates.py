"""Batch gates of ``gpuops nodes update``: checks that run before each batch starts, beside the
headroom gate, and may *hold* the rollout (issue 21: the maintenance window, the cluster's
disruption budget, firing alerts).

A gate is built once per run from its :class:`GateSpec` (the request carries the specs; the
CLI makes them from its options) when the run knows its cluster, inventory and record, and is
closed when the run ends, however it ends. Before each batch the run asks every gate in order;
the first :class:`Hold` stops the rollout: that batch and the later ones are not started
(``held``), the run ends cleanly (exit 3) and its node history record says where a later run
resumes. A gate that took something for a batch (budget) gives it back in :meth:`done` or, at the
latest, in :meth:`close`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from gpuops.usecases.nodes.common import Say

if TYPE_CHECKING:
    from gpuops.adapters.kube import KubeClient
    from gpuops.core import inventory
    from gpuops.usecases.nodes.records import BatchRecord, HostRecord, Rollout


@dataclass(frozen=True)
class Hold:
    """A gate's "not now": which gate, why (one line, shown and recorded) and what it saw."""

    gate: str  # "window", "budget", "alerts"
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"gate": self.gate, "message": self.message, "details": dict(self.details)}


@dataclass(frozen=True)
class GateContext:
    """What a gate may use: the cluster (None: hosts are no nodes), the inventory, the run's
    record so far (its batches' times, for estimates), and the run's progress line."""

    kube: KubeClient | None
    inventory: inventory.Inventory
    rollout: Rollout
    say: Say


class BatchGate(Protocol):
    name: str

    def admit(self, batch: BatchRecord, hosts: Sequence[HostRecord]) -> Hold | None:
        """None: the batch may start now (whatever it needed is taken); else why not."""

    def done(self, batch: BatchRecord, hosts: Sequence[HostRecord]) -> None:
        """The batch ended (its hosts released, or left cordoned when they failed)."""

    def close(self) -> None:
        """The run ends (also when it raised): give back everything still held."""


class GateSpec(Protocol):
    """A gate's options, as the request carries them; ``open`` builds the run's gate."""

    def open(self, ctx: GateContext) -> BatchGate: ...


def open_all(specs: Sequence[GateSpec], ctx: GateContext) -> list[BatchGate]:
    """The run's gates in the request's order; those opened are closed when a later one fails
    to open."""
    gates: list[BatchGate] = []
    try:
        for spec in specs:
            gates.append(spec.open(ctx))
    except BaseException:
        close_all(gates)
        raise
    return gates


def confirm_all(
    gates: Sequence[BatchGate], batch: BatchRecord, hosts: Sequence[HostRecord]
) -> None:
    """Right before a batch's nodes are disrupted (cordoned), after every gate admitted it: a
    gate with an optional ``confirm(batch, hosts)`` checks that what it took is still its own
    (the budget: a run stopped for longer than its lease between admit and cordon may have lost
    its share to another run) and raises when not; gates without one are not asked."""
    for gate in gates:
        confirm = getattr(gate, "confirm", None)
        if confirm is not None:
            confirm(batch, hosts)


def close_all(gates: Sequence[BatchGate]) -> None:
    """Close every gate, last opened first; the first error is raised after all were closed."""
    error: BaseException | None = None
    for gate in reversed(gates):
        try:
            gate.close()
        except BaseException as exc:  # every gate is closed, then the first error raised
            error = error or exc
    if error is not None:
        raise error
