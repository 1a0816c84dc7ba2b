"""Outputs declared like inputs: ``gpuops describe`` lists each command's result document as a
JSON Schema generated from its typed result, and the documents match it.

- every command ``describe`` lists declares its result (``cli.describe.RESULTS``), and every
  schema is a valid draft 2020-12 schema;
- the generator (:mod:`gpuops.schema`): ``TypedDict``s closed, ``NotRequired`` keys optional,
  ``Annotated`` documents, dataclass fields (and their ``asdict``), a class used twice once in
  ``$defs``, a result of two shapes, a ``StrEnum``'s words;
- a release's documents (refused, planned, failed and rolled back, history, status) match
  theirs, and the verdict is the use case's: a refused approval is exit 3 with its words;
- the suite's checker (``result_documents``) finds a field no schema declares.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NotRequired, TypedDict

import jsonschema
import pytest
import yaml
from result_documents import _checked as checked
from result_documents import document_errors

from gpuops.cli import describe
from gpuops.cli.main import run
from gpuops.contract import error_document, error_document_schema, result_document
from gpuops.core.deploywatch import Problem
from gpuops.core.releaseconfig import Environment, parse
from gpuops.core.releasehistory import Release
from gpuops.errors import ExitCode, GateRefused, InvalidInput, OperationFailed
from gpuops.schema import ASDICT, DIALECT, document_schema, open_items
from gpuops.usecases import releases
from gpuops.usecases.outcome import Verdict
from gpuops.usecases.releases import model as m
from gpuops.usecases.releases.gates import Gate
from gpuops.usecases.releases.status import HistoryOutcome, StatusOutcome
from gpuops.usecases.releases.watch import WatchResult

CONFIG = """\
environments:
  production:
    namespace: ai-prod
    deployments: [infer, embed]
    image: 127.0.0.1:9/ai/infer
    registry_tag: prod
    approval: {approvers: [alice, release-managers], timeout_minutes: 30}
    cluster: {kubeconfig: /nonexistent/kubeconfig}
"""


@pytest.fixture(scope="module")
def described() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in describe.RESULTS:
        schema = describe.result_schema(path)
        assert schema is not None, path
        out[path] = schema
        assert schema["properties"]["result"].get("type") == "object" or (
            "anyOf" in schema["properties"]["result"]
        ), path
    return out


def test_describe_lists_a_result_schema_for_every_command_and_one_error_schema(
    tmp_path: Path,
) -> None:
    result = tmp_path / "describe.json"
    assert run(["--result-file", str(result), "describe"]) == 0
    doc = json.loads(result.read_text())["result"]
    assert set(doc["commands"]) == set(describe.RESULTS), "declare each command's result"
    for path, command in doc["commands"].items():
        assert {"command", "summary", "options", "arguments"} <= set(command), path
        schema = command["result_schema"]
        assert schema["$schema"] == DIALECT
        assert schema["properties"]["command"] == {"const": path}
        jsonschema.Draft202012Validator.check_schema(schema)
    assert doc["error_schema"] == error_document_schema()
    jsonschema.Draft202012Validator.check_schema(doc["error_schema"])


def test_every_command_declares_its_result_field_by_field(described: dict[str, Any]) -> None:
    """Every command that returns a result names its typed result, and the schema's top is
    closed (no key the type does not name): a new command declares its result from the start."""
    for path, schema in described.items():
        target = describe.RESULTS[path]
        assert target and ":" in target, path
        result = schema["properties"]["result"]
        shapes = result.get("anyOf", [result])
        for each in shapes:
            shape = schema.get("$defs", {}).get(each.get("$ref", "").rpartition("/")[2], each)
            assert shape["additionalProperties"] is False, path
            assert shape["required"], path
        assert "description" not in result or "not declared" not in result["description"], path


def test_the_release_results_are_declared_field_by_field(described: dict[str, Any]) -> None:
    for path in ("release promote", "release rollback", "release history", "release status"):
        result = described[path]["properties"]["result"]
        assert result["additionalProperties"] is False, path
        assert "environment" in result["required"], path
    promote = described["release promote"]["properties"]["result"]["properties"]
    assert promote["approval"]["required"] == [
        "required",
        "approvers",
        "timeout_minutes",
        "approved_by",
        "requested_by",
    ]
    assert promote["lock"]["required"] == ["resource"]
    assert set(promote["state"]["enum"]) == set(m.STATES)


class _Inner(TypedDict):
    name: str
    count: NotRequired[int]


class _Outer(TypedDict):
    first: _Inner
    second: list[_Inner]
    state: Annotated[str, {"enum": ["a", "b"]}]
    release: Annotated[dict[str, Any] | None, Release]


class _Open(TypedDict):
    gate: str


open_items(_Open)


@dataclass
class _Fields:
    must: str
    maybe: int | None = None
    many: tuple[str, ...] = ()
    t0: float = field(default=0.0, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"must": self.must, "maybe": self.maybe, "many": list(self.many)}


def test_the_generator() -> None:
    schema = document_schema(_Outer)
    assert schema["$defs"]["_Inner"] == {
        "type": "object",
        "properties": {"name": {"type": "string"}, "count": {"type": "integer"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    props = schema["properties"]
    assert props["first"] == {"$ref": "#/$defs/_Inner"}
    assert props["second"] == {"type": "array", "items": {"$ref": "#/$defs/_Inner"}}
    assert props["state"] == {"type": "string", "enum": ["a", "b"]}
    assert props["release"]["anyOf"][1] == {"type": "null"}
    assert props["release"]["anyOf"][0]["required"] == [
        "number",
        "environment",
        "action",
        "status",
        "started",
    ]
    assert "additionalProperties" not in document_schema(_Open)
    fields = document_schema(_Fields)
    assert fields["required"] == ["must"] and "t0" not in fields["properties"]
    assert fields["properties"]["maybe"] == {"type": ["integer", "null"]}
    validator = jsonschema.Draft202012Validator(schema)
    good = {"first": {"name": "x"}, "second": [], "state": "a", "release": None}
    assert not list(validator.iter_errors(good))
    assert list(validator.iter_errors({**good, "first": {"name": "x", "extra": 1}}))
    assert list(validator.iter_errors({**good, "state": "c"}))


class _Word(StrEnum):
    ON = "on"
    OFF = "off"


class _Shapes(TypedDict):
    """Of a result of two shapes."""

    name: str


class _OtherShape(TypedDict):
    code: int


@dataclass
class _TwoShapes:
    code: int | None = None

    def to_dict(self) -> _Shapes | _OtherShape:
        return {"name": "x"} if self.code is None else {"code": self.code}


class _Rows(TypedDict):
    rows: list[Annotated[dict[str, Any], _Fields, ASDICT]]
    word: _Word


def test_the_generator_reads_unions_asdict_and_str_enums() -> None:
    two = jsonschema.Draft202012Validator(document_schema(_TwoShapes))
    assert not list(two.iter_errors(_TwoShapes().to_dict()))
    assert not list(two.iter_errors(_TwoShapes(3).to_dict()))
    assert list(two.iter_errors({"name": "x", "code": 3}))
    rows = document_schema(_Rows)
    assert rows["properties"]["word"] == {"type": "string", "enum": ["on", "off"]}
    row = rows["properties"]["rows"]["items"]
    assert row["required"] == ["must", "maybe", "many", "t0"]  # asdict: every field, always
    validator = jsonschema.Draft202012Validator(rows)
    full = json.loads(json.dumps(asdict(_Fields("m"))))  # as a document holds it
    assert not list(validator.iter_errors({"rows": [full], "word": "on"}))
    assert list(validator.iter_errors({"rows": [{"must": "m"}], "word": "on"}))
    assert list(validator.iter_errors({"rows": [], "word": "dim"}))


def _env() -> Environment:
    return parse(yaml.safe_load(CONFIG), "gpuops-release.yaml").environment("production")


def _release(n: int, status: str, **kw: Any) -> Release:
    return Release(n, "production", "promote", status, "2026-01-01T00:00:00Z", tag=f"1.{n}.0", **kw)


def _checked(command: str, doc: dict[str, Any]) -> None:
    assert document_errors(doc) == [], doc


class _NoCluster:
    """The release stops at its approval: the cluster is only asked for its address."""

    server = "https://127.0.0.1:9"

    def close(self) -> None:
        """Nothing to close."""


def test_a_refused_approval_is_the_use_cases_verdict_with_its_words(tmp_path: Path) -> None:
    config = tmp_path / "gpuops-release.yaml"
    config.write_text(CONFIG)
    deps = releases.Deps(
        registry_for=lambda env: None,
        say=lambda line: None,
        connect=lambda cluster: _NoCluster(),
    )
    outcome = releases.promote(
        m.PromoteRequest(m.Target(str(config), "production"), tag="1.2.0"), deps
    )
    assert outcome.verdict is Verdict.REFUSED and outcome.exit_code == ExitCode.GATE_REFUSED
    assert isinstance(outcome.problem, GateRefused)
    assert outcome.problem.message == (
        "production requires an approval (alice, release-managers) and none was given"
    )
    assert outcome.problem.hint == (
        "approve it in the pipeline (promoteTag asks) or pass --approved-by"
    )
    doc = outcome.to_dict()
    assert doc["state"] == "refused" and doc["approval"]["required"] is True
    assert doc["lock"] == {"resource": "gpuops-release 127.0.0.1:9/ai-prod/infer,embed"}
    _checked("release promote", error_document("release promote", outcome.problem, doc))


def test_every_part_of_a_release_document_matches_its_schema() -> None:
    env = _env()
    out = m.ReleaseOutcome(env, "promote", m.FAILED, "https://k8s:6443")
    out.approval = {
        "required": True,
        "approvers": ["alice"],
        "timeout_minutes": 30,
        "approved_by": "alice",
        "requested_by": "bob",
    }
    out.lock = {
        "resource": m.lock_resource(out.server, env),
        "leases": ["gpuops-release-infer"],
        "holder": "jenkins-7",
        "taken_over": [{"lease": "x", "holder": "y", "operation": "z", "silent_for_s": 99}],
    }
    digest = "sha256:" + "a" * 64
    out.gates = [
        Gate("image", True, "ok", {"digest": digest}),
        Gate("compat", True, "every node suits CUDA 12.4", {"nodes": ["g1"]}),
        Gate("headroom", True, "fits", {"deployments": [{"deployment": "infer", "fits": True}]}),
    ]
    out.wanted = m.Wanted("1.2.0", digest, f"127.0.0.1:9/ai/infer:1.2.0@{digest}", "v2")
    out.current = _release(1, "succeeded", digest=digest)
    out.record = _release(
        2, "failed", failure={"kind": "crash-loop"}, rolled_back_to=1, registry_tag="prod"
    )
    problem = Problem("crash-loop", "infer", "back-off", ("infer-1",), "0/3 nodes")
    out.rollout = WatchResult("failed", 12.5, problem, ["infer 1/2"])
    out.restore = WatchResult("complete", 3.0, None, ["infer 2/2"])
    out.explanation = {"summary": "no GPU", "fixes": []}
    out.reconciled = [{"release": 1, "was": "pending", "now": "succeeded"}]
    out.notes = ["stopped: gone"]
    out.timings_s = {"gates": 0.5, "total": 20.1}
    failed = OperationFailed("release #2 failed", hint="see history")
    _checked("release promote", error_document("release promote", failed, out.to_dict()))
    rollback = m.ReleaseOutcome(env, "rollback", m.PLANNED, "https://k8s:6443")
    rollback.lock = {"resource": "r"}
    rollback.approval = {**out.approval, "required": False, "approved_by": None}
    rollback.wanted = m.Wanted("1.1.0", digest, "img", None, _release(1, "succeeded"))
    _checked("release rollback", result_document("release rollback", rollback.to_dict()))
    bad = {**out.to_dict(), "state": "exploded"}
    assert document_errors(result_document("release promote", bad))


def test_history_and_status_documents_match_their_schemas() -> None:
    env = _env()
    current = _release(2, "succeeded")
    history = HistoryOutcome(
        env,
        "https://k8s:6443",
        [current, _release(1, "succeeded", rolled_back_by=3)],
        current,
        _release(1, "succeeded"),
        [_release(1, "succeeded")],
        {3: "in progress (its release holds the lock)"},
    )
    doc = history.to_dict()
    _checked("release history", result_document("release history", doc))
    with_page: dict[str, Any] = {
        **doc,
        "report": {"status": "written", "kind": "releases", "page": "p.html", "files": []},
    }
    _checked("release history", result_document("release history", with_page))
    row = {
        "name": "infer",
        "image": "img",
        "model": None,
        "release": 2,
        "replicas": 2,
        "updated": 2,
        "ready": 2,
        "available": 2,
        "complete": True,
        "progress": "infer 2/2",
    }
    status = StatusOutcome(env, "https://k8s:6443", current, [row], [], {})
    status.registry_tag = {"tag": "prod", "repository": "r", "digest": None, "problem": "down"}
    _checked("release status", result_document("release status", status.to_dict()))


@pytest.mark.parametrize(
    "error",
    [
        OperationFailed("it failed", hint="look"),
        InvalidInput("bad", field="tag"),
        GateRefused("no", hint=None),
    ],
)
def test_error_documents_match_the_shared_schema(error: Exception) -> None:
    assert isinstance(error, OperationFailed | InvalidInput | GateRefused)
    assert document_errors(error_document("headroom check", error)) == []
    doc = error_document("probe raise", error)
    assert document_errors({**doc, "error": {**doc["error"], "exit_code": 9}})
    assert document_errors({**doc, "stack": "..."})


def test_the_in_process_check_names_a_document_that_breaks_its_schema() -> None:
    seen: list[str] = []
    build = checked(result_document, seen)
    build("release status", {"environment": "x"})
    build("probe echo", {"anything": 1})  # no declared schema: only the envelope
    assert len(seen) == 1 and seen[0].startswith("gpuops release status: ")
