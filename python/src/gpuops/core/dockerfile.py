"""What a Dockerfile builds from: the stages, and the base image of the stage that is built.

Only ``ARG`` (before and between stages) and ``FROM`` matter here: the base image goes into the
build record and the ``org.opencontainers.image.base.name`` label, and a ``--target`` that names
no stage is an input error before any build starts. Pure: text in, names out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from gpuops.core.values import shown
from gpuops.errors import InvalidInput

_VAR = re.compile(
    r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:[-+])?(?P<word>[^}]*)\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))"
)
_STAGE_NAME = re.compile(r"^[a-z][a-z0-9-_.]*$")


@dataclass(frozen=True)
class Stage:
    index: int
    name: str | None  # the AS name, lower-cased as Docker does
    base: str  # FROM's image after ARG substitution: an image, "scratch" or an earlier stage
    platform: str | None


def _logical_lines(text: str) -> list[str]:
    """Instructions with line continuations joined, comments and blank lines dropped."""
    out: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if current and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        out.append(current + line)
        current = ""
    if current.strip():
        out.append(current)
    return out


def substitute(text: str, variables: Mapping[str, str]) -> str:
    """``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``${VAR:+alternative}`` as Docker expands
    them in FROM; an unknown variable becomes empty."""

    def one(m: re.Match[str]) -> str:
        name = m.group("braced") or m.group("plain")
        value = variables.get(name, "")
        op, word = m.group("op"), m.group("word") or ""
        if op == ":-":
            return value or word
        if op == ":+":
            return word if value else ""
        return value

    return _VAR.sub(one, text)


def _arg(rest: str, scope: dict[str, str], given: Mapping[str, str]) -> None:
    for decl in rest.split():
        name, eq, default = decl.partition("=")
        if name in given:
            scope[name] = given[name]
        elif eq:
            scope[name] = substitute(default.strip("\"'"), scope)


def stages(text: str, build_args: Mapping[str, str] | None = None) -> list[Stage]:
    """The FROM stages of a Dockerfile, with global ARGs (and ``build_args``) substituted."""
    given = dict(build_args or {})
    scope: dict[str, str] = {}
    out: list[Stage] = []
    for line in _logical_lines(text):
        word, _, rest = line.partition(" ")
        keyword = word.upper()
        if keyword == "ARG" and not out:
            _arg(rest, scope, given)
        elif keyword == "FROM":
            tokens = rest.split()
            platform = None
            while tokens and tokens[0].startswith("--"):
                flag = tokens.pop(0)
                if flag.startswith("--platform="):
                    platform = substitute(flag.partition("=")[2], scope)
            if not tokens:
                raise InvalidInput(f"Dockerfile: 'FROM' without an image: {shown(line)}")
            base = substitute(tokens[0], scope)
            name = tokens[2].lower() if len(tokens) >= 3 and tokens[1].upper() == "AS" else None
            out.append(Stage(len(out), name, base, platform))
    if not out:
        raise InvalidInput("Dockerfile has no FROM instruction")
    return out


def base_image(
    text: str, build_args: Mapping[str, str] | None = None, target: str | None = None
) -> str:
    """The image the built stage (``target``, else the last) starts from, following ``FROM
    <earlier stage>`` back to an image; ``scratch`` for none."""
    found = stages(text, build_args)
    by_name = {s.name: s for s in found if s.name}
    if target is not None:
        if target.lower() not in by_name:
            names = ", ".join(sorted(by_name)) or "none"
            raise InvalidInput(
                f"target {shown(target)} is not a stage of the Dockerfile (stages named: {names})"
            )
        stage = by_name[target.lower()]
    else:
        stage = found[-1]
    seen: set[int] = set()
    while stage.base.lower() in by_name and by_name[stage.base.lower()].index < stage.index:
        if stage.index in seen:  # pragma: no cover - indexes strictly decrease
            break
        seen.add(stage.index)
        stage = by_name[stage.base.lower()]
    return stage.base


def check_stage_name(value: str, what: str = "target") -> str:
    if not isinstance(value, str) or not _STAGE_NAME.fullmatch(value.lower()):
        raise InvalidInput(f"{what} {shown(value)} is not a build stage name")
    return value
