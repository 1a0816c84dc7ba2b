"""Canary measurements against answers the lab's real components do not give: a pod (behind
the API server's pod proxy) that trickles its answer or answers megabytes, a pod whose own
404 is shaped like a Kubernetes Status. The API server relays whatever a pod sends; the lab's
app stand-in answers only healthy, slow, degraded and error pages, so a stub HTTP server on
loopback plays "the API server relaying such a pod" here (the bytes are the test data); the
client, its transport and the measuring are the real ones. The real API server's own answers
(a pod not found, a pod it cannot reach) are tested on the lab
(tests/python/integration/test_analysis_lab.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gpuops.adapters.kube import KubeClient, NotFound, podproxy
from gpuops.core.analysis import FAILED, INCONCLUSIVE
from gpuops.core.releasestrategy import AnalysisStep, HttpCheck
from gpuops.errors import InvalidInput, Unreachable
from gpuops.usecases.releases import analysis
from gpuops.usecases.releases.analysis import PodRef, Target

PREFIX = "/api/v1/namespaces/ai/pods/"


class Api:
    """Answers a pod proxy GET by the pod's name: ``answers[pod] = (status, body, pause)``,
    ``pause``: seconds between the body's bytes (0: all at once)."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, bytes, float]] = {}
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                pod = self.path.split(PREFIX, 1)[-1].split(":", 1)[0]
                status, body, pause = api.answers.get(pod, (404, b"404 page not found", 0.0))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    if not pause:
                        self.wfile.write(body)
                        return
                    for i in range(len(body)):
                        self.wfile.write(body[i : i + 1])
                        self.wfile.flush()
                        time.sleep(pause)
                except OSError:
                    return

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def api() -> Iterator[Api]:
    stub = Api()
    yield stub
    stub.server.shutdown()
    stub.server.server_close()


@pytest.fixture
def kube(api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KubeClient]:
    monkeypatch.delenv("KUBECONFIG", raising=False)
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
    client = KubeClient.connect(str(path))
    yield client
    client.close()


def _target(kube: KubeClient, pods: list[str]) -> Target:
    return Target(kube, "ai", "web", "web-canary", 7, "i", 0.0, lambda: [PodRef(p) for p in pods])


def _status(code: int, reason: str, details: dict[str, Any] | None = None) -> bytes:
    doc: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "status": "Failure"}
    doc.update(reason=reason, code=code, message=f"the server says {reason}")
    if details is not None:
        doc["details"] = details
    return json.dumps(doc).encode()


def test_a_pod_trickling_its_answer_is_cut_off_at_the_timeout(api: Api, kube: KubeClient) -> None:
    """The API server treats a pod proxy request as long-running (no timeout of its own): a
    pod sending a byte every 20 ms held the measurement for as long as its answer lasted."""
    api.answers["drip"] = (200, b'{"status": "ok"}'.ljust(2000), 0.02)
    started = time.monotonic()
    with pytest.raises(Unreachable, match=r"TimeoutError \(no whole answer within 1 s\)"):
        podproxy.get(kube, "ai", "drip", 8080, "/healthz", timeout=1)
    assert time.monotonic() - started < 2.5
    # the client's next call works (the cut connection is not reused)
    api.answers["ok"] = (200, b'{"status": "ok"}', 0.0)
    assert podproxy.get(kube, "ai", "ok", 8080, "/healthz").status == 200


def test_a_pod_answering_megabytes_fails_the_measurement_unread(api: Api, kube: KubeClient) -> None:
    """Its whole answer was read into memory, then cut to 1 MiB: a pod (or anything on its
    port) answering gigabytes took the release's memory. Now at most 1 MiB + 1 byte is read."""
    api.answers["big"] = (200, b'{"status": "ok", "pad": "' + b"x" * (3 * 2**20) + b'"}', 0.0)
    with pytest.raises(podproxy.AnswerTooLarge, match=r"answered GET /healthz with more than"):
        podproxy.get(kube, "ai", "big", 8080, "/healthz")
    m = analysis.measure(AnalysisStep("h", HttpCheck(8080, "/healthz")), _target(kube, ["big"]))
    assert m.verdict == FAILED and "more than 1024 KiB" in m.detail, m
    api.answers["ok"] = (200, b'{"status": "ok"}', 0.0)
    assert podproxy.get(kube, "ai", "ok", 8080, "/healthz").body == b'{"status": "ok"}'


def test_a_pods_own_404_shaped_as_a_status_is_its_answer_not_pod_gone(
    api: Api, kube: KubeClient
) -> None:
    """A pod answering 404 with a Kubernetes Status body (an app built on Kubernetes'
    libraries) was taken for the API server's "pod not found": inconclusive, which
    ``inconclusive: pass`` turned into a pass of a canary answering 404."""
    api.answers["app"] = (404, _status(404, "NotFound", {"kind": "widgets", "name": "x"}), 0.0)
    answer = podproxy.get(kube, "ai", "app", 8080, "/healthz")
    assert answer.status == 404
    step = AnalysisStep("h", HttpCheck(8080, "/healthz"), inconclusive="pass")
    m = analysis.measure(step, _target(kube, ["app"]))
    assert (m.verdict, m.detail) == (FAILED, "pod app answered HTTP 404, not 200"), m
    # the API server's own "pods gone not found" names the pod: that pod is gone
    api.answers["gone"] = (404, _status(404, "NotFound", {"kind": "pods", "name": "gone"}), 0.0)
    with pytest.raises(NotFound):
        podproxy.get(kube, "ai", "gone", 8080, "/healthz")
    m = analysis.measure(step, _target(kube, ["gone"]))
    assert (m.verdict, m.detail) == (INCONCLUSIVE, "pod gone is gone"), m


@pytest.mark.parametrize(
    "path", ["/a/../../../secrets", "/%2e%2e/x", "/a/%2E/b", "/./x", "/a%2fb", "/a/.."]
)
def test_the_pod_proxy_refuses_a_path_that_leaves_the_pod(path: str) -> None:
    """The file's parser refuses these; the adapter does too (a path built by code)."""
    with pytest.raises(InvalidInput, match="is not an HTTP path"):
        podproxy.proxy_path("ai", "p", 80, path)


def test_through_a_kubeconfigs_proxy_the_body_is_bounded_too(api: Api) -> None:
    """A kubeconfig naming a proxy-url goes through urllib3: the stub plays the proxy (it
    answers the absolute-URI request a proxy gets) relaying the same pods."""
    from gpuops.adapters.kube.creds import Credentials
    from gpuops.adapters.kube.transport import Transport

    http = Transport(Credentials("http://api.invalid", proxy=api.url))
    path = PREFIX + "{}:8080/proxy/healthz"
    try:
        api.answers["ok"] = (200, b'{"status": "ok"}', 0.0)
        assert http.request("GET", path.format("ok"), what="ok", timeout=5, limit=64) == (
            200,
            b'{"status": "ok"}',
        )
        api.answers["big"] = (200, b"x" * (2 * 2**20), 0.0)
        status, body = http.request("GET", path.format("big"), what="big", timeout=5, limit=1000)
        assert (status, len(body)) == (200, 1001)
        api.answers["drip"] = (200, b"y" * 2000, 0.02)
        started = time.monotonic()
        with pytest.raises(Unreachable, match="through its proxy"):
            http.request("GET", path.format("drip"), what="drip", timeout=1, limit=4096)
        assert time.monotonic() - started < 2.5
    finally:
        http.close()


def test_a_prometheus_redirect_is_not_followed_and_the_token_goes_nowhere_else() -> None:
    """A stub on loopback answers the query with 307 to another stub (a proxy or a moved
    server could): the answer is a failed measurement naming HTTP 307, and the second stub
    is never asked, so the bearer token never reaches it. (No Prometheus redirects its API;
    this pins that the client follows nothing.)"""
    from gpuops.adapters import prometheus
    from gpuops.errors import OperationFailed

    asked: list[str] = []

    class Elsewhere(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            asked.append(str(self.headers.get("Authorization")))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    other = ThreadingHTTPServer(("127.0.0.1", 0), Elsewhere)
    target = f"http://127.0.0.1:{other.server_address[1]}/api/v1/query"

    class Moved(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(307)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    first = ThreadingHTTPServer(("127.0.0.1", 0), Moved)
    for server in (other, first):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        prom = prometheus.Prometheus(f"http://127.0.0.1:{first.server_address[1]}", "tok-123456")
        with pytest.raises(OperationFailed, match="answered HTTP 307 with no Prometheus API"):
            prom.query("up")
        assert asked == []
    finally:
        for server in (other, first):
            server.shutdown()
            server.server_close()
