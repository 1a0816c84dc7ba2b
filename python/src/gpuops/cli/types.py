"""Option types of every gpuops command: one declaration per option, strict on both paths.

An option's value reaches a command two ways: as text on the command line, or as a JSON
value in the parameters file (how Jenkins calls the CLI). Each type here states which JSON
kinds it accepts (:attr:`GpuOpsType.json_kinds`) and checks them *before* converting, so a
JSON ``true`` is not taken for ``1``, ``4.7`` is not truncated to ``4``, ``"\\uff14"`` (a
full-width four) is not a number and ``"default\\n"`` is not a name. Each type also
describes itself (:meth:`GpuOpsType.describe`) for ``gpuops describe``, the single source the
Jenkins steps take their parameters from.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import click

from gpuops.core.values import json_kind, shown
from gpuops.errors import InvalidInput

__all__ = ["Choice", "GpuOpsType", "Integer", "Structured", "Text", "json_kind", "shown"]
_ASCII_INT = re.compile(r"[+-]?[0-9]{1,18}")
#: Characters no option value may hold: C0 and C1 controls (U+0085 among them), line and
#: paragraph separators, zero-width and bidirectional formatting characters, the byte order
#: mark, lone surrogates and the noncharacters U+FFFE/U+FFFF. str.strip() used to remove some
#: of them silently; a value holding one is refused, never normalised.
_CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u2069\ufeff\ud800-\udfff\ufffe\uffff]"
)
_CONTROL_SAID = "contains a control character or an invisible one (newline, tab, U+2028, ...)"
_MAX_TEXT = 4096


class GpuOpsType(click.ParamType[Any]):
    """Base of the option types: JSON kinds accepted, and a description for ``describe``."""

    json_kinds: ClassVar[tuple[str, ...]] = ("string",)

    def kinds(self) -> tuple[str, ...]:
        return self.json_kinds

    def describe(self) -> dict[str, Any]:
        return {"type": self.name, "json": list(self.kinds())}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            check_kind(value, self.kinds())
            return self.parse(value)
        except InvalidInput as exc:
            self.fail(exc.message, param, ctx)

    def parse(self, value: Any) -> Any:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError


class Integer(GpuOpsType):
    """A whole number: a JSON integer, or ASCII digits (as on the command line)."""

    name = "integer"
    json_kinds = ("integer", "string")

    def __init__(self, min: int | None = None, max: int | None = None) -> None:
        self.min, self.max = min, max

    def parse(self, value: Any) -> int:
        if isinstance(value, str):
            if not _ASCII_INT.fullmatch(value):
                raise InvalidInput(f"{shown(value)} is not a whole number (digits 0-9 only)")
            value = int(value)
        number = int(value)
        if self.min is not None and number < self.min:
            raise InvalidInput(f"{number} is below the minimum of {self.min}")
        if self.max is not None and number > self.max:
            raise InvalidInput(f"{number} is above the maximum of {self.max}")
        return number

    def describe(self) -> dict[str, Any]:
        doc = super().describe()
        if self.min is not None:
            doc["minimum"] = self.min
        if self.max is not None:
            doc["maximum"] = self.max
        return doc


class Text(GpuOpsType):
    """A string checked by ``check`` (a core validator raising InvalidInput), if given.

    No control characters (a trailing newline is not part of any name), at most 4 KiB.
    """

    json_kinds = ("string",)

    def __init__(
        self, name: str = "text", check: Callable[[str], Any] | None = None, *, empty: bool = False
    ) -> None:
        self.name = name
        self._check = check
        self._empty = empty

    def parse(self, value: Any) -> Any:
        text = str(value)
        if _CONTROL.search(text):
            raise InvalidInput(f"{shown(text)} {_CONTROL_SAID}")
        if len(text) > _MAX_TEXT:
            raise InvalidInput(f"is {len(text)} characters long; the limit is {_MAX_TEXT}")
        if not text and not self._empty:
            raise InvalidInput("must not be empty")
        return self._check(text) if self._check else text


class Choice(GpuOpsType):
    """One of a fixed set of words."""

    name = "choice"
    json_kinds = ("string",)

    def __init__(self, choices: Sequence[str]) -> None:
        self.choices = tuple(choices)

    def parse(self, value: Any) -> str:
        if value not in self.choices:
            raise InvalidInput(f"{shown(value)} is not one of {', '.join(self.choices)}")
        return str(value)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "choices": list(self.choices)}

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[" + "|".join(self.choices) + "]"


class Structured(GpuOpsType):
    """A value given as text (``k=v,...`` or JSON) or as a JSON object/array, parsed by a
    core parser that raises InvalidInput (selectors, tolerations, affinity, counts)."""

    def __init__(self, name: str, parse: Callable[[Any], Any], kinds: tuple[str, ...]) -> None:
        self.name = name
        self._parse = parse
        self._kinds = kinds

    def kinds(self) -> tuple[str, ...]:
        return self._kinds

    def parse(self, value: Any) -> Any:
        bad = _invisible(value)
        if bad is not None:
            raise InvalidInput(f"{shown(bad)} {_CONTROL_SAID}")
        return self._parse(value)


def _invisible(value: Any, depth: int = 0) -> str | None:
    """The first string (key or value, at any depth) of a JSON value that holds a character
    no value may hold, or None."""
    if isinstance(value, str):
        return value if _CONTROL.search(value) else None
    if depth > 32:  # deeper than any option's value: refused by its parser
        return None
    items: list[Any] = []
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, list):
        items = value
    for item in items:
        found = _invisible(item, depth + 1)
        if found is not None:
            return found
    return None


def option_kinds(param: click.Parameter) -> tuple[str, ...]:
    """The JSON kinds ``param`` accepts in the parameters file."""
    if isinstance(param, click.Option) and param.is_flag:
        return ("boolean",)
    if isinstance(param.type, GpuOpsType):
        return param.type.kinds()
    raise TypeError(f"option {param.name} has no gpuops type (click {param.type.name})")


def check_param_value(param: click.Parameter, value: Any) -> None:
    """Check a parameters-file value's JSON kind for ``param`` (items, for a list option)."""
    kinds = option_kinds(param)
    if getattr(param, "multiple", False):
        if not isinstance(value, list):
            raise InvalidInput(f"must be a JSON array, got a JSON {json_kind(value)}")
        for i, item in enumerate(value):
            try:
                check_kind(item, kinds)
            except InvalidInput as exc:
                raise InvalidInput(f"item {i}: {exc.message}") from None
        return
    check_kind(value, kinds)


def check_kind(value: Any, kinds: tuple[str, ...]) -> None:
    kind = json_kind(value)
    if kind not in kinds:
        want = " or ".join(f"a JSON {k}" for k in kinds)
        raise InvalidInput(f"must be {want}, got a JSON {kind} ({shown(value)})")
