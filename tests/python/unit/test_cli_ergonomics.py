"""The CLI as operators expect it (kubectl, helm, ansible-playbook): ``-o`` after the command,
``-v``, one ``--dry-run`` with the old names kept, ``--limit`` a host pattern only, help without
story ids, and progress lines with their time."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import click
import pytest

from gpuops.cli import main as cli_main
from gpuops.cli.base import GpuOpsGroup, Runtime, Shown
from gpuops.cli.options import renamed
from gpuops.cli.types import Integer

#: The time a progress line starts with: UTC, RFC 3339 to the second, then one space.
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ "


@click.group(cls=GpuOpsGroup, name="probe")
def probe() -> None:
    """Test-only commands."""


@probe.command(name="count")
@renamed("--last", "--limit", "last", hidden=["--limit"], keys=["limit"], type=Integer(1, 99))
@click.option("--fail", is_flag=True)
def probe_count(last: int | None, fail: bool) -> Shown:
    if fail:
        raise click.UsageError("told to fail")
    return Shown({"last": last}, f"last {last}")


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(cli_main.cli.commands, "probe", probe)
    for var in ("GPUOPS_PARAMS_FILE", "GPUOPS_RESULT_FILE", "GPUOPS_ERROR_FILE", "GPUOPS_OUTPUT"):
        monkeypatch.delenv(var, raising=False)


def _params(
    path: str, args: list[str], params: dict[str, Any] | None = None, tmp: Path | None = None
) -> dict[str, Any]:
    """The values ``gpuops <path> <args>`` parses (nothing runs), with ``params`` as the JSON
    parameters file."""
    runtime = Runtime()
    if params is not None:
        assert tmp is not None
        runtime.params_file = str(tmp / "params.json")
        Path(runtime.params_file).write_text(json.dumps(params))
    root = click.Context(cli_main.cli, info_name="gpuops", obj=runtime)
    command: Any = cli_main.cli
    for word in path.split():
        command = command.get_command(root, word)
    with command.make_context(path, list(args), parent=root) as ctx:
        return dict(ctx.params)


# -- -o/--output and -v/--verbose after the command --------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["-o", "json", "probe", "count", "--last", "3"],
        ["--output", "json", "probe", "count", "--last", "3"],
        ["probe", "count", "--last", "3", "-o", "json"],
        ["probe", "count", "-ojson", "--last", "3"],
        ["probe", "count", "--last", "3", "--output=json"],
        ["-o", "text", "probe", "count", "--last", "3", "-o", "json"],  # the last one wins
    ],
)
def test_output_is_taken_before_and_after_the_command(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main.run(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["command"] == "probe count" and doc["result"] == {"last": 3}, doc


@pytest.mark.parametrize(
    ("argv", "output"),
    [
        (["probe", "-o", "json", "count", "--last", "3"], "json"),
        (["probe", "--output=json", "count", "--last", "3"], "json"),
        (["probe", "-ojson", "count", "--last", "3"], "json"),
        (["-o", "text", "probe", "-o", "json", "count", "--last", "3"], "json"),  # the last wins
        (["-o", "json", "probe", "-o", "text", "count", "--last", "3"], "text"),
        (["probe", "-o", "json", "count", "--last", "3", "-o", "text"], "text"),
        (["probe", "-o", "text", "count", "--last", "3", "-o", "json"], "json"),
    ],
)
def test_output_is_taken_between_the_group_and_its_command(
    argv: list[str], output: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """As kubectl and helm: ``gpuops headroom -o json check ...``."""
    assert cli_main.run(argv) == 0
    out = capsys.readouterr().out
    if output == "json":
        doc = json.loads(out)
        assert doc["command"] == "probe count" and doc["result"] == {"last": 3}, doc
    else:
        assert out.strip() == "last 3", out


def test_output_between_the_group_and_a_real_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-kubeconfig"
    argv = ["headroom", "-o", "json", "check", "--gpus-per-pod", "1", "--kubeconfig", str(missing)]
    assert cli_main.run(argv) == 2
    doc = json.loads(capsys.readouterr().err)
    assert doc["command"] == "headroom check", doc
    assert "does not exist" in doc["error"]["message"], doc


def test_output_after_the_command_shapes_its_errors_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A bad value, a usage error raised by the command, an unknown option: the error is the
    JSON document the -o after the command asked for (the presumed runtime reads it too)."""
    for argv in (
        ["probe", "count", "--last", "x", "-o", "json"],
        ["probe", "count", "--fail", "-o", "json"],
        ["probe", "count", "--nope", "-o", "json"],
        ["probe", "count", "-o", "json", "--last", "100"],
    ):
        assert cli_main.run(argv) == 2, argv
        doc = json.loads(capsys.readouterr().err)
        assert doc["ok"] is False and doc["error"]["category"] == "invalid-input", (argv, doc)


def test_output_after_a_real_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-kubeconfig"
    code = cli_main.run(
        ["headroom", "check", "--gpus-per-pod", "1", "--kubeconfig", str(missing), "-o", "json"]
    )
    assert code == 2
    assert "does not exist" in json.loads(capsys.readouterr().err)["error"]["message"]
    assert cli_main.run(["describe", "-o", "json"]) == 0
    assert "nodes update" in json.loads(capsys.readouterr().out)["result"]["commands"]


def test_the_global_options_are_no_parameters_of_a_command() -> None:
    """-o and -v after a command are the root's: not in describe, not a JSON parameter key."""
    doc = _params("probe count", ["-o", "json", "-v"])
    assert doc == {"last": None, "fail": False}
    command = cli_main.cli.get_command(click.Context(cli_main.cli), "headroom")
    assert isinstance(command, click.Group)
    check = command.get_command(click.Context(command), "check")
    assert check is not None
    assert not {"output", "verbose"} & {p.name for p in check.params}


@pytest.mark.parametrize(
    ("argv", "level"),
    [
        ([], logging.WARNING),
        (["-v"], logging.INFO),
        (["--verbose"], logging.INFO),
        (["-vv"], logging.DEBUG),
        (["-v", "-v"], logging.DEBUG),
        (["--debug"], logging.DEBUG),
        (["AFTER", "-v"], logging.INFO),
        (["-v", "AFTER", "-v"], logging.DEBUG),
        (["GROUP", "-v"], logging.INFO),
        (["GROUP", "--verbose"], logging.INFO),
        (["GROUP", "-v", "AFTER", "-v"], logging.DEBUG),
        (["-v", "GROUP", "-v"], logging.DEBUG),
    ],
)
def test_verbose_sets_the_log_level_before_and_after_the_command(
    argv: list[str], level: int
) -> None:
    """-v counts add up wherever they are: before the group, after it, after the command."""
    before = list(argv[: argv.index("AFTER")]) if "AFTER" in argv else argv
    after = argv[argv.index("AFTER") + 1 :] if "AFTER" in argv else []
    between: list[str] = []
    if "GROUP" in before:
        before, between = before[: before.index("GROUP")], before[before.index("GROUP") + 1 :]
    assert cli_main.run([*before, "probe", *between, "count", *after]) == 0
    assert logging.getLogger("gpuops").level == level


def test_the_presumed_runtime_reads_the_global_options_anywhere() -> None:
    presumed = cli_main._presumed_runtime
    assert presumed(["nodes", "update", "-o", "json"]).output == "json"
    assert presumed(["nodes", "update", "-ojson"]).output == "json"
    assert presumed(["--output=json", "nodes"]).output == "json"
    assert presumed(["-o", "yaml"]).output == "text"  # not a value: the default
    assert presumed(["-vv", "x", "-v"]).verbose == 3
    assert presumed(["--verbose"]).verbose == 1
    assert presumed(["headroom", "explain", "--", "-o"]).output == "text"  # an argument
    assert presumed(["headroom", "-o", "json", "check"]).output == "json"
    # a trailing -o without its value leaves the earlier one (click refuses it, in JSON)
    assert presumed(["-o", "json", "nodes", "update", "-o"]).output == "json"
    assert presumed(["--output", "json", "nodes", "update", "--output"]).output == "json"


# -- one name for "change nothing", the old names kept -------------------------------------------


def test_nodes_update_takes_dry_run_and_check(tmp_path: Path) -> None:
    for flag in ("--dry-run", "--check"):
        assert _params("nodes update", ["-i", "inv", flag])["dry_run"] is True
    assert _params("nodes update", ["-i", "inv"])["dry_run"] is False
    for key in ("dry_run", "check"):  # the JSON parameter, old key too
        values = _params("nodes update", [], {"inventory": "inv", key: True}, tmp_path)
        assert values["dry_run"] is True, key


def test_jenkins_apply_takes_dry_run_and_check(tmp_path: Path) -> None:
    base = ["--url", "http://127.0.0.1:1/"]
    for flag in ("--dry-run", "--check"):
        assert _params("jenkins apply", [*base, flag])["dry_run"] is True
    for key in ("dry_run", "check"):
        values = _params("jenkins apply", [], {"url": "http://127.0.0.1:1/", key: True}, tmp_path)
        assert values["dry_run"] is True, key


@pytest.mark.parametrize(
    ("path", "args"),
    [
        ("nodes label", ["-i", "inv"]),
        ("release promote", ["-e", "dev"]),
        ("release rollback", ["-e", "dev"]),
        ("nodes update", ["-i", "inv"]),
        ("jenkins apply", ["--url", "http://127.0.0.1:1/"]),
    ],
)
def test_every_command_that_changes_something_has_dry_run(path: str, args: list[str]) -> None:
    assert _params(path, [*args, "--dry-run"])["dry_run"] is True


def test_old_and_new_key_together_are_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    params = tmp_path / "p.json"
    params.write_text(json.dumps({"inventory": "inv", "check": True, "dry_run": False}))
    code = cli_main.run(["--output", "json", "--params-file", str(params), "nodes", "update"])
    assert code == 2
    error = json.loads(capsys.readouterr().err)["error"]
    assert "check and dry_run are the same option (--dry-run)" in error["message"], error
    assert error["field"] == "dry_run"


def test_a_bad_value_under_an_old_key_is_named_by_that_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    params = tmp_path / "p.json"
    params.write_text(json.dumps({"inventory": "inv", "check": "yes"}))
    code = cli_main.run(["--output", "json", "--params-file", str(params), "nodes", "update"])
    assert code == 2
    error = json.loads(capsys.readouterr().err)["error"]
    assert error["field"] == "check" and "parameter check (--dry-run)" in error["message"], error


def test_an_unknown_key_still_lists_the_new_names_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    params = tmp_path / "p.json"
    params.write_text(json.dumps({"inventory": "inv", "chek": True}))
    assert cli_main.run(["--output", "json", "--params-file", str(params), "nodes", "update"]) == 2
    hint = json.loads(capsys.readouterr().err)["error"]["hint"]
    assert "dry_run" in hint and "check," not in hint.replace("learn_host_keys", ""), hint


# -- --limit is a host pattern; the history takes --last -----------------------------------------


def test_release_history_takes_last_and_its_old_limit(tmp_path: Path) -> None:
    assert _params("release history", ["-e", "dev"])["last"] == 20
    assert _params("release history", ["-e", "dev", "--last", "5"])["last"] == 5
    assert _params("release history", ["-e", "dev", "--limit", "7"])["last"] == 7
    for key in ("last", "limit"):
        assert _params("release history", [], {"environment": "dev", key: 4}, tmp_path)["last"] == 4


@pytest.mark.parametrize(
    "argv",
    [
        ["release", "history", "-e", "dev", "--last", "0"],
        ["release", "history", "-e", "dev", "--limit", "0"],
        ["probe", "count", "--last", "0"],
        ["probe", "count", "--limit", "x"],
    ],
)
def test_a_bad_value_names_the_option_not_its_hidden_old_flag(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main.run([*argv, "-o", "json"]) == 2
    error = json.loads(capsys.readouterr().err)["error"]
    assert "'--last'" in error["message"] and "--limit" not in error["message"], error
    assert error["field"] == "last", error


def test_a_hidden_old_flag_works_but_is_not_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.run(["release", "history", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--last" in text and "--limit" not in text
    assert cli_main.run(["jenkins", "apply", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--dry-run" in text and "--check" not in text
    assert cli_main.run(["nodes", "update", "--help"]) == 0
    assert "--dry-run, --check" in capsys.readouterr().out  # as ansible-playbook users expect


def test_limit_is_a_host_pattern_wherever_it_is_shown() -> None:
    from gpuops.cli.describe import walk

    ctx = click.Context(cli_main.cli)
    for name in cli_main.COMMANDS:
        group = cli_main.cli.get_command(ctx, name)
        if not isinstance(group, click.Group):
            continue
        for path, doc in walk(ctx, group, name).items():
            for option in doc["options"]:
                if option["flag"] == "--limit":
                    assert option["type"] == "pattern", (path, option)


def test_describe_names_the_old_keys_and_the_new_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.run(["--output", "json", "describe"]) == 0
    commands = json.loads(capsys.readouterr().out)["result"]["commands"]

    def option(path: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = next(o for o in commands[path]["options"] if o["name"] == name)
        return found

    assert option("nodes update", "dry_run") | {"help": ""} == option("nodes update", "dry_run") | {
        "help": "",
        "flag": "--dry-run",
        "aliases": ["check"],
    }
    assert option("jenkins apply", "dry_run")["aliases"] == ["check"]
    assert (
        option("release history", "last")["flag"],
        option("release history", "last")["aliases"],
    ) == (
        "--last",
        ["limit"],
    )
    assert "aliases" not in option("release promote", "dry_run")


# -- help --------------------------------------------------------------------------------------


def _every_help() -> dict[str, str]:
    ctx = click.Context(cli_main.cli, info_name="gpuops")
    out = {"gpuops": cli_main.cli.get_help(ctx)}

    def walk(command: click.Command, parent: click.Context, path: str) -> None:
        sub = click.Context(command, info_name=path.rsplit(maxsplit=1)[-1], parent=parent)
        out[path] = command.get_help(sub)
        if isinstance(command, click.Group):
            for name in command.list_commands(sub):
                child = command.get_command(sub, name)
                if child is not None:
                    walk(child, sub, f"{path} {name}")

    for name in sorted(cli_main.COMMANDS):
        command = cli_main.cli.get_command(ctx, name)
        if command is not None:
            walk(command, ctx, name)
    return out


def test_help_names_no_internal_story_or_issue() -> None:
    found = {
        path: re.findall(r"\bS-\d+|\bissue \d+|#\d+", text) for path, text in _every_help().items()
    }
    assert not {p: f for p, f in found.items() if f}, found


def test_headroom_explain_says_its_target_syntax() -> None:
    text = " ".join(_every_help()["headroom explain"].split())
    assert "TARGET is pod/NAME, deployment/NAME, job/NAME or just NAME" in text, text


def test_the_root_help_documents_o_and_v(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.run(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "-o, --output [text|json]" in text and "Also after the command" in text
    assert "-v, --verbose" in text and "-v info, -vv debug" in text


# -- progress lines carry their time -------------------------------------------------------------


def test_a_node_progress_line_starts_with_its_time(capsys: pytest.CaptureFixture[str]) -> None:
    from gpuops.usecases.nodes import common

    common.say("[canary 1/2] gpu-01: changed nvidia_driver")
    err = capsys.readouterr().err
    assert re.fullmatch(STAMP + r"\[canary 1/2\] gpu-01: changed nvidia_driver\n", err), err


def test_a_release_progress_line_starts_with_its_time(capsys: pytest.CaptureFixture[str]) -> None:
    from gpuops.cli.release import _deps

    _deps(Runtime(output="text")).say("release #1: promote 1.1.0")
    err = capsys.readouterr().err
    assert re.fullmatch(STAMP + r"\[ +\d+\.\ds\] release #1: promote 1\.1\.0\n", err), err
    _deps(Runtime(output="json")).say("release #1: promote 1.1.0")
    assert capsys.readouterr().err == ""  # JSON output: stderr is the error document only


def test_an_image_build_line_starts_with_its_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuops.errors import OperationFailed
    from gpuops.usecases.images import build

    def fake_build(request: build.BuildRequest, on_line: Any) -> build.BuildRecord:
        on_line("#5 RUN make")
        raise OperationFailed("the build stopped here")

    monkeypatch.setattr(build, "build", fake_build)
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    argv = ["image", "build", "--image", "127.0.0.1:5000/team/x", "--context", str(tmp_path)]
    assert cli_main.run([*argv, "--build-number", "1"]) == 1
    first = capsys.readouterr().err.splitlines()[0]
    assert re.fullmatch(STAMP + r"#5 RUN make", first), first
