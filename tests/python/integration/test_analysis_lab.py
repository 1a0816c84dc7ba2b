"""Measuring a canary (issue 20) against the lab: the real Prometheus, the real API server's
pod proxy, the real Job controller.

Stand-ins here: kwok runs no container, so the lab's **app stand-in** plays the containers
of pods labelled ``gpuops.io/lab-app`` (it answers on each pod's IP, port 8080, through the
API server's pod proxy, and exports request counters whose error rate and latency the image
tag decides); in a real cluster each pod's own container answers and Prometheus scrapes it.
A smoke Job's pod "exits" as the lab's kwok stages decide by the image tag
(``-labfault-smokefail``: exit 1); a real kubelet runs the container and reports its exit.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from integration.conftest_kube import KubeLab, wait_until
from integration.conftest_metrics import MetricsLab, lab_tag
from kubernetes import client

from gpuops.adapters.kube import Conflict, KubeClient, podproxy
from gpuops.adapters.kube import jobs as kubejobs
from gpuops.core.analysis import FAILED, INCONCLUSIVE, PASSED
from gpuops.core.releasestrategy import AnalysisStep, HttpCheck, JobCheck, PrometheusCheck
from gpuops.errors import Unreachable
from gpuops.usecases.releases import analysis, analysisjob
from gpuops.usecases.releases.analysis import PodRef, Target
from gpuops_lab.labapp import SLOW_LATENCY_S

pytestmark = pytest.mark.timeout(300)

IMAGE = "127.0.0.1:5000/ai/web"
DIGEST = "@sha256:" + "ab" * 32  # gpuops sets images as repo:tag@digest
RELEASE = 7
ERROR_RATIO = (
    'sum(rate(lab_app_requests_total{namespace="$namespace",track="canary",code=~"5.."}[5s]))'
    ' / sum(rate(lab_app_requests_total{namespace="$namespace",track="canary"}[5s]))'
)


@pytest.fixture
def namespace(kube_lab: KubeLab) -> Iterator[str]:
    name = f"an-{uuid.uuid4().hex[:8]}"
    kube_lab.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    wait_until(
        lambda: any(
            sa.metadata.name == "default"
            for sa in kube_lab.core.list_namespaced_service_account(name).items
        ),
        "default ServiceAccount in the new namespace",
    )
    yield name
    kube_lab.core.delete_namespace(name)


@pytest.fixture
def kube(kube_lab: KubeLab) -> Iterator[KubeClient]:
    k = KubeClient.connect(str(kube_lab.kubeconfig))
    yield k
    k.close()


def image(tag: str) -> str:
    return f"{IMAGE}:{tag}{DIGEST}"


def start_pods(lab: MetricsLab, namespace: str, pods: dict[str, tuple[str, str | None]]) -> None:
    """Pods (name -> (image tag, track)) the app stand-in plays; waits until it does."""
    for name, (tag, track) in pods.items():
        lab.kube.core.create_namespaced_pod(
            namespace,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "labels": lab.app_labels("web", track)},
                "spec": {
                    "containers": [{"name": "main", "image": image(tag)}],
                    "terminationGracePeriodSeconds": 0,
                },
            },
        )
    lab.wait_playing(namespace, pods)


def target(kube: KubeClient, namespace: str, pods: list[str], tag: str = "1.1.0") -> Target:
    return Target(
        kube=kube,
        namespace=namespace,
        deployment="web",
        canary="web-canary",
        release=RELEASE,
        image=image(tag),
        since=0.0,
        pods=lambda: [PodRef(p) for p in pods],
        environ={},
    )


def prom_step(url: str, query: str, **kw: Any) -> AnalysisStep:
    settings = {"interval_s": 1, "count": 1, "failure_limit": 0, "inconclusive": "fail", **kw}
    hi = settings.pop("max", 0.05)
    token_env = settings.pop("token_env", None)
    return AnalysisStep("error-rate", PrometheusCheck(url, query, None, hi, token_env), **settings)


def test_prometheus_judges_the_canarys_error_rate_and_stops_at_the_failure_limit(
    metrics_lab: MetricsLab, kube: KubeClient, namespace: str
) -> None:
    """A canary in a ``-labfault-errors`` image (30 % code 500) beside a healthy stable pod:
    the real Prometheus' error ratio fails the canary's measurement, the stable's passes;
    run() stops after exactly failure_limit + 1 failed measurements."""
    start_pods(
        metrics_lab,
        namespace,
        {"web-1": (lab_tag("1.0.0"), None), "web-canary-1": (lab_tag("1.1.0", "errors"), "canary")},
    )
    url = metrics_lab.prometheus_url
    metrics_lab.wait_query(
        f'count(rate(lab_app_requests_total{{namespace="{namespace}"}}[5s]) > 5)',
        lambda s: bool(s) and s[0][1] >= 2,
        "both pods' request rates in Prometheus",
    )
    t = target(kube, namespace, ["web-canary-1"])
    m = analysis.measure(prom_step(url, ERROR_RATIO), t)
    assert m.verdict == FAILED, m
    assert m.value is not None and 0.2 <= m.value <= 0.4, m
    assert m.detail.startswith("value 0.") and "> max 0.05" in m.detail, m.detail

    stable = ERROR_RATIO.replace('track="canary"', 'track!="canary"') + " or vector(0)"
    m = analysis.measure(prom_step(url, stable), t)
    assert (m.verdict, m.value) == (PASSED, 0.0), m

    slept: list[float] = []
    lines: list[str] = []
    renewals = []
    step = prom_step(url, ERROR_RATIO, count=5, failure_limit=1, interval_s=2)
    tally = analysis.run(
        step,
        t,
        sleep=slept.append,
        say=lines.append,
        renew=lambda: renewals.append(1),
    )
    assert tally.verdict == FAILED and [x.verdict for x in tally.measurements] == [FAILED] * 2
    assert slept == [2] and len(renewals) >= 1
    assert lines[-1].startswith("analysis error-rate: failed (2 failed measurement(s), more than")
    doc = tally.to_dict()
    assert doc["provider"] == "prometheus" and doc["failures"] == 2

    # several series: the worst against the threshold, named
    per_pod = (
        '1 - sum by (pod) (rate(lab_app_requests_total{namespace="$namespace",code="200"}[5s]))'
        ' / sum by (pod) (rate(lab_app_requests_total{namespace="$namespace"}[5s]))'
    )
    m = analysis.measure(prom_step(url, per_pod), t)
    assert m.verdict == FAILED, m
    assert m.detail.endswith('(series {pod="web-canary-1"}, worst of 2)'), m


def test_prometheus_empty_nan_unreachable_and_refused_answers(
    metrics_lab: MetricsLab, kube: KubeClient, namespace: str
) -> None:
    url = metrics_lab.prometheus_url
    # the canary's pod: its name is not in these queries, its being there is what counts
    t = target(kube, namespace, ["web-canary-1"])
    empty = 'sum(rate(lab_app_requests_total{namespace="$namespace",track="none"}[5s]))'
    m = analysis.measure(prom_step(url, empty), t)
    assert (m.verdict, m.value, m.detail) == (INCONCLUSIVE, None, "the query answered no series")
    nan = analysis.measure(prom_step(url, "vector(0) / vector(0)"), t)
    assert (nan.verdict, nan.value) == (INCONCLUSIVE, None), nan
    assert nan.detail.startswith("value NaN"), nan
    inf = analysis.measure(prom_step(url, "vector(1) / vector(0)"), t)
    assert (inf.verdict, inf.detail) == (FAILED, "value +Inf > max 0.05"), inf
    scalar = analysis.measure(prom_step(url, "scalar(vector(0.01))"), t)
    assert (scalar.verdict, scalar.value) == (PASSED, 0.01), scalar

    # what an inconclusive answer counts as: fail, pass, or nothing (3 x count at most)
    for policy, verdict, taken in (("fail", FAILED, 1), ("pass", PASSED, 2), ("ignore", FAILED, 6)):
        step = prom_step(url, empty, count=2, inconclusive=policy)
        tally = analysis.run(step, t, sleep=lambda _s: None)
        assert (tally.verdict, len(tally.measurements)) == (verdict, taken), policy

    bad = analysis.measure(prom_step(url, "sum("), t)
    assert bad.verdict == FAILED and "refused the query: bad_data (HTTP 400)" in bad.detail, bad
    matrix = analysis.measure(prom_step(url, "up[1m]"), t)
    assert matrix.verdict == FAILED and "with a matrix" in matrix.detail, matrix
    # nothing listens on port 1: the source did not answer
    down = analysis.measure(prom_step("http://127.0.0.1:1", "up"), t)
    assert down.verdict == INCONCLUSIVE and "cannot reach Prometheus" in down.detail, down
    no_token = analysis.measure(prom_step(url, "up", token_env="LAB_PROM_TOKEN"), t)
    assert (no_token.verdict, no_token.detail) == (
        FAILED,
        "token_env LAB_PROM_TOKEN is not set or empty",
    )
    # no canary pod: a ratio "or vector(0)" would answer 0 and pass; nothing is measured
    idle = analysis.measure(
        prom_step(url, "vector(0)", inconclusive="pass"), target(kube, namespace, [])
    )
    assert (idle.verdict, idle.detail) == (FAILED, "no canary pod to measure"), idle


def test_http_asks_every_canary_pod_through_the_pod_proxy(
    metrics_lab: MetricsLab, kube: KubeClient, namespace: str
) -> None:
    start_pods(
        metrics_lab,
        namespace,
        {
            "ok-1": (lab_tag("1.1.0"), "canary"),
            "ok-2": (lab_tag("1.1.0"), "canary"),
            "degraded": (lab_tag("1.1.0", "degraded"), "canary"),
            "slow": (lab_tag("1.1.0", "slow"), "canary"),
        },
    )
    check = HttpCheck(8080, "/healthz", 200, 500, "status", "ok")
    step = AnalysisStep("health", check)
    m = analysis.measure(step, target(kube, namespace, ["ok-1", "ok-2"]))
    assert m.verdict == PASSED and m.detail.startswith("2 pod(s) answered 200, slowest 0."), m
    assert m.value is not None and m.value < 0.5

    m = analysis.measure(step, target(kube, namespace, ["ok-1", "degraded"]))
    assert (m.verdict, m.detail) == (FAILED, "pod degraded: status is 'degraded', not 'ok'"), m
    m = analysis.measure(step, target(kube, namespace, ["ok-1", "slow"]))
    # the stand-in's slow variant sleeps SLOW_LATENCY_S before it answers: the time measured
    # through the proxy is at least that (no upper bound: the machine may be busy)
    assert m.verdict == FAILED and m.value is not None and m.value >= SLOW_LATENCY_S, m
    assert m.detail == f"pod slow answered in {m.value:.3f} s, more than 500 ms", m
    m = analysis.measure(step, target(kube, namespace, ["slow", "degraded"]))
    assert m.detail.endswith("(and 1 more pod(s))"), m
    wrong = AnalysisStep("x", HttpCheck(8080, "/nothing-here"))
    m = analysis.measure(wrong, target(kube, namespace, ["ok-1"]))
    assert (m.verdict, m.detail) == (FAILED, "pod ok-1 answered HTTP 404, not 200"), m

    # a pod gone between the list and the GET: no answer to judge
    m = analysis.measure(step, target(kube, namespace, ["ok-1", "no-such-pod"]))
    assert (m.verdict, m.detail) == (INCONCLUSIVE, "pod no-such-pod is gone"), m
    # no canary pod at all: nothing to judge is a failure, not a source that did not answer
    m = analysis.measure(step, target(kube, namespace, []))
    assert (m.verdict, m.detail) == (FAILED, "no canary pod to ask"), m


def test_the_pod_proxy_tells_the_pods_answer_from_the_api_servers(
    metrics_lab: MetricsLab, kube: KubeClient, namespace: str
) -> None:
    """A pod nobody answers for (no ``gpuops.io/lab-app`` label: kwok gives it a real IP of
    the lab's pod network, nothing listens there) is the API server saying it could not
    reach it: PodUnreachable, a failed measurement; the stand-in's own 404 is the pod's."""
    start_pods(
        metrics_lab,
        namespace,
        {"ok": (lab_tag("1.1.0"), "canary"), "slow": (lab_tag("1.1.0", "slow"), "canary")},
    )
    kube_lab = metrics_lab.kube
    kube_lab.core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "silent"},
            "spec": {"containers": [{"name": "main", "image": image("1.1.0")}]},
        },
    )
    wait_until(
        lambda: kube_lab.core.read_namespaced_pod("silent", namespace).status.pod_ip,
        "the silent pod's IP",
    )
    answer = podproxy.get(kube, namespace, "ok", 8080, "/healthz")
    assert answer.status == 200 and answer.body.startswith(b'{"status": "ok"')
    assert podproxy.get(kube, namespace, "ok", 8080, "/nope").status == 404
    # a pod slower than the timeout: no answer (the API server waits on), and the client's
    # next call, on a fresh connection, has the default timeout again
    started = time.monotonic()
    with pytest.raises(Unreachable, match="TimeoutError"):
        podproxy.get(kube, namespace, "slow", 8080, "/healthz", timeout=0.5)
    assert time.monotonic() - started < 1.5
    assert podproxy.get(kube, namespace, "slow", 8080, "/healthz").status == 200
    with pytest.raises(podproxy.PodUnreachable, match=r"could not reach pod .*/silent port 8080"):
        podproxy.get(kube, namespace, "silent", 8080, "/healthz")
    m = analysis.measure(
        AnalysisStep("h", HttpCheck(8080, "/healthz")), target(kube, namespace, ["silent"])
    )
    assert m.verdict == FAILED and "could not reach pod" in m.detail, m
    with pytest.raises(Exception, match="not found") as info:
        podproxy.get(kube, namespace, "nobody", 8080, "/healthz")
    assert type(info.value).__name__ == "NotFound"


def canary_deployment(kube_lab: KubeLab, namespace: str, tag: str) -> None:
    labels = {"app": "web", "gpuops.io/track": "canary"}
    kube_lab.apps.create_namespaced_deployment(
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web-canary"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": "default",
                        "containers": [
                            {
                                "name": "server",
                                "image": image(tag),
                                "env": [{"name": "MODEL", "value": "m-3"}],
                            }
                        ],
                    },
                },
            },
        },
    )


def test_a_smoke_job_decides_by_its_exit_and_is_deleted(
    kube_lab: KubeLab, kube: KubeClient, namespace: str
) -> None:
    """Lab stand-in for the kubelet: the smoke Job's pod exits 0, or 1 in a
    ``-labfault-smokefail`` image (the lab's kwok stages); the Job controller is real."""
    canary_deployment(kube_lab, namespace, lab_tag("1.1.0"))
    step = AnalysisStep("smoke", JobCheck(("python", "-m", "smoke"), 60))
    t = target(kube, namespace, [], lab_tag("1.1.0"))
    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    m = analysis.measure(step, t, sleep=wait)
    name = "web-canary-smoke-7-1"
    assert (m.verdict, m.value) == (PASSED, 0.0), m
    assert m.detail.startswith(f"Job {name} completed: pod {name}-") and m.detail.endswith(
        "exited 0 (Completed)"
    ), m.detail
    assert waits, "the Job's end was waited for"
    gone = kubejobs.get_job(kube, namespace, name)
    assert gone is None or gone["metadata"].get("deletionTimestamp"), gone

    failing = target(kube, namespace, [], lab_tag("1.1.0", "smokefail"))
    m = analysis.measure(step, failing, attempt=2, sleep=time.sleep)
    assert (m.verdict, m.value) == (FAILED, 1.0), m
    assert m.detail.startswith("Job web-canary-smoke-7-2 failed (BackoffLimitExceeded): pod "), m
    assert m.detail.endswith("exited 1 (Error)"), m


def test_a_smoke_jobs_name_is_gpuops_only_when_it_proves_it(
    kube_lab: KubeLab, kube: KubeClient, namespace: str
) -> None:
    canary_deployment(kube_lab, namespace, lab_tag("1.1.0"))
    step = AnalysisStep("smoke", JobCheck(("true",), 60))
    t = target(kube, namespace, [], lab_tag("1.1.0"))
    canary = analysisjob.Canary(kube, namespace, "web", "web-canary", RELEASE, t.image)
    # a crashed run's leftover (ours: its labels name this release): replaced
    left = kubejobs.create_job(
        kube,
        analysisjob.job_body(step, step.check, canary, "web-canary-smoke-7-3", None),  # type: ignore[arg-type]
    )
    m = analysis.measure(step, t, attempt=3, sleep=time.sleep)
    assert m.verdict == PASSED, m
    # someone else's Job of that name: left alone, the measurement fails naming it
    foreign = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "web-canary-smoke-7-4", "namespace": namespace},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "x", "image": image("9")}],
                }
            }
        },
    }
    theirs = kubejobs.create_job(kube, foreign)
    m = analysis.measure(step, t, attempt=4, sleep=time.sleep)
    assert m.verdict == FAILED and "exists that gpuops did not create for release 7" in m.detail
    still = kubejobs.get_job(kube, namespace, "web-canary-smoke-7-4")
    assert still is not None and still["metadata"]["uid"] == theirs["metadata"]["uid"]
    assert not still["metadata"].get("deletionTimestamp")
    # a delete is only of the uid gpuops holds
    with pytest.raises(Conflict):
        kubejobs.delete_job(kube, namespace, "web-canary-smoke-7-4", left["metadata"]["uid"])
    assert kubejobs.delete_job(kube, namespace, "web-canary-smoke-7-4", theirs["metadata"]["uid"])
