"""LIST items into model objects: the conversion the JSON pages (:mod:`.pages`, msgspec)
and the protobuf pages (:mod:`.proto`, upb) share, so that both give the same
:mod:`gpuops.core.kubemodel` objects; the reader protocol of a page and its error.

Neither msgspec nor protobuf is loaded here: a LIST answered in protobuf (what the API
server sends to gpuops) loads no JSON decoder, and one answered in JSON no protobuf.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, Protocol, TypeVar

from gpuops.adapters.kube.shape import Resources, amounts
from gpuops.core.kubemodel import Container, Node, Placement, Pod, Taint, pod_requests

T = TypeVar("T")
_NO_PLACEMENT = Placement()
#: An item's absent metadata, spec or status (a JSON item may lack one; a protobuf item
#: always has them): the fields read, with the defaults of the shapes in :mod:`.pages`.
_NO_NODE_META = SimpleNamespace(name="", labels=None)
_NO_NODE_SPEC = SimpleNamespace(taints=None, unschedulable=None)
_NO_NODE_STATUS = SimpleNamespace(conditions=None, allocatable=None, capacity=None)
_NO_POD_META = SimpleNamespace(name="", namespace="", ownerReferences=None)
_NO_POD_SPEC = SimpleNamespace(nodeName=None, containers=None, initContainers=None, overhead=None)


class PageReader(Protocol[T]):
    """Decodes one LIST answer fed in pieces (JSON: :class:`ListReader`; protobuf:
    :class:`.proto.ProtoListReader`)."""

    token: str  # the list's continue token, once the head is read

    @property
    def head_read(self) -> bool: ...

    def feed(self, data: bytes) -> list[T]: ...

    def end(self) -> list[T]: ...


class PageError(Exception):
    """A page that does not parse (``invalid``; ``encoding`` says as what) or is not of the
    expected shape."""

    def __init__(self, *, invalid: bool, encoding: str = "JSON") -> None:
        super().__init__(f"invalid {encoding}" if invalid else "unexpected shape")
        self.invalid, self.encoding = invalid, encoding


def _as_read(values: Any, _keep: Resources) -> Any:
    """Resource amounts as JSON has them (:func:`.shape.amounts` picks ``keep``)."""
    return values


#: How a decoded object's resource map (allocatable, requests, ...) becomes name -> quantity:
#: as read for JSON, from ``Quantity`` messages for protobuf (:mod:`.proto`).
Quantities = Callable[[Any, Resources], Any]


def node_item(n: Any, keep: Resources, quantities: Quantities = _as_read) -> Node:
    """A node from its decoded item (JSON or protobuf: the same field names)."""
    meta = n.metadata or _NO_NODE_META
    spec = n.spec or _NO_NODE_SPEC
    status = n.status or _NO_NODE_STATUS
    ready, reason = False, "no Ready condition"
    for cond in status.conditions or ():
        if cond.type == "Ready":
            ready = cond.status == "True"
            reason = "" if ready else str(cond.reason or f"Ready={cond.status or ''}")
    what = f"node {meta.name}"
    return Node(
        name=meta.name,
        labels=dict(meta.labels or ()),
        taints=tuple(Taint(t.key, t.value or "", t.effect) for t in spec.taints or ()),
        unschedulable=bool(spec.unschedulable),
        ready=ready,
        not_ready_reason=reason,
        allocatable=amounts(quantities(status.allocatable, keep), what, "status.allocatable", keep),
        capacity=amounts(quantities(status.capacity, keep), what, "status.capacity", keep),
    )


def _containers(items: Any, what: str, keep: Resources, quantities: Quantities) -> list[Container]:
    out = []
    for c in items or ():
        res = c.resources
        if res is None:
            continue
        requested, limited = quantities(res.requests, keep), quantities(res.limits, keep)
        if not requested and not limited:  # most containers of a large cluster: none we keep
            continue
        requests = amounts(requested, what, "resources.requests", keep)
        limits = amounts(limited, what, "resources.limits", keep)
        if requests or limits:
            out.append(Container(requests, limits, c.restartPolicy or ""))
    return out


def pod_item(p: Any, keep: Resources, quantities: Quantities = _as_read) -> Pod:
    """A pod from its decoded item (JSON or protobuf: the same field names)."""
    meta = p.metadata or _NO_POD_META
    spec = p.spec or _NO_POD_SPEC
    what = f"pod {meta.namespace}/{meta.name}"
    owner = ""
    for ref in meta.ownerReferences or ():
        if ref.controller:
            owner = f"{ref.kind}/{ref.name}"
    containers = _containers(spec.containers, what, keep, quantities)
    init_containers = _containers(spec.initContainers, what, keep, quantities)
    overhead = amounts(quantities(spec.overhead, keep), what, "spec.overhead", keep)
    return Pod(
        namespace=meta.namespace,
        name=meta.name,
        node_name=spec.nodeName or "",
        phase=(p.status.phase if p.status else None) or "Pending",
        requests=(
            pod_requests(containers, init_containers, overhead)
            if containers or init_containers or overhead
            else {}
        ),
        placement=_NO_PLACEMENT,
        owner=owner,
    )
