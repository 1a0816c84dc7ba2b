"""GPU node health: thresholds per inventory group, findings per GPU and per host (S-16).

:func:`evaluate` turns one node's parsed inspection (:mod:`gpuops.core.gpuparse`) into a
:class:`HostHealth`: per GPU its readings (temperature, memory, utilisation, ECC, retired
pages or remapped rows, NVLink state and errors, fan, power, throttling, Xid events) and
findings; per host nvidia-smi's own failure (classified), a GPU missing from the list, NIC
error counters and disk free. Each finding has a severity, ``warning`` or ``critical``; a
host's status is its worst finding (``ok`` without any). Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from gpuops.core import gpuparse
from gpuops.core import xid as xidlib
from gpuops.core.gpucheck import CRITICAL, OK, WARNING, check_gpu, xid_finding
from gpuops.core.values import key_shown
from gpuops.errors import InvalidInput

UNREACHABLE = "unreachable"
_RANK = {OK: 0, WARNING: 1, CRITICAL: 2}
#: Host-wide checks that say nothing about the GPUs; every other host-wide finding
#: (nvidia-smi failing, a reboot pending, a GPU missing, an Xid of an unlisted GPU) does.
HOST_ONLY_CHECKS = frozenset({"nic-errors", "disk-free", "disk-unchecked"})
__all__ = [
    "CRITICAL",
    "HOST_ONLY_CHECKS",
    "OK",
    "UNREACHABLE",
    "WARNING",
    "Finding",
    "HostHealth",
    "Thresholds",
]


@dataclass(frozen=True)
class Thresholds:
    """Limits of one host (the inventory's ``gpu_inspect_thresholds`` over these defaults)."""

    temperature_warning_c: int = 85
    temperature_critical_c: int = 90
    ecc_corrected_volatile_warning: int = 1000
    ecc_uncorrected_volatile_critical: int = 0
    ecc_uncorrected_aggregate_warning: int = 0
    remapped_rows_uncorrectable_warning: int = 0
    retired_pages_dbe_warning: int = 0
    nvlink_recovery_errors_warning: int = 0
    nvlink_crc_errors_warning: int = 1000
    fan_warning_pct: int = 95
    disk_free_warning_pct: int = 15
    disk_free_critical_pct: int = 5
    nic_errors_warning: int = 1000
    xid_ignore: tuple[int, ...] = ()

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None, where: str) -> Thresholds:
        """Defaults overridden by ``values``; an unknown key or a bad value names ``where``."""
        if values is None:
            return cls()
        if not isinstance(values, Mapping):
            raise InvalidInput(f"{where}: gpu_inspect_thresholds must be a mapping")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InvalidInput(
                f"{where}: unknown threshold(s) {', '.join(key_shown(k) for k in unknown[:5])}",
                hint=f"known thresholds: {', '.join(sorted(known))}",
            )
        checked: dict[str, Any] = {}
        for key, val in values.items():
            if key == "xid_ignore":
                if not isinstance(val, list | tuple) or not all(
                    isinstance(x, int) and not isinstance(x, bool) for x in val
                ):
                    raise InvalidInput(f"{where}: xid_ignore must be a list of Xid numbers")
                checked[key] = tuple(val)
            elif isinstance(val, bool) or not isinstance(val, int) or not 0 <= val <= 10**9:
                raise InvalidInput(f"{where}: threshold {key} must be a whole number >= 0")
            else:
                checked[key] = val
        made = cls(**checked)
        if made.temperature_critical_c < made.temperature_warning_c:
            raise InvalidInput(f"{where}: temperature_critical_c is below temperature_warning_c")
        if made.disk_free_critical_pct > made.disk_free_warning_pct:
            raise InvalidInput(f"{where}: disk_free_critical_pct is above disk_free_warning_pct")
        return made

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["xid_ignore"] = list(self.xid_ignore)
        return doc


@dataclass
class Finding:
    check: str
    severity: str
    message: str
    gpu: int | None = None
    value: Any = None
    limit: Any = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class HostHealth:
    host: str
    status: str
    gpus: list[dict[str, Any]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    driver: str | None = None
    cuda: str | None = None
    gpus_expected: int = 0
    nvidia_smi: dict[str, Any] = field(default_factory=dict)
    xids: list[dict[str, Any]] = field(default_factory=list)
    nics: list[dict[str, Any]] = field(default_factory=list)
    disks: list[dict[str, Any]] = field(default_factory=list)
    thresholds: Thresholds = field(default_factory=Thresholds)

    @property
    def critical(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == CRITICAL]

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["findings"] = [f.to_dict() for f in self.findings]
        doc["thresholds"] = self.thresholds.to_dict()
        doc["gpu_count"] = len(self.gpus)
        return doc


def _maker(add: Callable[[Finding], None]) -> Callable[..., None]:
    """A finding maker for :mod:`gpuops.core.gpucheck` (which knows no Finding type)."""

    def make(
        check: str,
        severity: str,
        message: str,
        gpu: int | None = None,
        value: Any = None,
        limit: Any = None,
    ) -> None:
        add(Finding(check, severity, message, gpu, value, limit))

    return make


def worst(severities: list[str]) -> str:
    return max(severities, key=lambda s: _RANK.get(s, 0), default=OK)


def unreachable(host: str, message: str, expected: int, thresholds: Thresholds) -> HostHealth:
    return HostHealth(
        host=host,
        status=UNREACHABLE,
        findings=[Finding("unreachable", CRITICAL, message)],
        gpus_expected=expected,
        nvidia_smi={"rc": None, "failure": None, "message": ""},
        thresholds=thresholds,
    )


def evaluate(host: str, raw: gpuparse.RawHost, expected: int, t: Thresholds) -> HostHealth:
    """Readings and findings of one node from its parsed inspection output."""
    smi = raw.get("gpus")
    gpus, lost = gpuparse.parse_gpus(smi)
    failure = gpuparse.classify_smi(smi, lost)
    version = gpuparse.parse_version(raw.get("version"))
    health = HostHealth(
        host=host,
        status=OK,
        driver=version.get("driver") or next((g.get("driver_version") for g in gpus), None),
        cuda=version.get("cuda"),
        gpus_expected=expected,
        nvidia_smi={
            "rc": smi.rc,
            "failure": failure,
            "message": " / ".join(line.strip() for line in smi.lines[:2]) if failure else "",
        },
        thresholds=t,
    )
    add = health.findings.append
    if failure and failure != "gpu-lost":
        add(
            Finding(
                failure,
                CRITICAL,
                f"{gpuparse.SMI_FAILURES[failure]}: "
                f"{health.nvidia_smi['message'] or f'exit {smi.rc}'}",
                value=smi.rc,
            )
        )
    nvlinks = gpuparse.parse_nvlink(raw.get("nvlink"), raw.get("nvlink_errors"))
    events = [e for e in gpuparse.parse_kernel(raw.get("kernel")) if e.xid not in t.xid_ignore]
    by_bus = {xidlib.bus_key(str(g.get("pci.bus_id", ""))): g for g in gpus}
    for gpu in gpus:
        health.gpus.append(
            check_gpu(gpu, nvlinks.get(int(gpu.get("index") or 0)), events, t, _maker(add))
        )
    for item in lost:
        bus = xidlib.bus_key(item["bus_id"]) if item["bus_id"] else ""
        entry = {
            "index": None,
            "bus_id": item["bus_id"],
            "lost": True,
            "worst": CRITICAL,
            "findings": ["gpu-lost"],
            "xids": [e.to_dict() for e in events if e.bus == bus],
        }
        health.gpus.append(entry)
        add(Finding("gpu-lost", CRITICAL, f"GPU {item['bus_id'] or '?'}: {item['message']}"))
    listed = len(gpus) + len(lost)
    if (not failure or failure == "gpu-lost") and expected and listed < expected:
        add(
            Finding(
                "gpu-missing",
                CRITICAL,
                f"nvidia-smi lists {listed} GPUs, {expected} expected",
                value=listed,
                limit=expected,
            )
        )
    for event in events:
        if event.bus not in by_bus:  # a lost GPU's, or one nvidia-smi does not list
            xid_finding(event, None, _maker(add))
    health.xids = [e.to_dict() for e in events]
    health.nics = gpuparse.parse_netdev(raw.get("netdev"))
    for nic in health.nics:
        errors = sum(nic[k] for k in ("rx_errors", "rx_dropped", "tx_errors", "tx_dropped"))
        if errors > t.nic_errors_warning:
            add(
                Finding(
                    "nic-errors",
                    WARNING,
                    f"{nic['name']}: {errors} errors/drops since boot",
                    value=errors,
                    limit=t.nic_errors_warning,
                )
            )
    health.disks = gpuparse.parse_disk(raw.get("disk"))
    for disk in health.disks:
        free = disk["free_pct"]
        if free < t.disk_free_critical_pct:
            add(
                Finding(
                    "disk-free",
                    CRITICAL,
                    f"{disk['mount']}: {free}% free",
                    value=free,
                    limit=t.disk_free_critical_pct,
                )
            )
        elif free < t.disk_free_warning_pct:
            add(
                Finding(
                    "disk-free",
                    WARNING,
                    f"{disk['mount']}: {free}% free",
                    value=free,
                    limit=t.disk_free_warning_pct,
                )
            )
    for unchecked in gpuparse.parse_unchecked_mounts(raw.get("disk")):
        why = {
            "missing": "does not exist on the host",
            "df-failed": "df could not read it",
        }[unchecked["why"]]
        add(
            Finding(
                "disk-unchecked",
                WARNING,
                f"{unchecked['mount']}: {why}: its free space is not checked",
                value=unchecked["mount"],
            )
        )
    health.status = worst([f.severity for f in health.findings])
    return health
