"""JSON Schema (draft 2020-12) of the documents gpuops writes, generated from Python types.

A command's result is a typed object whose ``to_dict`` makes the ``result`` of its documents.
:func:`document_schema` turns that type into a schema:

- a ``to_dict`` annotated to return a ``TypedDict`` (the document's shape, declared next to the
  ``to_dict`` that builds it and checked against it by mypy): that ``TypedDict``; a union of
  ``TypedDict``s (a result of two shapes): any one of them;
- a class with ``__json_schema__()``: what it returns (a shape types cannot say);
- a dataclass whose ``to_dict`` keeps its fields' names: its fields (a field with a default
  may be left out of the document).

Inside a ``TypedDict``: ``str`` (a ``StrEnum``: its words), ``int``, ``float``, ``bool``,
``None``, ``Literal``, unions, ``list``/``tuple``/``Sequence``, ``dict[str, X]``/``Mapping``,
``Any``, other ``TypedDict``s and dataclasses, and ``Annotated[dict[str, Any], SomeType]``
("SomeType's document": what mypy sees is a dict, what the schema says is SomeType's shape),
``Annotated[dict[str, Any], SomeDataclass, "asdict"]`` (:data:`ASDICT`: what
``dataclasses.asdict`` makes of it, every field always there) or ``Annotated[X, {...}]``
(extra schema keywords, e.g. an ``enum``). A ``TypedDict`` is closed (no other keys) unless
:func:`open_items` says it carries more keys than it names.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: ``Annotated[dict[str, Any], SomeDataclass, ASDICT]``: ``dataclasses.asdict`` of it.
ASDICT = "asdict"

_OPEN: set[type] = set()
_PRIMITIVES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def open_items(typed_dict: type) -> None:
    """Say that documents of ``typed_dict`` may carry keys it does not name (a gate's
    details, which each gate chooses)."""
    _OPEN.add(typed_dict)


def document_schema(tp: Any) -> dict[str, Any]:
    """The schema of ``tp``'s document (see the module's docstring), without ``$schema``: a
    class used once is written where it is used, one used more often once in ``$defs``."""
    builder = _Builder()
    schema = builder.of(tp)
    uses: dict[str, int] = {}
    for part in [schema, *builder.defs.values()]:
        _count_refs(part, uses)
    kept = {name: s for name, s in builder.defs.items() if uses.get(name, 0) > 1}
    schema = _inline(schema, builder.defs, kept)
    if kept:
        schema = {**schema, "$defs": {k: _inline(v, builder.defs, kept) for k, v in kept.items()}}
    return schema


def _ref(name: str) -> str:
    return f"#/$defs/{name}"


def _count_refs(node: Any, uses: dict[str, int]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = ref.removeprefix(_ref(""))
            uses[name] = uses.get(name, 0) + 1
        for value in node.values():
            _count_refs(value, uses)
    elif isinstance(node, list):
        for value in node:
            _count_refs(value, uses)


def _inline(node: Any, defs: dict[str, Any], kept: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and len(node) == 1:
            name = ref.removeprefix(_ref(""))
            if name not in kept:
                return _inline(defs[name], defs, kept)
        return {k: _inline(v, defs, kept) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, defs, kept) for v in node]
    return node


class _Builder:
    def __init__(self) -> None:
        self.seen: list[Any] = []  # the types being built, to refuse a cycle clearly
        self.defs: dict[str, dict[str, Any]] = {}  # each class's schema, by its name
        self.names: dict[type, str] = {}  # each class's name in ``defs``

    def of(self, tp: Any) -> dict[str, Any]:  # one case per kind of type
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Annotated:  # first: its extras need not be hashable
            return self._annotated(args[0], tp.__metadata__)
        if tp is Any or tp is object:
            return {}
        if tp is None or tp is type(None):
            return {"type": "null"}
        if tp in _PRIMITIVES:
            return {"type": _PRIMITIVES[tp]}
        if origin is typing.Literal:
            return {"enum": list(args)}
        if origin in (typing.Union, types.UnionType):
            return _any_of([self.of(a) for a in args])
        if origin in (list, tuple, Sequence, set, frozenset):
            items = [a for a in args if a is not Ellipsis]
            return {"type": "array", "items": self.of(items[0])} if items else {"type": "array"}
        if origin in (dict, Mapping):
            if len(args) == 2 and args[1] is not Any:  # key and value
                return {"type": "object", "additionalProperties": self.of(args[1])}
            return {"type": "object"}
        if tp in (list, tuple):
            return {"type": "array"}
        if tp in (dict, Mapping):
            return {"type": "object"}
        if isinstance(tp, type):
            return self._class(tp)
        raise TypeError(f"no JSON Schema for the type {tp!r}")

    def _annotated(self, base: Any, extras: tuple[Any, ...]) -> dict[str, Any]:
        nullable = type(None) in typing.get_args(base)
        every = any(isinstance(e, str) and e == ASDICT for e in extras)
        schema: dict[str, Any] | None = None
        for extra in extras:
            if isinstance(extra, type):  # the document of this type stands for the base
                schema = self._class(extra, every=True) if every else self.of(extra)
        if schema is None:
            schema = self.of(base)
            nullable = False  # already in the base's schema
        for extra in extras:
            if isinstance(extra, Mapping):
                schema = {**schema, **extra}
        return _any_of([schema, {"type": "null"}]) if nullable else schema

    def _class(self, cls: type, *, every: bool = False) -> dict[str, Any]:
        if every:  # dataclasses.asdict(cls): every field, whatever its to_dict says
            return self._as_dict(cls)
        if issubclass(cls, enum.Enum) and issubclass(cls, str):  # a StrEnum: its words
            return {"type": "string", "enum": [m.value for m in cls]}
        if issubclass(cls, str):
            return {"type": "string"}
        returns = _to_dict_returns(cls)
        if returns is not None and not hasattr(cls, "__json_schema__"):
            return self.of(returns)
        if cls in self.seen:
            raise TypeError(f"{cls.__qualname__}'s document contains itself: declare its schema")
        if cls in self.names:
            return {"$ref": _ref(self.names[cls])}
        name = cls.__qualname__
        if name in self.names.values():  # two classes of one name: the second by its module
            name = f"{cls.__module__}.{name}"
        self.seen.append(cls)
        try:
            declared: Callable[[], dict[str, Any]] | None = getattr(cls, "__json_schema__", None)
            if declared is not None:
                schema = declared()
            elif typing.is_typeddict(cls):
                schema = self._typed_dict(cls)
            elif dataclasses.is_dataclass(cls):
                schema = self._dataclass(cls)
            else:
                raise TypeError(f"no JSON Schema for {cls.__module__}.{name}")
        finally:
            self.seen.pop()
        self.names[cls] = name
        self.defs[name] = schema
        return {"$ref": _ref(name)}

    def _as_dict(self, cls: type) -> dict[str, Any]:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls.__qualname__} is not a dataclass: it has no asdict document")
        name = f"{cls.__qualname__}.asdict"
        if name not in self.defs:
            if cls in self.seen:
                raise TypeError(f"{cls.__qualname__}'s document contains itself")
            self.seen.append(cls)
            try:
                hints = typing.get_type_hints(cls, include_extras=True)
                fields = dataclasses.fields(cls)
                props = {f.name: self.of(hints[f.name]) for f in fields}
                self.defs[name] = _object(props, [f.name for f in fields], closed=True)
            finally:
                self.seen.pop()
        return {"$ref": _ref(name)}

    def _typed_dict(self, cls: type) -> dict[str, Any]:
        hints = typing.get_type_hints(cls, include_extras=True)
        total = getattr(cls, "__total__", True)
        props = {name: self.of(_unwrap_required(hint)) for name, hint in hints.items()}
        required = [k for k, hint in hints.items() if _required(hint, total=total)]
        return _object(props, required, closed=cls not in _OPEN)

    def _dataclass(self, cls: type) -> dict[str, Any]:
        hints = typing.get_type_hints(cls, include_extras=True)
        props, required = {}, []
        for f in dataclasses.fields(cls):
            if not f.repr:  # bookkeeping (a start time), never in the document
                continue
            props[f.name] = self.of(hints[f.name])
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(f.name)
        return _object(props, required, closed=True)


def _to_dict_returns(cls: type) -> Any:
    """The ``TypedDict`` (or union of ``TypedDict``s: one per shape) ``cls.to_dict`` says it
    returns, or None."""
    to_dict = getattr(cls, "to_dict", None)
    if to_dict is None:
        return None
    returns = typing.get_type_hints(to_dict).get("return")
    union = typing.get_origin(returns) in (typing.Union, types.UnionType)
    parts = typing.get_args(returns) if union else (returns,)
    typed = all(isinstance(p, type) and typing.is_typeddict(p) for p in parts)
    return returns if typed else None


def _required(hint: Any, *, total: bool) -> bool:
    # from the hints, not __required_keys__: Python 3.11 misses NotRequired in a module with
    # ``from __future__ import annotations``
    origin = typing.get_origin(hint)
    return origin is typing.Required or (total and origin is not typing.NotRequired)


def _unwrap_required(hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.NotRequired, typing.Required):
        return typing.get_args(hint)[0]
    return hint


def _object(props: dict[str, Any], required: list[str], *, closed: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    if closed:
        schema["additionalProperties"] = False
    return schema


def _any_of(schemas: list[dict[str, Any]]) -> dict[str, Any]:
    if any(s == {} for s in schemas):
        return {}
    simple = [s for s in schemas if set(s) == {"type"} and isinstance(s["type"], str)]
    if len(simple) == len(schemas):
        return {"type": [s["type"] for s in simple]}
    return {"anyOf": schemas}
