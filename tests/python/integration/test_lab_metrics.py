"""The lab's real Prometheus, its app stand-in and its Job stages (issue 20's lab).

Stand-ins here: kwok runs no container, so the lab's **app stand-in** (one process,
``gpuops_lab.appstandin``) plays the containers of pods labelled ``gpuops.io/lab-app``: it
answers on each pod's IP, port 8080, and exports synthetic request counters whose error rate
and latency the image tag decides; in a real cluster each pod's own container answers and is
scraped. A Job's pod "exits" as the lab's kwok stages decide by image tag (a real kubelet runs
the container and reports its exit code). Prometheus, the API server and its pod proxy, the
Job controller and the scheduler are the real ones.
"""

from __future__ import annotations

import ipaddress
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from integration.conftest_kube import KubeLab, wait_until
from integration.conftest_metrics import MetricsLab, lab_tag
from kubernetes import client

pytestmark = pytest.mark.timeout(300)

IMAGE = "127.0.0.1:5000/ai/web"
DIGEST = "@sha256:" + "ab" * 32  # gpuops sets images as repo:tag@digest


@pytest.fixture
def namespace(kube_lab: KubeLab) -> Iterator[str]:
    name = f"m-{uuid.uuid4().hex[:8]}"
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


def app_pod(name: str, tag: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "containers": [{"name": "main", "image": f"{IMAGE}:{tag}{DIGEST}"}],
            "terminationGracePeriodSeconds": 0,
        },
    }


#: pod name -> (image tag, track)
PODS = {
    "web-stable": (lab_tag("1.0.0"), "stable"),
    "web-canary": (lab_tag("1.1.0", "errors"), "canary"),
    "web-slow": (lab_tag("1.1.0", "slow"), "slow"),
    "web-degraded": (lab_tag("1.1.0", "degraded"), "degraded"),
}


def ratio_query(namespace: str, codes: str) -> str:
    """Per track: the share of requests whose code matches ``codes``, over 5 s."""
    ns = f'namespace="{namespace}"'
    return (
        f"sum by (track) (rate(lab_app_requests_total{{{ns},{codes}}}[5s]))"
        f" / sum by (track) (rate(lab_app_requests_total{{{ns}}}[5s]))"
    )


def test_prometheus_and_the_pod_proxy_see_what_each_image_variant_does(
    metrics_lab: MetricsLab, namespace: str
) -> None:
    """A stable pod in a healthy image and a canary in a ``-labfault-errors`` one (plus a
    slow and a degraded one): the real Prometheus shows the canary's 30 % error ratio and
    the stable's none in a ``rate()`` query within seconds; the API server's pod proxy
    reaches each pod's ``/healthz``."""
    core = metrics_lab.kube.core
    for name, (tag, track) in PODS.items():
        labels = metrics_lab.app_labels("web", None if track == "stable" else track)
        core.create_namespaced_pod(namespace, app_pod(name, tag, labels))
    played = metrics_lab.wait_playing(namespace, PODS)
    assert {p["pod"]: (p["tag"], p["track"]) for p in played} == PODS
    cidr = ipaddress.ip_network(metrics_lab.kube.facts["pod_network"]["cidr"])
    for p in played:  # kwok's pod IP, a real address of the lab's pod network
        pod = core.read_namespaced_pod(p["pod"], namespace)
        assert p["ip"] == pod.status.pod_ip
        assert ipaddress.ip_address(pod.status.pod_ip) in cidr

    # rate() over 5 s is the steady 10 requests/s once 5 s of samples are in its window
    started = time.monotonic()
    per_pod = metrics_lab.wait_query(
        f'sum by (pod) (rate(lab_app_requests_total{{namespace="{namespace}"}}[5s]))',
        lambda s: len(s) == len(PODS) and all(9.0 <= v <= 11.0 for _, v in s),
        "~10 requests/s per pod",
    )
    seen_s = time.monotonic() - started
    assert seen_s < 15, f"the request rates took {seen_s:.1f}s to show: {per_pod}"
    # ~50 requests in the window: the canary's 30 % errors show within 1/50
    errors = {m["track"]: v for m, v in metrics_lab.query(ratio_query(namespace, 'code=~"5.."'))}
    assert set(errors) == {"canary"}, errors  # only the canary ever answered 500
    assert 0.28 <= errors["canary"] <= 0.32, errors
    ok = {m["track"]: v for m, v in metrics_lab.query(ratio_query(namespace, 'code="200"'))}
    canary = pytest.approx(0.7, abs=0.02)
    assert ok == {"stable": 1.0, "slow": 1.0, "degraded": 1.0, "canary": canary}, ok
    p99 = metrics_lab.wait_query(
        "histogram_quantile(0.99, sum by (pod, le) "
        f'(rate(lab_app_request_duration_seconds_bucket{{namespace="{namespace}"}}[5s])))',
        lambda s: len(s) == len(PODS),
        "p99 latency per pod",
    )
    latency = {m["pod"]: v for m, v in p99}
    assert 1.0 <= latency["web-slow"] <= 2.5, latency
    assert all(v <= 0.05 for pod, v in latency.items() if pod != "web-slow"), latency

    for name, (tag, _track) in PODS.items():
        took = time.monotonic()
        status, body = metrics_lab.proxy_get(namespace, name, "/healthz")
        took = time.monotonic() - took
        assert status == 200, (name, body)
        want = "degraded" if name == "web-degraded" else "ok"
        assert body == f'{{"status": "{want}", "version": "{tag}"}}'
        if name == "web-slow":
            assert took >= 1.5, f"the slow pod answered in {took:.2f}s"
    status, _ = metrics_lab.proxy_get(namespace, "web-stable", "/nothing-here")
    assert status == 404


def test_a_deleted_pod_is_no_longer_played(metrics_lab: MetricsLab, namespace: str) -> None:
    core = metrics_lab.kube.core
    core.create_namespaced_pod(
        namespace, app_pod("gone", lab_tag("1.0.0"), metrics_lab.app_labels("web"))
    )
    metrics_lab.wait_playing(namespace, ["gone"])
    assert metrics_lab.proxy_get(namespace, "gone")[0] == 200
    core.delete_namespaced_pod("gone", namespace, grace_period_seconds=0)
    wait_until(
        lambda: not [p for p in metrics_lab.playing() if p["namespace"] == namespace],
        "the stand-in stops playing the deleted pod",
    )


def smoke_job(name: str, tag: str, restart_policy: str = "Never", backoff: int = 0) -> Any:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": backoff,
            "template": {
                "spec": {
                    "restartPolicy": restart_policy,
                    "containers": [
                        {
                            "name": "smoke",
                            "image": f"{IMAGE}:{tag}{DIGEST}",
                            "command": ["python", "-m", "smoke"],
                        }
                    ],
                }
            },
        },
    }


def _job_state(kube_lab: KubeLab, namespace: str, name: str) -> str | None:
    st = kube_lab.batch.read_namespaced_job_status(name, namespace).status
    for cond in st.conditions or []:
        if cond.type in ("Complete", "Failed") and cond.status == "True":
            return str(cond.type)
    return None


def _job_pod(kube_lab: KubeLab, namespace: str, name: str) -> Any:
    pods = kube_lab.core.list_namespaced_pod(
        namespace, label_selector=f"batch.kubernetes.io/job-name={name}"
    ).items
    assert len(pods) == 1, [p.metadata.name for p in pods]
    return pods[0]


def test_a_smoke_job_exits_as_its_image_variant_says(kube_lab: KubeLab, namespace: str) -> None:
    """Lab stand-in for a kubelet running the smoke test: a Job's pod in a
    ``-labfault-smokefail`` image ends Failed with its container's exit code 1 (reason
    Error), another Succeeded with exit code 0; the real Job controller judges the Jobs."""
    kube_lab.batch.create_namespaced_job(namespace, smoke_job("ok", lab_tag("1.1.0")))
    kube_lab.batch.create_namespaced_job(namespace, smoke_job("bad", lab_tag("1.1.0", "smokefail")))
    kube_lab.batch.create_namespaced_job(
        namespace,
        smoke_job("retry", lab_tag("1.1.0", "smokefail"), restart_policy="OnFailure", backoff=2),
    )
    for name, want in (("ok", "Complete"), ("bad", "Failed"), ("retry", "Failed")):
        wait_until(lambda n=name: _job_state(kube_lab, namespace, n), f"Job {name} ends", 90)
        assert _job_state(kube_lab, namespace, name) == want, name

    ok = _job_pod(kube_lab, namespace, "ok").status
    assert ok.phase == "Succeeded"
    done = ok.container_statuses[0].state.terminated
    assert (done.exit_code, done.reason) == (0, "Completed")

    bad = _job_pod(kube_lab, namespace, "bad").status
    assert bad.phase == "Failed"
    failed = bad.container_statuses[0].state.terminated
    assert (failed.exit_code, failed.reason) == (1, "Error")
    conds = {c.type: (c.status, c.reason) for c in bad.conditions}
    assert conds["Ready"] == ("False", "PodFailed")
    job = kube_lab.batch.read_namespaced_job_status("bad", namespace).status
    assert job.failed == 1 and not job.succeeded
    # restartPolicy OnFailure: the kubelet restarts the container in its pod; the Job
    # controller fails the Job once the restarts reach backoffLimit
    retry = kube_lab.batch.read_namespaced_job_status("retry", namespace).status
    reasons = {c.reason for c in retry.conditions if c.type == "Failed"}
    assert reasons == {"BackoffLimitExceeded"}, reasons
