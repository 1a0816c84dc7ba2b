"""Use case of ``gpuops report``: HTML pages from the JSON results the commands produce.

Input is a result document (``{"ok": true, "result": …}``), an error document whose
``result`` holds what the operation found (a refused gate), or a bare result object.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuops import fsio
from gpuops.core.values import shown
from gpuops.errors import InvalidInput
from gpuops.render.html.page import Written

#: Largest input accepted: a 5,000-node ``--show-nodes`` result is ~2.5 MB.
MAX_INPUT_BYTES = 64 << 20


@dataclass(frozen=True)
class ReportRequest:
    kind: str
    input: Path
    out: Path
    option: str = "out"  # the option that named ``out``, for its errors


@dataclass(frozen=True)
class ReportOutcome:
    kind: str
    written: Written

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.written.to_dict()}


def _writers() -> dict[str, Callable[[Mapping[str, Any], fsio.OutDir], Written]]:
    from gpuops.render.html import capacity, nodes, releases  # noqa: PLC0415 - when used

    return {
        "capacity": capacity.write,
        "fleet": nodes.write_fleet,
        "node-update": nodes.write_rollout,
        "releases": releases.write,
    }


KINDS = ("capacity", "fleet", "node-update", "releases")


def load_result(path: Path) -> Mapping[str, Any]:
    """The ``result`` object of a result/error document, or a bare result object."""
    from gpuops.render.html import inputs  # noqa: PLC0415 - with the pages

    text = fsio.read_text(path, cap=MAX_INPUT_BYTES, what="input", option="input")
    doc = inputs.loads(text, shown(str(path), 200))  # strictly: NaN, a key twice, ... exit 2
    if isinstance(doc, dict) and "ok" in doc and "command" in doc:
        doc = doc.get("result")
    if not isinstance(doc, dict):
        raise InvalidInput(
            f"input {path} holds no result object (an error document of a command that "
            "did not run?)",
            field="input",
        )
    return doc


def render(request: ReportRequest, result: Mapping[str, Any] | None = None) -> ReportOutcome:
    """Write the ``kind`` page for ``result`` (read from ``request.input`` when not given)."""
    out = fsio.OutDir(request.out, option=request.option)  # checked now, made when written
    if result is not None:
        return ReportOutcome(request.kind, _writers()[request.kind](result, out))
    from gpuops.render.html import inputs  # noqa: PLC0415 - with the pages

    source = shown(str(request.input), 200)
    data = load_result(request.input)
    inputs.check(request.kind, data, source)  # what the page computes with, before it runs
    try:
        written = _writers()[request.kind](data, out)
    except InvalidInput as exc:  # the page's own checks: name the file they are about
        if exc.field not in (None, "input"):  # the out folder's own errors
            raise
        raise InvalidInput(f"input {source}: {exc.message}", hint=exc.hint, field="input") from None
    return ReportOutcome(request.kind, written)
