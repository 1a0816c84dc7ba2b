"""``gpuops image``: bad input is exit 2 naming the field before any daemon, registry or cluster
is contacted; an address nobody listens on is exit 4 naming it. What needs the real builder,
registry or cluster is in tests/python/integration/test_image_*.py."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from gpuops.cli.main import run


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in (
        "GPUOPS_PARAMS_FILE",
        "GPUOPS_RESULT_FILE",
        "GPUOPS_ERROR_FILE",
        "GPUOPS_OUTPUT",
        "GPUOPS_REGISTRY_USERNAME",
        "GPUOPS_REGISTRY_PASSWORD",
        "GPUOPS_REGISTRY_CA",
        "DOCKER_API_VERSION",
        "KUBECONFIG",
    ):
        monkeypatch.delenv(var, raising=False)
    # a daemon address where nothing listens: input errors must come before any connection
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")


def _fails(capsys: pytest.CaptureFixture[str], argv: list[str], code: int) -> dict[str, Any]:
    assert run(["--output", "json", *argv]) == code
    doc: dict[str, Any] = json.loads(capsys.readouterr().err)
    assert doc["ok"] is False
    assert doc["error"]["exit_code"] == code
    return doc


@pytest.fixture
def context(tmp_path: Path) -> Path:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM reg.io/lab/base:1 AS runtime\nCOPY a /a\n")
    (ctx / "a").write_text("a\n")
    return ctx


def _build(context: Path, *extra: str) -> list[str]:
    return [
        "image",
        "build",
        "--image",
        "127.0.0.1:5000/team/x",
        "--context",
        str(context),
        "--build-number",
        "1",
        *extra,
    ]


@pytest.mark.parametrize(
    ("extra", "field", "says"),
    [
        (["--context", "/nonexistent/ctx"], "context", "is not a directory"),
        (["--dockerfile", "/nonexistent/Dockerfile"], "dockerfile", "does not exist"),
        (["--target", "tests"], "target", "is not a stage of the Dockerfile"),
        (["--image", "team/x"], "image", "names no registry"),
        (["--image", "127.0.0.1:5000/team/x:1"], "image", "without a tag"),
        (["--build-number", "4 2"], "build_number", "is not a valid tag"),
        (["--git-revision", "main"], "git_revision", "is not a commit id"),
        (["--tags", "ok,bad tag"], "tags", "is not a valid tag"),
        (["--build-args", "NOEQUALS"], "build_args", "not KEY=VALUE"),
        (["--labels", "org.opencontainers.image.version=9"], "labels", "set by gpuops"),
        (["--platform", "amd64"], "platform", "os/arch"),
        (["--timeout", "0"], "timeout", "below the minimum"),
        (["--docker-api-version", "v2"], "docker_api_version", "not a Docker API version"),
        (["--source", "git@example.com:x.git"], "source", "not an http(s) URL"),
    ],
)
def test_build_refuses_bad_input_before_any_daemon(
    capsys: pytest.CaptureFixture[str], context: Path, extra: list[str], field: str, says: str
) -> None:
    doc = _fails(capsys, _build(context, *extra), 2)
    assert doc["error"].get("field") == field, doc
    assert says in doc["error"]["message"]
    assert doc["result"] is None


def test_build_needs_a_tag(capsys: pytest.CaptureFixture[str], context: Path) -> None:
    argv = ["image", "build", "--image", "127.0.0.1:5000/team/x", "--context", str(context)]
    doc = _fails(capsys, argv, 2)
    assert doc["error"]["field"] == "build_number"


def test_half_set_registry_credentials_are_input_errors(
    capsys: pytest.CaptureFixture[str], context: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUOPS_REGISTRY_USERNAME", "ci")
    doc = _fails(capsys, _build(context), 2)
    assert "$GPUOPS_REGISTRY_PASSWORD is empty" in doc["error"]["message"]


def test_an_unreachable_daemon_is_exit_4_naming_it(
    capsys: pytest.CaptureFixture[str], context: Path, tmp_path: Path
) -> None:
    doc = _fails(capsys, _build(context), 4)
    assert f"unix://{tmp_path}/no-daemon.sock" in doc["error"]["message"]
    assert "DOCKER_HOST" in doc["error"]["hint"]


def test_params_file_carries_objects_and_arrays(
    capsys: pytest.CaptureFixture[str],
    context: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    params = tmp_path / "params.json"
    params.write_text(
        json.dumps(
            {
                "image": "127.0.0.1:5000/team/x",
                "context": str(context),
                "build_number": "7",
                "tags": ["a", "b"],
                "build_args": {"A": "1,2"},
                "target": "nope",
            }
        )
    )
    monkeypatch.setenv("GPUOPS_PARAMS_FILE", str(params))
    doc = _fails(capsys, ["image", "build"], 2)
    assert doc["error"]["field"] == "target"  # every other value passed its checks
    params.write_text(json.dumps({"image": "127.0.0.1:5000/team/x", "tags": "x", "cleanup": 1}))
    doc = _fails(capsys, ["image", "build"], 2)
    assert doc["error"]["field"] == "cleanup"


@pytest.mark.parametrize(
    ("argv", "field", "says"),
    [
        (["image", "tag", "--source", "reg.io/x", "--target", "y"], "source", "needs a tag"),
        (["image", "tag", "--source", "reg.io/x:1", "--target", "-y"], "target", "not a valid tag"),
        (
            ["image", "tag", "--source", "reg.io/x:1", "--target", "other.io/x:1"],
            "target",
            "within one registry",
        ),
        (["image", "inspect", "--image", "x:1"], "image", "names no registry"),
        (["image", "compat", "--node-selector", "a=b"], "image", "give an image or --cuda-version"),
        (
            ["image", "compat", "--image", "reg.io/x:1", "--node-selector", "a"],
            "node_selector",
            "is not key=value",
        ),
        (
            ["image", "compat", "--cuda-version", "twelve", "--node-selector", "a=b"],
            "cuda_version",
            "is not a version",
        ),
        (
            ["image", "inspect", "--image", "reg.io/x:1", "--registry-password-env", "A-B"],
            "registry_password_env",
            "not an environment variable name",
        ),
    ],
)
def test_registry_commands_refuse_bad_input(
    capsys: pytest.CaptureFixture[str], argv: list[str], field: str, says: str
) -> None:
    doc = _fails(capsys, argv, 2)
    assert doc["error"].get("field") == field, doc
    assert says in doc["error"]["message"]


def test_a_registry_nobody_listens_on_is_exit_4(capsys: pytest.CaptureFixture[str]) -> None:
    ref = f"127.0.0.1:{_closed_port()}/team/x:1"
    doc = _fails(capsys, ["image", "tag", "--source", ref, "--target", "prod", "--plain-http"], 4)
    assert "cannot reach the registry 127.0.0.1:" in doc["error"]["message"]
    doc = _fails(capsys, ["image", "inspect", "--image", ref], 4)
    assert "ConnectionRefusedError" in doc["error"]["message"]


def test_a_missing_ca_file_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["image", "inspect", "--image", "reg.io/x:1", "--registry-ca", "/nonexistent/ca.pem"]
    doc = _fails(capsys, argv, 2)
    assert doc["error"]["field"] == "registry_ca"


def test_image_clean_bad_values_are_exit_2_and_an_unreachable_daemon_exit_4(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for argv, field in (
        (["--keep-last", "-1"], "keep_last"),
        (["--min-age", "1h"], "min_age"),
        (["--docker-host", "ftp://x"], "docker_host"),
    ):
        doc = _fails(capsys, ["image", "clean", *argv], 2)
        assert doc["error"]["field"] == field, doc
    doc = _fails(capsys, ["image", "clean", "--dry-run"], 4)  # even a dry run asks the daemon
    assert f"unix://{tmp_path}/no-daemon.sock" in doc["error"]["message"]
