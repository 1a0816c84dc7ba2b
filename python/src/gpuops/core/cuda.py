"""The CUDA-vs-driver gate: which NVIDIA driver an image's CUDA version needs, and whether each
node of a class has it (S-2, S-24, S-37). Pure: labels and versions in, verdicts out.

The minimums are NVIDIA's "CUDA toolkit and minimum driver version" table (CUDA release notes,
Table 3, as copied into shared/docs/NVIDIA_SMI.md). A driver at or above the table's minimum
for the image's exact CUDA release runs it fully. Below that, CUDA minor-version compatibility
still runs an image of the same major release on any driver of that major's floor or newer
(12.x on >= 525.60.13, 13.x on >= 580, 11.x on >= 450.80.02), without PTX JIT and the newest
features; ``strict`` turns that allowance off. Forward compatibility (the cuda-compat package
on data-centre GPUs) is not assumed: the gate stays on the safe side.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuops.core.values import shown
from gpuops.errors import InvalidInput

_VERSION = re.compile(r"^[0-9]{1,6}(?:\.[0-9]{1,6}){1,3}$")


@dataclass(frozen=True, order=True)
class Version:
    """A dotted numeric version, compared by its numbers; ``text`` keeps how it was written
    (``535.161.08`` stays ``08``)."""

    parts: tuple[int, ...]
    text: str = field(compare=False)

    @classmethod
    def parse(cls, text: str, what: str = "version") -> Version:
        if not isinstance(text, str) or not _VERSION.fullmatch(text):  # refused, never trimmed
            raise InvalidInput(f"{what} {shown(text)} is not a version like 12.2 or 535.161.08")
        return cls(tuple(int(p) for p in text.split(".")), text)

    def padded(self, n: int = 3) -> tuple[int, ...]:
        return (*self.parts, *([0] * (n - len(self.parts))))[:n]

    @property
    def major(self) -> int:
        return self.parts[0]

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class TableRow:
    cuda: tuple[int, int, int]
    label: str
    min_driver: str


#: NVIDIA's minimum Linux driver per CUDA toolkit release (NVIDIA_SMI.md, newest first).
MIN_DRIVER_TABLE: tuple[TableRow, ...] = (
    TableRow((13, 2, 0), "13.2 GA", "595.45.04"),
    TableRow((13, 1, 0), "13.1", "590.44.01"),
    TableRow((13, 0, 0), "13.0 GA", "580.65.06"),
    TableRow((12, 9, 0), "12.9 GA", "575.51.03"),
    TableRow((12, 8, 0), "12.8 GA", "570.26"),
    TableRow((12, 6, 0), "12.6 GA", "560.28.03"),
    TableRow((12, 5, 0), "12.5 GA", "555.42.02"),
    TableRow((12, 4, 1), "12.4 Update 1", "550.54.15"),
    TableRow((12, 4, 0), "12.4 GA", "550.54.14"),
    TableRow((12, 3, 0), "12.3 GA", "545.23.06"),
    TableRow((12, 2, 0), "12.2 GA", "535.54.03"),
    TableRow((12, 1, 0), "12.1", "530.30.02"),
    TableRow((12, 0, 0), "12.0 GA", "525.60.13"),
    TableRow((11, 8, 0), "11.8 GA", "520.61.05"),
)
#: The oldest driver that runs any release of a CUDA major under minor-version compatibility.
#: 12.x and 13.x: the .0 GA minimums of the table (NVIDIA_SMI.md: "12.x ... >= 525", "13.x
#: needs >= 580"); 11.x: 450.80.02, NVIDIA's exact figure for the doc's ">= 450".
MINOR_COMPAT_FLOOR: dict[int, str] = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}

#: Node labels that carry the driver version: S-30's operator label, then GPU feature
#: discovery's (current ``cuda.driver-version.*`` and the older ``cuda.driver.*``).
DRIVER_LABEL = "gpu-driver"
GFD_FULL = "nvidia.com/cuda.driver-version.full"
GFD_PARTS = (
    "nvidia.com/cuda.driver-version.major",
    "nvidia.com/cuda.driver-version.minor",
    "nvidia.com/cuda.driver-version.revision",
)
GFD_LEGACY_PARTS = (
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
)

#: Where NVIDIA's CUDA base images state their CUDA version (older images: the label; all:
#: the environment; NVIDIA_REQUIRE_CUDA as the last resort, major.minor only).
CUDA_LABEL = "com.nvidia.cuda.version"
CUDA_ENV = "CUDA_VERSION"
REQUIRE_ENV = "NVIDIA_REQUIRE_CUDA"
_REQUIRE = re.compile(r"(?:^|\s)cuda>=([0-9]+\.[0-9]+(?:\.[0-9]+)?)(?=\s|$)")


@dataclass(frozen=True)
class DeclaredCuda:
    """The CUDA version an image's config declares, where it was found, and, when a
    declaration is there but cannot be read, why (``version`` is then None): the gate refuses
    such an image, it does not take it for one that declares nothing."""

    version: Version | None
    source: str  # "label ...", "env ...", or "unknown" when nothing is declared
    problem: str = ""

    @property
    def unreadable(self) -> bool:
        return bool(self.problem)


def _declared(source: str, value: object) -> Version | str:
    """``value`` as a version, exactly as written (no whitespace, no suffix), or the problem."""
    if isinstance(value, str) and _VERSION.fullmatch(value) and value == value.strip():
        return Version.parse(value)
    return f"{source} {shown(value)} is not a CUDA version like 12.8 or 12.8.1"


def declared_cuda(labels: Mapping[str, object] | None, env: Iterable[str] | None) -> DeclaredCuda:
    """What the image declares: NVIDIA's label and ``CUDA_VERSION`` (each, when there, must
    read as a version; when both are there and disagree the newest is used, as it needs the
    newer driver), else ``NVIDIA_REQUIRE_CUDA``'s ``cuda>=``. (None, "unknown") when the image
    declares none (not an NVIDIA CUDA based image)."""
    env_map: dict[str, str] = {}
    for item in env or ():
        key, _, value = str(item).partition("=")
        env_map[key] = value
    found: list[tuple[str, Version]] = []
    declared: tuple[tuple[str, bool, object], ...] = (
        (f"label {CUDA_LABEL}", CUDA_LABEL in (labels or {}), (labels or {}).get(CUDA_LABEL)),
        (f"env {CUDA_ENV}", CUDA_ENV in env_map, env_map.get(CUDA_ENV)),
    )
    for source, present, raw in declared:
        if not present:
            continue
        read = _declared(source, raw)
        if isinstance(read, str):
            return DeclaredCuda(None, source, read)
        found.append((source, read))
    if found:
        source, newest = max(found, key=lambda f: f[1])
        others = [f"{s} says {v}" for s, v in found if v != newest]
        if others:
            source = f"{source} ({'; '.join(others)}; the newest is used)"
        return DeclaredCuda(newest, source)
    if REQUIRE_ENV in env_map:
        source = f"env {REQUIRE_ENV}"
        match = _REQUIRE.search(env_map[REQUIRE_ENV])
        if not match:
            return DeclaredCuda(
                None, source, f"{source} {shown(env_map[REQUIRE_ENV])} names no cuda>= version"
            )
        return DeclaredCuda(Version.parse(match.group(1)), source)
    return DeclaredCuda(None, "unknown")


@dataclass(frozen=True)
class Requirement:
    """What a CUDA version needs from the driver."""

    cuda: Version
    full_min: Version | None  # the table's minimum for this release (full compatibility)
    full_note: str  # which table row gave it, or why none did
    compat_min: Version | None  # the major's minor-version-compatibility floor

    def needed(self, strict: bool) -> Version | None:
        """The oldest driver the gate accepts."""
        if strict:
            return self.full_min
        return self.compat_min or self.full_min

    def to_dict(self) -> dict[str, Any]:
        return {
            "cuda": str(self.cuda),
            "full_min_driver": str(self.full_min) if self.full_min else None,
            "table_row": self.full_note,
            "minor_compat_min_driver": str(self.compat_min) if self.compat_min else None,
        }


def requirement(cuda: Version) -> Requirement:
    """The table's minimum for ``cuda`` (the latest row of the same major.minor at or below its
    patch level; for a release the table skips, the next newer row, to stay safe) and the
    major's minor-compatibility floor."""
    major, minor, patch = cuda.padded()
    floor_text = MINOR_COMPAT_FLOOR.get(major)
    floor = Version.parse(floor_text) if floor_text else None
    same = [r for r in MIN_DRIVER_TABLE if r.cuda[:2] == (major, minor) and r.cuda[2] <= patch]
    if same:
        row = max(same, key=lambda r: r.cuda)
        return Requirement(cuda, Version.parse(row.min_driver), row.label, floor)
    newer = [r for r in MIN_DRIVER_TABLE if r.cuda[0] == major and r.cuda[:2] > (major, minor)]
    if newer:
        row = min(newer, key=lambda r: r.cuda)
        note = f"CUDA {cuda} is not in the table: {row.label}'s minimum is used (the next newer)"
        return Requirement(cuda, Version.parse(row.min_driver), note, floor)
    return Requirement(
        cuda, None, f"CUDA {cuda} is not in NVIDIA's table (NVIDIA_SMI.md): no full minimum", floor
    )


@dataclass(frozen=True)
class NodeDriver:
    version: Version | None
    source: str  # which label(s) gave it
    note: str = ""  # labels that disagree or do not parse


def _parts_version(labels: Mapping[str, str], keys: Sequence[str]) -> str | None:
    values = [labels.get(k) for k in keys]
    if not all(values):
        return None
    return ".".join(str(v) for v in values)


def node_driver(labels: Mapping[str, str]) -> NodeDriver:
    """The node's driver version from its labels. When labels disagree the lowest is used (a
    gate must not trust the newer claim) and the disagreement is noted."""
    found: list[tuple[str, str]] = []
    if labels.get(DRIVER_LABEL):
        found.append((DRIVER_LABEL, labels[DRIVER_LABEL]))
    if labels.get(GFD_FULL):
        found.append((GFD_FULL, labels[GFD_FULL]))
    else:
        parts = _parts_version(labels, GFD_PARTS)
        if parts:
            found.append(("nvidia.com/cuda.driver-version.*", parts))
    legacy = _parts_version(labels, GFD_LEGACY_PARTS)
    if legacy:
        found.append(("nvidia.com/cuda.driver.*", legacy))
    valid: list[tuple[str, Version]] = []
    bad: list[str] = []
    for source, text in found:
        try:
            valid.append((source, Version.parse(text)))
        except InvalidInput:
            bad.append(f"{source}={shown(text)} is not a version")
    if not valid:
        return NodeDriver(None, "", "; ".join(bad) or "no driver label")
    lowest = min(v for _, v in valid)
    sources = [s for s, v in valid if v == lowest]
    notes = bad[:]
    if len({v for _, v in valid}) > 1:
        notes.append(
            "labels disagree (" + ", ".join(f"{s}={v}" for s, v in valid) + "); the lowest is used"
        )
    return NodeDriver(lowest, ", ".join(sources), "; ".join(notes))


#: Verdicts that keep an image off a node.
REFUSING = frozenset({"too-old", "no-driver", "unknown"})


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    driver: NodeDriver
    verdict: str  # ok, minor-compat, too-old, no-driver, unknown
    reason: str

    @property
    def refused(self) -> bool:
        return self.verdict in REFUSING

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "driver": str(self.driver.version) if self.driver.version else None,
            "driver_source": self.driver.source,
            "verdict": self.verdict,
            "reason": self.reason,
            **({"note": self.driver.note} if self.driver.note else {}),
        }


def node_verdict(
    node: str, labels: Mapping[str, str], req: Requirement, strict: bool
) -> NodeVerdict:
    driver = node_driver(labels)
    version, cuda = driver.version, req.cuda
    if version is None:
        return NodeVerdict(node, driver, "no-driver", f"{driver.note}: cannot check")
    if req.full_min is not None and version >= req.full_min:
        return NodeVerdict(
            node, driver, "ok", f"{version} >= {req.full_min} ({req.full_note}) for CUDA {cuda}"
        )
    if not strict and req.compat_min is not None and version >= req.compat_min:
        full = f"; full support needs {req.full_min}" if req.full_min else ""
        return NodeVerdict(
            node,
            driver,
            "minor-compat",
            f"{version} runs CUDA {cuda} under minor-version compatibility (>= {req.compat_min}"
            f" for {cuda.major}.x; no PTX JIT, not the newest features){full}",
        )
    needed = req.needed(strict)
    if needed is None:
        return NodeVerdict(node, driver, "unknown", req.full_note)
    return NodeVerdict(node, driver, "too-old", f"{version} < {needed} needed for CUDA {cuda}")


@dataclass(frozen=True)
class CompatResult:
    requirement: Requirement
    strict: bool
    nodes: tuple[NodeVerdict, ...]

    @property
    def ok(self) -> bool:
        return bool(self.nodes) and not self.offending

    @property
    def offending(self) -> tuple[NodeVerdict, ...]:
        return tuple(n for n in self.nodes if n.refused)

    @property
    def needed(self) -> Version | None:
        return self.requirement.needed(self.strict)

    def drivers(self) -> list[dict[str, Any]]:
        """The class's drivers, oldest first, with how many nodes run each and the verdict."""
        by: dict[str, list[NodeVerdict]] = {}
        for n in self.nodes:
            by.setdefault(str(n.driver.version) if n.driver.version else "none", []).append(n)

        def order(key: str) -> tuple[int, tuple[int, ...]]:
            return (0, ()) if key == "none" else (1, Version.parse(key).parts)

        return [
            {"driver": k, "nodes": len(v), "verdict": v[0].verdict}
            for k, v in sorted(by.items(), key=lambda kv: order(kv[0]))
        ]

    @property
    def message(self) -> str:
        cuda = self.requirement.cuda
        drivers = ", ".join(f"{d['driver']} ({d['nodes']})" for d in self.drivers())
        if self.ok:
            return (
                f"CUDA {cuda} runs on all {len(self.nodes)} node(s) of the class: drivers {drivers}"
            )
        bad = self.offending
        names = ", ".join(
            f"{n.node} ({n.driver.version or 'no driver label'})" for n in bad[:10]
        ) + (f" and {len(bad) - 10} more" if len(bad) > 10 else "")
        needed = f"driver >= {self.needed}" if self.needed else "a driver NVIDIA's table names"
        return (
            f"CUDA {cuda} needs {needed}: {len(bad)} of {len(self.nodes)} node(s) cannot run "
            f"it: {names}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "cuda_version": str(self.requirement.cuda),
            "strict": self.strict,
            "min_driver": str(self.needed) if self.needed else None,
            "requirement": self.requirement.to_dict(),
            "drivers": self.drivers(),
            "nodes": [n.to_dict() for n in self.nodes],
            "offending": [n.node for n in self.offending],
            "message": self.message,
        }


def check_class(
    nodes: Iterable[tuple[str, Mapping[str, str]]], cuda: Version, *, strict: bool = False
) -> CompatResult:
    """Every node's verdict for an image needing ``cuda``; nodes sorted by name."""
    req = requirement(cuda)
    verdicts = tuple(
        node_verdict(name, labels, req, strict)
        for name, labels in sorted(nodes, key=lambda n: n[0])
    )
    return CompatResult(req, strict, verdicts)
