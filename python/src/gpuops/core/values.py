"""How a value from outside is named in a message: its JSON kind, and a short, one-line
rendering of it (an input can be a megabyte; a message shows its first characters)."""

from __future__ import annotations

import json
import re
from typing import Any

#: A blank: where a URL in a text ends.
_BLANK = re.compile(r"\s")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def _scheme_start(text: str, colon: int, floor: int) -> int | None:
    """Where the scheme ending at ``text[colon:colon + 3] == "://"`` begins (a letter at a
    word boundary, then letters, digits, ``+ . -``), not before ``floor``; None if none."""
    first = colon
    while first > floor and text[first - 1] in _SCHEME_CHARS:
        first -= 1
    for k in range(first, colon):
        before = text[k - 1] if k > 0 else " "
        if text[k].isascii() and text[k].isalpha() and not (before.isalnum() or before == "_"):
            return k
    return None


def userinfo_spans(text: str) -> list[tuple[int, int, int]]:
    """Each URL's userinfo in ``text``: (scheme start, userinfo start, index of its ``@``).

    The one userinfo rule of gpuops (:mod:`gpuops.core.urls` finds a URL's password with it
    too): the userinfo is everything between ``scheme://`` and the LAST ``@`` before a blank.
    A password may hold an unencoded ``/``, ``?``, ``#`` or ``@`` (``https://u:pa/ss@h/``);
    for a message hiding too much (a path with an ``@`` in it) is the right error. Linear in
    the length of ``text`` (an input can be a megabyte)."""
    spans: list[tuple[int, int, int]] = []
    pos = 0
    while (colon := text.find("://", pos)) >= 0:
        scheme = _scheme_start(text, colon, pos)
        if scheme is None:
            pos = colon + 3
            continue
        begin = colon + 3
        blank = _BLANK.search(text, begin)
        end = blank.start() if blank else len(text)
        at = text.rfind("@", begin, end)
        if at < 0:
            pos = end  # no "@" in the rest of this word: no later URL in it has userinfo
            continue
        spans.append((scheme, begin, at))
        pos = at + 1
    return spans


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


def without_userinfo(text: str) -> str:
    """``text`` with the ``user:password@`` of every URL in it removed."""
    if "@" not in text:
        return text
    pieces, pos = [], 0
    for _scheme, begin, at in userinfo_spans(text):
        pieces.append(text[pos:begin])
        pos = at + 1
    return "".join(pieces) + text[pos:]


def shown(value: Any, limit: int = 60) -> str:
    """``value`` for a message: strings quoted (control characters escaped, URLs without
    their ``user:password@``), everything else as compact JSON, cut to ``limit`` characters."""
    if isinstance(value, str):
        value = without_userinfo(value)
        text = repr(value if len(value) <= limit else value[:limit])
    else:
        try:
            text = json.dumps(value, separators=(",", ":"), default=str)
        except (ValueError, TypeError, RecursionError):
            text = f"a JSON {json_kind(value)}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
