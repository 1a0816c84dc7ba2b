"""GPU facts as node labels (S-30, NVIDIA GPU Feature Discovery's names) and health as taints.

Labels: ``accelerator`` and ``gpu-driver`` (the seed's), GFD's ``nvidia.com/gpu.product``,
``nvidia.com/gpu.memory``, ``nvidia.com/gpu.count``, ``nvidia.com/cuda.driver.major/minor/rev``
and ``nvidia.com/cuda.runtime.major/minor``, and ``rack`` from the inventory. Taints: a host
whose new driver waits for a reboot, or with a critical finding, gets one by policy; the
unhealthy one is claimed as setter ``nodes-inspect`` and released only for that setter
(core/taintclaims.py), so a taint another setter holds stays.

gpuops owns what it set: the node annotation :data:`OWNED` lists those label keys, so a later
run removes a stale one (a label it set that no longer applies) and never touches another
tool's. The annotation only narrows: whatever a node says there (a kubelet can write its own
node), gpuops removes labels of :data:`MANAGED_LABELS`, its own fixed list, and no other. A
fact that cannot be read now (nvidia-smi failed) keeps its label as it is. The label values
that come from the inventory (:data:`INVENTORY_LABELS`) are checked before any node is
touched. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuops.core import kubeinput, taintclaims
from gpuops.core.gpuhealth import CRITICAL, HostHealth
from gpuops.core.inventory import Inventory
from gpuops.core.kubemodel import Taint
from gpuops.core.values import json_kind, shown
from gpuops.errors import InvalidInput, OperationFailed

OWNED = "gpuops.io/labels"
TAINT_REBOOT = "gpuops.io/reboot-pending"
TAINT_UNHEALTHY = taintclaims.TAINT  # held by setters with reasons: core/taintclaims.py
#: the setter name ``nodes label`` (inspection) claims the unhealthy taint under
INSPECT_SETTER = "nodes-inspect"
TAINT_KEYS = (TAINT_REBOOT, TAINT_UNHEALTHY)
TAINT_EFFECTS = ("NoSchedule", "NoExecute", "none")
RACK = "rack"
#: labels that come from nvidia-smi (kept as they are when it cannot be read)
FACT_LABELS = (
    "accelerator",
    "gpu-driver",
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.memory",
    "nvidia.com/gpu.count",
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
    "nvidia.com/cuda.runtime.major",
    "nvidia.com/cuda.runtime.minor",
)
#: Every label gpuops sets, declared once: the only labels it ever removes.
MANAGED_LABELS: frozenset[str] = frozenset((RACK, *FACT_LABELS))
#: Inventory variables whose values become labels as they are written: variable -> label.
INVENTORY_LABELS: dict[str, str] = {"rack": RACK, "gpu_nodes_accelerator": "accelerator"}
_BAD = re.compile(r"[^A-Za-z0-9_.-]+")


def check_inventory_labels(inv: Inventory) -> None:
    """Each host's label values from the inventory are valid label values (strings: YAML's
    ``rack: 01`` is the number 1), before any node is touched; an error names host and
    variable."""
    for host in inv.hosts:
        for var in INVENTORY_LABELS:
            value = host.vars.get(var)
            if value is None or value == "":
                continue
            where = f"inventory {inv.path}: host {host.name} (group {host.group}): {var}"
            if not isinstance(value, str):
                raise InvalidInput(
                    f"{where} {shown(value)} is a JSON {json_kind(value)}, not a string",
                    hint=f'quote it in the inventory ({var}: "...")',
                    field="inventory",
                )
            try:
                kubeinput.label_value(value, where)
            except InvalidInput as exc:
                raise InvalidInput(exc.message, field="inventory") from None


def owned_labels(annotations: Mapping[str, str], node: str) -> set[str]:
    """The label keys the node's :data:`OWNED` annotation lists, decoded strictly (as gpuops
    writes it: label keys joined by ','); a malformed one is an operation failure naming the
    node (what the cluster holds, not the user's input)."""
    if OWNED not in annotations:
        return set()
    text = annotations[OWNED]
    keys: list[Any] = text.split(",") if isinstance(text, str) else [text]
    for key in keys:
        try:
            kubeinput.qualified_name(key, "key")
        except InvalidInput:
            raise OperationFailed(
                f"node {node}: annotation {OWNED} {shown(text)} is not a list of label keys "
                "joined by ','",
                hint=f"remove it (kubectl annotate node {node} {OWNED}-): gpuops then removes "
                "none of its labels, and records them again on its next run",
            ) from None
    return {str(k) for k in keys}


def label_value(text: str) -> str:
    """A valid label value (as GFD makes them): other characters become '-', 63 at most,
    alphanumeric at both ends."""
    value = _BAD.sub("-", text.strip())[:63]
    return value.strip("-_.")


def accelerator(name: str) -> str:
    """``NVIDIA A100-SXM4-80GB`` -> ``nvidia-a100-sxm4-80gb`` (when the inventory sets none)."""
    return label_value(name.lower().replace(" ", "-"))


def desired_labels(
    health: HostHealth, *, rack: str = "", accelerator_name: str = ""
) -> tuple[dict[str, str], set[str]]:
    """(labels this host should carry, fact labels that cannot be known now)."""
    labels: dict[str, str] = {}
    if rack:  # as the inventory writes it: checked by check_inventory_labels, not mended
        labels[RACK] = rack
    gpus = [g for g in health.gpus if not g.get("lost")]
    failed = health.nvidia_smi.get("failure") not in (None, "gpu-lost")
    if failed or not gpus:
        return labels, set(FACT_LABELS)
    first = gpus[0]
    product = str(first.get("name") or "")
    labels["nvidia.com/gpu.product"] = label_value(product.replace(" ", "-"))
    labels["accelerator"] = accelerator_name or accelerator(product)
    if first.get("memory_total_mib") is not None:
        labels["nvidia.com/gpu.memory"] = str(first["memory_total_mib"])
    labels["nvidia.com/gpu.count"] = str(len(gpus))
    unknown: set[str] = set()
    if health.driver:
        labels["gpu-driver"] = label_value(health.driver)
        parts = health.driver.split(".")
        for key, part in zip(("major", "minor", "rev"), parts, strict=False):
            labels[f"nvidia.com/cuda.driver.{key}"] = label_value(part)
    else:
        unknown |= {
            "gpu-driver",
            *(f"nvidia.com/cuda.driver.{k}" for k in ("major", "minor", "rev")),
        }
    if health.cuda:
        major, _, minor = health.cuda.partition(".")
        labels["nvidia.com/cuda.runtime.major"] = label_value(major)
        labels["nvidia.com/cuda.runtime.minor"] = label_value(minor or "0")
    else:
        unknown |= {"nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor"}
    return labels, unknown


def desired_taints(health: HostHealth, effect: str) -> list[Taint]:
    """The taints gpuops wants on this host's node (none with effect ``none``)."""
    if effect == "none":
        return []
    taints = []  # the unhealthy taint is claimed through core/taintclaims.py by plan_node
    if health.nvidia_smi.get("failure") == "reboot-pending":
        taints.append(Taint(TAINT_REBOOT, "true", effect))
    critical = [f.check for f in health.findings if f.severity == CRITICAL]
    others = [c for c in critical if c != "reboot-pending"]
    if others:
        taints.append(Taint(TAINT_UNHEALTHY, label_value(others[0]), effect))
    return taints


def unhealthy_reason(health: HostHealth) -> str:
    """Inspection's reason for the unhealthy taint: its critical checks and the GPUs (not a
    pending reboot, which has its own taint; no measured values, so a second run with the
    same findings writes nothing)."""
    found = sorted(
        {
            f.check + (f" (GPU {f.gpu})" if f.gpu is not None else "")
            for f in health.findings
            if f.severity == CRITICAL and f.check != "reboot-pending"
        }
    )
    return "nodes inspect: critical " + ", ".join(found) if found else ""


@dataclass
class NodeChange:
    """What to change on one node; empty when it already matches."""

    node: str
    set_labels: dict[str, str] = field(default_factory=dict)
    remove_labels: list[str] = field(default_factory=list)
    owned: list[str] = field(default_factory=list)
    owned_changed: bool = False
    taints: list[Taint] | None = None  # the node's full new taint list, None: unchanged
    taints_added: list[str] = field(default_factory=list)
    taints_removed: list[str] = field(default_factory=list)
    #: the unhealthy taint's claims after the change (setter -> reason), None: unchanged
    unhealthy_by: dict[str, str] | None = None
    #: the annotation's new text (None: removed) when ``unhealthy_by`` is not None
    unhealthy_annotation: str | None = None

    @property
    def changed(self) -> bool:
        return bool(
            self.set_labels
            or self.remove_labels
            or self.owned_changed
            or self.taints is not None
            or self.unhealthy_by is not None
        )

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        del doc["unhealthy_annotation"]  # the document shows the claims (unhealthy_by)
        doc["taints"] = None if self.taints is None else [str(t) for t in self.taints]
        doc["changed"] = self.changed
        return doc


def plan_node(
    node: str,
    current_labels: Mapping[str, str],
    current_annotations: Mapping[str, str],
    current_taints: Sequence[Taint],
    labels: Mapping[str, str],
    unknown: set[str],
    taints: Sequence[Taint],
    *,
    manage_taints: bool = True,
    unhealthy_reason: str = "",
) -> NodeChange:
    """The change from what the node has to what it should have; idempotent. The unhealthy
    taint in ``taints`` is claimed as :data:`INSPECT_SETTER` (for ``unhealthy_reason``), and
    without it inspection releases only its own claim: a taint another setter holds, or one
    set without a claim, stays."""
    recorded = owned_labels(current_annotations, node)
    owned = recorded & MANAGED_LABELS  # the annotation never widens what gpuops removes
    change = NodeChange(node)
    change.set_labels = {k: v for k, v in labels.items() if current_labels.get(k) != v}
    stale = sorted((owned - set(labels) - unknown) & set(current_labels))
    change.remove_labels = stale
    new_owned = sorted(set(labels) | (owned & unknown & set(current_labels)))
    change.owned = new_owned
    change.owned_changed = set(new_owned) != recorded
    if manage_taints:
        reboot = [t for t in taints if t.key == TAINT_REBOOT]
        mine = {(t.key, t.value, t.effect) for t in current_taints if t.key == TAINT_REBOOT}
        want = {(t.key, t.value, t.effect) for t in reboot}
        after = list(current_taints)
        if mine != want:
            after = [t for t in current_taints if t.key != TAINT_REBOOT] + reboot
        unhealthy = [t for t in taints if t.key == TAINT_UNHEALTHY]
        plan = (
            taintclaims.plan_mark(
                after,
                current_annotations,
                INSPECT_SETTER,
                unhealthy_reason or unhealthy[0].value,
                effect=unhealthy[0].effect,
                value=unhealthy[0].value,
            )
            if unhealthy
            else taintclaims.plan_release(after, current_annotations, INSPECT_SETTER)
        )
        before = {(t.key, t.value, t.effect) for t in current_taints}
        final = {(t.key, t.value, t.effect) for t in plan.taints}
        if before != final or len(plan.taints) != len(current_taints):
            change.taints = plan.taints
            change.taints_added = sorted(str(Taint(*w)) for w in final - before)
            change.taints_removed = sorted(str(Taint(*m)) for m in before - final)
        if plan.annotation != current_annotations.get(taintclaims.ANNOTATION):
            change.unhealthy_by = plan.claims
            change.unhealthy_annotation = plan.annotation
    return change
