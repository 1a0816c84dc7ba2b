"""Cheap decoding of Kubernetes API JSON (plain dicts) into :mod:`gpuops.core.kubemodel`.

The official client's model deserialisation costs more than the LIST itself on a large
cluster, so the adapter asks for raw JSON and these functions pick only the fields the
headroom logic needs. A malformed quantity raises :class:`~gpuops.errors.OperationFailed`
naming the object: a verdict must never be computed from data we could not read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpuops.core.kubemodel import (
    Container,
    Node,
    NodeSelectorTerm,
    Placement,
    Pod,
    Requirement,
    Taint,
    Toleration,
    pod_requests,
    resource_amount,
)
from gpuops.errors import OperationFailed

_EMPTY: Mapping[str, Any] = {}


#: Which resources to decode: ``None`` for all, else only these names (``headroom check``
#: needs its resource and ``pods``; skipping cpu/memory quantities cuts the decode ~3x).
Resources = frozenset[str] | None
#: A pod that carries no placement (``headroom check`` never reads it); frozen, so shared.
_NO_PLACEMENT = Placement()


def _amounts(
    resources: Mapping[str, Any] | None, what: str, keep: Resources = None
) -> dict[str, int]:
    out: dict[str, int] = {}
    if not resources:
        return out
    items: Iterable[tuple[str, Any]]
    if keep is None:
        items = resources.items()
    else:
        items = ((name, resources[name]) for name in keep if name in resources)
    for name, qty in items:
        try:
            out[name] = resource_amount(name, qty)
        except (TypeError, ValueError):
            raise OperationFailed(
                f"{what}: cannot read quantity {qty!r} of {name}",
                hint="the object in the API is not what Kubernetes writes; inspect it with kubectl",
            ) from None
    return out


def node_from_api(obj: Mapping[str, Any], *, resources: Resources = None) -> Node:
    """A node; with ``resources``, only those names in its allocatable and capacity."""
    meta = obj.get("metadata") or _EMPTY
    spec = obj.get("spec") or _EMPTY
    status = obj.get("status") or _EMPTY
    name = str(meta.get("name", ""))
    ready, reason = False, "no Ready condition"
    for cond in status.get("conditions") or ():
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
            reason = "" if ready else str(cond.get("reason") or f"Ready={cond.get('status')}")
    return Node(
        name=name,
        labels=dict(meta.get("labels") or _EMPTY),
        taints=tuple(
            Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect", "")))
            for t in spec.get("taints") or ()
        ),
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        not_ready_reason=reason,
        allocatable=_amounts(status.get("allocatable"), f"node {name}", resources),
        capacity=_amounts(status.get("capacity"), f"node {name}", resources),
    )


def _containers(items: Any, what: str, keep: Resources) -> list[Container]:
    """The containers' resource parts; those with nothing (of ``keep``) are left out, as they
    add nothing to :func:`pod_requests` (an empty init container's peak is the sidecars
    alone, which the main phase already counts)."""
    out = []
    for c in items or ():
        res = c.get("resources") or _EMPTY
        requests = _amounts(res.get("requests"), what, keep)
        limits = _amounts(res.get("limits"), what, keep)
        if requests or limits:
            out.append(
                Container(
                    requests=requests,
                    limits=limits,
                    restart_policy=str(c.get("restartPolicy") or ""),
                )
            )
    return out


def _requirements(items: Any) -> tuple[Requirement, ...]:
    return tuple(
        Requirement(str(r.get("key", "")), str(r.get("operator", "")), tuple(r.get("values") or ()))
        for r in items or ()
    )


def placement_from_spec(spec: Mapping[str, Any]) -> Placement:
    """Node selector, required node affinity and tolerations of a pod spec."""
    affinity = ((spec.get("affinity") or _EMPTY).get("nodeAffinity") or _EMPTY).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    terms = None
    if affinity is not None:
        terms = tuple(
            NodeSelectorTerm(
                _requirements(t.get("matchExpressions")), _requirements(t.get("matchFields"))
            )
            for t in affinity.get("nodeSelectorTerms") or ()
        )
    return Placement(
        node_selector=dict(spec.get("nodeSelector") or _EMPTY),
        affinity=terms,
        tolerations=tuple(
            Toleration(
                key=str(t.get("key") or ""),
                operator=str(t.get("operator") or "Equal"),
                value=str(t.get("value") or ""),
                effect=str(t.get("effect") or ""),
            )
            for t in spec.get("tolerations") or ()
        ),
    )


def pod_from_api(
    obj: Mapping[str, Any], *, with_placement: bool = False, resources: Resources = None
) -> Pod:
    """A pod; with ``resources``, its requests of only those names."""
    meta = obj.get("metadata") or _EMPTY
    spec = obj.get("spec") or _EMPTY
    ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    what = f"pod {ns}/{name}"
    owner = ""
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            owner = f"{ref.get('kind')}/{ref.get('name')}"
    containers = _containers(spec.get("containers"), what, resources)
    init_containers = _containers(spec.get("initContainers"), what, resources)
    overhead = _amounts(spec.get("overhead"), what, resources)
    requests = (
        pod_requests(containers, init_containers, overhead)
        if containers or init_containers or overhead
        else {}
    )
    return Pod(
        namespace=ns,
        name=name,
        node_name=str(spec.get("nodeName") or ""),
        phase=str((obj.get("status") or _EMPTY).get("phase") or "Pending"),
        requests=requests,
        placement=placement_from_spec(spec) if with_placement else _NO_PLACEMENT,
        owner=owner,
    )


def scheduled_condition(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(reason, message) of the pod's PodScheduled condition, empty strings if none."""
    for cond in (obj.get("status") or _EMPTY).get("conditions") or ():
        if cond.get("type") == "PodScheduled":
            return str(cond.get("reason") or ""), str(cond.get("message") or "")
    return "", ""


def label_selector(selector: Mapping[str, Any] | None) -> str:
    """A workload's ``spec.selector`` as a label-selector query string."""
    sel = selector or _EMPTY
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or _EMPTY).items())]
    for expr in sel.get("matchExpressions") or ():
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)
