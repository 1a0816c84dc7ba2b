"""The CLI contract every command inherits: exit codes, JSON parameters, result and error files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

import gpuops
from gpuops.cli import main as cli_main
from gpuops.cli.base import GpuOpsGroup, Shown
from gpuops.cli.types import Integer, Text
from gpuops.errors import (
    ExitCode,
    GateRefused,
    HostBroken,
    InvalidInput,
    OperationFailed,
    Unreachable,
    error_categories,
)

# A throw-away command group used only by these tests, registered on the real root group.


@click.group(cls=GpuOpsGroup, name="probe")
def probe() -> None:
    """Test-only commands."""


@probe.command(name="echo")
@click.option("--count", type=Integer(1, 10), default=1)
@click.option("--name", type=Text("name"), default="world")
@click.option("--flag", is_flag=True)
def probe_echo(count: int, name: str, flag: bool) -> Shown:
    return Shown({"count": count, "name": name, "flag": flag}, f"hello {name} x{count}")


@probe.command(name="raise")
@click.option("--kind", type=Text("kind"), required=True)
def probe_raise(kind: str) -> Shown:
    errors: dict[str, Exception] = {
        "failed": OperationFailed("the rollout failed", hint="look at the pods"),
        "invalid": InvalidInput("bad tag 'x y'"),
        "unreachable": Unreachable("cannot reach https://127.0.0.1:1"),
        "broken": HostBroken("1 rollback(s) failed, left broken: h1"),
        "bug": KeyError("boom"),
    }
    if kind == "gate":  # a refusal is an outcome: the numbers, and the error that sets the code
        return Shown({"free": 2, "needed": 4}, "2 free", error=GateRefused("2 free GPUs, need 4"))
    raise errors[kind]


@pytest.fixture(autouse=True)
def _probe_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(cli_main.cli.commands, "probe", probe)
    for var in ("GPUOPS_PARAMS_FILE", "GPUOPS_RESULT_FILE", "GPUOPS_ERROR_FILE", "GPUOPS_OUTPUT"):
        monkeypatch.delenv(var, raising=False)


def run(argv: list[str]) -> int:
    return cli_main.run(argv)


def test_exit_codes_are_distinct_and_documented() -> None:
    cats = error_categories()
    assert [c.code for c in cats] == [0, 1, 2, 3, 4, 5, 6]
    assert len({c.category for c in cats}) == len(cats)
    assert [c.category for c in cats] == [
        "ok",
        "failed",
        "invalid-input",
        "gate-refused",
        "unreachable",
        "internal",
        "host-broken",
    ]


@pytest.mark.parametrize(
    ("kind", "code", "category"),
    [
        ("failed", ExitCode.FAILED, "failed"),
        ("invalid", ExitCode.INVALID_INPUT, "invalid-input"),
        ("gate", ExitCode.GATE_REFUSED, "gate-refused"),
        ("unreachable", ExitCode.UNREACHABLE, "unreachable"),
        ("bug", ExitCode.INTERNAL, "internal"),
        ("broken", ExitCode.HOST_BROKEN, "host-broken"),
    ],
)
def test_each_error_maps_to_its_exit_code_and_error_document(
    tmp_path: Path, kind: str, code: int, category: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err_file = tmp_path / "error.json"
    rc = run(["--output", "json", "--error-file", str(err_file), "probe", "raise", "--kind", kind])
    assert rc == code
    doc = json.loads(err_file.read_text())
    assert doc["ok"] is False
    assert doc["command"] == "probe raise"
    assert doc["error"]["category"] == category
    assert doc["error"]["exit_code"] == code
    assert doc["error"]["message"]
    stderr_doc = json.loads(capsys.readouterr().err)
    assert stderr_doc == doc


def test_gate_refusal_carries_its_numbers(tmp_path: Path) -> None:
    err_file = tmp_path / "error.json"
    run(["--error-file", str(err_file), "probe", "raise", "--kind", "gate"])
    doc = json.loads(err_file.read_text())
    assert doc["result"] == {"free": 2, "needed": 4}


def test_hint_reaches_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["probe", "raise", "--kind", "failed"]) == ExitCode.FAILED
    err = capsys.readouterr().err
    assert "gpuops: error: the rollout failed" in err
    assert "hint: look at the pods" in err


def test_traceback_only_with_debug(capsys: pytest.CaptureFixture[str]) -> None:
    run(["probe", "raise", "--kind", "bug"])
    assert "Traceback" not in capsys.readouterr().err
    run(["--debug", "probe", "raise", "--kind", "bug"])
    assert "Traceback" in capsys.readouterr().err


def test_params_file_supplies_option_values(tmp_path: Path) -> None:
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"count": 3, "name": "a100", "flag": True}))
    result = tmp_path / "result.json"
    rc = run(["--params-file", str(params), "--result-file", str(result), "probe", "echo"])
    assert rc == 0
    assert json.loads(result.read_text()) == {
        "ok": True,
        "command": "probe echo",
        "verdict": "ok",
        "result": {"count": 3, "name": "a100", "flag": True},
    }


def test_params_from_environment_and_command_line_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"count": 3, "name": "from-json"}))
    monkeypatch.setenv("GPUOPS_PARAMS_FILE", str(params))
    assert run(["--output", "json", "probe", "echo", "--name", "from-argv"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["result"] == {"count": 3, "name": "from-argv", "flag": False}


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ('{"count": 3, "colour": "red"}', "unknown parameter(s) colour"),
        ("[1, 2]", "must hold a JSON object"),
        ("{not json", "is not valid JSON"),
        ('{"count": 99}', "count"),
        ('{"count": "many"}', "many"),
        ('{"$(reboot)": 1}', "is not a parameter name"),
    ],
)
def test_bad_params_are_invalid_input_and_name_the_culprit(
    tmp_path: Path, content: str, needle: str
) -> None:
    params = tmp_path / "params.json"
    params.write_text(content)
    err_file = tmp_path / "error.json"
    rc = run(["--params-file", str(params), "--error-file", str(err_file), "probe", "echo"])
    assert rc == ExitCode.INVALID_INPUT
    doc = json.loads(err_file.read_text())
    assert doc["error"]["category"] == "invalid-input"
    assert needle in doc["error"]["message"]


def test_a_params_key_that_is_no_name_is_never_quoted(tmp_path: Path) -> None:
    """A file that is not a parameters document (a password file) has its content for keys."""
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"root:$y$j9T$saltsalt$hashhash": 1}))
    err_file = tmp_path / "error.json"
    rc = run(["--params-file", str(params), "--error-file", str(err_file), "probe", "echo"])
    assert rc == ExitCode.INVALID_INPUT
    message = json.loads(err_file.read_text())["error"]["message"]
    assert "hashhash" not in message and "saltsalt" not in message
    assert "is not a parameter name" in message


def test_missing_params_file_is_invalid_input(tmp_path: Path) -> None:
    err_file = tmp_path / "error.json"
    rc = run(
        [
            "--params-file",
            str(tmp_path / "nope.json"),
            "--error-file",
            str(err_file),
            "probe",
            "echo",
        ]
    )
    assert rc == ExitCode.INVALID_INPUT
    assert "does not exist" in json.loads(err_file.read_text())["error"]["message"]


def test_usage_errors_are_invalid_input(tmp_path: Path) -> None:
    err_file = tmp_path / "error.json"
    assert run(["--error-file", str(err_file), "probe", "echo", "--bogus"]) == 2
    assert json.loads(err_file.read_text())["error"]["category"] == "invalid-input"
    assert run(["no-such-command"]) == ExitCode.INVALID_INPUT


def test_json_output_is_one_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--output", "json", "probe", "echo", "--count", "2"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["result"]["count"] == 2


def test_version_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"gpuops {gpuops.__version__}"
    assert run(["--output", "json", "--version"]) == 0
    assert json.loads(capsys.readouterr().out) == {"version": gpuops.__version__}


def test_help_lists_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--help"]) == 0
    out = capsys.readouterr().out
    for cat in error_categories():
        assert f"{cat.code:<3} {cat.category}" in out


def test_console_script_exit_code_is_the_process_status(tmp_path: Path) -> None:
    """The installed entry point really exits with the code (not just returns it)."""
    params = tmp_path / "p.json"
    params.write_text("[]")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from gpuops.cli.main import main; main()",
            "--params-file",
            str(params),
            "headroom",
            "check",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == ExitCode.INVALID_INPUT, proc.stderr
    assert "must hold a JSON object" in proc.stderr


def test_library_version_matches_cli_version() -> None:
    root = Path(__file__).resolve().parents[3]
    lib_version = (root / "resources" / "org" / "gpuops" / "VERSION").read_text().strip()
    assert lib_version == gpuops.__version__
