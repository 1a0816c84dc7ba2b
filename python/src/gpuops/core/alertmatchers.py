"""Alertmanager matchers (``--alerts-selector``): parsed and checked before anything runs.

The syntax is Alertmanager's (``amtool``, silences, the API v2 ``filter`` parameter):
comma-separated matchers, optionally inside ``{...}``, each ``name OP value`` with OP one of
``=``, ``!=``, ``=~`` (regular expression, anchored), ``!~``. The value is a double-quoted
string (``\\"``, ``\\\\``, ``\\n`` escapes, as in OpenMetrics) or, as Alertmanager also
accepts, a bare word of letters, digits and ``_ . : / -``. Label names are Prometheus label names
(``[a-zA-Z_:][a-zA-Z0-9_:]*``, as Alertmanager's parser reads them). An escape other than
these three keeps its backslash (``\\d`` in a regular expression), as Alertmanager's does.

Refused, with a message naming the matcher: another syntax, an empty selector, a regular
expression that does not compile (in Python's re: a nesting deeper than it can parse is refused
too) or uses what Go's RE2 (Alertmanager's engine) lacks or refuses (backreferences,
look-around, a count over 1000 in ``{n,m}``), and a selector every matcher of which matches an empty
label (``foo=~".*"``, ``foo!="x"``): as for Alertmanager's silences, such a selector would
match every alert, Watchdog's ever-firing one included, and hold every rollout for ever.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuops.core.values import shown
from gpuops.errors import InvalidInput

OPS = ("=~", "!~", "!=", "=")
MAX_SELECTOR = 2000
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_BARE = re.compile(r"[a-zA-Z0-9_.:/-]+")
_QUOTED = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_SPACE = re.compile(r"[ \t]*")
#: what Python's re has and RE2 has not (Alertmanager would refuse the filter)
_NOT_RE2 = re.compile(r"\\[1-9]|\(\?[=!]|\(\?<[=!]|\(\?P=")
#: a counted repetition, {n} or {n,} or {n,m}: RE2 refuses counts over 1000
_REPEAT = re.compile(r"\{([0-9]+)(?:,([0-9]*))?\}")
RE2_MAX_REPEAT = 1000
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n"}

HINT = (
    'give Alertmanager matchers, comma-separated: name="value", name!="value", '
    'name=~"regex", name!~"regex" (e.g. severity="critical",team=~"gpu|infra")'
)


@dataclass(frozen=True)
class Matcher:
    name: str
    op: str
    value: str

    def matches(self, labels: dict[str, str]) -> bool:
        """As Alertmanager decides: a missing label is the empty string; regexes anchored."""
        have = labels.get(self.name, "")
        if self.op in ("=", "!="):
            return (have == self.value) == (self.op == "=")
        hit = re.fullmatch(self.value, have, re.DOTALL) is not None
        return hit == (self.op == "=~")

    def text(self) -> str:
        """The matcher as Alertmanager's filter parameter reads it (value quoted)."""
        quoted = self.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'{self.name}{self.op}"{quoted}"'


def parse(selector: str, what: str = "--alerts-selector") -> tuple[Matcher, ...]:
    """The matchers of ``selector``, or InvalidInput naming what is wrong."""
    if len(selector) > MAX_SELECTOR:
        raise InvalidInput(f"{what}: longer than {MAX_SELECTOR} characters", hint=HINT)
    text = selector.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    out: list[Matcher] = []
    pos = _skip(text, 0)
    while pos < len(text):
        matcher, pos = _one(text, pos, what)
        out.append(matcher)
        pos = _skip(text, pos)
        if pos < len(text):
            if text[pos] != ",":
                raise InvalidInput(
                    f"{what}: expected ',' after {matcher.text()} at {shown(text[pos:], 30)}",
                    hint=HINT,
                )
            pos = _skip(text, pos + 1)
            if pos >= len(text):
                raise InvalidInput(f"{what}: a trailing ','", hint=HINT)
    if not out:
        raise InvalidInput(f"{what}: no matcher given", hint=HINT)
    if all(m.matches({}) for m in out):
        raise InvalidInput(
            f"{what}: {', '.join(m.text() for m in out)} matches alerts without those labels "
            "too, so it would match every alert (Watchdog's included) and hold every batch",
            hint='add a matcher that needs a label, e.g. severity="critical"',
        )
    return tuple(out)


def _skip(text: str, pos: int) -> int:
    found = _SPACE.match(text, pos)
    return found.end() if found else pos


def _one(text: str, pos: int, what: str) -> tuple[Matcher, int]:
    name = _NAME.match(text, pos)
    if name is None:
        raise InvalidInput(
            f"{what}: {shown(text[pos:], 30)} does not start with a label name "
            "([a-zA-Z_:][a-zA-Z0-9_:]*)",
            hint=HINT,
        )
    pos = _skip(text, name.end())
    op = next((o for o in OPS if text.startswith(o, pos)), None)
    if op is None:
        raise InvalidInput(
            f"{what}: after the label {name.group()!r} comes no =, !=, =~ or !~", hint=HINT
        )
    pos = _skip(text, pos + len(op))
    quoted = _QUOTED.match(text, pos)
    if quoted is not None:
        value = re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group()), quoted.group(1))
        end = quoted.end()
    else:
        bare = _BARE.match(text, pos)
        if bare is None:
            raise InvalidInput(
                f"{what}: the value of {name.group()!r} is neither a double-quoted string nor "
                f"a plain word: {shown(text[pos:], 30)}",
                hint=HINT,
            )
        value, end = bare.group(), bare.end()
    matcher = Matcher(name.group(), op, value)
    if op in ("=~", "!~"):
        _regex(matcher, what)
    return matcher, end


def _regex(matcher: Matcher, what: str) -> None:
    if _NOT_RE2.search(matcher.value):
        raise InvalidInput(
            f"{what}: {matcher.text()} uses a backreference or look-around, which "
            "Alertmanager's regular expressions (Go RE2) do not have",
            hint=HINT,
        )
    counts = [int(n) for pair in _REPEAT.findall(matcher.value) for n in pair if n]
    if any(n > RE2_MAX_REPEAT for n in counts):
        raise InvalidInput(
            f"{what}: {shown(matcher.text(), 80)} asks for more than {RE2_MAX_REPEAT} "
            "repetitions, which Alertmanager's regular expressions (Go RE2) refuse",
            hint=HINT,
        )
    try:
        re.compile(matcher.value)
    except re.error as exc:
        raise InvalidInput(
            f"{what}: {shown(matcher.text(), 80)} is no regular expression: {exc.msg}", hint=HINT
        ) from None
    except (OverflowError, RecursionError) as exc:  # a count or a nesting too large for re
        raise InvalidInput(
            f"{what}: {shown(matcher.text(), 80)} is no regular expression: {type(exc).__name__}",
            hint=HINT,
        ) from None
