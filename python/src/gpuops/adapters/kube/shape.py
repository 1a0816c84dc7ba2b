"""Checks of the shape of Kubernetes API JSON: an object where an object belongs, a list,
a string. A value of another shape raises :class:`~gpuops.errors.OperationFailed` naming the
object and the field (never its value, which may be anything): an answer that is not what
Kubernetes writes fails the operation, it is never read as empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpuops.core.kubemodel import resource_amount
from gpuops.errors import OperationFailed

EMPTY: Mapping[str, Any] = {}
HINT = (
    "the API server (or a proxy in front of it) sent what Kubernetes does not write; "
    "inspect the object with kubectl get -o json"
)
#: Which resources to decode: ``None`` for all, else only these names.
Resources = frozenset[str] | None


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a JSON boolean"
    if isinstance(value, int):
        return "a JSON integer"
    if isinstance(value, float):
        return "a JSON number"
    if isinstance(value, str):
        return "a JSON string"
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, dict):
        return "a JSON object"
    return "JSON null" if value is None else type(value).__name__


def shape_error(what: str, field: str, value: Any, expected: str) -> OperationFailed:
    return OperationFailed(f"{what}: {field} is {_kind(value)}, not {expected}", hint=HINT)


def obj(value: Any, what: str, field: str) -> Mapping[str, Any]:
    """An object field (absent or null: empty)."""
    if isinstance(value, dict):
        return value
    if value is None:
        return EMPTY
    raise shape_error(what, field, value, "an object")


def arr(value: Any, what: str, field: str) -> list[Any]:
    """A list field (absent or null: empty)."""
    if isinstance(value, list):
        return value
    if value is None:
        return []
    raise shape_error(what, field, value, "a list")


def text(value: Any, what: str, field: str) -> str:
    """A string field (absent or null: empty)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    raise shape_error(what, field, value, "a string")


def objects(value: Any, what: str, field: str) -> Iterable[Mapping[str, Any]]:
    for i, item in enumerate(arr(value, what, field)):
        yield obj(item, what, f"{field}[{i}]")


def strings(value: Any, what: str, field: str) -> tuple[str, ...]:
    return tuple(text(v, what, f"{field}[{i}]") for i, v in enumerate(arr(value, what, field)))


def string_map(value: Any, what: str, field: str) -> dict[str, str]:
    """Labels, a nodeSelector: strings to strings."""
    out = dict(obj(value, what, field))
    for key, val in out.items():
        if not isinstance(val, str):
            raise shape_error(what, f"{field}[{key!r}]", val, "a string")
    return out


def amounts(resources: Any, what: str, field: str, keep: Resources = None) -> dict[str, int]:
    out: dict[str, int] = {}
    if resources is None:
        return out
    values = obj(resources, what, field)
    items: Iterable[tuple[str, Any]]
    if keep is None:
        items = values.items()
    else:
        items = ((name, values[name]) for name in keep if name in values)
    for name, qty in items:
        try:
            out[name] = resource_amount(name, qty)
        except (TypeError, ValueError, OverflowError):
            raise OperationFailed(
                f"{what}: cannot read quantity {str(qty)[:40]!r} of {name}", hint=HINT
            ) from None
    return out


def page_items(doc: Any, where: str) -> list[Mapping[str, Any]]:
    """The items of one LIST page: a list object whose ``items`` is a list of objects. A page
    without ``items`` fails: a list that could not be read is never an empty cluster."""
    if not isinstance(doc, dict):
        raise OperationFailed(f"{where}: the answer is not a list object", hint=HINT)
    meta = doc.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise OperationFailed(f"{where}: the list's metadata is not a JSON object", hint=HINT)
    items = doc.get("items")
    if not isinstance(items, list):
        raise OperationFailed(
            f"{where}: the answer has no items list; refusing to go on as if the list were empty",
            hint="is the server a Kubernetes API server (not a proxy's error page)?",
        )
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise OperationFailed(f"{where}: item {i} is {_kind(item)}, not an object", hint=HINT)
    return items
