"""The JSON contract between the Jenkins library (or any caller) and the CLI.

Parameters come in as one JSON object in the file named by ``GPUOPS_PARAMS_FILE``; its
keys are the invoked command's option names (underscores) and act as option defaults, so
the command line still wins. Results go out as one JSON document in the file named by
``GPUOPS_RESULT_FILE``, failures as one JSON document in ``GPUOPS_ERROR_FILE``:

    {"ok": true,  "command": "headroom check", "verdict": "ok", "result": {...}}
    {"ok": false, "command": "headroom check", "verdict": "refused" | "failed" | "partial",
     "error": {"message", "category", "hint", "exit_code"}, "result": {...} | null}

Both files are written atomically (temporary file, then rename), so a reader never sees
half a document. :func:`result_document_schema` and :func:`error_document_schema` are their
JSON Schemas (``gpuops describe`` lists them; the test suite checks every document against
them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuops import fsio
from gpuops.core.values import key_shown, shown
from gpuops.errors import GateRefused, GpuOpsError, InvalidInput, error_categories

PARAMS_ENV = "GPUOPS_PARAMS_FILE"
RESULT_ENV = "GPUOPS_RESULT_FILE"
ERROR_ENV = "GPUOPS_ERROR_FILE"

#: Largest parameters document accepted: parameters are shapes and names, not payloads.
MAX_PARAMS_BYTES = 1 << 20


def load_params(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a parameters document; any defect is an :class:`InvalidInput` naming the file."""
    p = Path(path)
    if not os.path.lexists(p):
        raise InvalidInput(
            f"parameters file {shown(str(p), 200)} does not exist (from ${PARAMS_ENV} or "
            "--params-file)",
            hint=f"write the JSON parameters first or unset {PARAMS_ENV}",
            field="params_file",
        )
    text = fsio.read_text(p, cap=MAX_PARAMS_BYTES, what="parameters file", option="params_file")
    try:
        doc = json.loads(text)
    except RecursionError:
        raise InvalidInput(
            f"parameters file {shown(str(p), 200)} is nested too deeply", field="params_file"
        ) from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"parameters file {shown(str(p), 200)} is not valid JSON: {exc.msg} at line "
            f"{exc.lineno} column {exc.colno}"
        ) from None
    if not isinstance(doc, dict):
        raise InvalidInput(
            f"parameters file {shown(str(p), 200)} must hold a JSON object, not "
            f"{type(doc).__name__}"
        )
    for key in doc:
        if not key.replace("_", "").isalnum() or not key[:1].isalpha():
            raise InvalidInput(
                f"parameters file {shown(str(p), 200)}: {key_shown(key)} is not a parameter name"
            )
    return doc


def write_document(
    path: str | os.PathLike[str], doc: Mapping[str, Any], *, option: str, parents: bool = False
) -> None:
    """Write ``doc`` as JSON to ``path`` atomically, through the one writer (which redacts);
    ``parents``: make its missing folders (a build record under the workspace)."""
    fsio.write_json_file(path, dict(doc), option=option, parents=parents)


#: The verdicts of an error document (:class:`gpuops.usecases.outcome.Verdict` less ``ok``).
ERROR_VERDICTS = ("refused", "failed", "partial")


def result_document(command: str, result: Mapping[str, Any]) -> dict[str, Any]:
    return {"ok": True, "command": command, "verdict": "ok", "result": dict(result)}


def error_document(
    command: str,
    error: GpuOpsError,
    result: Mapping[str, Any] | None = None,
    verdict: str | None = None,
) -> dict[str, Any]:
    """``verdict``: the use case's (``partial`` when part of the operation succeeded); else
    ``refused`` for a gate's no and ``failed`` for any other error."""
    if verdict is None:
        verdict = "refused" if isinstance(error, GateRefused) else "failed"
    if verdict not in ERROR_VERDICTS:
        raise ValueError(f"not an error document's verdict: {verdict}")
    return {
        "ok": False,
        "command": command,
        "verdict": verdict,
        "error": error.to_dict(),
        "result": dict(result) if result is not None else None,
    }


def result_document_schema(command: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """The schema of ``command``'s result document, given its ``result``'s schema."""
    from gpuops.schema import DIALECT  # noqa: PLC0415 - only when described

    inner = dict(result)
    defs = inner.pop("$defs", None)
    doc: dict[str, Any] = {
        "$schema": DIALECT,
        "title": f"gpuops {command}: result document",
        "type": "object",
        "properties": {
            "ok": {"const": True},
            "command": {"const": command},
            "verdict": {"const": "ok"},
            "result": inner,
        },
        "required": ["ok", "command", "verdict", "result"],
        "additionalProperties": False,
    }
    if defs:
        doc["$defs"] = defs
    return doc


def error_document_schema() -> dict[str, Any]:
    """The schema of every command's error document (:func:`error_document`): its ``result``
    is what the operation found before the answer was no (the command's result, or null)."""
    from gpuops.schema import DIALECT  # noqa: PLC0415 - only when described

    cats = error_categories()
    return {
        "$schema": DIALECT,
        "title": "gpuops: error document",
        "type": "object",
        "properties": {
            "ok": {"const": False},
            "command": {"type": "string"},
            "verdict": {"enum": list(ERROR_VERDICTS)},
            "error": {
                "type": "object",
                "properties": {
                    "message": {"type": "string"},
                    "category": {"enum": [c.category for c in cats if c.code]},
                    "hint": {"type": ["string", "null"]},
                    "exit_code": {"enum": [int(c.code) for c in cats if c.code]},
                    "field": {"type": "string"},
                },
                "required": ["message", "category", "hint", "exit_code"],
                "additionalProperties": False,
            },
            "result": {"type": ["object", "null"]},
        },
        "required": ["ok", "command", "verdict", "error", "result"],
        "additionalProperties": False,
    }
