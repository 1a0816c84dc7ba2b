"""What a GPU host runs, as gpuops records it before changing it, and what a run pins it to.

A node change can be undone only when what the host ran before is known: :class:`HostBefore`
is read in pre-flight (read-only, over ssh) before any host changes. A :class:`DriverPin` makes
one host's wanted driver differ from its group's (the playbook's extravar
``gpuops_driver_pins``, host -> pin): the automatic rollback of a failed host, ``nodes
rollback --to`` and ``release rollback --with-nodes`` all reinstall through it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: the playbook's extravar: ``{host: {"version": ..., "cuda": ...}}``
PINS_EXTRAVAR = "gpuops_driver_pins"


@dataclass(frozen=True)
class DriverPin:
    """The driver a host must run: ``version`` like ``550.90.07`` and the CUDA version
    ``nvidia-smi`` reports with it ("": not checked)."""

    version: str
    cuda: str = ""

    def to_extravar(self) -> dict[str, str]:
        return {"version": self.version, "cuda": self.cuda}


def pins_extravars(pins: dict[str, DriverPin]) -> dict[str, Any]:
    """The extravars that pin ``pins``' hosts (none when there are no pins)."""
    return {PINS_EXTRAVAR: {h: p.to_extravar() for h, p in pins.items()}} if pins else {}


@dataclass
class HostBefore:
    """What a host ran before this run changed it (None: not installed or not readable)."""

    driver: str | None = None  # the loaded driver, as nvidia-smi reports it
    cuda: str | None = None  # the CUDA version nvidia-smi reports with it
    run_file: str | None = None  # NVIDIA-Linux-x86_64-<driver>.run
    module: str = "unknown"  # loaded | none | mismatch (a newer driver waits for a reboot)
    #: the driver the role last installed (its local fact), read beside a mismatch: the one
    #: that runs after the pending reboot; None: no fact or not readable
    installed: str | None = None
    fabricmanager: str | None = None  # nv-fabricmanager's version, where installed
    container_toolkit: str | None = None  # nvidia-ctk's version, where installed
    node_init: dict[str, str] = field(default_factory=dict)  # settings node_init manages

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DriverChange:
    """One host's driver before and after a run: what the downgrade gate judges."""

    host: str
    node: str | None  # its Kubernetes node, None when it is none
    group: str
    before: str | None  # None: no driver, or (``before_known`` False) it cannot be read
    after: str
    before_known: bool = True  # False: what it runs cannot be read (the gate refuses)
