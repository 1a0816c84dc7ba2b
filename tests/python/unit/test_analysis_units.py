"""The pure parts of measuring a canary (issue 20): judging a pod's answer, the worst of
several series, a Prometheus answer's decoding, the smoke Job's name and body, a Job's end and
its pod's exit, the pod proxy's path, run()'s pacing and the pre-flight of a strategy."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from gpuops.adapters import prometheus
from gpuops.adapters.hostkeys import HostKeys
from gpuops.adapters.kube import jobs, podproxy
from gpuops.core.analysis import FAILED, INCONCLUSIVE, PASSED, Measurement
from gpuops.core.gpuhealth import HostHealth, Thresholds
from gpuops.core.inventory import Host, Inventory
from gpuops.core.releasestrategy import (
    AnalysisStep,
    CanaryReplicas,
    GpuCheck,
    HttpCheck,
    JobCheck,
    PrometheusCheck,
    Strategy,
)
from gpuops.errors import InvalidInput, OperationFailed, Unreachable
from gpuops.usecases.releases import analysis, analysisgpu, analysisjob
from gpuops.usecases.releases.analysis import Target


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("ok", "ok", True),
        (1, 1.0, True),
        (True, 1, False),
        (1, True, False),
        (False, 0, False),
        (True, True, True),
        (None, None, True),
        ("1", 1, False),
    ],
)
def test_same_json(a: Any, b: Any, same: bool) -> None:
    assert analysis.same_json(a, b) is same


def test_json_field_walks_objects_and_lists() -> None:
    body = json.dumps({"status": "ok", "a": {"b": [{"c": 3}]}, "x": None}).encode()
    assert analysis.json_field(body, "status") == (True, "ok")
    assert analysis.json_field(body, "a.b.0.c") == (True, 3)
    assert analysis.json_field(body, "x") == (True, None)
    assert analysis.json_field(body, "a.b.1.c") == (False, None)
    assert analysis.json_field(body, "missing") == (False, None)
    assert analysis.json_field(b"<html>", "status") == (False, None)


HEALTH = HttpCheck(8080, "/healthz", 200, 500, "status", "ok")


@pytest.mark.parametrize(
    ("answer", "verdict", "detail"),
    [
        ((200, 0.02, b'{"status": "ok"}'), PASSED, "pod p answered 200 in 0.020 s"),
        ((500, 0.02, b'{"status": "ok"}'), FAILED, "pod p answered HTTP 500, not 200"),
        ((200, 0.75, b'{"status": "ok"}'), FAILED, "pod p answered in 0.750 s, more than 500 ms"),
        (
            (200, 0.02, b'{"status": "degraded"}'),
            FAILED,
            "pod p: status is 'degraded', not 'ok'",
        ),
        ((200, 0.02, b"ok"), FAILED, "pod p: its answer has no JSON field status"),
    ],
)
def test_judge_http(answer: tuple[int, float, bytes], verdict: str, detail: str) -> None:
    got = analysis.judge_http(HEALTH, "p", podproxy.ProxyAnswer(*answer))
    assert got == (verdict, answer[1], detail)


def test_the_worst_sample_against_the_threshold() -> None:
    s = [({"pod": "a"}, 0.01), ({"pod": "b"}, 0.3), ({"pod": "c"}, math.nan), ({"pod": "d"}, 0.2)]
    assert analysis.worst_sample(s, None, 0.05) == ({"pod": "b"}, 0.3)
    assert analysis.worst_sample(s, 0.1, None)[0] == {"pod": "a"}  # failed, lowest
    assert analysis.worst_sample(s[:1] + s[2:3], None, 0.05)[0] == {"pod": "c"}  # NaN > pass
    passing = [({"pod": "a"}, 0.01), ({"pod": "e"}, 0.04)]
    assert analysis.worst_sample(passing, None, 0.05)[0] == {"pod": "e"}  # nearest the bound
    assert analysis.worst_sample([({}, 0.5), ({}, 1.5)], 0.2, 1.0) == ({}, 1.5)
    assert analysis.worst_sample([({}, 0.0), ({}, 1.05)], 0.2, 1.0) == ({}, 0.0)


def _answer(status: int, doc: Any) -> tuple[int, bytes]:
    return status, json.dumps(doc).encode() if not isinstance(doc, bytes) else doc


def _ok(kind: str, result: Any) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": kind, "result": result}}


def test_prometheus_answers_decode_to_samples() -> None:
    url = "http://p:9090"
    vector = _ok(
        "vector",
        [
            {"metric": {"pod": "a"}, "value": [1.5, "0.25"]},
            {"metric": {}, "value": [1.5, "NaN"]},
            {"metric": {"x": "y"}, "value": [1.5, "+Inf"]},
            {"metric": {"x": "z"}, "value": [1.5, "-Inf"]},
        ],
    )
    got = prometheus._samples(url, *_answer(200, vector))
    assert got[0] == ({"pod": "a"}, 0.25) and math.isnan(got[1][1])
    assert [v for _, v in got[2:]] == [math.inf, -math.inf]
    assert prometheus._samples(url, *_answer(200, _ok("scalar", [1.0, "3"]))) == [({}, 3.0)]
    assert prometheus._samples(url, *_answer(200, _ok("vector", []))) == []


@pytest.mark.parametrize(
    ("status", "doc", "error", "words"),
    [
        (
            400,
            {"status": "error", "errorType": "bad_data", "error": "parse error: secret-ish"},
            prometheus.QueryRejected,
            "refused the query: bad_data (HTTP 400)",
        ),
        (
            422,
            {"status": "error", "errorType": "execution", "error": "x"},
            prometheus.QueryRejected,
            "execution (HTTP 422)",
        ),
        (
            503,
            {"status": "error", "errorType": "unavailable", "error": "x"},
            Unreachable,
            "could not answer the query: unavailable (HTTP 503)",
        ),
        (
            200,
            {"status": "error", "errorType": "timeout", "error": "x"},
            Unreachable,
            "timeout (HTTP 200)",
        ),
        (502, b"<html>Bad Gateway</html>", Unreachable, "failed the query: HTTP 502"),
        (401, b"", prometheus.PrometheusRefused, "refused the query: HTTP 401"),
        (403, b"", prometheus.PrometheusRefused, "HTTP 403"),
        (200, b"<html>", OperationFailed, "answered HTTP 200 with no Prometheus API answer"),
        (200, _ok("matrix", []), prometheus.QueryRejected, "with a matrix, not a vector"),
        (200, _ok("string", [1, "x"]), prometheus.QueryRejected, "with a string"),
        (200, _ok("vector", [{"metric": {}, "value": [1, 2]}]), OperationFailed, "malformed value"),
        (200, _ok("vector", [{"metric": {"a": 1}, "value": [1, "2"]}]), OperationFailed, "labels"),
        (200, _ok("vector", ["x"]), OperationFailed, "malformed sample"),
        (200, _ok("histogram", []), OperationFailed, "malformed result"),
    ],
)
def test_prometheus_errors_in_our_words(
    status: int, doc: Any, error: type[Exception], words: str
) -> None:
    with pytest.raises(error) as info:
        prometheus._samples("http://p:9090", *_answer(status, doc))
    assert words in str(info.value)
    assert "secret-ish" not in str(info.value)  # the server's free text is not repeated


def test_the_job_name_stays_a_label_value_and_is_the_same_every_time() -> None:
    assert analysisjob.job_name("web-canary", 7, 1) == "web-canary-smoke-7-1"
    long = "d" * 56 + "-canary"
    name = analysisjob.job_name(long, 123456, 12)
    assert len(name) == 63 and name.endswith("-smoke-123456-12")
    assert name == analysisjob.job_name(long, 123456, 12)
    # a cut that ends in "-" would make two dashes (and "-." no name): stripped
    assert analysisjob.job_name("a" * 52 + "-bbbb", 1, 1) == "a" * 52 + "-smoke-1-1"


def test_the_smoke_job_runs_the_new_image_but_is_not_the_deployments_pod() -> None:
    template = {
        "metadata": {"labels": {"app": "web", "gpuops.io/track": "canary"}},
        "spec": {
            "serviceAccountName": "web",
            "imagePullSecrets": [{"name": "harbor"}],
            "nodeSelector": {"gpu": "h800"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "volumes": [{"name": "model", "emptyDir": {}}],
            "containers": [
                {"name": "sidecar", "image": "proxy:1"},
                {
                    "name": "server",
                    "image": "r/web:2@sha256:" + "a" * 64,
                    "env": [{"name": "MODEL", "value": "m"}],
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                    "volumeMounts": [{"name": "model", "mountPath": "/m"}],
                    "ports": [{"containerPort": 8080}],
                },
            ],
        },
    }
    step = AnalysisStep("smoke", JobCheck(("python", "-m", "smoke"), 120))
    canary = analysisjob.Canary(None, "ai", "web", "web-canary", 7, "r/web:2@sha256:" + "a" * 64)  # type: ignore[arg-type]
    body = analysisjob.job_body(step, step.check, canary, "web-canary-smoke-7-1", template)  # type: ignore[arg-type]
    labels = {
        "app.kubernetes.io/managed-by": "gpuops",
        "gpuops.io/release": "7",
        "gpuops.io/smoke-of": "web-canary",
        "gpuops.io/analysis": "smoke",
    }
    assert body["metadata"] == {
        "name": "web-canary-smoke-7-1",
        "namespace": "ai",
        "labels": labels,
        "annotations": {"gpuops.io/canary-of": "web"},
    }
    spec = body["spec"]
    assert (
        spec["backoffLimit"],
        spec["activeDeadlineSeconds"],
        spec["ttlSecondsAfterFinished"],
    ) == (
        0,
        120,
        3600,
    )
    assert spec["template"]["metadata"] == {"labels": labels}  # not the Service's selector
    pod = spec["template"]["spec"]
    assert pod == {
        "serviceAccountName": "web",
        "imagePullSecrets": [{"name": "harbor"}],
        "nodeSelector": {"gpu": "h800"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "restartPolicy": "Never",
        "containers": [
            {
                "env": [{"name": "MODEL", "value": "m"}],
                "name": "smoke",
                "image": "r/web:2@sha256:" + "a" * 64,
                "command": ["python", "-m", "smoke"],
            }
        ],
    }
    bare = analysisjob.job_body(step, step.check, canary, "n", None)  # type: ignore[arg-type]
    assert bare["spec"]["template"]["spec"]["containers"][0]["command"] == ["python", "-m", "smoke"]


def test_a_jobs_end_and_its_pods_exit() -> None:
    assert jobs.job_end({"status": {}}) == jobs.JobEnd(None)
    done = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert jobs.job_end(done).state == "Complete"
    failed = {
        "status": {
            "conditions": [
                {"type": "FailureTarget", "status": "True"},
                {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "m"},
            ]
        }
    }
    assert jobs.job_end(failed) == jobs.JobEnd("Failed", "DeadlineExceeded", "m")
    pod = {
        "metadata": {"name": "p"},
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {"name": "smoke", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}
            ],
        },
    }
    assert jobs.pod_exit(pod) == jobs.PodExit("p", "Failed", "smoke", 3, "Error")
    evicted = {"metadata": {"name": "q"}, "status": {"phase": "Failed", "reason": "Evicted"}}
    assert jobs.pod_exit(evicted) == jobs.PodExit("q", "Failed", reason="Evicted")


def test_the_pod_proxy_path_is_built_from_checked_parts() -> None:
    assert (
        podproxy.proxy_path("ai", "web-1", 8080, "/healthz?x=1")
        == "/api/v1/namespaces/ai/pods/web-1:8080/proxy/healthz?x=1"
    )
    for bad in (("AI", "p", 80, "/"), ("ai", "p/../x", 80, "/"), ("ai", "p", 0, "/")):
        with pytest.raises(InvalidInput):
            podproxy.proxy_path(*bad)
    for path in ("healthz", "/a b", "/a\r\nHost: x", "/a#b"):
        with pytest.raises(InvalidInput, match="is not an HTTP path"):
            podproxy.proxy_path("ai", "p", 80, path)
    assert podproxy._is_status(b'{"kind": "Status", "apiVersion": "v1", "code": 503}')
    assert not podproxy._is_status(b'{"kind": "Status"}')
    assert not podproxy._is_status(b"Service Unavailable")


def _target() -> Target:
    return Target(None, "ai", "web", "web-canary", 1, "i", 0.0, list)  # type: ignore[arg-type]


def test_run_measures_at_once_then_every_interval_renewing_the_lock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pure unit of run()'s pacing: measure() is replaced by a script of verdicts."""
    verdicts = iter([PASSED, FAILED, PASSED, INCONCLUSIVE, PASSED])
    events: list[str] = []

    def fake(step: AnalysisStep, target: Target, **kw: Any) -> Measurement:
        events.append(f"measure {kw['attempt']}")
        return Measurement("t", next(verdicts), 0.5, "d")

    monkeypatch.setattr(analysis, "measure", fake)
    step = AnalysisStep("a", GpuCheck("inv"), interval_s=7, count=3, failure_limit=1)
    lines: list[str] = []
    tally = analysis.run(
        step,
        _target(),
        sleep=lambda s: events.append(f"sleep {s}"),
        say=lines.append,
        renew=lambda: events.append("renew"),
    )
    assert tally.verdict == PASSED and len(tally.measurements) == 3
    assert events == [
        "measure 1",
        "renew",
        "sleep 7",
        "renew",
        "measure 2",
        "renew",
        "sleep 7",
        "renew",
        "measure 3",
        "renew",
    ]
    assert lines[0] == "analysis a (gpu) measurement 1: passed value 0.5: d"
    assert lines[-1] == "analysis a: passed (3 of 3 measurements, 1 failed (limit 1))"


def test_preflight_names_the_step_of_what_is_missing(tmp_path: Path) -> None:
    prom = AnalysisStep("err", PrometheusCheck("http://p:9090", "up", max=1, token_env="PROM_T"))
    strategy = Strategy((CanaryReplicas(1), prom))
    with pytest.raises(InvalidInput) as info:
        analysis.preflight(strategy, "r.yaml", "prod", {})
    assert info.value.message == (
        "r.yaml: environments.prod.strategy.steps[1].analysis.prometheus: token_env names "
        "PROM_T, which is not set or empty"
    )
    analysis.preflight(strategy, "r.yaml", "prod", {"PROM_T": "t0ken-value"})
    tls = AnalysisStep(
        "e", PrometheusCheck("https://p", "up", max=1, ca_file=str(tmp_path / "none.pem"))
    )
    with pytest.raises(InvalidInput, match=r"steps\[1\]\.analysis\.prometheus: the CA file"):
        analysis.preflight(Strategy((CanaryReplicas(1), tls)), "r.yaml", "prod", {})
    gpu = AnalysisStep("g", GpuCheck(str(tmp_path / "no-inventory")))
    with pytest.raises(InvalidInput, match=r"steps\[2\]\.analysis\.gpu: "):
        analysis.preflight(
            Strategy((CanaryReplicas(1), prom, gpu)), "r.yaml", "prod", {"PROM_T": "x"}
        )


def test_an_xid_counts_when_logged_after_the_step_began_by_the_nodes_clock() -> None:
    """Pure unit of the gpu analysis' arithmetic: the step began at 1000.0 (epoch s); the node
    read uptime 500.0 when its clock said 1010.0, so the step began at uptime 490.0."""
    host = Host("gpu-1")
    memory = analysisgpu._Memory(Inventory("inv", (host,)), {"gpu-1": Thresholds()}, HostKeys())
    events = [
        {"xid": 13, "name": "n", "bus": "0000:18:00", "uptime_s": at, "line": f"[{at}] Xid 13"}
        for at in (489.9, 490.0, 495.5)
    ]
    health = HostHealth("gpu-1", PASSED, xids=events)
    found = analysisgpu._new_xids(host, health, (500.0, 1010.0), 1000.0, 1012.0, memory)
    assert [f.split(" on ")[0] for f in found] == ["gpu-1: Xid 13 (n)"] * 2
    # no clock from the node: the controller's time before asking (1005.0): uptime 495.0
    found = analysisgpu._new_xids(host, health, (500.0, None), 1000.0, 1005.0, memory)
    assert len(found) == 1
    # rebooted since the step began (uptime 5 s, 10 s after it): every event of this boot
    found = analysisgpu._new_xids(host, health, (5.0, 1010.0), 1000.0, 1012.0, memory)
    assert len(found) == 3
    # no uptime at all: an untimed comparison with the step's first reading
    memory.lines.clear()
    assert analysisgpu._new_xids(host, health, None, 1000.0, 1012.0, memory) == []
    more = HostHealth("gpu-1", PASSED, xids=[*events, {**events[0], "line": "new"}])
    assert len(analysisgpu._new_xids(host, more, None, 1000.0, 1013.0, memory)) == 1


def test_ecc_counts_beyond_the_steps_first_reading() -> None:
    host = Host("gpu-1")
    limits = Thresholds(ecc_corrected_volatile_warning=10)
    memory = analysisgpu._Memory(Inventory("inv", (host,)), {"gpu-1": limits}, HostKeys())

    def reading(corrected: int, uncorrected: int) -> HostHealth:
        ecc = {"corrected_volatile": corrected, "uncorrected_volatile": uncorrected}
        ecc["uncorrected_aggregate"] = 7  # old, and unchanged
        return HostHealth("gpu-1", PASSED, gpus=[{"index": 0, "uuid": "GPU-1", "ecc": ecc}])

    assert analysisgpu._new_ecc(host, reading(5, 3), memory) == []  # the baseline
    assert analysisgpu._new_ecc(host, reading(15, 3), memory) == []  # 10 more: the limit
    assert analysisgpu._new_ecc(host, reading(16, 3), memory) == [
        "gpu-1: GPU 0 (GPU-1): 11 corrected ECC errors since the step began, more than 10"
    ]
    assert analysisgpu._new_ecc(host, reading(5, 4), memory) == [
        "gpu-1: GPU 0 (GPU-1): 1 uncorrected ECC error(s) since the step began"
    ]


# -- a hostile review: answers of an unexpected shape are never a pass ------------------------
@pytest.mark.parametrize(
    "value",
    ["\u0661", "\uff11", " 0 ", "0_1", "infinity", "nan", "+inf", "1e", "", "0x1", "1\n"],
)
def test_a_prometheus_value_is_prometheus_number_text_or_malformed(value: str) -> None:
    """Go's strconv text (digits, '.', an exponent, NaN, +Inf, -Inf) and nothing else:
    Python's float() also reads Arabic-Indic and full-width digits, blanks and '_', which
    no Prometheus writes (a proxy's rewriting would be judged as a number)."""
    with pytest.raises(OperationFailed, match="malformed value"):
        prometheus._samples("http://p:9090", *_answer(200, _ok("vector", [{"value": [1, value]}])))


@pytest.mark.parametrize("value", ["0", "-0.5", "1e-3", "2.5E+10", ".5", "NaN", "+Inf", "-Inf"])
def test_prometheus_number_text_is_read(value: str) -> None:
    got = prometheus._samples("http://p:9090", *_answer(200, _ok("scalar", [1, value])))
    assert len(got) == 1 and (got[0][1] == float(value) or math.isnan(got[0][1]))


def test_a_partial_prometheus_answer_is_inconclusive_never_judged() -> None:
    """``warnings`` (Prometheus, Thanos, Mimir: a store or a remote read did not answer) means
    the vector may lack series, the canary's failing one among them: not an answer to judge."""
    partial = {**_ok("vector", [{"metric": {}, "value": [1, "0.01"]}]), "warnings": ["store x"]}
    with pytest.raises(Unreachable, match="partial answer"):
        prometheus._samples("http://p:9090", *_answer(200, partial))
    empty = {**_ok("vector", []), "warnings": []}  # an empty list warns of nothing
    assert prometheus._samples("http://p:9090", *_answer(200, empty)) == []


@pytest.mark.parametrize("token", ["t\u00f6ken-value", "tok\u2019en-value", "tok en", "tok\ten"])
def test_a_token_that_is_no_http_header_value_is_an_input_error_not_shown(token: str) -> None:
    """A bearer token is RFC 6750's b64token characters: one with a non-ASCII character
    crashed the request (UnicodeEncodeError, holding 'Bearer <token>' in its object)."""
    with pytest.raises(InvalidInput) as info:
        prometheus.Prometheus("https://p:9090", token)
    assert token not in info.value.message and "token" in info.value.message


class _Trickle:
    """Stand-in for a server (a proxy in front of Prometheus, or the API server relaying a
    pod) that sends ``at_once`` and then ``slowly`` one byte at a time, each byte well within
    the socket timeout: a plain TCP server on loopback, no Prometheus. Real Prometheus never
    trickles; what is tested is that the client's timeout bounds the whole answer."""

    def __init__(self, at_once: bytes, slowly: bytes, pause: float = 0.02) -> None:
        import socket
        import threading

        self.srv = socket.create_server(("127.0.0.1", 0))
        self.port = self.srv.getsockname()[1]
        self.at_once, self.slowly, self.pause = at_once, slowly, pause
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        import time

        try:
            conn, _ = self.srv.accept()
        except OSError:
            return
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(self.at_once)
                for i in range(len(self.slowly)):
                    if self.stop.is_set():
                        return
                    conn.sendall(self.slowly[i : i + 1])
                    time.sleep(self.pause)
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.srv.close()


def _trickled_answer(body: bytes, where: str) -> _Trickle:
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\nX-Pad: {'p' * 200}\r\n\r\n"
    if where == "headers":
        return _Trickle(b"", head.encode() + body)
    return _Trickle(head.encode(), body)


@pytest.mark.parametrize("where", ["headers", "body"])
def test_the_prometheus_timeout_bounds_the_whole_answer(where: str) -> None:
    import time

    trickle = _trickled_answer(json.dumps(_ok("scalar", [1, "0"])).encode().ljust(400), where)
    try:
        started = time.monotonic()
        with pytest.raises(Unreachable, match=r"did not answer within 1 s"):
            prometheus.Prometheus(f"http://127.0.0.1:{trickle.port}", timeout=1).query("up")
        assert time.monotonic() - started < 2.5
    finally:
        trickle.close()


def _exit(code: int | None, pod: str = "smoke-x", reason: str = "") -> jobs.PodExit:
    phase = "Succeeded" if code == 0 else "Failed"
    return jobs.PodExit(pod, phase, "smoke" if code is not None else "", code, reason)


COMPLETE = jobs.JobEnd("Complete")


@pytest.mark.parametrize(
    ("end", "exits", "verdict", "detail"),
    [
        (COMPLETE, [_exit(0, reason="Completed")], PASSED, "Job j completed: pod smoke-x exited 0"),
        # a Job that says Complete without a pod that exited 0 is no evidence the test ran
        (COMPLETE, [], FAILED, "Job j says Complete but no pod of it reported an exit"),
        (COMPLETE, [_exit(None)], FAILED, "Job j says Complete but pod smoke-x reported no exit"),
        (COMPLETE, [_exit(1)], FAILED, "Job j says Complete but pod smoke-x exited 1"),
        (COMPLETE, [_exit(0), _exit(137, "smoke-y")], FAILED, "pod smoke-y exited 137"),
        (
            jobs.JobEnd("Failed", "BackoffLimitExceeded"),
            [_exit(1, reason="Error")],
            FAILED,
            "Job j failed (BackoffLimitExceeded): pod smoke-x exited 1 (Error)",
        ),  # the Job controller's own failure, as before
    ],
)
def test_a_smoke_job_passes_only_when_it_completed_and_every_pod_exited_0(
    end: jobs.JobEnd, exits: list[jobs.PodExit], verdict: str, detail: str
) -> None:
    got = analysisjob.judge_end("j", end, exits)
    assert got[0] == verdict and detail in got[2], got
    if verdict == FAILED and exits and exits[-1].exit_code:
        assert got[1] == float(exits[-1].exit_code)


def test_a_job_that_failed_and_completed_is_failed() -> None:
    """Conditions naming both (a status someone patched): the failure wins, whatever order."""
    both = [{"type": "Complete", "status": "True"}, {"type": "Failed", "status": "True"}]
    assert jobs.job_end({"status": {"conditions": both}}).state == "Failed"


def test_a_smoke_job_deleted_or_never_ending_fails_never_inconclusive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pure unit of smoke()'s waiting: the Job adapter's calls are replaced by a script (the
    real Job controller's answers are in the lab test). A Job deleted by someone, or replaced
    by another of its name, was inconclusive: ``inconclusive: pass`` passed a smoke test that
    never ended."""
    made = {"metadata": {"name": "web-canary-smoke-7-1", "uid": "u-1"}}
    seen: dict[str, Any] = {}
    monkeypatch.setattr(analysisjob.kubeapps, "get_deployment", lambda *_a: {})
    monkeypatch.setattr(analysisjob.kubejobs, "create_job", lambda _k, _b: made)
    monkeypatch.setattr(analysisjob.kubejobs, "delete_job", lambda *a: seen.setdefault("del", a))
    step = AnalysisStep("smoke", JobCheck(("x",), 5), inconclusive="pass")
    canary = analysisjob.Canary(None, "ai", "web", "web-canary", 7, "i")  # type: ignore[arg-type]
    for now in (None, {"metadata": {"name": "web-canary-smoke-7-1", "uid": "u-2"}}):
        monkeypatch.setattr(analysisjob.kubejobs, "get_job", lambda *_a, now=now: now)
        got = analysisjob.smoke(step, step.check, canary, 1, lambda _s: None)  # type: ignore[arg-type]
        assert got[0] == FAILED and "was deleted or replaced by someone else" in got[2], got
    running = {"metadata": {"name": "web-canary-smoke-7-1", "uid": "u-1"}, "status": {}}
    monkeypatch.setattr(analysisjob.kubejobs, "get_job", lambda *_a: running)
    clock = iter(range(0, 10_000, 10))
    got = analysisjob.smoke(step, step.check, canary, 1, lambda _s: None, clock=lambda: next(clock))  # type: ignore[arg-type]
    assert got[0] == FAILED and "did not end within 65 s" in got[2], got
    assert seen["del"][-1] == "u-1"  # deleted by the uid gpuops created


def _gpu_inventory(tmp: Path) -> str:
    path = tmp / "hosts.yml"
    path.write_text(
        "all:\n  children:\n    gpu_nodes:\n      hosts:\n"
        "        gpu-01: {ansible_host: 192.0.2.250}\n",
        encoding="utf-8",
    )
    return str(path)


def test_a_gpu_analysis_of_nodes_it_cannot_know_fails_it_never_passes(tmp_path: Path) -> None:
    """A canary node the inventory does not name is a setting that will not change: the gpu
    check inspected nothing, and ``inconclusive: pass`` passed it. Like a query Prometheus
    refuses, it is failed; so is a canary without a pod (nothing to inspect). A pod not yet on
    a node is inconclusive (the next measurement may find it placed). No ssh is reached."""
    step = AnalysisStep("gpus", GpuCheck(_gpu_inventory(tmp_path)), inconclusive="pass")

    def target(pods: list[analysis.PodRef]) -> Target:
        return Target(None, "ai", "web", "web-canary", 1, "i", 0.0, lambda: pods, environ={})  # type: ignore[arg-type]

    m = analysis.measure(step, target([analysis.PodRef("web-canary-1", "gpu-99")]))
    assert m.verdict == FAILED and m.detail.startswith("node gpu-99 of a canary pod is not"), m
    m = analysis.measure(step, target([]))
    assert (m.verdict, m.detail) == (FAILED, "no canary pod to inspect"), m
    m = analysis.measure(step, target([analysis.PodRef("web-canary-1")]))
    assert (m.verdict, m.detail) == (INCONCLUSIVE, "no canary pod is on a node yet"), m


def test_an_http_analysis_of_a_canary_without_pods_fails_it() -> None:
    """No canary pod: nothing answered, and ``inconclusive: pass`` passed a canary that is
    not there (the engine's steps made it; none being left is not an unreachable source)."""
    step = AnalysisStep("h", HttpCheck(8080, "/healthz"), inconclusive="pass")
    m = analysis.measure(step, _target())
    assert (m.verdict, m.detail) == (FAILED, "no canary pod to ask"), m


def test_gpus_that_stop_working_since_the_steps_first_reading_fail_it() -> None:
    """nvidia-smi failing (the driver gone, hung), a GPU lost or no longer listed since the
    step's first reading: the gpu analysis looked only at Xid lines and ECC counters, so a
    node whose driver the canary took down (no GPU left to count ECC on) passed with "no Xid
    event or ECC error". What was already broken at the first reading is the fleet's, not
    the canary's (as for ECC). Pure unit: the readings are built here."""
    from gpuops.core.gpuhealth import CRITICAL, Finding

    host = Host("gpu-1")
    memory = analysisgpu._Memory(Inventory("inv", (host,)), {"gpu-1": Thresholds()}, HostKeys())
    cards = [{"index": i, "uuid": f"GPU-{i}", "ecc": {}} for i in range(2)]
    lost = Finding("gpu-lost", CRITICAL, "GPU 0000:18:00.0: GPU is lost")
    down = Finding("driver-not-loaded", CRITICAL, "the NVIDIA driver is not loaded: rc 9")
    assert analysisgpu._new_outages(host, HostHealth("gpu-1", PASSED, gpus=cards), memory) == []
    one = HostHealth("gpu-1", FAILED, gpus=cards[:1], findings=[lost])
    assert analysisgpu._new_outages(host, one, memory) == [
        "gpu-1: GPU 0000:18:00.0: GPU is lost (since the step began)",
        "gpu-1: GPU GPU-1 is no longer listed by nvidia-smi (since the step began)",
    ]
    none = HostHealth("gpu-1", FAILED, findings=[down])
    assert analysisgpu._new_outages(host, none, memory)[0] == (
        "gpu-1: the NVIDIA driver is not loaded: rc 9 (since the step began)"
    )
    # broken at the first reading already: not the canary's doing
    old = analysisgpu._Memory(Inventory("inv", (host,)), {"gpu-1": Thresholds()}, HostKeys())
    assert analysisgpu._new_outages(host, one, old) == []
    assert analysisgpu._new_outages(host, one, old) == []


def test_ecc_counters_unreadable_at_the_first_reading_count_from_their_first_reading() -> None:
    host = Host("gpu-1")
    memory = analysisgpu._Memory(Inventory("inv", (host,)), {"gpu-1": Thresholds()}, HostKeys())

    def reading(ecc: dict[str, int]) -> HostHealth:
        return HostHealth("gpu-1", PASSED, gpus=[{"index": 0, "uuid": "GPU-1", "ecc": ecc}])

    assert analysisgpu._new_ecc(host, reading({}), memory) == []  # N/A at first
    assert analysisgpu._new_ecc(host, reading({"uncorrected_volatile": 2}), memory) == []
    assert analysisgpu._new_ecc(host, reading({"uncorrected_volatile": 5}), memory) == [
        "gpu-1: GPU 0 (GPU-1): 3 uncorrected ECC error(s) since the step began"
    ]


def test_a_prometheus_analysis_of_a_canary_without_pods_fails_it() -> None:
    """An error ratio written as the docs advised (``... or vector(0)``) answers 0 for a
    canary that serves nothing, pods or not: a canary whose pods are all gone passed. With
    no canary pod there is nothing the query can be about: failed, before asking (the URL
    here is never reached: nothing listens on port 1)."""
    check = PrometheusCheck("http://127.0.0.1:1", "vector(0)", max=0.05)
    m = analysis.measure(AnalysisStep("err", check, inconclusive="pass"), _target())
    assert (m.verdict, m.detail) == (FAILED, "no canary pod to measure"), m
