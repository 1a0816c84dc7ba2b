"""One outcome shape: the use case decides the verdict, the CLI only maps it.

- a convention test (AST): nothing in ``python/src/gpuops/cli/`` constructs a verdict error
  (``GateRefused``, ``OperationFailed``, ``Unreachable``, ...; ``InvalidInput`` for bad
  arguments is allowed) or hands an error to ``Shown`` itself: only ``cli.base.show`` does,
  from a use case's :class:`~gpuops.usecases.outcome.Outcome`. The root's own failures are
  listed in :data:`ALLOWED`;
- the mapping: ok is exit 0 and the result document, refused exit 3 and partial exit 1, each
  with the outcome's data as the error document's ``result``;
- the verdicts the headroom and compat use cases decide (they were the CLI's), with their
  hints word for word, and a capacity page that cannot be written changing no verdict.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest
from test_headroom import node, pod, shape

from gpuops import errors
from gpuops.cli import main as cli_main
from gpuops.cli.base import GpuOpsGroup, Shown, show
from gpuops.cli.types import Text
from gpuops.core.cuda import Version
from gpuops.core.headroom import Policy
from gpuops.core.kubemodel import Node, Pod
from gpuops.errors import ExitCode, GateRefused, OperationFailed
from gpuops.render.html.pages import PAGES
from gpuops.usecases import headroom, reports
from gpuops.usecases.images import compat
from gpuops.usecases.outcome import Outcome, Verdict


@dataclass(frozen=True)
class Data:
    """A use case's result that is already a JSON object (the probe commands')."""

    data: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


CLI = Path(__file__).resolve().parents[3] / "python" / "src" / "gpuops" / "cli"

#: Error classes a command must not build: the verdict is the use case's.
VERDICT_ERRORS = frozenset(
    name
    for name, value in vars(errors).items()
    if isinstance(value, type)
    and issubclass(value, errors.GpuOpsError)
    and value is not errors.InvalidInput  # bad arguments: the CLI's own to say
)

#: The root's own failures (not an operation's verdict): (file, function, what it builds).
ALLOWED = frozenset(
    {
        ("main.py", "_load", "OperationFailed"),  # a command group that cannot be loaded
        ("main.py", "_emit", "OperationFailed"),  # a result file that cannot be written
        ("main.py", "run", "InternalError"),  # the last line of defence: a bug
        ("base.py", "show", "Shown(error)"),  # the one mapping of a use case's verdict
    }
)


def verdicts_built(source: str) -> Iterator[tuple[int, str, str]]:
    """(line, enclosing function, what) for each verdict ``source`` builds."""

    def visit(tree: ast.AST, function: str) -> Iterator[tuple[int, str, str]]:
        for child in ast.iter_child_nodes(tree):
            name = function
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = child.name
            if isinstance(child, ast.Call):
                func = child.func
                called = (
                    func.id
                    if isinstance(func, ast.Name)
                    else func.attr
                    if isinstance(func, ast.Attribute)
                    else ""
                )
                if called in VERDICT_ERRORS:
                    yield child.lineno, function, called
                elif called in ("Shown", "Outcome") and (
                    len(child.args) >= 3 or any(k.arg == "error" for k in child.keywords)
                ):
                    yield child.lineno, function, "Shown(error)"
                elif called in ("refused", "failed"):  # usecases.outcome.Outcome's makers
                    yield child.lineno, function, f"Outcome.{called}"
            yield from visit(child, name)

    yield from visit(ast.parse(source), "<module>")


def test_no_command_builds_a_verdict() -> None:
    offenders = []
    for path in sorted(CLI.glob("*.py")):
        for line, function, what in verdicts_built(path.read_text()):
            if (path.name, function, what) not in ALLOWED:
                offenders.append(f"python/src/gpuops/cli/{path.name}:{line}: {what} in {function}")
    assert not offenders, (
        "the CLI builds verdicts; the use case must return them in its Outcome "
        "(cli.base.show maps it):\n" + "\n".join(offenders)
    )


def test_the_convention_test_sees_each_way_of_building_a_verdict() -> None:
    planted = (
        "def a():\n"
        "    raise GateRefused('no')\n"
        "def b():\n"
        "    return Outcome(d, t, error=errors.OperationFailed('x'))\n"
        "def c():\n"
        "    return Shown(d, t, exc)\n"
        "def d():\n"
        "    return UseCaseOutcome.refused(r, 'no')\n"
        "def e():\n"
        "    raise Unreachable('x')\n"
        "def f():\n"
        "    raise InvalidInput('bad --pods')\n"
    )
    found = [(line, fn, what) for line, fn, what in verdicts_built(planted)]
    assert found == [
        (2, "a", "GateRefused"),
        (4, "b", "Shown(error)"),
        (4, "b", "OperationFailed"),
        (6, "c", "Shown(error)"),
        (8, "d", "Outcome.refused"),
        (10, "e", "Unreachable"),
    ]


# -- the mapping -------------------------------------------------------------------------
@click.group(cls=GpuOpsGroup, name="probe")
def probe() -> None:
    """Test-only commands."""


@probe.command(name="verdict")
@click.option("--kind", type=Text("kind"), required=True)
def probe_verdict(kind: str) -> Shown:
    data = Data({"free": 2, "needed": 4})
    outcomes: dict[str, Outcome[Data]] = {
        "ok": Outcome(data),
        "refused": Outcome.refused(data, "2 free GPUs, need 4", hint="free some"),
        "partial": Outcome.failed(data, "1 of 2 hosts failed", partial=True),
        "failed": Outcome.failed(data, "the rollout failed"),
    }
    return show(outcomes[kind], f"{kind}: 2 free")


@pytest.fixture
def _probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(cli_main.cli.commands, "probe", probe)
    for var in ("GPUOPS_PARAMS_FILE", "GPUOPS_RESULT_FILE", "GPUOPS_ERROR_FILE", "GPUOPS_OUTPUT"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.usefixtures("_probe")
def test_an_ok_outcome_is_exit_0_and_the_result_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result, error = tmp_path / "result.json", tmp_path / "error.json"
    argv = ["--result-file", str(result), "--error-file", str(error)]
    assert cli_main.run([*argv, "probe", "verdict", "--kind", "ok"]) == 0
    doc = json.loads(result.read_text())
    assert doc["ok"] is True and doc["result"] == {"free": 2, "needed": 4}
    assert doc["verdict"] == "ok"
    assert not error.exists()
    assert capsys.readouterr().out == "ok: 2 free\n"


@pytest.mark.usefixtures("_probe")
@pytest.mark.parametrize(
    ("kind", "code", "category", "verdict"),
    [
        ("refused", ExitCode.GATE_REFUSED, "gate-refused", Verdict.REFUSED),
        ("partial", ExitCode.FAILED, "failed", Verdict.PARTIAL),
        ("failed", ExitCode.FAILED, "failed", Verdict.FAILED),
    ],
)
def test_a_refused_or_partial_outcome_is_its_exit_code_with_its_result(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    code: int,
    category: str,
    verdict: Verdict,
) -> None:
    error = tmp_path / "error.json"
    argv = ["--output", "json", "--error-file", str(error), "probe", "verdict", "--kind", kind]
    assert cli_main.run(argv) == code
    doc = json.loads(error.read_text())
    assert doc["ok"] is False and doc["command"] == "probe verdict"
    assert doc["verdict"] == verdict.value  # review: a partial run was invisible to callers
    assert doc["error"]["category"] == category and doc["error"]["exit_code"] == code
    assert doc["result"] == {"free": 2, "needed": 4}  # what the operation found
    assert json.loads(capsys.readouterr().err) == doc
    data = Data({})
    made = {
        "refused": Outcome.refused(data, "no"),
        "partial": Outcome.failed(data, "x", partial=True),
        "failed": Outcome.failed(data, "x"),
    }[kind]
    assert made.verdict is verdict and made.exit_code == code


@pytest.mark.usefixtures("_probe")
def test_a_refusal_in_text_prints_the_result_then_the_error_and_its_hint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli_main.run(["probe", "verdict", "--kind", "refused"]) == 3
    out, err = capsys.readouterr()
    assert out == "refused: 2 free\n"
    assert err == "gpuops: error: 2 free GPUs, need 4\nhint: free some\n"


# -- verdicts the use cases decide ---------------------------------------------------------
class FakeKube:
    """What the headroom and compat use cases ask of the Kubernetes adapter (pure unit)."""

    server = "https://kube.test:6443"

    def __init__(self, nodes: list[Node], bound: list[Pod]) -> None:
        self.nodes, self.bound = nodes, bound

    def ensure_namespace(self, namespace: str) -> None:
        pass

    def quota_limits(self, namespace: str, resource: str) -> list[Any]:
        return []

    def list_nodes_and_bound_pods(
        self, resources: frozenset[str] | None = None
    ) -> tuple[list[Node], list[Pod], dict[str, float]]:
        return self.nodes, self.bound, {"nodes": 0.0, "pods": 0.0}

    def list_nodes(self, resources: frozenset[str] | None = None) -> list[Node]:
        return self.nodes

    def close(self) -> None:
        pass


def _check(
    gpus: int, *, report_dir: Path | None = None, show_nodes: bool = False
) -> Outcome[headroom.CheckResult]:
    kube = FakeKube([node("a"), node("b")], [pod("x", "a", 4), pod("y", "b", 6)])
    request = headroom.CheckRequest(
        shape(gpus), Policy(), show_nodes=show_nodes, report_dir=report_dir
    )
    return headroom.check(request, lambda cluster: kube)  # type: ignore[arg-type,return-value]


@pytest.fixture
def _no_webhook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(headroom.WEBHOOK_ENV, raising=False)
    monkeypatch.setattr(reports, "_INSTALLED", {})  # given back after the test
    reports.install_pages(lambda: PAGES)  # what the CLI does as it starts


@pytest.mark.usefixtures("_no_webhook")
def test_headroom_check_refuses_a_shape_that_does_not_fit_with_the_hint() -> None:
    fits = _check(4)
    assert fits.verdict is Verdict.OK and fits.problem is None and fits.result.fits
    assert fits.to_dict()["verdict"] == "fits" and fits.to_dict()["nodes"] is None
    short = _check(5)
    assert short.verdict is Verdict.REFUSED and short.exit_code == ExitCode.GATE_REFUSED
    assert isinstance(short.problem, GateRefused)
    assert short.problem.message == short.result.message
    assert short.problem.hint == (
        "free GPUs on the wanted class, lower the reserve, or relax the node selector; "
        "'gpuops headroom explain' says why a pending pod does not fit"
    )
    assert short.to_dict()["notification"]["status"] == "not-configured"
    assert len(_check(5, show_nodes=True).to_dict()["nodes"]) == 2


@pytest.mark.usefixtures("_no_webhook")
def test_headroom_check_writes_its_capacity_page_beside_the_result(tmp_path: Path) -> None:
    for gpus, verdict in ((4, Verdict.OK), (5, Verdict.REFUSED)):
        out = tmp_path / f"r{gpus}"
        outcome = _check(gpus, report_dir=out)
        assert outcome.verdict is verdict
        report = outcome.to_dict()["report"]
        assert report["status"] == "written" and report["kind"] == "capacity"
        assert report["page"] == str(out / "capacity.html") and Path(report["page"]).is_file()
        assert outcome.files == {"page": report["page"]}
        assert outcome.to_dict()["nodes"] is None  # the page has them; the result as asked


@pytest.mark.usefixtures("_no_webhook")
def test_a_capacity_page_that_cannot_be_written_changes_no_verdict(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    for gpus, verdict in ((4, Verdict.OK), (5, Verdict.REFUSED)):
        outcome = _check(gpus, report_dir=blocker / "reports")
        assert outcome.verdict is verdict
        report = outcome.to_dict()["report"]
        assert report["status"] == "failed" and report["detail"]
        assert outcome.files == {}


def _compat(driver: str, cuda: str = "12.8") -> Outcome[compat.CompatCheck]:
    labels = {"accelerator": "h800", "gpu-driver": driver}
    kube = FakeKube([node("g1", labels=labels)], [])
    request = compat.CompatRequest({"accelerator": "h800"}, cuda_version=Version.parse(cuda))
    return compat.compat(request, lambda cluster: kube)  # type: ignore[arg-type,return-value]


def test_image_compat_refuses_nodes_whose_drivers_are_too_old_with_the_hint() -> None:
    assert _compat("570.124.06").verdict is Verdict.OK
    old = _compat("470.82.01")
    assert old.verdict is Verdict.REFUSED and old.exit_code == ExitCode.GATE_REFUSED
    assert old.problem is not None and old.problem.message == old.result.message
    assert old.problem.hint == (
        "upgrade the drivers of the nodes named (gpuops nodes update), pick another "
        "class, or build on an older CUDA base image"
    )
    assert "g1" in json.dumps(old.to_dict()["offending"])


def test_an_outcome_that_failed_part_way_needs_its_error() -> None:
    with pytest.raises(ValueError, match="partial outcome needs the error"):
        Outcome(Data({}), partial=True)
    assert Outcome(Data({}), OperationFailed("x"), partial=True).verdict is Verdict.PARTIAL
    assert Outcome(Data({}), errors.Unreachable("x")).exit_code == ExitCode.UNREACHABLE


def test_a_page_beside_a_result_without_installed_pages_is_said_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review: a caller that never installed the pages got a RuntimeError after the work was
    done (exit 5 once hosts had changed); the page is said not written, the verdict stays."""
    monkeypatch.setattr(reports, "_INSTALLED", {})
    beside = reports.write_beside("capacity", tmp_path / "out", lambda: {})
    assert beside.page is None and "no report pages installed" in beside.detail
    assert beside.to_dict()["status"] == "failed"
