"""Typed decoding of node and pod LIST pages: only the fields gpuops reads become objects.

A LIST page of pods is mostly what gpuops never reads (``managedFields``, statuses, images,
volumes). Parsing it whole into dicts and then picking fields (:mod:`.decode`) spends most
of a large cluster's ``headroom check`` in the parser; msgspec, given the shape of what we
read, validates the whole document but skips every other field without building it (~5x
less CPU on a page of pods). The items become the same :mod:`gpuops.core.kubemodel` objects
that :func:`.decode.node_from_api` and :func:`.decode.pod_from_api` build from the
same JSON (:mod:`.items`; a unit test holds the two together).

A page that is not JSON, or whose known fields have an unexpected type (an item that is not
an object, a name that is not a string, no ``items``), raises :class:`PageError`; the
adapter turns it into an :class:`~gpuops.errors.OperationFailed` naming the list: a verdict
is never computed from a page we could not read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec

from gpuops.adapters.kube.items import PageError, node_item, pod_item
from gpuops.adapters.kube.shape import Resources
from gpuops.core.kubemodel import Node, Pod

T = TypeVar("T")

# -- the shapes read (every other field is skipped) ---------------------------------------
# gc=False: these objects hold no cycles; the collector need not track them.


class _ListMeta(msgspec.Struct, gc=False):
    continue_: str | None = msgspec.field(default=None, name="continue")


class _Taint(msgspec.Struct, gc=False):
    key: str = ""
    value: str | None = None
    effect: str = ""


class _Condition(msgspec.Struct, gc=False):
    type: str | None = None
    status: str | None = None
    reason: str | None = None


class _NodeMeta(msgspec.Struct, gc=False):
    name: str = ""
    labels: dict[str, str] | None = None


class _NodeSpec(msgspec.Struct, gc=False):
    taints: list[_Taint] | None = None
    unschedulable: bool | None = None


class _NodeStatus(msgspec.Struct, gc=False):
    conditions: list[_Condition] | None = None
    allocatable: dict[str, Any] | None = None
    capacity: dict[str, Any] | None = None


class _Node(msgspec.Struct, gc=False):
    metadata: _NodeMeta | None = None
    spec: _NodeSpec | None = None
    status: _NodeStatus | None = None


class _Owner(msgspec.Struct, gc=False):
    kind: str = ""
    name: str = ""
    controller: bool | None = None


class _PodMeta(msgspec.Struct, gc=False):
    name: str = ""
    namespace: str = ""
    ownerReferences: list[_Owner] | None = None


class _Resources(msgspec.Struct, gc=False):
    requests: dict[str, Any] | None = None
    limits: dict[str, Any] | None = None


class _Container(msgspec.Struct, gc=False):
    resources: _Resources | None = None
    restartPolicy: str | None = None


class _PodSpec(msgspec.Struct, gc=False):
    nodeName: str | None = None
    containers: list[_Container] | None = None
    initContainers: list[_Container] | None = None
    overhead: dict[str, Any] | None = None


class _PodStatus(msgspec.Struct, gc=False):
    phase: str | None = None


class _Pod(msgspec.Struct, gc=False):
    metadata: _PodMeta | None = None
    spec: _PodSpec | None = None
    status: _PodStatus | None = None


ItemT = TypeVar("ItemT")


class _Page(msgspec.Struct, Generic[ItemT], gc=False):
    items: list[ItemT]  # required: a list answer without items is not read as "empty"
    metadata: _ListMeta | None = None


_NODE_PAGE = msgspec.json.Decoder(_Page[_Node])
_POD_PAGE = msgspec.json.Decoder(_Page[_Pod])
_NODE_ITEMS = msgspec.json.Decoder(list[_Node])
_POD_ITEMS = msgspec.json.Decoder(list[_Pod])


def _decode(decoder: msgspec.json.Decoder[_Page[Any]], raw: bytes) -> _Page[Any]:
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError:
        raise PageError(invalid=False) from None
    except msgspec.DecodeError:
        raise PageError(invalid=True) from None


# -- pages to model objects ------------------------------------------------------------------
def node_page(raw: bytes, resources: Resources = None) -> tuple[str, list[Node]]:
    """(the page's continue token, its nodes); see :func:`.decode.node_from_api`."""
    page = _decode(_NODE_PAGE, raw)
    return _token(page), [node_item(n, resources) for n in page.items]


def pod_page(raw: bytes, resources: Resources = None) -> tuple[str, list[Pod]]:
    """(the page's continue token, its pods); see :func:`.decode.pod_from_api`."""
    page = _decode(_POD_PAGE, raw)
    return _token(page), [pod_item(p, resources) for p in page.items]


def _token(page: _Page[Any]) -> str:
    return (page.metadata.continue_ if page.metadata else None) or ""


# -- a LIST body decoded while it arrives ----------------------------------------------------
#: The API server writes a list as {"kind":..,"apiVersion":..,"metadata":{..},"items":[..]}
#: (compact, items last) and every node or pod object starts with its metadata.
_ITEMS = b'"items":['
_BOUNDARY = b'},{"metadata":{'
_HEAD_MAX = 1 << 16


class ListReader(Generic[T]):
    """Decodes one LIST answer fed in pieces: whole items as soon as they are complete, so
    that a 100 MB list of pods never sits in memory at once (and is decoded while the API
    server still writes it).

    Items are cut at ``},{"metadata":{`` (never inside a string: there a quote is escaped).
    Should such a cut fall inside an item (a nested object that starts with metadata), the
    piece does not parse and is kept until a later cut closes it; the head is checked by
    decoding it with an empty item list. An answer of any other layout is decoded whole at
    its end. Errors are :class:`PageError`, as for :func:`node_page` and :func:`pod_page`.
    """

    def __init__(
        self,
        page: msgspec.json.Decoder[_Page[Any]],
        items: msgspec.json.Decoder[list[Any]],
        convert: Callable[[Any], T],
    ) -> None:
        self._page, self._items, self._convert = page, items, convert
        self._buf = bytearray()
        self._head = False  # the head ("items":[ and before) is read and checked
        self._whole = False  # not the layout above: decode the whole answer at its end
        self._scan = 0  # where the next cut may start
        self.token = ""  # the list's continue token, once the head is read

    @property
    def head_read(self) -> bool:
        """Whether the head has been read (and :attr:`token` is the list's)."""
        return self._head

    def feed(self, data: bytes) -> list[T]:
        """The items that ``data`` completes."""
        self._buf += data
        if self._whole or (not self._head and not self._read_head()):
            return []
        cut = self._buf.rfind(_BOUNDARY, self._scan)
        if cut < 0:
            self._scan = max(0, len(self._buf) - len(_BOUNDARY))
            return []
        try:
            items = self._items.decode(b"[" + self._buf[: cut + 1] + b"]")
        except msgspec.ValidationError:
            raise PageError(invalid=False) from None
        except msgspec.DecodeError:  # the cut fell inside an item: wait for a later one
            self._scan = cut + 1
            return []
        del self._buf[: cut + 2]  # the items and the comma after them
        self._scan = 0
        return [self._convert(i) for i in items]

    def end(self) -> list[T]:
        """The items left at the end of the answer."""
        if self._whole or not self._head:
            page = _decode(self._page, bytes(self._buf))
            self.token = _token(page)
            return [self._convert(i) for i in page.items]
        rest = bytes(self._buf).rstrip()
        if not rest.endswith(b"]}"):
            raise PageError(invalid=True)
        rest = rest[:-2].rstrip()
        if not rest:
            return []
        try:
            items = self._items.decode(b"[" + rest + b"]")
        except msgspec.ValidationError:
            raise PageError(invalid=False) from None
        except msgspec.DecodeError:
            raise PageError(invalid=True) from None
        return [self._convert(i) for i in items]

    def _read_head(self) -> bool:
        at = self._buf.find(_ITEMS, 0, _HEAD_MAX)
        if at < 0:
            self._whole = len(self._buf) > _HEAD_MAX
            return False
        end = at + len(_ITEMS)
        try:
            page = self._page.decode(self._buf[:end] + b"]}")
        except msgspec.ValidationError:
            raise PageError(invalid=False) from None
        except msgspec.DecodeError:
            self._whole = True
            return False
        self.token = _token(page)
        del self._buf[:end]
        self._head = True
        return True


def node_reader(resources: Resources = None) -> ListReader[Node]:
    """A :class:`ListReader` of nodes; see :func:`node_page`."""
    return ListReader(_NODE_PAGE, _NODE_ITEMS, lambda n: node_item(n, resources))


def pod_reader(resources: Resources = None) -> ListReader[Pod]:
    """A :class:`ListReader` of pods; see :func:`pod_page`."""
    return ListReader(_POD_PAGE, _POD_ITEMS, lambda p: pod_item(p, resources))
