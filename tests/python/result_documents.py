"""Every result and error document the suite sees is checked against its JSON Schema.

The schemas are those ``gpuops describe`` lists (``result_schema`` per command, one
``error_schema``). Two ways documents reach a test, both checked:

- in-process (``gpuops.cli.main.run``): the fixture below wraps the functions that build every
  document (``gpuops.contract.result_document`` / ``error_document``) and fails the test, at
  its end, naming each document that does not match;
- a ``gpuops`` process (the lab tests, as Jenkins runs it): the helpers that read its result
  or error file use :func:`load_document` (or :func:`check_document` on JSON they read
  themselves), which fails at once.

A command ``describe`` does not list (the tests' probe commands, ``gpuops lab``) has only its
envelope checked. The validator is the ``jsonschema`` library (draft 2020-12); :func:`_errors`
is the one place that calls it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Generator, Mapping
from pathlib import Path
from typing import Any

import pytest

#: What every result document is, whatever its command.
_ENVELOPE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ok": {"const": True},
        "command": {"type": "string"},
        "verdict": {"const": "ok"},
        "result": {"type": "object"},
    },
    "required": ["ok", "command", "verdict", "result"],
    "additionalProperties": False,
}


@functools.cache
def _result_schema(command: str) -> dict[str, Any] | None:
    from gpuops.cli.describe import result_schema  # when first needed

    return result_schema(command)


@functools.cache
def _error_schema() -> dict[str, Any]:
    from gpuops.contract import error_document_schema

    return error_document_schema()


def _errors(instance: Any, schema: Mapping[str, Any]) -> list[str]:
    """Where ``instance`` breaks ``schema`` (empty: it matches)."""
    import jsonschema  # a dev dependency: only when a document is checked

    validator = jsonschema.Draft202012Validator(schema)
    return [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(document)'}: {e.message[:300]}"
        for e in sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    ][:10]


def document_errors(doc: Any) -> list[str]:
    """Where a result or error document breaks its command's schema."""
    if not isinstance(doc, Mapping):
        return [f"(document): not a JSON object but {type(doc).__name__}"]
    command = doc.get("command")
    declared = _result_schema(command) if isinstance(command, str) else None
    if doc.get("ok") is False:
        problems = _errors(doc, _error_schema())
        result = doc.get("result")
        if declared is not None and isinstance(result, Mapping):  # a refusal's numbers
            inner = {**declared["properties"]["result"], "$defs": declared.get("$defs", {})}
            problems += [f"result/{p}" for p in _errors(result, inner)]
        return problems
    return _errors(doc, declared if declared is not None else _ENVELOPE)


def check_document(doc: Any, where: str = "") -> Any:
    """``doc`` when it matches its schema; otherwise the test fails naming what does not."""
    problems = document_errors(doc)
    if problems:
        command = doc.get("command") if isinstance(doc, Mapping) else None
        pytest.fail(
            f"{where or 'a gpuops document'} (gpuops {command}) breaks its schema (gpuops "
            "describe):\n  " + "\n  ".join(problems),
            pytrace=False,
        )
    return doc


def load_document(path: Path) -> Any:
    """Read a result or error file gpuops wrote, checked against its schema."""
    return check_document(json.loads(path.read_text()), str(path))


def _checked(build: Callable[..., dict[str, Any]], seen: list[str]) -> Callable[..., Any]:
    @functools.wraps(build)
    def wrapper(*args: Any, **kwargs: Any) -> dict[str, Any]:
        doc = build(*args, **kwargs)
        try:
            problems = document_errors(json.loads(json.dumps(doc, default=str)))
        except Exception as exc:  # a schema that cannot be built is a finding too
            problems = [f"(schema): {type(exc).__name__}: {exc}"]
        if problems:
            seen.append(f"gpuops {doc.get('command')}: " + "; ".join(problems))
        return doc

    return wrapper


@pytest.fixture(autouse=True)
def _documents_match_their_schemas(monkeypatch: pytest.MonkeyPatch) -> Generator[None, None, None]:
    """In-process documents: each one checked as it is built, the test failed at its end."""
    import gpuops.cli.main as cli_main
    from gpuops import contract

    seen: list[str] = []
    for name in ("result_document", "error_document"):
        original = getattr(contract, name)
        wrapped = _checked(original, seen)
        monkeypatch.setattr(contract, name, wrapped)
        if getattr(cli_main, name, None) is original:  # imported by name
            monkeypatch.setattr(cli_main, name, wrapped)
    yield
    if seen:
        pytest.fail(
            "documents that break their schema (gpuops describe):\n  " + "\n  ".join(seen),
            pytrace=False,
        )
