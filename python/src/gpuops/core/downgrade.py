"""The downgrade gate's judgement: before a host's driver goes down, can every GPU workload of
its class still run on the target driver? Pure: driver changes, nodes and workloads in, a
verdict out.

- A host goes *down* when its driver after the run is numerically older than before
  (``535.161.08 < 550.90.07``); a host without a driver before is no downgrade, but one whose
  driver cannot be read (``DriverChange.before_known`` False) refuses.
- The *class* of a downgraded node is the nodes with the same ``accelerator`` label (the class
  label the compat gate and the node labels use): its workloads are the GPU pods running on
  any of them, since a drain moves them onto the class's other nodes and back. The target a
  class is judged against is the lowest driver any of its downgraded hosts goes to. A node
  without the label is a class of its own.
- A workload passes when the target is at least NVIDIA's full minimum for its image's CUDA
  (core/cuda.py :func:`~gpuops.core.cuda.requirement`). Minor-version compatibility is not
  assumed by default (``strict``): the workload runs today, and the downgrade must not take
  it to a driver that runs it only without PTX JIT and the newest features.
- Fail-closed: an image whose CUDA declaration cannot be read (registry unreachable, no such
  image, an unreadable label) refuses, as does a version gpuops cannot parse. An image that
  declares no CUDA version (not built on NVIDIA's CUDA images) passes, as the compat gate
  treats it: there is nothing to check it against.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuops.core.cuda import Version, requirement
from gpuops.core.nodestate import DriverChange
from gpuops.errors import InvalidInput

CLASS_LABEL = "accelerator"
OK, NO_CUDA, TOO_OLD, UNREADABLE, UNKNOWN = "ok", "no-cuda", "too-old", "unreadable", "unknown"
REFUSING = frozenset({TOO_OLD, UNREADABLE, UNKNOWN})


@dataclass(frozen=True)
class Workload:
    """One container of a GPU pod, with the CUDA version its image declares."""

    namespace: str
    pod: str
    node: str
    container: str
    image: str
    cuda: str | None  # the declared version; None: declares none (or cannot be read)
    cuda_source: str = ""
    problem: str = ""  # why the image's CUDA cannot be read: refused

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.pod}"


@dataclass(frozen=True)
class Target:
    """The driver a class is judged against, and the host that goes there."""

    host: str
    driver: Version


@dataclass(frozen=True)
class Judged:
    workload: Workload
    target: Target
    verdict: str  # ok, no-cuda, too-old, unreadable, unknown
    needed: Version | None
    reason: str

    @property
    def refused(self) -> bool:
        return self.verdict in REFUSING

    def to_dict(self) -> dict[str, Any]:
        w = self.workload
        return {
            "workload": w.key,
            "container": w.container,
            "node": w.node,
            "image": w.image,
            "cuda": w.cuda,
            "cuda_source": w.cuda_source,
            "needed_driver": str(self.needed) if self.needed else None,
            "target_driver": str(self.target.driver),
            "target_host": self.target.host,
            "verdict": self.verdict,
            "reason": self.reason,
        }


@dataclass
class DowngradeVerdict:
    """The gate's findings: which hosts go down, every workload judged, and what could not
    be judged at all (refused too)."""

    downgrades: list[DriverChange]
    judged: list[Judged] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    strict: bool = True

    @property
    def refused(self) -> list[Judged]:
        return [j for j in self.judged if j.refused]

    @property
    def ok(self) -> bool:
        return not self.refused and not self.problems

    @property
    def message(self) -> str:
        if not self.downgrades and not self.problems:
            return "no driver goes down: the downgrade gate does not apply"
        hosts = ", ".join(f"{c.host} {c.before} -> {c.after}" for c in self.downgrades)
        if self.ok:
            return (
                f"downgrade of {hosts}: all {len(self.judged)} GPU workload container(s) of the "
                "class can run on the target driver"
            )
        parts = [f"{p}" for p in self.problems]
        for j in self.refused[:20]:
            w = j.workload
            needed = f"needs driver >= {j.needed}" if j.needed else j.reason
            parts.append(
                f"{w.key} ({w.image}, CUDA {w.cuda or 'unreadable'}) {needed}, target "
                f"{j.target.driver} ({j.target.host})"
                + (f": {w.problem}" if j.verdict == UNREADABLE else "")
            )
        more = len(self.refused) - 20
        tail = f"; and {more} more" if more > 0 else ""
        return f"driver downgrade refused ({hosts or 'unjudged'}): " + "; ".join(parts) + tail

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "strict": self.strict,
            "downgrades": [
                {
                    "host": c.host,
                    "node": c.node,
                    "group": c.group,
                    "before": c.before,
                    "after": c.after,
                }
                for c in self.downgrades
            ],
            "workloads": [j.to_dict() for j in self.judged],
            "refused": sorted({j.workload.key for j in self.refused}),
            "problems": list(self.problems),
            "message": self.message,
        }


def downgrades(changes: Sequence[DriverChange]) -> tuple[list[DriverChange], list[str]]:
    """The changes whose driver goes down, and the ones that cannot be compared (refused:
    gpuops cannot tell they are no downgrade)."""
    down, problems = [], []
    for c in changes:
        if not c.before_known:
            problems.append(
                f"{c.host}: the driver it runs now cannot be read: cannot tell whether it goes down"
            )
            continue
        if c.before is None:
            continue
        try:
            before = Version.parse(c.before, f"{c.host}'s driver before")
            after = Version.parse(c.after, f"{c.host}'s target driver")
        except InvalidInput as exc:
            problems.append(f"{c.host}: {exc.message}: cannot tell whether it goes down")
            continue
        if after < before:
            down.append(c)
    return down, problems


def class_targets(
    down: Sequence[DriverChange], nodes: Mapping[str, Mapping[str, str]]
) -> dict[str, Target]:
    """Node -> the target its workloads are judged against: every node of a downgraded node's
    class (same :data:`CLASS_LABEL`), at the class's lowest target."""
    lowest: dict[str, Target] = {}  # class key -> target
    for c in down:
        if c.node is None:
            continue
        key = _class_of(c.node, nodes)
        target = Target(c.host, Version.parse(c.after))
        if key not in lowest or target.driver < lowest[key].driver:
            lowest[key] = target
    out = {name: lowest[k] for name in nodes if (k := _class_of(name, nodes)) in lowest}
    for c in down:  # a downgraded node the cluster does not list is still judged on its own
        if c.node is not None and c.node not in out:
            out[c.node] = lowest[_class_of(c.node, nodes)]
    return out


def _class_of(node: str, nodes: Mapping[str, Mapping[str, str]]) -> str:
    cls = (nodes.get(node) or {}).get(CLASS_LABEL)
    return f"{CLASS_LABEL}={cls}" if cls else f"node={node}"


def judge_one(w: Workload, target: Target, *, strict: bool = True) -> Judged:
    if w.problem:
        return Judged(w, target, UNREADABLE, None, w.problem)
    if w.cuda is None:
        return Judged(w, target, NO_CUDA, None, "the image declares no CUDA version")
    try:
        req = requirement(Version.parse(w.cuda, "CUDA version"))
    except InvalidInput as exc:
        return Judged(w, target, UNREADABLE, None, exc.message)
    needed = req.needed(strict)
    if needed is None:
        return Judged(w, target, UNKNOWN, None, f"no driver minimum known: {req.full_note}")
    if target.driver >= needed:
        return Judged(w, target, OK, needed, f"{target.driver} >= {needed} for CUDA {w.cuda}")
    return Judged(
        w, target, TOO_OLD, needed, f"{target.driver} < {needed} needed for CUDA {w.cuda}"
    )


def judge(
    changes: Sequence[DriverChange],
    nodes: Mapping[str, Mapping[str, str]],
    workloads: Sequence[Workload],
    *,
    strict: bool = True,
) -> DowngradeVerdict:
    """The verdict for ``workloads`` (those on the class nodes :func:`class_targets` names)."""
    down, problems = downgrades(changes)
    targets = class_targets(down, nodes)
    judged = [
        judge_one(w, targets[w.node], strict=strict)
        for w in sorted(workloads, key=lambda w: (w.namespace, w.pod, w.container))
        if w.node in targets
    ]
    return DowngradeVerdict(down, judged, problems, strict)
