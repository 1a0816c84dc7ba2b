"""Every bad value is exit 2 naming its key; exit 5 only for a bug (issue 8's examples).

Each example goes in both ways a value reaches gpuops: the JSON parameters file (as the Jenkins
steps call it) and the command line. The cluster is unreachable on purpose: a value that got
past the checks would show as exit 4, not 2.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from gpuops.cli import main as cli_main
from gpuops.cli.base import GpuOpsGroup, Outcome
from gpuops.cli.main import run
from gpuops.cli.types import Text


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("KUBECONFIG", "GPUOPS_PARAMS_FILE", "GPUOPS_RESULT_FILE", "GPUOPS_ERROR_FILE",
                "GPUOPS_WEBHOOK_URL", "GPUOPS_OUTPUT"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kc.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{_closed_port()}'}}}}]\n"
        "users: [{name: u, user: {token: t0ken}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    return path


NOT_INTEGERS = (True, False, 4.7, 2.0, float("inf"), [2], {"a": [1]}, None, "\uff14", "4\n",
                " 4", "4.7", "", "0x10", "1_000", "\u0664")  # fmt: skip
GT_FULL_WIDTH = [{"matchExpressions": [{"key": "n", "operator": "Gt", "values": ["\uff14"]}]}]
#: (key, JSON value) pairs from the issue, and the class they stand for.
BAD: list[tuple[str, Any]] = [
    *[(key, value) for key in ("gpus_per_pod", "pods", "reserve") for value in NOT_INTEGERS],
    *[
        (key, value)
        for key in ("namespace", "resource", "group_by", "webhook_url_env", "link", "context")
        for value in (-1, 0, 4.5, True, [], {}, None)
    ],
    ("namespace", "default\n"),
    ("namespace", "\uff44efault"),
    ("resource", "nvidia.com/gpu\n"),
    ("resource", "a"),
    ("resource", "gpu"),
    ("resource", "kubernetes.io/gpu"),
    ("group_by", "accelerator\n"),
    ("webhook_url_env", "GPUOPS_WEBHOOK_URL\n"),
    ("kubeconfig", "/tmp/kc\n"),
    ("context", "x\ty"),
    ("node_selector", {"accelerator": ["a"]}),
    ("node_selector", "accelerator=nvidia-h800\n"),
    ("node_affinity", [{"matchExpressions": 5}]),
    ("node_affinity", '{"nodeAffinity": 5}'),
    ("node_affinity", GT_FULL_WIDTH),
    ("tolerations", [1]),
    ("tolerations", {"key": [1]}),
    ("reserve_per_class", {"a100": "4\n"}),
    ("reserve_per_class", {"a100": True}),
    ("show_nodes", "yes"),
    ("show_nodes", 1),
]


@pytest.mark.parametrize(("key", "value"), BAD, ids=[f"{k}={v!r}" for k, v in BAD])
def test_a_bad_value_in_the_params_file_is_exit_2_naming_its_key(
    tmp_path: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str], key: str, value: Any
) -> None:
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"gpus_per_pod": 1, "kubeconfig": str(kubeconfig), key: value}))
    code = run(["--output", "json", "--params-file", str(params), "headroom", "check"])
    err = capsys.readouterr().err
    assert code == 2, err
    error = json.loads(err)["error"]
    assert error["category"] == "invalid-input"
    assert error["field"] == key
    assert "Traceback" not in err


#: On a command line every value is text: a number is a fine context name there. What must be
#: refused as text: the integer options' non-integers, and every bad string of the list.
FLAG_BAD = [
    (k, v if isinstance(v, str) else json.dumps(v))
    for k, v in BAD
    if (isinstance(v, str) or k in ("gpus_per_pod", "pods", "reserve"))
    and v is not None
    and k != "show_nodes"
    and not (k == "reserve" and v is False)
] + [("namespace", "0.5"), ("resource", "4"), ("webhook_url_env", "-1"), ("link", "0")]


@pytest.mark.parametrize(("key", "text"), FLAG_BAD, ids=[f"{k}={v!r}" for k, v in FLAG_BAD])
def test_the_same_value_as_a_flag_is_exit_2_naming_the_option(
    kubeconfig: Path, capsys: pytest.CaptureFixture[str], key: str, text: str
) -> None:
    args = ["--gpus-per-pod", "1"] if key != "gpus_per_pod" else []
    flag = "--" + key.replace("_", "-")
    code = run(["--output", "json", "headroom", "check", "--kubeconfig", str(kubeconfig),
                *args, flag, text])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    error = json.loads(err)["error"]
    assert error["category"] == "invalid-input"
    assert error["field"] == key, error
    assert "Traceback" not in err


def test_a_kubeconfig_that_is_not_yaml_is_exit_2_with_the_line_not_the_content(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "kc"
    broken.write_text("apiVersion: v1\nusers:\n- name: u\n  user: {token: s3cr3t-t0ken\n")
    code = run(["--output", "json", "headroom", "check", "--gpus-per-pod", "1",
                "--kubeconfig", str(broken)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    error = json.loads(err)["error"]
    assert f"kubeconfig {broken} is not valid YAML (line" in error["message"]
    assert "s3cr3t" not in err


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[1, 2]\n", "is not a YAML mapping"),
        ("", "is empty"),
        ("apiVersion: v1\nclusters: []\n", "names no current-context"),
        ("current-context: x\ncontexts: 5\n", "contexts is not a list"),
        ("current-context: x\ncontexts: [{name: y, context: {}}]\n", "no context named 'x'"),
        ("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n", "no cluster named"),
        (
            "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
            "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n",
            "no user named 'u'",
        ),
    ],
)
def test_kubeconfig_defects_are_named_in_our_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    path = tmp_path / "kc"
    path.write_text(text)
    code = run(["--output", "json", "headroom", "check", "--gpus-per-pod", "1",
                "--kubeconfig", str(path)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert says in json.loads(err)["error"]["message"]


@pytest.mark.parametrize(
    "path", ["x" * 300, "/tmp/" + "y" * 300 + "/kc", "~no-such-user-here/kc", "/etc/passwd/kc"]
)
def test_a_kubeconfig_path_no_file_can_have_is_an_input_error(
    capsys: pytest.CaptureFixture[str], path: str
) -> None:
    """Found by tests/python/integration/test_fuzz_cli.py: a name too long was exit 5."""
    code = run(["--output", "json", "headroom", "check", "--gpus-per-pod", "1",
                "--kubeconfig", path])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert "does not exist" in json.loads(err)["error"]["message"]


@pytest.mark.parametrize("name", ["z" * 300, "f" * 300 + "/result.json"])
def test_a_result_file_name_no_file_can_have_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    code = run(["--output", "json", "--result-file", str(tmp_path / name), "describe"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert json.loads(err)["error"]["field"] == "result_file"


def test_a_command_group_that_cannot_be_loaded_is_a_broken_install_not_a_bug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(cli_main.COMMANDS, "ghost", "gpuops.cli.no_such_module:ghost")
    monkeypatch.delitem(cli_main.cli.commands, "ghost", raising=False)
    code = run(["--output", "json", "ghost", "x"])
    err = capsys.readouterr().err
    assert code == 1, err
    error = json.loads(err)["error"]
    assert "command group 'ghost' cannot be loaded" in error["message"]
    assert "reinstall" in error["hint"]
    monkeypatch.setitem(cli_main.COMMANDS, "ghost", "gpuops.cli.main:COMMANDS")
    assert run(["ghost"]) == 1


def test_an_unwritable_result_file_is_refused_before_anything_runs(
    tmp_path: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 up front (nothing ran), never a traceback; exit 1 if it fails after the run."""
    missing = tmp_path / "no-such-dir" / "result.json"
    code = run(["--output", "json", "--result-file", str(missing), "headroom", "check",
                "--gpus-per-pod", "1", "--kubeconfig", str(kubeconfig)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert json.loads(err)["error"]["field"] == "result_file"
    done = subprocess.run(
        [sys.executable, "-c", "from gpuops.cli.main import main; main()", "--result-file",
         str(missing), "--version"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1, 2) and "Traceback" not in done.stderr


@click.group(cls=GpuOpsGroup, name="probe")
def probe() -> None:
    """Test-only commands."""


@probe.command(name="vanish")
@click.option("--dir", "directory", type=Text("path"), required=True)
def probe_vanish(directory: str) -> Outcome:
    """Runs, then puts a file where the result file's directory was."""
    shutil.rmtree(directory)
    Path(directory).write_text("not a directory any more\n")
    return Outcome({"done": True}, "done")


def test_a_result_file_that_cannot_be_written_after_the_run_is_exit_1_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(cli_main.cli.commands, "probe", probe)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    error_file = tmp_path / "error.json"
    code = run(["--result-file", str(out_dir / "result.json"), "--error-file", str(error_file),
                "probe", "vanish", "--dir", str(out_dir)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1, err
    error = json.loads(error_file.read_text())["error"]
    assert "could not be written" in error["message"]
    assert "the operation itself completed" in error["hint"]
    assert "Traceback" not in err
