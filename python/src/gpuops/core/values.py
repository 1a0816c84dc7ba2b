"""How a value from outside is named in a message: its JSON kind, and a short, one-line
rendering of it (an input can be a megabyte; a message shows its first characters)."""

from __future__ import annotations

import json
import re
from typing import Any

# URLs' userinfo rule is the redaction's (gpuops.logs, which imports nothing of ours)
from gpuops.logs import without_userinfo

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


#: A key of a user's document that a message may name as it is (a name, not content).
_NAME_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}")


def key_shown(key: object) -> str:
    """A mapping key of a user's document for a message: the key itself when it looks like a
    name, else only its kind and length (a file that is not the expected document, e.g. a
    password file given as ``--config``, has its content for keys: never quote it)."""
    if isinstance(key, str) and _NAME_KEY.fullmatch(key):
        return key
    size = f" of {len(key)} characters" if isinstance(key, str) else ""
    return f"<a {json_kind(key)}{size}, not shown>"


#: A quoted piece of the input inside a YAML parser's problem (``'!tag'``, ``"x"``); token
#: names like ``'<block end>'`` are the parser's own words.
_QUOTED = re.compile(r"'(?!<[a-z ]+>')[^']*'|\"[^\"]*\"")


def yaml_problem(exc: BaseException) -> str:
    """Where and what a YAML parser found wrong, in its own words only: line, column and the
    problem, with every piece of the input it quotes (a tag, a character, an anchor) left
    out. Never the offending line (``str(exc)`` shows it)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = ""
    if mark is not None and isinstance(getattr(mark, "line", None), int):
        where = f"at line {mark.line + 1} column {mark.column + 1}: "
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or "invalid YAML"
    problem = _QUOTED.sub("(not shown)", str(problem))
    return where + (problem if len(problem) <= 120 else problem[:117] + "...")


def shown(value: Any, limit: int = 60) -> str:
    """``value`` for a message: strings quoted (control characters escaped, URLs without
    their ``user:password@``), everything else as compact JSON, cut to ``limit`` characters."""
    if isinstance(value, str):
        value = without_userinfo(value)
        text = repr(value if len(value) <= limit else value[:limit])
    else:
        try:  # a URL inside a list or mapping loses its userinfo too
            text = without_userinfo(json.dumps(value, separators=(",", ":"), default=str))
        except (ValueError, TypeError, RecursionError):
            text = f"a JSON {json_kind(value)}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
