"""What gpuops does with Kubernetes API answers that are not what a Kubernetes API server
writes: the operation fails (exit 1) naming what was wrong; a gate never computes a verdict
from a list it could not read (a LIST without ``items`` must not make every GPU look free).

A real kube-apiserver never sends these answers, so a stub HTTP server on loopback sends them
(the bytes are the test data); the client, its HTTP layer and the whole CLI are the real ones.
Answers a real server does send (404 for a wrong path prefix, 410, quota) are tested on the
lab as well (tests/python/integration/test_headroom_lab.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from unit.test_kubeproto import envelope

from gpuops.adapters.kube import proto as kubeproto
from gpuops.cli.main import run

NS = {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "default"}}
NODE = {
    "metadata": {"name": "n1", "labels": {"accelerator": "nvidia-h800"}},
    "spec": {},
    "status": {
        "conditions": [{"type": "Ready", "status": "True"}],
        "allocatable": {"nvidia.com/gpu": "8", "pods": "110"},
        "capacity": {"nvidia.com/gpu": "8", "pods": "110"},
    },
}
OK: dict[str, tuple[int, Any]] = {
    "/api/v1/namespaces/default": (200, NS),
    "/api/v1/namespaces/default/resourcequotas": (200, {"kind": "ResourceQuotaList", "items": []}),
    "/api/v1/nodes": (200, {"kind": "NodeList", "metadata": {}, "items": [NODE]}),
    "/api/v1/pods": (200, {"kind": "PodList", "metadata": {}, "items": []}),
}


def _status(code: int, reason: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
            "message": f"the server says {reason}", "code": code}  # fmt: skip


def _proto_status(code: int, reason: str) -> bytes:
    """:func:`_status` as the API server writes it to a client asking for protobuf."""
    status = kubeproto.message_type("Status")(reason=reason, code=code)
    status.message = f"the server says {reason}"
    unknown = kubeproto.message_type("Unknown")(raw=status.SerializeToString())
    unknown.typeMeta.apiVersion, unknown.typeMeta.kind = "v1", "Status"
    return kubeproto.MAGIC + unknown.SerializeToString()


class Api:
    """Answers by path; ``answers`` maps a path to (HTTP status, JSON document or raw bytes)."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, Any]] = dict(OK)
        self.seen: list[str] = []
        self.queries: list[str] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                api.seen.append(path)
                api.queries.append(self.path)
                status, body = api.answers.get(path, (404, b"404 page not found\n"))
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                ctype = "text/plain" if isinstance(body, bytes) else "application/json"
                if data.startswith(kubeproto.MAGIC):  # as the API server answers protobuf
                    ctype = "application/vnd.kubernetes.protobuf"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def api() -> Iterator[Api]:
    stub = Api()
    yield stub
    stub.server.shutdown()
    stub.server.server_close()


@pytest.fixture
def kubeconfig(api: Api, tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": api.url}}],
                "users": [{"name": "u", "user": {"token": "stub-token"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("KUBECONFIG", "GPUOPS_PARAMS_FILE", "GPUOPS_RESULT_FILE", "GPUOPS_ERROR_FILE"):
        monkeypatch.delenv(var, raising=False)


def _check(kubeconfig: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = run(["--output", "json", "headroom", "check", "--gpus-per-pod", "1",
                "--kubeconfig", str(kubeconfig)])  # fmt: skip
    out = capsys.readouterr()
    doc = json.loads(out.out if code == 0 else out.err)
    assert "Traceback" not in out.err
    return code, doc


def test_the_stub_is_a_sane_api_server(
    api: Api, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, doc = _check(kubeconfig, capsys)
    assert code == 0, doc
    assert doc["result"]["free_total"] == 8
    assert set(OK) <= set(api.seen)


def test_lists_answered_in_protobuf_give_the_json_verdict(
    api: Api, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "nodeName": "n1",
            "containers": [{"resources": {"requests": {"nvidia.com/gpu": "3"}}}],
        },
        "status": {"phase": "Running"},
    }
    api.answers["/api/v1/pods"] = (200, {"kind": "PodList", "metadata": {}, "items": [pod]})
    want = _check(kubeconfig, capsys)
    api.answers["/api/v1/nodes"] = (200, envelope("Node", [NODE]))
    api.answers["/api/v1/pods"] = (200, envelope("Pod", [pod]))
    got = _check(kubeconfig, capsys)
    for _, doc in (want, got):
        doc["result"].pop("timings_s")  # how long it took differs, nothing else may
    assert got == want and got[0] == 0 and got[1]["result"]["free_total"] == 5


@pytest.mark.parametrize(
    ("page", "says"),
    [
        ({"kind": "NodeList", "metadata": {}}, "no items"),
        ({"kind": "NodeList", "metadata": {}, "items": None}, "no items"),
        ({"kind": "NodeList", "metadata": {}, "items": {}}, "no items"),
        ([NODE], "not a list object"),
        ("nodes", "not a list object"),
        ({"kind": "NodeList", "metadata": 5, "items": [NODE]}, "metadata"),
        ({"kind": "NodeList", "metadata": {}, "items": [5]}, "item 0 is a JSON integer"),
        ({"kind": "NodeList", "metadata": {}, "items": [NODE, "n2"]}, "item 1 is a JSON string"),
        ({"kind": "NodeList", "items": [{**NODE, "metadata": 5}]}, "metadata is a JSON integer"),
        ({"kind": "NodeList", "items": [{**NODE, "status": []}]}, "status is a JSON array"),
        (
            {"kind": "NodeList", "items": [{**NODE, "metadata": {"name": "n1", "labels": [1]}}]},
            "metadata.labels is a JSON array",
        ),
    ],
)
def test_a_list_answer_of_the_wrong_shape_fails_closed(
    api: Api, kubeconfig: Path, capsys: pytest.CaptureFixture[str], page: Any, says: str
) -> None:
    api.answers["/api/v1/nodes"] = (200, page)
    code, doc = _check(kubeconfig, capsys)
    assert code == 1, doc
    error = doc["error"]
    assert error["category"] == "failed"
    assert "list nodes" in error["message"] or "node" in error["message"]
    assert says in error["message"], error["message"]
    assert doc["result"] is None  # no verdict from a list that could not be read


def test_a_quota_list_without_items_fails_closed(
    api: Api, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answers["/api/v1/namespaces/default/resourcequotas"] = (200, {"kind": "List"})
    code, doc = _check(kubeconfig, capsys)
    assert code == 1 and "resourcequotas" in doc["error"]["message"], doc


@pytest.mark.parametrize(
    ("path", "answer", "code", "says"),
    [
        ("/api/v1/nodes", (404, _status(404, "NotFound")), 1, "list nodes: the API at"),
        ("/api/v1/nodes", (404, b"404 page not found\n"), 1, "not a Kubernetes API path"),
        ("/api/v1/namespaces/default", (404, b"404 page not found\n"), 1, "not a Kubernetes API"),
        ("/api/v1/nodes", (410, _status(410, "Expired")), 1, "kept expiring"),
        ("/api/v1/namespaces/default/resourcequotas", (410, _status(410, "Gone")), 1, "HTTP 410"),
        ("/api/v1/pods", (500, _status(500, "InternalError")), 4, "HTTP 500"),
        ("/api/v1/pods", (403, _status(403, "Forbidden")), 1, "HTTP 403"),
        ("/api/v1/pods", (200, b"<html>proxy login</html>"), 1, "invalid JSON"),
        ("/api/v1/pods", (200, b"k8s\x00\x12\x05\x12\x02"), 1, "invalid protobuf"),
        ("/api/v1/nodes", (200, b"k8s\x00\xff\xff\xff"), 1, "invalid protobuf"),
        ("/api/v1/nodes", (404, _proto_status(404, "NotFound")), 1, "list nodes: the API at"),
        ("/api/v1/pods", (403, _proto_status(403, "Forbidden")), 1, "says Forbidden"),
        ("/api/v1/namespaces/default", (200, [1, 2]), 1, "not a JSON object"),
    ],
)
def test_unexpected_answers_are_failures_with_a_clear_message(
    api: Api,
    kubeconfig: Path,
    capsys: pytest.CaptureFixture[str],
    path: str,
    answer: tuple[int, Any],
    code: int,
    says: str,
) -> None:
    api.answers[path] = answer
    got, doc = _check(kubeconfig, capsys)
    assert got == code, doc
    assert doc["error"]["category"] != "internal"
    assert says in doc["error"]["message"], doc["error"]["message"]
    assert api.url in doc["error"]["message"]


def test_a_real_not_found_namespace_is_still_an_input_error(
    api: Api, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answers["/api/v1/namespaces/default"] = (404, _status(404, "NotFound"))
    code, doc = _check(kubeconfig, capsys)
    assert code == 2 and "namespace 'default' does not exist" in doc["error"]["message"]


@pytest.mark.parametrize("value", ["abc", "-5", "\uff11\uff10", "10\n", "1e3", "100001"])
def test_a_malformed_page_size_is_an_input_error_naming_the_variable(
    kubeconfig: Path, value: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from gpuops.cli.main import main; main()", "--output", "json",
         "headroom", "check", "--gpus-per-pod", "1", "--kubeconfig", str(kubeconfig)],
        env={"GPUOPS_KUBE_PAGE_SIZE": value, "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stderr)["error"]
    assert "GPUOPS_KUBE_PAGE_SIZE" in error["message"]
    assert "Traceback" not in done.stderr


def test_a_good_page_size_is_used(api: Api, kubeconfig: Path) -> None:
    api.queries.clear()
    done = subprocess.run(
        [sys.executable, "-c", "from gpuops.cli.main import main; main()",
         "headroom", "check", "--gpus-per-pod", "1", "--kubeconfig", str(kubeconfig)],
        env={"GPUOPS_KUBE_PAGE_SIZE": "7", "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert any(q.startswith("/api/v1/nodes?") and "limit=7" in q for q in api.queries)
