"""The Groovy side reads only declared fields: every field a step (``vars/*.groovy``) or a
library class (``src/**/*.groovy``) reads from a result or error document is declared in that
document's schema (``gpuops describe``).

A document enters Groovy through a few variables (:data:`ROOTS`: per file, the variable and
the schema it holds); a variable set from one of them (``Map approval = plan.approval``) is
followed. Each ``name.field.field`` / ``name?.field`` / ``name['field']`` read of those is
looked up in the schema. Any other ``.result.<field>`` read is a document read this table
does not know: it fails until it is added here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from gpuops.cli.describe import result_schema
from gpuops.contract import error_document_schema, result_document_schema

ROOT = Path(__file__).resolve().parents[3]
RELEASE = ("release promote", "release rollback")
#: What ReleaseSteps reads: the release's result, then each `release resume`'s (a progressive
#: release's approval steps, issue 20).
STEPPED = (*RELEASE, "release resume")
#: The version document (``gpuops --output json --version``): the one document that is no
#: command's result.
VERSION = {"type": "object", "properties": {"version": {"type": "string"}}}

#: file -> variable -> what it holds: command paths (their result), "error-document" /
#: "result-document" (any command's result document) / "version" (whole documents) or "error"
#: (an error document's ``error``; in CliContract also the map errorOf makes of it, whose keys
#: errorText reads). CliContract's ``doc`` is any of these documents (verdictOf reads both).
#: "<command>:<field>" is an item of the list at that field of the command's result (one of a
#: release's ``steps``).
ROOTS: dict[str, dict[str, tuple[str, ...]]] = {
    "src/org/gpuops/ReleaseFlow.groovy": {"plan": RELEASE},
    "src/org/gpuops/ReleaseSteps.groovy": {
        "result": STEPPED,
        "step": tuple(f"{command}:steps" for command in STEPPED),
    },
    "src/org/gpuops/CliContract.groovy": {
        "doc": ("error-document", "result-document", "version"),
        "error": ("error",),
    },
    "vars/gpuopsExec.groovy": {"document": ("error-document",), "done": ("result-document",)},
    "vars/buildImage.groovy": {"record": ("image build",), "clean": ("image clean",)},
}
#: ``readDocument(...)?.result``: the result document's ``result``.
_READ_DOCUMENT = re.compile(r"readDocument\([^)]*\)\??\.(\w+)")
_IDENT = r"[A-Za-z_]\w*"
_ALIAS = re.compile(rf"\bMap\s+({_IDENT})\s*=\s*({_IDENT}(?:\??\.{_IDENT})+)")
_RESULT_READ = re.compile(rf"\.result\??(?:\.|\[')({_IDENT})")
_NOT_FIELDS = {"get", "containsKey", "toString", "findAll", "join", "keySet", "size", "each"}


def _schemas(kind: str) -> list[dict[str, Any]]:
    if kind == "error-document":
        return [error_document_schema()]
    if kind == "version":
        return [VERSION]
    if kind == "result-document":  # the envelope every command's result document shares
        return [result_document_schema("any", {"type": "object"})]
    if kind == "error":
        return [error_document_schema()["properties"]["error"]]
    schema = result_schema(kind)
    assert schema is not None, f"gpuops {kind} is no command describe lists"
    return [schema, {**schema["properties"]["result"], "$defs": schema.get("$defs", {})}]


def _resolve(schema: Mapping[str, Any], node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The object schemas ``node`` may be (through $ref and anyOf)."""
    ref = node.get("$ref")
    if isinstance(ref, str):
        return _resolve(schema, schema["$defs"][ref.rsplit("/", 1)[1]])
    if node.get("type") == "array" and isinstance(node.get("items"), Mapping):
        return _resolve(schema, node["items"])  # a field of a list's items
    out = []
    for alt in node.get("anyOf", []):
        out += _resolve(schema, alt)
    if "properties" in node or node.get("type") in ("object", ["object", "null"]):
        out.append(node)
    return out


def declared(schema: Mapping[str, Any], path: list[str]) -> bool:
    """Whether ``path`` (field names from the document's root) is declared in ``schema``."""
    nodes = _resolve(schema, schema)
    for depth, name in enumerate(path, 1):
        found = [node["properties"][name] for node in nodes if name in node.get("properties", {})]
        if not found:
            return False
        if depth == len(path):
            return True
        nodes = [x for node in found for x in _resolve(schema, node)]
    return True


def _code(line: str) -> str:
    """The line without comments and string text: a '...' string is text only, a "..."
    string keeps its ${...} expressions."""
    out, i = [], 0
    while i < len(line):
        c = line[i]
        if line.startswith("//", i):
            break
        if c == "'":
            end = line.find("'", i + 1)
            i = len(line) if end < 0 else end + 1
            out.append("''")
            continue
        if c == '"':
            end = line.find('"', i + 1)
            body = line[i + 1 : len(line) if end < 0 else end]
            out.append(" ".join(re.findall(r"\$\{([^}]*)\}", body)) or '""')
            i = len(line) if end < 0 else end + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def reads(text: str, roots: Mapping[str, tuple[str, ...]]) -> Iterator[tuple[int, str, list[str]]]:
    """(line, variable, field path from the document's root) of each read of a document."""
    holds: dict[str, tuple[str, list[str]]] = {name: (name, []) for name in roots}
    for line_no, line in enumerate(text.splitlines(), 1):
        code = _code(line)
        for m in _ALIAS.finditer(code):
            head, *rest = re.split(r"\??\.", m.group(2))
            if head in holds:
                root, base = holds[head]
                holds[m.group(1)] = (root, base + rest)
        for name, (root, base) in list(holds.items()):
            pattern = rf"(?<![\w.]){name}((?:\??\.{_IDENT}|\['{_IDENT}'\])+)"
            for m in re.finditer(pattern, code):
                fields = re.findall(rf"\??\.({_IDENT})|\['({_IDENT})'\]", m.group(1))
                path = [a or b for a, b in fields]
                while path and path[-1] in _NOT_FIELDS:
                    path.pop()
                if path:
                    yield line_no, root, base + path


def _groovy_files() -> list[Path]:
    return sorted([*ROOT.glob("vars/*.groovy"), *ROOT.glob("src/**/*.groovy")])


@pytest.mark.parametrize("rel", sorted(ROOTS))
def test_every_field_a_step_reads_from_a_document_is_declared(rel: str) -> None:
    path = ROOT / rel
    text = path.read_text()
    found = list(reads(text, ROOTS[rel]))
    assert found, f"{rel}: no read of {sorted(ROOTS[rel])} found: is the table stale?"
    for line, root, fields in found:
        kinds = ROOTS[rel][root]
        for kind in kinds:
            command, _, base = kind.partition(":")
            path = [*base.split("."), *fields] if base else fields
            ok = any(declared(s, path) for s in _schemas(command))
            if "version" in kinds:  # one variable for any of these documents
                ok = any(declared(s, fields) for k in kinds for s in _schemas(k))
            assert ok, (
                f"{rel}:{line} reads {root}.{'.'.join(fields)}, which the schema of "
                f"{kind} does not declare (gpuops describe)"
            )


def test_a_result_document_is_read_only_through_the_known_variables() -> None:
    for path in _groovy_files():
        rel = str(path.relative_to(ROOT))
        text = path.read_text()
        for m in _READ_DOCUMENT.finditer(text):
            assert m.group(1) == "result", f"{rel}: readDocument(...).{m.group(1)}"
        for line_no, line in enumerate(text.splitlines(), 1):
            for m in _RESULT_READ.finditer(_code(line)):
                if m.group(1) in _NOT_FIELDS:
                    continue
                pytest.fail(
                    f"{rel}:{line_no} reads the field {m.group(1)} of a result no table "
                    "knows: add its variable to ROOTS in this test"
                )


def test_the_reads_the_release_flow_makes_are_found_and_an_undeclared_one_fails() -> None:
    text = (ROOT / "src/org/gpuops/ReleaseFlow.groovy").read_text()
    paths = {".".join(p) for _, _, p in reads(text, ROOTS["src/org/gpuops/ReleaseFlow.groovy"])}
    assert {"approval.required", "lock.resource", "wanted.tag", "action"} <= paths
    promote = _schemas("release promote")[1]
    assert declared(promote, ["approval", "timeout_minutes"])
    assert not declared(promote, ["approval", "deadline"])
    assert not declared(promote, ["lock", "owner"])
    fake = "Map plan = x\nMap w = plan.wanted ?: [:]\nString s = w.colour + 'plan.x'\n"
    found = [(line, fields) for line, _, fields in reads(fake, {"plan": RELEASE})]
    assert found == [(2, ["wanted"]), (3, ["wanted", "colour"])]
    assert declared(promote, ["wanted"]) and not declared(promote, ["wanted", "colour"])


def test_the_verdict_read_of_both_documents_is_found_and_declared() -> None:
    contract = (ROOT / "src/org/gpuops/CliContract.groovy").read_text()
    found = {
        (root, ".".join(p))
        for _, root, p in reads(contract, ROOTS["src/org/gpuops/CliContract.groovy"])
    }
    assert ("doc", "verdict") in found
    runner = (ROOT / "vars/gpuopsExec.groovy").read_text()
    found = {(root, ".".join(p)) for _, root, p in reads(runner, ROOTS["vars/gpuopsExec.groovy"])}
    assert ("done", "result") in found
    for kind in ("result-document", "error-document"):
        assert declared(_schemas(kind)[0], ["verdict"]), kind
        assert not declared(_schemas(kind)[0], ["outcome"]), kind


def test_the_reads_of_a_progressive_release_are_found_and_an_undeclared_one_fails() -> None:
    roots = ROOTS["src/org/gpuops/ReleaseSteps.groovy"]
    text = (ROOT / "src/org/gpuops/ReleaseSteps.groovy").read_text()
    paths = {(root, ".".join(p)) for _, root, p in reads(text, roots)}
    assert {
        ("result", "state"),
        ("result", "paused.timeout_minutes"),
        ("result", "paused.approvers"),
        ("result", "paused.step"),
        ("result", "release.number"),
        ("result", "steps"),
        ("step", "kind"),
        ("step", "failures"),
        ("step", "measurements"),
    } <= paths, paths
    resume = _schemas("release resume")[1]
    assert declared(resume, ["steps", "verdict"])
    assert not declared(resume, ["steps", "colour"])
    assert not declared(resume, ["paused", "deadline"])
    fake = "Map result = x\nMap step = y\nString s = step.colour + result.paused.step\n"
    found = [(root, p) for _, root, p in reads(fake, roots)]
    assert ("step", ["colour"]) in found and ("result", ["paused", "step"]) in found
    assert not declared(resume, ["steps", "colour"])
