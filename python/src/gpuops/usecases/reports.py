"""Use case of ``gpuops report``: HTML pages from the JSON results the commands produce.

Input is a result document (``{"ok": true, "result": …}``), an error document whose
``result`` holds what the operation found (a refused gate), or a bare result object.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuops.errors import InvalidInput
from gpuops.render.html.page import Written

#: Largest input accepted: a 5,000-node ``--show-nodes`` result is ~2.5 MB.
MAX_INPUT_BYTES = 64 << 20


@dataclass(frozen=True)
class ReportRequest:
    kind: str
    input: Path
    out: Path


@dataclass(frozen=True)
class ReportOutcome:
    kind: str
    written: Written

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.written.to_dict()}


def _writers() -> dict[str, Callable[[Mapping[str, Any], Path], Written]]:
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
    try:
        if path.stat().st_size > MAX_INPUT_BYTES:
            raise InvalidInput(
                f"input {path} is larger than {MAX_INPUT_BYTES >> 20} MiB", field="input"
            )
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInput(f"input {path} does not exist", field="input") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            f"cannot read input {path} ({type(exc).__name__})", field="input"
        ) from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"input {path} is not JSON: {exc.msg} at line {exc.lineno}", field="input"
        ) from None
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
    data = load_result(request.input) if result is None else result
    return ReportOutcome(request.kind, _writers()[request.kind](data, request.out))
