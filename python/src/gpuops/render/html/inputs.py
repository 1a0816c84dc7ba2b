"""What a report page reads from a document the user gave, decoded strictly.

``gpuops report KIND --input FILE`` renders a page from a result document that passed through
a person's hands (an archived artifact, a file in a folder). Before any page code sees it, the
values the page computes with are checked for their JSON kind here, each kind of page by one
declaration of what it reads (:data:`SPECS`): a ``gpus_per_pod`` that is text, a host list that
is a number, a release that is not an object is exit 2 naming the file and the value's place in
it (``input 'r.json': classes[0].free must be an integer, not "x"``), never exit 5 from deep
inside a chart. Values a page only prints (messages, names) may be of any kind: they are
printed as text, escaped.

The JSON itself is decoded strictly too (:func:`loads`): ``NaN`` and ``Infinity`` (not JSON),
a key given twice, nesting deeper than any gpuops document and a number too long to convert
are refused, each naming the file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuops.core.values import json_kind, shown
from gpuops.errors import InvalidInput

#: Nesting deeper than this is no gpuops document (a fleet result is ~8 levels deep).
MAX_DEPTH = 64


class Spec:
    """What one value must be; ``what`` says it in a message."""

    what = "any JSON value"

    def problem(self, value: Any, at: str) -> tuple[str, Any] | None:
        """(where, value) of the first value that is not as specified, or None."""
        return None


class _Kind(Spec):
    def __init__(self, what: str, *types: type, finite: bool = False) -> None:
        self.what, self._types, self._finite = what, types, finite

    def problem(self, value: Any, at: str) -> tuple[str, Any] | None:
        if isinstance(value, bool) and bool not in self._types:
            return at, value
        if not isinstance(value, self._types):
            return at, value
        if self._finite and isinstance(value, float) and not math.isfinite(value):
            return at, value
        return None


INT = _Kind("an integer", int)
NUM = _Kind("a number", int, float, finite=True)
STR = _Kind("a string", str)
BOOL = _Kind("true or false", bool)
#: printed only, or used as a key: any JSON value but an array or an object
SCALAR = _Kind("a string, a number, true, false or null", str, int, float, bool, type(None))
ANY = Spec()


@dataclass
class Opt(Spec):
    """``inner`` or null."""

    inner: Spec

    @property
    def what(self) -> str:  # type: ignore[override]
        return f"{self.inner.what} or null"

    def problem(self, value: Any, at: str) -> tuple[str, Any] | None:
        return None if value is None else self.inner.problem(value, at)


@dataclass
class List(Spec):
    """A JSON array whose every item is ``item``."""

    item: Spec
    what: str = "an array"

    def problem(self, value: Any, at: str) -> tuple[str, Any] | None:
        if not isinstance(value, list):
            return at, value
        for i, item in enumerate(value):
            found = self.item.problem(item, f"{at}[{i}]")
            if found is not None:
                return found
        return None


@dataclass
class Map(Spec):
    """A JSON object whose every value is ``value`` (its keys: any names)."""

    value: Spec
    what: str = "an object"

    def problem(self, value: Any, at: str) -> tuple[str, Any] | None:
        if not isinstance(value, dict):
            return at, value
        for key, item in value.items():
            found = self.value.problem(item, f"{at}.{key}")
            if found is not None:
                return found
        return None


@dataclass
class Obj(Spec):
    """A JSON object with ``fields`` (each as specified when present), ``required`` of them
    present. Other keys are not read by the page."""

    fields: Mapping[str, Spec]
    required: Sequence[str] = ()
    what: str = "an object"
    _all: dict[str, Spec] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._all = dict(self.fields)

    def problem(self, value: Any, at: str) -> tuple[str, Any] | None:
        if not isinstance(value, dict):
            return at, value
        for key in self.required:
            if key not in value:
                return f"{at}.{key}" if at else key, _MISSING
        for key, spec in self._all.items():
            if key in value:
                found = spec.problem(value[key], f"{at}.{key}" if at else key)
                if found is not None:
                    return found
        return None


class _Missing:
    pass


_MISSING = _Missing()


def _spec_at(spec: Spec, at: str) -> Spec:
    """The spec of the value at ``at`` (for the message's "must be ...")."""
    for part in at.replace("[", ".[").split("."):
        if not part:
            continue
        while isinstance(spec, Opt):
            spec = spec.inner
        if part.startswith("["):
            spec = spec.item if isinstance(spec, List) else ANY
        elif isinstance(spec, Obj):
            spec = spec._all.get(part, ANY)
        elif isinstance(spec, Map):
            spec = spec.value
        else:
            spec = ANY
    return spec


_CLASS = Obj(
    {
        "node_class": STR,
        "allocatable": INT,
        "requested": INT,
        "free": INT,
        "free_usable": INT,
        "pods_placeable": INT,
        "reserve": INT,
        "unavailable": INT,
        "nodes": INT,
        "nodes_healthy": INT,
        "nodes_usable": INT,
        "largest_free_block": INT,
    },
    required=(  # the page prints each (a missing one is no headroom check's class)
        "node_class",
        "allocatable",
        "requested",
        "free",
        "free_usable",
        "pods_placeable",
        "reserve",
        "nodes",
        "nodes_healthy",
        "nodes_usable",
        "largest_free_block",
    ),
)
_NODE = Obj(
    {
        "name": STR,
        "node_class": STR,
        "free": INT,
        "allocatable": INT,
        "usable": Opt(BOOL),
        "reasons": Opt(List(STR)),
    },
    required=("name", "node_class", "free", "allocatable"),
)
_QUOTA = Obj(dict.fromkeys(("quota", "resource", "used", "hard", "left"), SCALAR))
CAPACITY = Obj(
    {
        "verdict": SCALAR,
        "fits": SCALAR,
        "message": SCALAR,
        "resource": SCALAR,
        "gpus_per_pod": INT,
        "pods": INT,
        "gpus_needed": INT,
        "free_total": INT,
        "free_usable": Opt(NUM),
        "nodes_total": Opt(NUM),
        "reserve": SCALAR,
        "pods_placeable": SCALAR,
        "namespace": SCALAR,
        "classes": List(_CLASS),
        "nodes": Opt(List(_NODE)),
        "placement": Opt(Obj({"node_selector": Opt(Map(SCALAR))})),
        "excluded": Opt(Map(INT)),
        "plan": Opt(Map(INT)),
        "reserve_per_class": Map(SCALAR),
        "quotas": Opt(List(_QUOTA)),
        "shortages": Opt(List(SCALAR)),
    },
    required=(
        "verdict",
        "message",
        "resource",
        "gpus_per_pod",
        "pods",
        "gpus_needed",
        "classes",
        "free_total",
        "reserve_per_class",
        "fits",
        "pods_placeable",
        "namespace",
        "reserve",
        "free_usable",
        "nodes_total",
    ),
)
_GPU = Obj({"index": Opt(INT)})
_FINDING = Obj({"gpu": Opt(INT), "check": SCALAR, "severity": SCALAR, "message": SCALAR})
FLEET = Obj(
    {
        "hosts": List(
            Obj(
                {
                    "host": SCALAR,
                    "status": SCALAR,
                    "group": SCALAR,
                    "gpus": Opt(List(_GPU)),
                    "findings": Opt(List(_FINDING)),
                },
                required=("host",),
            )
        ),
        "summary": Opt(Map(SCALAR)),
    },
    required=("inventory", "status", "summary", "hosts_total", "hosts"),
)
NODE_UPDATE = Obj(
    {
        "hosts": List(Obj({"host": SCALAR, "batch": Opt(SCALAR)}, required=("host",))),
        "summary": Map(Opt(INT)),
    },
    required=("inventory", "summary", "hosts", "check"),
)
RELEASES = Obj(
    {
        "environment": SCALAR,
        "namespace": SCALAR,
        "current": SCALAR,
        "releases": List(Obj({"number": SCALAR, "status": SCALAR, "tag": SCALAR})),
        "rollback_choices": Opt(List(SCALAR)),
        "deployments": Opt(List(SCALAR)),
        "open": Opt(Map(SCALAR)),
    },
    required=("environment", "namespace", "releases", "rollback_choices"),
)
_NODE_RECORD = Obj(
    {
        "number": SCALAR,
        "fleet": SCALAR,
        "action": SCALAR,
        "status": SCALAR,
        "rollback_of": SCALAR,
        "groups": Opt(Map(Obj({"before": Opt(Map(SCALAR)), "after": Opt(Map(SCALAR))}))),
        "hosts": Opt(Map(Obj({"status": SCALAR, "driver_before": SCALAR, "driver_after": SCALAR}))),
    },
    required=("number", "status"),
)
NODE_HISTORY = Obj(
    {"fleet": SCALAR, "namespace": SCALAR, "records": List(_NODE_RECORD)},
    required=("fleet", "records"),
)
_DECISION = Obj(
    {
        "digest": SCALAR,
        "action": SCALAR,
        "created": SCALAR,
        "tags": Opt(List(SCALAR)),
        "reasons": Opt(List(SCALAR)),
    },
    required=("digest", "action"),
)
PRUNE = Obj(
    {
        "dry_run": SCALAR,
        "state": SCALAR,
        "deleted": Opt(INT),
        "kept": Opt(INT),
        "locks": Opt(List(SCALAR)),
        "repositories": List(
            Obj(
                {
                    "repository": SCALAR,
                    "environments": Opt(List(SCALAR)),
                    "tags": Opt(INT),
                    "protected": Opt(Map(List(SCALAR))),
                    "decisions": List(_DECISION),
                    "deleted": Opt(List(SCALAR)),
                },
                required=("repository", "decisions"),
            )
        ),
    },
    required=("state", "repositories"),
)
#: What each page reads, by the command whose result it shows.
SPECS: dict[str, tuple[Spec, str]] = {
    "capacity": (CAPACITY, "gpuops headroom check --show-nodes"),
    "fleet": (FLEET, "gpuops nodes inspect"),
    "node-history": (NODE_HISTORY, "gpuops nodes history"),
    "node-update": (NODE_UPDATE, "gpuops nodes update"),
    "prune": (PRUNE, "gpuops image prune"),
    "releases": (RELEASES, "gpuops release history"),
}


def check(kind: str, doc: Mapping[str, Any], source: str) -> None:
    """InvalidInput (field ``input``) naming ``source`` and the first value ``kind``'s page
    cannot read; nothing when the page can read every one."""
    spec, command = SPECS[kind]
    found = spec.problem(doc, "")
    if found is None:
        return
    at, value = found
    hint = f"pass the result (or error) document of '{command}' as it wrote it"
    if value is _MISSING:
        raise InvalidInput(
            f"input {source} is not a '{command}' result: {at} is missing",
            hint=hint,
            field="input",
        )
    raise InvalidInput(
        f"input {source} is not a '{command}' result: {at or 'the document'} must be "
        f"{_spec_at(spec, at).what}, not a JSON {json_kind(value)} ({shown(value, 40)})",
        hint=hint,
        field="input",
    )


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for key, value in pairs:
        if key in doc:
            raise ValueError(f"the key {shown(key, 40)} is given twice")
        doc[key] = value
    return doc


def _depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (strings skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def loads(text: str, source: str) -> Any:
    """``text`` as JSON, strictly (see the module); InvalidInput naming ``source``."""
    if _depth(text) > MAX_DEPTH:
        raise InvalidInput(
            f"input {source} nests arrays and objects deeper than {MAX_DEPTH} levels",
            field="input",
        )
    try:
        doc = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique)
        json.dumps(doc, ensure_ascii=False).encode("utf-8")  # no lone surrogate (\\ud800)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"input {source} is not JSON: {exc.msg} at line {exc.lineno}", field="input"
        ) from None
    except UnicodeEncodeError:
        raise InvalidInput(
            f"input {source} is not JSON as gpuops writes it: a string holds a lone surrogate",
            field="input",
        ) from None
    except (ValueError, RecursionError) as exc:  # NaN, a key twice, a number too long
        raise InvalidInput(
            f"input {source} is not JSON as gpuops writes it: {exc}", field="input"
        ) from None
    return doc
