"""Parse what ``gpu-inspect.sh`` prints on a GPU node (the gpu_inspect role's script).

The script prints sections (``@@gpuops <name> rc=<status>`` and the command's output):
``gpus`` (``nvidia-smi --query-gpu=... --format=csv,nounits``: a header of canonical field
names, values without units, ``[N/A]`` for missing ones, and, for a GPU fallen off the bus,
"Unable to determine the device handle ... GPU is lost" in its place), ``nvlink`` and
``nvlink_errors`` (``nvidia-smi nvlink -s`` / ``-e``), ``version`` (``nvidia-smi --version``),
``kernel`` (the NVRM lines of ``dmesg``), ``netdev`` (``/proc/net/dev``) and ``disk``
(``df -P -k``). Shapes follow shared/docs/NVIDIA_SMI.md. Pure: text in, data out.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from typing import Any

from gpuops.core import xid as xidlib

SECTIONS = ("gpus", "nvlink", "nvlink_errors", "version", "kernel", "netdev", "disk")
_SECTION = re.compile(r"^@@gpuops (?P<name>[a-z_]+) rc=(?P<rc>-?\d+)$")
_MISSING = re.compile(r"^\[.*\]$|^N/A$")
_LOST = re.compile(
    r"Unable to determine the device handle for GPU ?(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
    r"[0-9A-Fa-f]{2}\.\d)?:? ?(?P<why>.*)$"
)
_GPU_HEAD = re.compile(r"^GPU (?P<i>\d+): ")
_LINK = re.compile(r"^\s*Link (?P<n>\d+): (?P<v>.*)$")
_LINK_ERR = re.compile(r"^\s*Link (?P<n>\d+): (?P<kind>Replay|Recovery|CRC) Errors: (?P<c>\d+)")
_TEXT = {"name", "uuid", "pci.bus_id", "driver_version", "pstate", "clocks_event_reasons.active"}


class ParseError(ValueError):
    """The script's output is not what it prints (truncated, or another program's)."""


@dataclass
class Section:
    rc: int
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass
class RawHost:
    """One node's inspection output, split into sections."""

    sections: dict[str, Section] = field(default_factory=dict)

    def get(self, name: str) -> Section:
        return self.sections.get(name) or Section(255, [])


def split_sections(output: str) -> RawHost:
    """Sections of the script's output; ParseError unless it ran to its end marker."""
    raw = RawHost()
    current: Section | None = None
    ended = False
    for line in output.splitlines():
        m = _SECTION.match(line)
        if m:
            current = Section(int(m.group("rc")), [])
            raw.sections[m.group("name")] = current
        elif line == "@@gpuops end":
            ended = True
            current = None
        elif current is not None:
            current.lines.append(line)
    missing = [s for s in SECTIONS if s not in raw.sections]
    if not ended or missing:
        what = f"sections {', '.join(missing)} missing" if missing else "no end marker"
        raise ParseError(f"the inspection output is incomplete ({what})")
    return raw


def value(text: str) -> Any:
    """A CSV value: None for [N/A] and friends, bool for Yes/No, else int/float/str."""
    text = text.strip()
    if _MISSING.match(text):
        return None
    if text in ("Yes", "No"):
        return text == "Yes"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _field(header: str) -> str:
    return header.strip().split(" [", 1)[0]


def parse_gpus(section: Section) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(one dict per listed GPU keyed by canonical field name, GPUs nvidia-smi lost)."""
    gpus: list[dict[str, Any]] = []
    lost: list[dict[str, str]] = []
    lines = [line for line in section.lines if line.strip()]
    header: list[str] | None = None
    for line in lines:
        m = _LOST.search(line)
        if m:
            lost.append({"bus_id": (m.group("bus") or "").lower(), "message": line.strip()})
            continue
        row = next(csv.reader([line], skipinitialspace=True))
        if header is None:
            if row and _field(row[0]) == "index":
                header = [_field(h) for h in row]
            continue
        if len(row) != len(header):
            continue  # an error line of nvidia-smi's among the rows: the rc says more
        gpus.append(
            {
                name: raw.strip() if name in _TEXT else value(raw)
                for name, raw in zip(header, row, strict=True)
            }
        )
    return gpus, lost


def parse_nvlink(status: Section, errors: Section) -> dict[int, dict[str, Any]]:
    """Per GPU index: links (count), inactive (link numbers), errors per link, supported."""
    out: dict[int, dict[str, Any]] = {}
    gpu: int | None = None
    for line in status.lines:
        head = _GPU_HEAD.match(line)
        if head:
            gpu = int(head.group("i"))
            out[gpu] = {"supported": True, "links": 0, "inactive": [], "errors": {}}
            continue
        if gpu is None:
            continue
        if "does not have or support Nvlink" in line or "not supported" in line:
            out[gpu]["supported"] = False
            continue
        m = _LINK.match(line)
        if m:
            out[gpu]["links"] += 1
            if "inactive" in m.group("v"):
                out[gpu]["inactive"].append(int(m.group("n")))
    gpu = None
    for line in errors.lines:
        head = _GPU_HEAD.match(line)
        if head:
            gpu = int(head.group("i"))
            continue
        m = _LINK_ERR.match(line)
        if m and gpu is not None and gpu in out:
            counts = out[gpu]["errors"].setdefault(
                m.group("n"), {"replay": 0, "recovery": 0, "crc": 0}
            )
            counts[m.group("kind").lower()] = int(m.group("c"))
    return out


def parse_version(section: Section) -> dict[str, str]:
    """``nvidia-smi --version``: driver and CUDA versions (empty when it failed)."""
    found: dict[str, str] = {}
    for line in section.lines:
        key, sep, val = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        if key == "driver version":
            found["driver"] = val.strip()
        elif key == "cuda version":
            found["cuda"] = val.strip()
    return found


def parse_kernel(section: Section) -> list[xidlib.XidEvent]:
    return xidlib.parse(section.lines)


def parse_netdev(section: Section) -> list[dict[str, Any]]:
    """``/proc/net/dev``: error and drop counters per interface (loopback left out)."""
    nics = []
    for line in section.lines:
        name, sep, rest = line.partition(":")
        fields = rest.split()
        if not sep or len(fields) < 16 or not fields[0].isdigit():
            continue
        name = name.strip()
        if name == "lo":
            continue
        nums = [int(f) for f in fields[:16]]
        nics.append(
            {
                "name": name,
                "rx_errors": nums[2],
                "rx_dropped": nums[3],
                "tx_errors": nums[10],
                "tx_dropped": nums[11],
            }
        )
    return nics


def parse_disk(section: Section) -> list[dict[str, Any]]:
    """``df -P -k``: size, available and free share per mount point."""
    disks = []
    for line in section.lines[1:]:
        parts = line.split()
        if len(parts) < 6 or not parts[1].isdigit() or not parts[3].isdigit():
            continue
        size, avail = int(parts[1]), int(parts[3])
        disks.append(
            {
                "mount": " ".join(parts[5:]),
                "size_kib": size,
                "available_kib": avail,
                "free_pct": round(100.0 * avail / size, 1) if size else 0.0,
            }
        )
    return disks


_UNCHECKED = re.compile(r"^@@unchecked (?P<why>missing|df-failed) (?P<mount>.+)$")


def parse_unchecked_mounts(section: Section) -> list[dict[str, str]]:
    """Mounts the script could not check (``@@unchecked missing|df-failed PATH``): a path
    that does not exist on the host, or one df could not read."""
    found = []
    for line in section.lines:
        m = _UNCHECKED.match(line)
        if m:
            found.append({"mount": m.group("mount"), "why": m.group("why")})
    return found


#: nvidia-smi's own failures (NVIDIA_SMI.md), by what it printed and its exit status
SMI_FAILURES: dict[str, str] = {
    "driver-not-loaded": "the NVIDIA driver is not loaded (nvidia-smi cannot talk to it)",
    "reboot-pending": "Driver/library version mismatch: an installed driver waits for a reboot",
    "gpu-lost": "a GPU has fallen off the bus (GPU is lost: reboot to recover it)",
    "nvidia-smi-missing": "nvidia-smi is not installed",
    "timeout": "nvidia-smi hung and was stopped",
    "failed": "nvidia-smi failed",
}


def classify_smi(section: Section, lost: list[dict[str, str]]) -> str | None:
    """Which of :data:`SMI_FAILURES` the ``gpus`` section shows, None when it worked."""
    text = section.text
    if section.rc == 18 or "Driver/library version mismatch" in text:
        return "reboot-pending"
    if section.rc == 9 or "couldn't communicate with the NVIDIA driver" in text:
        return "driver-not-loaded"
    if lost or section.rc == 15:
        return "gpu-lost"
    if section.rc == 127:
        return "nvidia-smi-missing"
    if section.rc == 124:
        return "timeout"
    if section.rc != 0:
        return "failed"
    return None
