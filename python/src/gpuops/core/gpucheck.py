"""Per-GPU checks of a node's inspection: readings and findings of one card (temperature,
ECC, remapped rows and retired pages, NVLink, fan, throttling, its Xid events). Pure; used by
:func:`gpuops.core.gpuhealth.evaluate`, which owns the thresholds and the finding type."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpuops.core import xid as xidlib

if TYPE_CHECKING:
    from gpuops.core.gpuhealth import Thresholds

OK, WARNING, CRITICAL = "ok", "warning", "critical"
_RANK = {OK: 0, WARNING: 1, CRITICAL: 2}
#: clocks_event_reasons bits that mean the hardware slowed the GPU down
THROTTLE_BITS = {0x8: "hw-slowdown", 0x40: "hw-thermal-slowdown", 0x80: "hw-power-brake"}
#: make(check, severity, message, gpu, value, limit)
Make = Callable[..., None]


def xid_finding(event: xidlib.XidEvent, gpu: int | None, make: Make) -> None:
    i = event.info
    where = f"GPU {gpu}" if gpu is not None else f"PCI {event.bus}"
    make(
        f"xid-{event.xid}",
        i.severity,
        f"{where}: Xid {event.xid} ({i.name}): {i.meaning}; action: {i.action}",
        gpu,
        event.xid,
        None,
    )


def check_gpu(
    g: dict[str, Any],
    nvlink: dict[str, Any] | None,
    events: list[xidlib.XidEvent],
    t: Thresholds,
    make: Make,
) -> dict[str, Any]:
    """One GPU's readings (as the JSON result shows them) and its findings, made through
    ``make(check, severity, message, gpu, value, limit)``."""
    index = g.get("index")
    found: list[tuple[str, str, str, int | None, Any, Any]] = []

    def check(name: str, severity: str, message: str, value: Any, limit: Any) -> None:
        found.append((name, severity, f"GPU {index}: {message}", index, value, limit))

    temp = g.get("temperature.gpu")
    if isinstance(temp, int | float):
        if temp >= t.temperature_critical_c:
            check("temperature", CRITICAL, f"{temp} C", temp, t.temperature_critical_c)
        elif temp >= t.temperature_warning_c:
            check("temperature", WARNING, f"{temp} C", temp, t.temperature_warning_c)
    _count(
        check,
        g,
        "ecc.errors.uncorrected.volatile.total",
        "ecc-uncorrected",
        CRITICAL,
        t.ecc_uncorrected_volatile_critical,
        "uncorrected ECC errors since boot",
    )
    _count(
        check,
        g,
        "ecc.errors.uncorrected.aggregate.total",
        "ecc-uncorrected-aggregate",
        WARNING,
        t.ecc_uncorrected_aggregate_warning,
        "uncorrected ECC errors (lifetime)",
    )
    _count(
        check,
        g,
        "ecc.errors.corrected.volatile.total",
        "ecc-corrected",
        WARNING,
        t.ecc_corrected_volatile_warning,
        "corrected ECC errors since boot",
    )
    _count(
        check,
        g,
        "remapped_rows.uncorrectable",
        "remapped-rows",
        WARNING,
        t.remapped_rows_uncorrectable_warning,
        "rows remapped for uncorrectable errors",
    )
    _count(
        check,
        g,
        "retired_pages.double_bit.count",
        "retired-pages",
        WARNING,
        t.retired_pages_dbe_warning,
        "pages retired for double-bit errors",
    )
    if g.get("remapped_rows.failure") is True:
        check("remapped-rows-failure", CRITICAL, "row remapping failed", True, False)
    if g.get("remapped_rows.pending") is True:
        check("remapped-rows-pending", WARNING, "a row remap waits for a GPU reset", True, False)
    if g.get("retired_pages.pending") is True:
        check("retired-pages-pending", WARNING, "a page retirement waits for a reset", True, False)
    fan = g.get("fan.speed")
    if isinstance(fan, int | float) and fan >= t.fan_warning_pct:
        check("fan", WARNING, f"fan at {fan}%", fan, t.fan_warning_pct)
    throttle = _throttle(g.get("clocks_event_reasons.active"))
    if throttle:
        check("throttled", WARNING, "slowed by " + ", ".join(throttle), throttle, [])
    link = nvlink or {"supported": False, "links": 0, "inactive": [], "errors": {}}
    if link["inactive"]:
        check(
            "nvlink-inactive",
            CRITICAL,
            f"NVLink link(s) {link['inactive']} inactive",
            link["inactive"],
            [],
        )
    recovery = sum(c["recovery"] for c in link["errors"].values())
    crc = sum(c["crc"] + c["replay"] for c in link["errors"].values())
    if recovery > t.nvlink_recovery_errors_warning:
        check(
            "nvlink-errors",
            WARNING,
            f"{recovery} NVLink recovery errors",
            recovery,
            t.nvlink_recovery_errors_warning,
        )
    elif crc > t.nvlink_crc_errors_warning:
        check(
            "nvlink-errors",
            WARNING,
            f"{crc} NVLink CRC/replay errors",
            crc,
            t.nvlink_crc_errors_warning,
        )
    bus = xidlib.bus_key(str(g.get("pci.bus_id", "")))
    mine = [e for e in events if e.bus == bus]
    for event in mine:
        xid_finding(event, index, lambda *f: found.append(f))
    for f in found:
        make(*f)
    return {
        "index": index,
        "name": g.get("name"),
        "uuid": g.get("uuid"),
        "bus_id": g.get("pci.bus_id"),
        "lost": False,
        "pstate": g.get("pstate"),
        "temperature_c": temp,
        "fan_pct": fan,
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
        "throttle": throttle,
        "nvlink": link,
        "xids": [e.to_dict() for e in mine],
        "worst": max((f[1] for f in found), key=_RANK.__getitem__, default=OK),
        "findings": sorted({f[0] for f in found}),
    }


def _count(
    check: Any, g: dict[str, Any], key: str, name: str, severity: str, limit: int, what: str
) -> None:
    count = g.get(key)
    if isinstance(count, int) and not isinstance(count, bool) and count > limit:
        check(name, severity, f"{count} {what}", count, limit)


def _throttle(active: Any) -> list[str]:
    try:
        bits = int(str(active), 16)
    except ValueError:
        return []
    return [name for bit, name in THROTTLE_BITS.items() if bits & bit]
