"""How a value from outside is named in a message: its JSON kind, and a short, one-line
rendering of it (an input can be a megabyte; a message shows its first characters)."""

from __future__ import annotations

import json
from typing import Any

_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (dict, "object"),
    (list, "array"),
)


def json_kind(value: Any) -> str:
    """The JSON kind of a decoded value: string, integer, number, boolean, null, object, array."""
    if value is None:
        return "null"
    for cls, kind in _KINDS:
        if isinstance(value, cls):
            return kind
    return type(value).__name__


def shown(value: Any, limit: int = 60) -> str:
    """``value`` for a message: strings quoted (control characters escaped), everything else as
    compact JSON, cut to ``limit`` characters."""
    if isinstance(value, str):
        text = repr(value if len(value) <= limit else value[:limit])
    else:
        try:
            text = json.dumps(value, separators=(",", ":"), default=str)
        except (ValueError, TypeError, RecursionError):
            text = f"a JSON {json_kind(value)}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
