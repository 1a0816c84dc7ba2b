"""What a health check knows and says: the severities and their one ranking, a host's
thresholds, a finding, and a host's health (its readings and findings). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from gpuops.core.values import key_shown
from gpuops.errors import InvalidInput

OK, WARNING, CRITICAL = "ok", "warning", "critical"
#: A host's status when it could not be inspected at all (not a finding's severity).
UNREACHABLE = "unreachable"
#: The one severity ranking: a host's or a GPU's status is its worst finding.
RANK = {OK: 0, WARNING: 1, CRITICAL: 2}
#: Host-wide checks that say nothing about the GPUs; every other host-wide finding
#: (nvidia-smi failing, a reboot pending, a GPU missing, an Xid of an unlisted GPU) does.
HOST_ONLY_CHECKS = frozenset({"nic-errors", "disk-free", "disk-unchecked"})


def worst(severities: Iterable[str]) -> str:
    """The highest of ``severities`` by :data:`RANK` (``ok`` when there is none)."""
    return max(severities, key=lambda s: RANK.get(s, 0), default=OK)


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
    """One thing a check found: which check, how bad, what it says, and on which GPU."""

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
    """One node's readings (per GPU, NIC and disk) and findings; its status is the worst."""

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
