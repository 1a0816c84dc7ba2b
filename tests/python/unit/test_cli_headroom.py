"""``gpuops headroom``: input validation, exit codes and the webhook (no cluster needed).

What needs a cluster (verdicts, exit 3 with its numbers, explain) is tested against the
lab in tests/python/integration/test_headroom_lab.py.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from gpuops.adapters import webhook
from gpuops.cli.main import run
from gpuops.errors import InvalidInput


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}
                ],
                "users": [{"name": "u", "user": {"token": "t0ken-for-tests"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


@pytest.fixture
def dead_kubeconfig(tmp_path: Path) -> Path:
    return _kubeconfig(tmp_path / "kc.json", f"https://127.0.0.1:{_closed_port()}")


@pytest.fixture(autouse=True)
def _no_ambient_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        "KUBECONFIG",
        "GPUOPS_PARAMS_FILE",
        "GPUOPS_RESULT_FILE",
        "GPUOPS_ERROR_FILE",
        "GPUOPS_WEBHOOK_URL",
        "GPUOPS_OUTPUT",
    ):
        monkeypatch.delenv(var, raising=False)


def _error(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(capsys.readouterr().err)
    return doc


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--gpus-per-pod", "0"], "--gpus-per-pod"),
        (["--gpus-per-pod", "-2"], "--gpus-per-pod"),
        (["--gpus-per-pod", "2", "--pods", "0"], "--pods"),
        (["--gpus-per-pod", "two"], "--gpus-per-pod"),
        ([], "--gpus-per-pod"),
        (["--gpus-per-pod", "1", "--node-selector", "accelerator"], "is not key=value"),
        (["--gpus-per-pod", "1", "--node-selector", "a=b c"], "not a valid label value"),
        (["--gpus-per-pod", "1", "--tolerations", "gpu=x:Always"], "effect 'Always'"),
        (["--gpus-per-pod", "1", "--tolerations", '[{"key": 1'], "not valid JSON"),
        (["--gpus-per-pod", "1", "--node-affinity", "zone=a"], "must be JSON"),
        (["--gpus-per-pod", "1", "-n", "Bad_NS"], "namespace 'Bad_NS'"),
        (["--gpus-per-pod", "1", "--resource", "nvidia.com/"], "resource 'nvidia.com/'"),
        (["--gpus-per-pod", "1", "--reserve", "-1"], "--reserve"),
        (["--gpus-per-pod", "1", "--reserve-per-class", "a100=lots"], "a100"),
        (["--gpus-per-pod", "1", "--group-by", "bad label"], "group-by label"),
        (["--gpus-per-pod", "1", "--webhook-url-env", "NOT-A-VAR"], "NOT-A-VAR"),
    ],
)
def test_check_rejects_bad_input(
    args: list[str], named: str, dead_kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run(
        ["--output", "json", "headroom", "check", "--kubeconfig", str(dead_kubeconfig), *args]
    )
    assert code == 2  # never reaches the (dead) cluster: that would be 4
    err = _error(capsys)["error"]
    assert err["category"] == "invalid-input"
    assert named in err["message"]


def test_params_file_values_are_validated_like_flags(
    tmp_path: Path, dead_kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    params = tmp_path / "params.json"
    error_file = tmp_path / "error.json"
    params.write_text(
        json.dumps(
            {
                "gpus_per_pod": 2,
                "pods": 3,
                "node_selector": {"accelerator": "nvidia-h800"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "Sometimes"}],
                "kubeconfig": str(dead_kubeconfig),
            }
        )
    )
    code = run(["--params-file", str(params), "--error-file", str(error_file), "headroom", "check"])
    assert code == 2
    doc = json.loads(error_file.read_text())
    assert doc["command"] == "headroom check"
    assert "effect 'Sometimes'" in doc["error"]["message"]
    params.write_text(json.dumps({"gpus_per_pod": 2, "gpu_per_pod": 2}))
    assert run(["--params-file", str(params), "headroom", "check"]) == 2
    assert "unknown parameter(s) gpu_per_pod" in capsys.readouterr().err


def test_params_file_dict_and_list_values_reach_the_cluster_call(
    tmp_path: Path, dead_kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """JSON objects and lists from the params file parse; then the dead cluster says 4."""
    params = tmp_path / "params.json"
    params.write_text(
        json.dumps(
            {
                "gpus_per_pod": 2,
                "pods": 3,
                "node_selector": {"accelerator": "nvidia-h800"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "reserve_per_class": {"nvidia-h800": 2},
                "reserve": 1,
                "node_affinity": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ],
                "kubeconfig": str(dead_kubeconfig),
            }
        )
    )
    assert run(["--output", "json", "--params-file", str(params), "headroom", "check"]) == 4


def test_unreachable_cluster_is_exit_4_naming_the_server(
    dead_kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = json.loads(dead_kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    code = run(
        [
            "--output",
            "json",
            "headroom",
            "check",
            "--gpus-per-pod",
            "1",
            "--kubeconfig",
            str(dead_kubeconfig),
        ]
    )
    assert code == 4
    err = _error(capsys)["error"]
    assert err["category"] == "unreachable"
    assert server in err["message"]
    assert "t0ken-for-tests" not in json.dumps(err)
    code = run(
        [
            "--output",
            "json",
            "headroom",
            "explain",
            "pod/train-0",
            "-n",
            "ml",
            "--kubeconfig",
            str(dead_kubeconfig),
        ]
    )
    assert code == 4
    assert server in _error(capsys)["error"]["message"]


def test_kubeconfig_problems_are_input_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        run(["headroom", "check", "--gpus-per-pod", "1", "--kubeconfig", str(tmp_path / "missing")])
        == 2
    )
    assert "does not exist" in capsys.readouterr().err
    broken = tmp_path / "broken"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n")
    assert run(["headroom", "check", "--gpus-per-pod", "1", "--kubeconfig", str(broken)]) == 2
    assert f"kubeconfig {broken}" in capsys.readouterr().err


def test_malformed_webhook_url_is_an_input_error_without_echoing_it(
    dead_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ONCALL_HOOK", "ftp://hooks.example/s3cr3t-path")
    code = run(
        [
            "--output",
            "json",
            "headroom",
            "check",
            "--gpus-per-pod",
            "1",
            "--kubeconfig",
            str(dead_kubeconfig),
            "--webhook-url-env",
            "ONCALL_HOOK",
        ]
    )
    assert code == 2
    err = _error(capsys)["error"]
    assert "$ONCALL_HOOK" in err["message"]
    assert "s3cr3t" not in json.dumps(err)


@pytest.mark.parametrize(
    ("target", "named"),
    [
        ("cronjob/nightly", "kind 'cronjob'"),
        ("pod/Train_0", "pod name 'Train_0'"),
        ("deployment/", "deployment name ''"),
        ("job/" + "x" * 254, "job name"),
    ],
)
def test_explain_rejects_bad_targets(
    target: str, named: str, dead_kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run(
        ["--output", "json", "headroom", "explain", target, "--kubeconfig", str(dead_kubeconfig)]
    )
    assert code == 2
    assert named in _error(capsys)["error"]["message"]


# -- webhook -----------------------------------------------------------------------------
class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []  # noqa: RUF012 - test collector
    status = 200

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Hook.received.append(
            {"path": self.path, "type": self.headers["Content-Type"], "json": json.loads(body)}
        )
        self.send_response(_Hook.status)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hook_server() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Hook.received.clear()
    _Hook.status = 200
    yield f"http://127.0.0.1:{server.server_address[1]}/hooks/s3cr3t-token"
    server.shutdown()
    server.server_close()


def test_webhook_posts_json_and_never_logs_the_url(
    hook_server: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ONCALL_HOOK", hook_server)
    caplog.set_level(logging.DEBUG, logger="gpuops")
    assert str(webhook.post("ONCALL_HOOK", {"text": "short of GPUs"})) == "sent (HTTP 200)"
    assert _Hook.received == [
        {
            "path": "/hooks/s3cr3t-token",
            "type": "application/json",
            "json": {"text": "short of GPUs"},
        }
    ]
    _Hook.status = 500
    assert str(webhook.post("ONCALL_HOOK", {"text": "again"})) == "failed (HTTP 500)"
    assert "s3cr3t" not in caplog.text and "ONCALL_HOOK" in caplog.text


def test_webhook_unset_unreachable_and_malformed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert webhook.post("ONCALL_HOOK", {}).status == "not-configured"
    monkeypatch.setenv("ONCALL_HOOK", f"http://127.0.0.1:{_closed_port()}/x")
    assert webhook.post("ONCALL_HOOK", {}).status == "failed"
    monkeypatch.setenv("ONCALL_HOOK", "not a url")
    with pytest.raises(InvalidInput, match=r"\$ONCALL_HOOK does not hold an http"):
        webhook.webhook_url("ONCALL_HOOK")
    # delivery never raises: a malformed URL is a failed delivery, the verdict stands
    assert webhook.post("ONCALL_HOOK", {}).status == "failed"


_RELEASE_FILE = """\
image: harbor.example.com/ai/infer
environments:
  production:
    namespace: ai-production
    deployment: infer
    node_class: nvidia-h800
    headroom: {reserve: 1, reserve_per_class: {nvidia-h800: 2}}
    cluster: {context: prod}
"""


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The check's request, as the use case gets it; the cluster is never reached."""
    from gpuops.usecases import headroom as usecase

    requests: list[Any] = []

    def check(request: Any, connect: Any = None) -> Any:
        requests.append(request)
        raise InvalidInput("stopped before the cluster (test)")

    monkeypatch.setattr(usecase, "check", check)
    return requests


def test_environment_settings_come_from_the_release_file(
    tmp_path: Path, asked: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Settings written once (issue 18): --environment reads namespace, node class, reserve
    and the cluster's context from gpuops-release.yaml, as the release's own gate does."""
    release = tmp_path / "gpuops-release.yaml"
    release.write_text(_RELEASE_FILE)
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"gpus_per_pod": 1, "environment": "production"}))
    monkeypatch.setenv("GPUOPS_RELEASE_CONFIG", str(release))
    assert run(["--params-file", str(params), "headroom", "check"]) == 2
    (request,) = asked
    assert request.shape.namespace == "ai-production"
    assert dict(request.shape.placement.node_selector) == {"accelerator": "nvidia-h800"}
    assert (request.policy.reserve, dict(request.policy.reserve_per_class)) == (
        1,
        {"nvidia-h800": 2},
    )
    assert request.policy.group_by == "accelerator"
    assert request.cluster.context == "prod"
    asked.clear()
    # the flag and the explicit --context win over the file's cluster, as in `release`
    run(["headroom", "check", "--gpus-per-pod", "1", "-e", "production",
         "--release-config", str(release), "--context", "other"])  # fmt: skip
    assert asked[0].cluster.context == "other"
    assert asked[0].shape.namespace == "ai-production"


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--namespace", "ai"], "--namespace comes from environments.production"),
        (["--node-selector", "accelerator=nvidia-a100"], "--node-selector comes from"),
        (["--reserve", "2"], "--reserve comes from"),
        (["--reserve-per-class", "nvidia-h800=1"], "--reserve-per-class comes from"),
        (["--group-by", "gpu"], "--group-by comes from"),
        (["-e", "Prod_1"], "environment 'Prod_1'"),
        (["-e", "qa"], "no environment 'qa' (environments: production)"),
    ],
)
def test_environment_settings_are_not_given_twice(
    tmp_path: Path,
    asked: list[Any],
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    named: str,
) -> None:
    release = tmp_path / "gpuops-release.yaml"
    release.write_text(_RELEASE_FILE)
    argv = ["--output", "json", "headroom", "check", "--gpus-per-pod", "1"]
    argv += ["--release-config", str(release), "-e", "production", *extra]
    assert run(argv) == 2
    assert named in _error(capsys)["error"]["message"]
    assert asked == []


def test_release_config_without_an_environment_or_a_file(
    tmp_path: Path, asked: list[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--output", "json", "headroom", "check", "--gpus-per-pod", "1"]
    assert run([*argv, "--release-config", str(tmp_path / "x.yaml")]) == 2
    assert "--release-config is read only with --environment" in _error(capsys)["error"]["message"]
    assert run([*argv, "-e", "production", "--release-config", str(tmp_path / "x.yaml")]) == 2
    assert "does not exist" in _error(capsys)["error"]["message"]
    assert asked == []
