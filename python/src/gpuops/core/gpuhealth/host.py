"""The host checks: each a small function of one node's inspection and its thresholds that
returns its findings (nvidia-smi's own failure, a GPU lost or missing, an Xid of a GPU
nvidia-smi does not list, NIC error counters, disk free). Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuops.core import gpuparse
from gpuops.core import xid as xidlib
from gpuops.core.gpuhealth.gpu import xid_finding
from gpuops.core.gpuhealth.model import CRITICAL, WARNING, Finding, Thresholds


@dataclass(frozen=True)
class Inspection:
    """One node's parsed inspection, as the host checks see it."""

    smi_rc: int
    failure: str | None  # nvidia-smi's failure, classified (gpuparse.SMI_FAILURES)
    smi_message: str  # its first lines when it failed
    gpus: list[dict[str, Any]]  # the GPUs nvidia-smi lists
    lost: list[dict[str, str]]  # the GPUs it names as lost: bus_id, message
    expected: int  # GPUs the inventory says the host has (0: not said)
    xids: list[xidlib.XidEvent]  # without those the thresholds ignore
    nics: list[dict[str, Any]]
    disks: list[dict[str, Any]]
    unchecked: list[dict[str, str]]  # mounts whose free space could not be read


#: a host check: the inspection and the thresholds -> its findings
HostCheck = Callable[[Inspection, Thresholds], list[Finding]]


def nvidia_smi_failed(i: Inspection, t: Thresholds) -> list[Finding]:
    """nvidia-smi failing (a lost GPU is :func:`gpu_lost`'s)."""
    if not i.failure or i.failure == "gpu-lost":
        return []
    said = i.smi_message or f"exit {i.smi_rc}"
    message = f"{gpuparse.SMI_FAILURES[i.failure]}: {said}"
    return [Finding(i.failure, CRITICAL, message, value=i.smi_rc)]


def gpu_lost(i: Inspection, t: Thresholds) -> list[Finding]:
    return [
        Finding("gpu-lost", CRITICAL, f"GPU {item['bus_id'] or '?'}: {item['message']}")
        for item in i.lost
    ]


def gpu_missing(i: Inspection, t: Thresholds) -> list[Finding]:
    """Fewer GPUs listed (or named lost) than expected, when nvidia-smi itself ran."""
    listed = len(i.gpus) + len(i.lost)
    if (not i.failure or i.failure == "gpu-lost") and i.expected and listed < i.expected:
        message = f"nvidia-smi lists {listed} GPUs, {i.expected} expected"
        return [Finding("gpu-missing", CRITICAL, message, value=listed, limit=i.expected)]
    return []


def unlisted_xids(i: Inspection, t: Thresholds) -> list[Finding]:
    """Xid events of a lost GPU, or of one nvidia-smi does not list (a listed GPU's are its
    own findings)."""
    listed = {xidlib.bus_key(str(g.get("pci.bus_id", ""))) for g in i.gpus}
    return [xid_finding(event, None) for event in i.xids if event.bus not in listed]


def nic_errors(i: Inspection, t: Thresholds) -> list[Finding]:
    found = []
    for nic in i.nics:
        errors = sum(nic[k] for k in ("rx_errors", "rx_dropped", "tx_errors", "tx_dropped"))
        if errors > t.nic_errors_warning:
            message = f"{nic['name']}: {errors} errors/drops since boot"
            found.append(
                Finding("nic-errors", WARNING, message, value=errors, limit=t.nic_errors_warning)
            )
    return found


def disk_free(i: Inspection, t: Thresholds) -> list[Finding]:
    found = []
    for disk in i.disks:
        free = disk["free_pct"]
        message = f"{disk['mount']}: {free}% free"
        if free < t.disk_free_critical_pct:
            limit = t.disk_free_critical_pct
            found.append(Finding("disk-free", CRITICAL, message, value=free, limit=limit))
        elif free < t.disk_free_warning_pct:
            limit = t.disk_free_warning_pct
            found.append(Finding("disk-free", WARNING, message, value=free, limit=limit))
    return found


_UNCHECKED_WHY = {"missing": "does not exist on the host", "df-failed": "df could not read it"}


def disk_unchecked(i: Inspection, t: Thresholds) -> list[Finding]:
    """A mount to check that the host lacks, or that df could not read: said, not skipped."""
    return [
        Finding(
            "disk-unchecked",
            WARNING,
            f"{u['mount']}: {_UNCHECKED_WHY[u['why']]}: its free space is not checked",
            value=u["mount"],
        )
        for u in i.unchecked
    ]


#: The host checks after the GPUs' (nvidia-smi's own failure comes before them), in the
#: order their findings are reported.
HOST_CHECKS: tuple[HostCheck, ...] = (
    gpu_lost,
    gpu_missing,
    unlisted_xids,
    nic_errors,
    disk_free,
    disk_unchecked,
)


def lost_readings(item: dict[str, str], events: list[xidlib.XidEvent]) -> dict[str, Any]:
    """A lost GPU's entry among the host's GPUs: its bus and its Xid events."""
    bus = xidlib.bus_key(item["bus_id"]) if item["bus_id"] else ""
    return {
        "index": None,
        "bus_id": item["bus_id"],
        "lost": True,
        "worst": CRITICAL,
        "findings": ["gpu-lost"],
        "xids": [e.to_dict() for e in events if e.bus == bus],
    }
