"""Cheap decoding of Kubernetes API JSON (plain dicts) into :mod:`gpuops.core.kubemodel`.

The official client's model deserialisation costs more than the LIST itself on a large
cluster, so the adapter asks for raw JSON and these functions pick only the fields the
headroom logic needs. Anything that is not what Kubernetes writes (an object where a list
belongs, a number for a name, a malformed quantity) raises
:class:`~gpuops.errors.OperationFailed` naming the object and the field: a verdict must never be
computed from data we could not read, and a surprise from the server is never a crash.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuops.adapters.kube.shape import (
    EMPTY,
    HINT,
    Resources,
    amounts,
    obj,
    objects,
    shape_error,
    string_map,
    strings,
    text,
)
from gpuops.core.headroom import QuotaLimit
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

_EMPTY = EMPTY


#: A pod that carries no placement (``headroom check`` never reads it); frozen, so shared.
_NO_PLACEMENT = Placement()


def _meta(item: Any, kind: str) -> tuple[Mapping[str, Any], Mapping[str, Any], str]:
    """The object, its metadata and a name for messages (``node n1``, ``pod ns/p``)."""
    if not isinstance(item, dict):
        raise shape_error(f"a {kind}", "the object", item, "an object")
    meta = obj(item.get("metadata"), f"a {kind}", "metadata")
    name = meta.get("name")
    ns = meta.get("namespace")
    label = name if isinstance(name, str) else "?"
    if kind == "pod":
        label = f"{ns if isinstance(ns, str) else '?'}/{label}"
    what = f"{kind} {label}"
    text(name, what, "metadata.name")
    text(ns, what, "metadata.namespace")
    return item, meta, what


# -- fast paths -------------------------------------------------------------------------------
# A LIST of a large cluster has tens of thousands of objects: these decode what Kubernetes
# writes at the old speed, and hand anything else to the checked decoders below, which name
# what is wrong. Only a dict has .get(), so any other JSON value where an object belongs
# raises AttributeError here; falsy values and strings are checked explicitly.
_UNUSUAL = (AttributeError, TypeError, ValueError, OverflowError, KeyError)


def _d(value: Any) -> Mapping[str, Any]:
    if type(value) is dict:
        return value
    if value is None:
        return _EMPTY
    raise TypeError


def _l(value: Any) -> list[Any] | tuple[()]:
    if type(value) is list:
        return value
    if value is None:
        return ()
    raise TypeError


def _s(value: Any) -> str:
    if type(value) is str:
        return value
    if value is None:
        return ""
    raise TypeError


def _fast_amounts(resources: Any, keep: Resources) -> dict[str, int]:
    if resources is None:
        return {}
    values = _d(resources)
    if keep is None:
        return {name: resource_amount(name, qty) for name, qty in values.items()}
    return {name: resource_amount(name, values[name]) for name in keep if name in values}


def _fast_containers(items: Any, keep: Resources) -> list[Container]:
    out = []
    for c in _l(items):
        res = _d(c.get("resources"))
        requests = _fast_amounts(res.get("requests"), keep)
        limits = _fast_amounts(res.get("limits"), keep)
        if requests or limits:
            out.append(Container(requests, limits, _s(c.get("restartPolicy"))))
    return out


def _fast_pod(item: Any, with_placement: bool, resources: Resources) -> Pod:
    meta = _d(item.get("metadata"))
    spec = _d(item.get("spec"))
    owner = ""
    for ref in _l(meta.get("ownerReferences")):
        if ref.get("controller"):
            owner = f"{_s(ref.get('kind'))}/{_s(ref.get('name'))}"
    containers = _fast_containers(spec.get("containers"), resources)
    init_containers = _fast_containers(spec.get("initContainers"), resources)
    overhead = _fast_amounts(spec.get("overhead"), resources)
    return Pod(
        namespace=_s(meta.get("namespace")),
        name=_s(meta.get("name")),
        node_name=_s(spec.get("nodeName")),
        phase=_s(_d(item.get("status")).get("phase")) or "Pending",
        requests=(
            pod_requests(containers, init_containers, overhead)
            if containers or init_containers or overhead
            else {}
        ),
        placement=placement_from_spec(spec) if with_placement else _NO_PLACEMENT,
        owner=owner,
    )


def pod_from_api(
    item: Mapping[str, Any], *, with_placement: bool = False, resources: Resources = None
) -> Pod:
    """A pod; with ``resources``, its requests of only those names. Anything Kubernetes would
    not write raises :class:`~gpuops.errors.OperationFailed` naming the pod and the field."""
    if with_placement:  # single pods (explain): no need for speed
        return pod_from_api_checked(item, with_placement=True, resources=resources)
    try:
        return _fast_pod(item, False, resources)
    except _UNUSUAL:
        return pod_from_api_checked(item, with_placement=with_placement, resources=resources)


def _fast_node(item: Any, resources: Resources) -> Node:
    meta = _d(item.get("metadata"))
    spec = _d(item.get("spec"))
    status = _d(item.get("status"))
    ready, reason = False, "no Ready condition"
    for cond in _l(status.get("conditions")):
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
            reason = "" if ready else _s(cond.get("reason")) or f"Ready={_s(cond.get('status'))}"
    labels = _d(meta.get("labels"))
    for value in labels.values():
        if type(value) is not str:
            raise TypeError
    _s(meta.get("namespace"))
    return Node(
        name=_s(meta.get("name")),
        labels=dict(labels),
        taints=tuple(
            Taint(_s(t.get("key")), _s(t.get("value")), _s(t.get("effect")))
            for t in _l(spec.get("taints"))
        ),
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        not_ready_reason=reason,
        allocatable=_fast_amounts(status.get("allocatable"), resources),
        capacity=_fast_amounts(status.get("capacity"), resources),
    )


def node_from_api(item: Mapping[str, Any], *, resources: Resources = None) -> Node:
    """A node; with ``resources``, only those names in its allocatable and capacity. Anything
    Kubernetes would not write raises :class:`~gpuops.errors.OperationFailed`."""
    try:
        return _fast_node(item, resources)
    except _UNUSUAL:
        return node_from_api_checked(item, resources=resources)


# -- checked decoders: the same results, and precise errors ------------------------------------
def node_from_api_checked(item: Mapping[str, Any], *, resources: Resources = None) -> Node:
    """:func:`node_from_api`, checking every field it reads."""
    item, meta, what = _meta(item, "node")
    spec = obj(item.get("spec"), what, "spec")
    status = obj(item.get("status"), what, "status")
    ready, reason = False, "no Ready condition"
    for cond in objects(status.get("conditions"), what, "status.conditions"):
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
            reason = (
                ""
                if ready
                else text(cond.get("reason"), what, "Ready reason")
                or (f"Ready={text(cond.get('status'), what, 'Ready status')}")
            )
    return Node(
        name=text(meta.get("name"), what, "metadata.name"),
        labels=string_map(meta.get("labels"), what, "metadata.labels"),
        taints=tuple(
            Taint(
                text(t.get("key"), what, "taint key"),
                text(t.get("value"), what, "taint value"),
                text(t.get("effect"), what, "taint effect"),
            )
            for t in objects(spec.get("taints"), what, "spec.taints")
        ),
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        not_ready_reason=reason,
        allocatable=amounts(status.get("allocatable"), what, "status.allocatable", resources),
        capacity=amounts(status.get("capacity"), what, "status.capacity", resources),
    )


def _containers(items: Any, what: str, field: str, keep: Resources) -> list[Container]:
    """The containers' resource parts; those with nothing (of ``keep``) are left out, as they
    add nothing to :func:`pod_requests` (an empty init container's peak is the sidecars
    alone, which the main phase already counts)."""
    out = []
    for c in objects(items, what, field):
        res = obj(c.get("resources"), what, f"{field}[].resources")
        requests = amounts(res.get("requests"), what, f"{field}[].resources.requests", keep)
        limits = amounts(res.get("limits"), what, f"{field}[].resources.limits", keep)
        if requests or limits:
            out.append(
                Container(
                    requests=requests,
                    limits=limits,
                    restart_policy=text(c.get("restartPolicy"), what, "restartPolicy"),
                )
            )
    return out


def _requirements(items: Any, what: str, field: str) -> tuple[Requirement, ...]:
    return tuple(
        Requirement(
            text(r.get("key"), what, f"{field}[].key"),
            text(r.get("operator"), what, f"{field}[].operator"),
            strings(r.get("values"), what, f"{field}[].values"),
        )
        for r in objects(items, what, field)
    )


def placement_from_spec(spec: Mapping[str, Any], what: str = "pod") -> Placement:
    """Node selector, required node affinity and tolerations of a pod spec."""
    affinity = obj(spec.get("affinity"), what, "spec.affinity")
    node_affinity = obj(affinity.get("nodeAffinity"), what, "spec.affinity.nodeAffinity")
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = None
    if required is not None:
        field = "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        required = obj(required, what, field)
        terms = tuple(
            NodeSelectorTerm(
                _requirements(t.get("matchExpressions"), what, "matchExpressions"),
                _requirements(t.get("matchFields"), what, "matchFields"),
            )
            for t in objects(required.get("nodeSelectorTerms"), what, "nodeSelectorTerms")
        )
    return Placement(
        node_selector=string_map(spec.get("nodeSelector"), what, "spec.nodeSelector"),
        affinity=terms,
        tolerations=tuple(
            Toleration(
                key=text(t.get("key"), what, "toleration key"),
                operator=text(t.get("operator"), what, "toleration operator") or "Equal",
                value=text(t.get("value"), what, "toleration value"),
                effect=text(t.get("effect"), what, "toleration effect"),
            )
            for t in objects(spec.get("tolerations"), what, "spec.tolerations")
        ),
    )


def pod_from_api_checked(
    item: Mapping[str, Any], *, with_placement: bool = False, resources: Resources = None
) -> Pod:
    """:func:`pod_from_api`, checking every field it reads."""
    item, meta, what = _meta(item, "pod")
    spec = obj(item.get("spec"), what, "spec")
    owner = ""
    for ref in objects(meta.get("ownerReferences"), what, "metadata.ownerReferences"):
        if ref.get("controller"):
            kind = text(ref.get("kind"), what, "owner kind")
            owner = f"{kind}/{text(ref.get('name'), what, 'owner name')}"
    containers = _containers(spec.get("containers"), what, "spec.containers", resources)
    init_containers = _containers(
        spec.get("initContainers"), what, "spec.initContainers", resources
    )
    overhead = amounts(spec.get("overhead"), what, "spec.overhead", resources)
    requests = (
        pod_requests(containers, init_containers, overhead)
        if containers or init_containers or overhead
        else {}
    )
    status = obj(item.get("status"), what, "status")
    return Pod(
        namespace=text(meta.get("namespace"), what, "metadata.namespace"),
        name=text(meta.get("name"), what, "metadata.name"),
        node_name=text(spec.get("nodeName"), what, "spec.nodeName"),
        phase=text(status.get("phase"), what, "status.phase") or "Pending",
        requests=requests,
        placement=placement_from_spec(spec, what) if with_placement else _NO_PLACEMENT,
        owner=owner,
    )


def scheduled_condition(item: Mapping[str, Any]) -> tuple[str, str]:
    """(reason, message) of the pod's PodScheduled condition, empty strings if none."""
    item, _, what = _meta(item, "pod")
    status = obj(item.get("status"), what, "status")
    for cond in objects(status.get("conditions"), what, "status.conditions"):
        if cond.get("type") == "PodScheduled":
            return (
                text(cond.get("reason"), what, "PodScheduled reason"),
                text(cond.get("message"), what, "PodScheduled message"),
            )
    return "", ""


def created_at(item: Mapping[str, Any]) -> str:
    """The object's creationTimestamp (RFC 3339, so it sorts as text)."""
    _, meta, what = _meta(item, "pod")
    return text(meta.get("creationTimestamp"), what, "metadata.creationTimestamp")


def workload_selector(item: Mapping[str, Any], what: str) -> str:
    """A Deployment's or Job's ``spec.selector`` as a label-selector query string."""
    spec = obj(obj(item, what, "the object").get("spec"), what, "spec")
    return label_selector(spec.get("selector"), what)


def label_selector(selector: Any, what: str = "workload") -> str:
    """A workload's ``spec.selector`` as a label-selector query string."""
    sel = obj(selector, what, "spec.selector")
    labels = string_map(sel.get("matchLabels"), what, "spec.selector.matchLabels")
    parts = [f"{k}={v}" for k, v in sorted(labels.items())]
    for expr in objects(sel.get("matchExpressions"), what, "spec.selector.matchExpressions"):
        key = text(expr.get("key"), what, "selector key")
        op = text(expr.get("operator"), what, "selector operator")
        values = strings(expr.get("values"), what, "selector values")
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def quota_limits_from_api(doc: Any, namespace: str, resource: str) -> list[QuotaLimit]:
    """``requests.<resource>`` and ``pods`` limits of a ResourceQuota list. A list without
    ``items`` fails: no quota read is not the same as no quota."""
    what = f"list resourcequotas in {namespace}"
    if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
        raise OperationFailed(f"{what}: the answer has no items list", hint=HINT)
    out = []
    for q in objects(doc["items"], what, "items"):
        meta = obj(q.get("metadata"), what, "metadata")
        name = text(meta.get("name"), what, "metadata.name")
        quota = f"ResourceQuota {namespace}/{name}"
        status = obj(q.get("status"), quota, "status")
        hard = obj(status.get("hard"), quota, "status.hard") or obj(
            obj(q.get("spec"), quota, "spec").get("hard"), quota, "spec.hard"
        )
        used = obj(status.get("used"), quota, "status.used")
        for key in (f"requests.{resource}", "pods"):
            if key in hard:
                try:
                    out.append(
                        QuotaLimit(
                            name,
                            key,
                            resource_amount(key, hard[key]),
                            resource_amount(key, used.get(key, "0")),
                        )
                    )
                except (TypeError, ValueError, OverflowError):
                    raise OperationFailed(f"{quota}: cannot read {key}", hint=HINT) from None
    return out
