"""NVIDIA Xid events from a node's kernel log: what each common Xid means and what it needs.

The driver logs ``NVRM: Xid (PCI:0000:cb:00): 13, pid=..., name=..., <detail>`` (the form
leptonai/gpud and NVIDIA's Xid catalogue document); newer drivers also log a GPU that has
"fallen off the bus" without an Xid. :func:`parse` finds both in ``dmesg`` output; the
catalogue below says, for the Xids operators meet most, what happened, whether the GPU needs
a reset (or the node a reboot), and how severe it is. An Xid not in the catalogue is reported
as a warning with its number, never dropped. Pure: text in, events out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

WARNING = "warning"
CRITICAL = "critical"

#: action words: none (an application error), reset-gpu, reboot-node, hardware (RMA, reseat)
NONE, RESET_GPU, REBOOT_NODE, HARDWARE = "none", "reset-gpu", "reboot-node", "hardware"


@dataclass(frozen=True)
class XidInfo:
    xid: int
    name: str
    meaning: str
    action: str
    severity: str


_CATALOGUE: tuple[XidInfo, ...] = (
    XidInfo(
        8,
        "GPU stopped processing",
        "a channel timed out (driver or application)",
        RESET_GPU,
        WARNING,
    ),
    XidInfo(
        13,
        "Graphics engine exception",
        "usually the application (out-of-range access)",
        NONE,
        WARNING,
    ),
    XidInfo(
        31, "GPU memory page fault", "usually the application (illegal address)", NONE, WARNING
    ),
    XidInfo(43, "GPU stopped processing", "a channel was reset after a user error", NONE, WARNING),
    XidInfo(45, "Preemptive cleanup", "processes were killed after earlier errors", NONE, WARNING),
    XidInfo(48, "Double-bit ECC error", "an uncorrectable memory error (DBE)", RESET_GPU, CRITICAL),
    XidInfo(
        61,
        "Internal micro-controller breakpoint/warning",
        "GPU firmware fault",
        RESET_GPU,
        CRITICAL,
    ),
    XidInfo(62, "Internal micro-controller halt", "GPU firmware halted", RESET_GPU, CRITICAL),
    XidInfo(
        63,
        "Row remapping / page retirement recorded",
        "a memory row was marked for remapping; it takes effect after a GPU reset",
        RESET_GPU,
        WARNING,
    ),
    XidInfo(
        64,
        "Row remapping / page retirement failed",
        "the memory error could not be remapped",
        HARDWARE,
        CRITICAL,
    ),
    XidInfo(74, "NVLink error", "an NVLink fault; the link may be down", RESET_GPU, CRITICAL),
    XidInfo(
        79, "GPU has fallen off the bus", "the GPU is not reachable on PCIe", REBOOT_NODE, CRITICAL
    ),
    XidInfo(
        92,
        "High single-bit ECC error rate",
        "memory is ageing (S-16: catch it early)",
        RESET_GPU,
        WARNING,
    ),
    XidInfo(
        94,
        "Contained ECC error",
        "an uncorrectable error was contained to one application",
        RESET_GPU,
        WARNING,
    ),
    XidInfo(
        95,
        "Uncontained ECC error",
        "an uncorrectable error affected every process on the GPU",
        RESET_GPU,
        CRITICAL,
    ),
    XidInfo(
        109,
        "Context switch timeout",
        "a context could not be switched (driver or application)",
        RESET_GPU,
        WARNING,
    ),
    XidInfo(
        119, "GSP RPC timeout", "the GPU System Processor stopped answering", RESET_GPU, CRITICAL
    ),
    XidInfo(120, "GSP error", "the GPU System Processor reported an error", RESET_GPU, CRITICAL),
    XidInfo(
        140,
        "Unrecovered ECC error",
        "an ECC error the GPU could not recover from",
        RESET_GPU,
        CRITICAL,
    ),
)
CATALOGUE: dict[int, XidInfo] = {x.xid: x for x in _CATALOGUE}

_XID = re.compile(
    r"NVRM: Xid \(PCI:(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})[^)]*\): "
    r"(?P<xid>\d+),\s*(?P<rest>.*)$"
)
_FALLEN = re.compile(
    r"NVRM: The NVIDIA GPU (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})"
)
_STAMP = re.compile(r"^\[\s*(?P<t>\d+\.\d+)\]\s*")
_PID = re.compile(r"^pid=('[^']*'|\S+?),\s*(name=\S*?,\s*)?")


def info(xid: int) -> XidInfo:
    """What ``xid`` means; an Xid outside the catalogue is an unknown warning."""
    return CATALOGUE.get(
        xid,
        XidInfo(
            xid,
            f"Xid {xid}",
            "not in gpuops' catalogue: see NVIDIA's Xid documentation",
            RESET_GPU,
            WARNING,
        ),
    )


@dataclass(frozen=True)
class XidEvent:
    """One Xid line of the kernel log, tied to a PCI bus (``0000:cb:00``)."""

    xid: int
    bus: str
    detail: str
    uptime_s: float | None
    line: str

    @property
    def info(self) -> XidInfo:
        return info(self.xid)

    def to_dict(self) -> dict[str, Any]:
        i = self.info
        return {
            "xid": self.xid,
            "bus": self.bus,
            "name": i.name,
            "meaning": i.meaning,
            "action": i.action,
            "severity": i.severity,
            "needs_reset": i.action in (RESET_GPU, REBOOT_NODE),
            "detail": self.detail,
            "uptime_s": self.uptime_s,
            "line": self.line,
        }


def bus_key(bus_id: str) -> str:
    """A PCI address as the kernel log names it: ``00000000:CB:00.0`` -> ``0000:cb:00``."""
    text = bus_id.strip().lower()
    text = text.rsplit(".", 1)[0] if "." in text else text
    domain, _, rest = text.partition(":")
    return f"{domain[-4:]}:{rest}"


def parse(lines: Iterable[str]) -> list[XidEvent]:
    """Xid events in ``dmesg`` output; a GPU that "has fallen off the bus" without an Xid line
    (newer drivers log it over several lines) counts as Xid 79."""
    events: list[XidEvent] = []
    fallen_bus: tuple[str, float | None, str] | None = None
    for raw in lines:
        line = raw.rstrip("\n")
        stamp = _STAMP.match(line)
        uptime = float(stamp.group("t")) if stamp else None
        body = line[stamp.end() :] if stamp else line
        m = _XID.search(body)
        if m:
            detail = _PID.sub("", m.group("rest")).strip()
            bus = bus_key(m.group("bus"))
            events.append(XidEvent(int(m.group("xid")), bus, detail, uptime, line))
            continue
        f = _FALLEN.search(body)
        if f:
            fallen_bus = (bus_key(f.group("bus")), uptime, line)
        if fallen_bus and "fallen off the bus" in body:
            bus, when, first = fallen_bus
            if not any(e.xid == 79 and e.bus == bus for e in events):
                events.append(XidEvent(79, bus, "fallen off the bus (no Xid logged)", when, first))
            fallen_bus = None
    return events


def catalogue() -> list[dict[str, Any]]:
    """The catalogue as data (docs, reports)."""
    return [asdict(x) for x in _CATALOGUE]
