"""The GPU checks: each a small function of one card and the host's thresholds that returns
its findings (as ansible-lint's rules do). :data:`GPU_CHECKS` lists them in the order their
findings are reported; :func:`check_gpu` runs them and returns the card's readings. Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuops.core import xid as xidlib
from gpuops.core.gpuhealth.model import CRITICAL, WARNING, Finding, Thresholds, worst

#: clocks_event_reasons bits that mean the hardware slowed the GPU down
THROTTLE_BITS = {0x8: "hw-slowdown", 0x40: "hw-thermal-slowdown", 0x80: "hw-power-brake"}


@dataclass(frozen=True)
class Card:
    """One GPU as the checks see it: its nvidia-smi fields, NVLink state and Xid events."""

    fields: dict[str, Any]
    nvlink: dict[str, Any]
    xids: list[xidlib.XidEvent]

    @property
    def index(self) -> Any:
        return self.fields.get("index")


#: a GPU check: one card and the thresholds -> its findings
GpuCheck = Callable[[Card, Thresholds], list[Finding]]


def card(
    fields: dict[str, Any],
    nvlinks: dict[int, dict[str, Any]],
    events: list[xidlib.XidEvent],
) -> Card:
    """The card of nvidia-smi's ``fields``, with its NVLink state and its own Xid events."""
    bus = xidlib.bus_key(str(fields.get("pci.bus_id", "")))
    return Card(
        fields=fields,
        nvlink=nvlinks.get(int(fields.get("index") or 0)) or _no_nvlink(),
        xids=[e for e in events if e.bus == bus],
    )


def _no_nvlink() -> dict[str, Any]:
    """What a card has when nvidia-smi shows no NVLink for it."""
    return {"supported": False, "links": 0, "inactive": [], "errors": {}}


def xid_finding(event: xidlib.XidEvent, gpu: int | None) -> Finding:
    """An Xid event's finding: on GPU ``gpu``, or on its PCI bus when no GPU is known."""
    i = event.info
    where = f"GPU {gpu}" if gpu is not None else f"PCI {event.bus}"
    return Finding(
        f"xid-{event.xid}",
        i.severity,
        f"{where}: Xid {event.xid} ({i.name}): {i.meaning}; action: {i.action}",
        gpu,
        event.xid,
        None,
    )


def _found(c: Card, check: str, severity: str, message: str, value: Any, limit: Any) -> Finding:
    return Finding(check, severity, f"GPU {c.index}: {message}", c.index, value, limit)


def _count(c: Card, key: str, check: str, severity: str, limit: int, what: str) -> list[Finding]:
    """A finding when the counter ``key`` is above ``limit``."""
    count = c.fields.get(key)
    if isinstance(count, int) and not isinstance(count, bool) and count > limit:
        return [_found(c, check, severity, f"{count} {what}", count, limit)]
    return []


def _flag(c: Card, key: str, check: str, severity: str, what: str) -> list[Finding]:
    """A finding when the flag ``key`` is set."""
    if c.fields.get(key) is True:
        return [_found(c, check, severity, what, True, False)]
    return []


def temperature(c: Card, t: Thresholds) -> list[Finding]:
    temp = c.fields.get("temperature.gpu")
    if not isinstance(temp, int | float):
        return []
    if temp >= t.temperature_critical_c:
        return [_found(c, "temperature", CRITICAL, f"{temp} C", temp, t.temperature_critical_c)]
    if temp >= t.temperature_warning_c:
        return [_found(c, "temperature", WARNING, f"{temp} C", temp, t.temperature_warning_c)]
    return []


def ecc_uncorrected(c: Card, t: Thresholds) -> list[Finding]:
    return _count(
        c,
        "ecc.errors.uncorrected.volatile.total",
        "ecc-uncorrected",
        CRITICAL,
        t.ecc_uncorrected_volatile_critical,
        "uncorrected ECC errors since boot",
    )


def ecc_uncorrected_aggregate(c: Card, t: Thresholds) -> list[Finding]:
    return _count(
        c,
        "ecc.errors.uncorrected.aggregate.total",
        "ecc-uncorrected-aggregate",
        WARNING,
        t.ecc_uncorrected_aggregate_warning,
        "uncorrected ECC errors (lifetime)",
    )


def ecc_corrected(c: Card, t: Thresholds) -> list[Finding]:
    return _count(
        c,
        "ecc.errors.corrected.volatile.total",
        "ecc-corrected",
        WARNING,
        t.ecc_corrected_volatile_warning,
        "corrected ECC errors since boot",
    )


def remapped_rows(c: Card, t: Thresholds) -> list[Finding]:
    return _count(
        c,
        "remapped_rows.uncorrectable",
        "remapped-rows",
        WARNING,
        t.remapped_rows_uncorrectable_warning,
        "rows remapped for uncorrectable errors",
    )


def retired_pages(c: Card, t: Thresholds) -> list[Finding]:
    return _count(
        c,
        "retired_pages.double_bit.count",
        "retired-pages",
        WARNING,
        t.retired_pages_dbe_warning,
        "pages retired for double-bit errors",
    )


def remapped_rows_failure(c: Card, t: Thresholds) -> list[Finding]:
    return _flag(
        c, "remapped_rows.failure", "remapped-rows-failure", CRITICAL, "row remapping failed"
    )


def remapped_rows_pending(c: Card, t: Thresholds) -> list[Finding]:
    return _flag(
        c,
        "remapped_rows.pending",
        "remapped-rows-pending",
        WARNING,
        "a row remap waits for a GPU reset",
    )


def retired_pages_pending(c: Card, t: Thresholds) -> list[Finding]:
    return _flag(
        c,
        "retired_pages.pending",
        "retired-pages-pending",
        WARNING,
        "a page retirement waits for a reset",
    )


def fan(c: Card, t: Thresholds) -> list[Finding]:
    speed = c.fields.get("fan.speed")
    if isinstance(speed, int | float) and speed >= t.fan_warning_pct:
        return [_found(c, "fan", WARNING, f"fan at {speed}%", speed, t.fan_warning_pct)]
    return []


def throttle_reasons(active: Any) -> list[str]:
    """The hardware slow-down reasons set in nvidia-smi's ``clocks_event_reasons.active``."""
    try:
        bits = int(str(active), 16)
    except ValueError:
        return []
    return [name for bit, name in THROTTLE_BITS.items() if bits & bit]


def throttled(c: Card, t: Thresholds) -> list[Finding]:
    reasons = throttle_reasons(c.fields.get("clocks_event_reasons.active"))
    if reasons:
        return [_found(c, "throttled", WARNING, "slowed by " + ", ".join(reasons), reasons, [])]
    return []


def nvlink_inactive(c: Card, t: Thresholds) -> list[Finding]:
    inactive = c.nvlink["inactive"]
    if inactive:
        message = f"NVLink link(s) {inactive} inactive"
        return [_found(c, "nvlink-inactive", CRITICAL, message, inactive, [])]
    return []


def nvlink_errors(c: Card, t: Thresholds) -> list[Finding]:
    """Recovery errors first; CRC and replay errors only when there are none of those."""
    counts = c.nvlink["errors"].values()
    recovery = sum(n["recovery"] for n in counts)
    crc = sum(n["crc"] + n["replay"] for n in counts)
    if recovery > t.nvlink_recovery_errors_warning:
        message = f"{recovery} NVLink recovery errors"
        return [
            _found(c, "nvlink-errors", WARNING, message, recovery, t.nvlink_recovery_errors_warning)
        ]
    if crc > t.nvlink_crc_errors_warning:
        message = f"{crc} NVLink CRC/replay errors"
        return [_found(c, "nvlink-errors", WARNING, message, crc, t.nvlink_crc_errors_warning)]
    return []


def xids(c: Card, t: Thresholds) -> list[Finding]:
    """The card's Xid events (those the thresholds ignore are gone before the checks)."""
    return [xid_finding(event, c.index) for event in c.xids]


#: Every GPU check, in the order its findings are reported.
GPU_CHECKS: tuple[GpuCheck, ...] = (
    temperature,
    ecc_uncorrected,
    ecc_uncorrected_aggregate,
    ecc_corrected,
    remapped_rows,
    retired_pages,
    remapped_rows_failure,
    remapped_rows_pending,
    retired_pages_pending,
    fan,
    throttled,
    nvlink_inactive,
    nvlink_errors,
    xids,
)


def check_gpu(c: Card, t: Thresholds) -> tuple[dict[str, Any], list[Finding]]:
    """The card's readings (as the JSON result shows them) and its findings."""
    found = [f for check in GPU_CHECKS for f in check(c, t)]
    return readings(c, found), found


def readings(c: Card, found: list[Finding]) -> dict[str, Any]:
    g = c.fields
    return {
        "index": c.index,
        "name": g.get("name"),
        "uuid": g.get("uuid"),
        "bus_id": g.get("pci.bus_id"),
        "lost": False,
        "pstate": g.get("pstate"),
        "temperature_c": g.get("temperature.gpu"),
        "fan_pct": g.get("fan.speed"),
        "power_w": g.get("power.draw"),
        "power_limit_w": g.get("power.limit"),
        "memory_used_mib": g.get("memory.used"),
        "memory_total_mib": g.get("memory.total"),
        "utilization_pct": g.get("utilization.gpu"),
        "ecc": {
            "corrected_volatile": g.get("ecc.errors.corrected.volatile.total"),
            "uncorrected_volatile": g.get("ecc.errors.uncorrected.volatile.total"),
            "uncorrected_aggregate": g.get("ecc.errors.uncorrected.aggregate.total"),
        },
        "retired_pages": {
            "sbe": g.get("retired_pages.single_bit_ecc.count"),
            "dbe": g.get("retired_pages.double_bit.count"),
            "pending": g.get("retired_pages.pending"),
        },
        "remapped_rows": {
            "correctable": g.get("remapped_rows.correctable"),
            "uncorrectable": g.get("remapped_rows.uncorrectable"),
            "pending": g.get("remapped_rows.pending"),
            "failure": g.get("remapped_rows.failure"),
        },
        "throttle": throttle_reasons(g.get("clocks_event_reasons.active")),
        "nvlink": c.nvlink,
        "xids": [e.to_dict() for e in c.xids],
        "worst": worst(f.severity for f in found),
        "findings": sorted({f.check for f in found}),
    }
