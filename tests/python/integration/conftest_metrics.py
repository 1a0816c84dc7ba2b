"""Session fixture ``metrics_lab``: a real Prometheus and the lab's app stand-in, on the
``kube_lab`` cluster (started once, for the tests that ask for it, not for every kube test).

* Prometheus: Debian's ``prometheus`` 2.42, started by the lab (``gpuops_lab.prometheus``),
  scraping every second; ``metrics_lab.prometheus_url`` is what a release config names.
* The Pushgateway: Debian's ``prometheus-pushgateway`` 1.5, started by the lab
  (``gpuops_lab.pushgateway``), scraped by that Prometheus with ``honor_labels``;
  ``metrics_lab.pushgateway_url``.
* The app stand-in (``gpuops_lab.appstandin``), a **lab stand-in for the containers** of
  pods labelled ``gpuops.io/lab-app`` (kwok runs none): on each such pod's IP, port 8080
  (reached through the API server's pod proxy) ``/healthz`` answers
  ``{"status": "ok"|"degraded", "version": "<image tag>"}``; it exports, per pod,
  ``lab_app_requests_total{namespace,pod,app,track,code}`` (10 requests/s, synthetic) and
  ``lab_app_request_duration_seconds`` (histogram). The image tag decides:
  ``-labfault-errors`` 30 % code 500, ``-labfault-slow`` ~2 s, ``-labfault-degraded``
  ``"status": "degraded"``, anything else healthy (200, ~20 ms). A pod that never answered
  500 has no ``code="500"`` series (as an instrumented app): write error-rate queries as
  success rates or with ``or vector(0)``. In a real cluster each pod's container answers
  and Prometheus discovers the pods through the API server.

Make a pod count: give it (or a Deployment's pod template) ``metrics_lab.app_labels("web")``
(``track="canary"`` for a canary; the label ``gpuops.io/track`` itself, as gpuops sets it,
works too) and an image whose tag carries the behaviour (``lab_tag("2.0.0", "errors")``).
Kubernetes Jobs: a Job's pod in a ``-labfault-smokefail`` image ends Failed with exit code 1,
any other Succeeded with exit code 0 (the lab's kwok stages).

Wire it from tests/python/conftest.py: ``pytest_plugins = [..., "integration.conftest_metrics"]``.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from integration.conftest_kube import KubeLab, wait_until
from kubernetes.client.exceptions import ApiException

from gpuops_lab import apps, kwokstages, labapp

#: The label that makes the stand-in play a pod, and the one naming its track.
LAB_APP_LABEL = labapp.LABEL
TRACK_LABEL = labapp.TRACK_LABEL
#: The port the stand-in answers on at each pod's IP.
APP_PORT = labapp.PORT

Sample = tuple[dict[str, str], float]


def lab_tag(version: str, fault: str | None = None) -> str:
    """An image tag with the lab's fault marker: ``lab_tag("2.0.0", "errors")`` is
    ``2.0.0-labfault-errors``; faults: errors, slow, degraded (the stand-in), smokefail
    (Job pods), pullerror, crashloop, notready (kwok stages)."""
    known = (*kwokstages.APP_FAULTS, kwokstages.SMOKE_FAIL, *kwokstages.FAULTS)
    if fault is None:
        return version
    if fault not in known:
        raise ValueError(f"unknown lab fault {fault!r}; one of {known}")
    return f"{version}{kwokstages.MARKER}{fault}"


@dataclass
class MetricsLab:
    kube: KubeLab
    prometheus_url: str
    exporter_url: str  # the stand-in's own /metrics (what Prometheus scrapes)
    pushgateway_url: str  # the real Pushgateway (Debian 1.5) Prometheus scrapes
    startup_s: dict[str, float]  # per component, as Lab.up measured it

    @staticmethod
    def app_labels(app: str, track: str | None = None) -> dict[str, str]:
        """Pod labels that make the stand-in play the pod as app ``app`` (track ``stable``
        unless given)."""
        labels = {LAB_APP_LABEL: "true", "app": app}
        if track is not None:
            labels[TRACK_LABEL] = track
        return labels

    def playing(self) -> list[dict[str, Any]]:
        """The pods the stand-in plays now: namespace, pod, uid, ip, app, track, tag,
        behaviour, started."""
        return apps.playing(self.kube.lab)

    def wait_playing(
        self, namespace: str, pods: Iterable[str], timeout: float = 90.0
    ) -> list[dict[str, Any]]:
        """Wait until the stand-in plays each named pod of ``namespace``; their entries.

        The scheduler binds each pod, kwok makes it Running with an IP, the stand-in binds
        that IP: a few seconds on a quiet machine, over 30 s once in CI on a freshly started
        cluster (hence 90). When it does not, the failure says where each pod stopped."""
        names = set(pods)

        def ready() -> list[dict[str, Any]]:
            now = [p for p in self.playing() if p["namespace"] == namespace]
            found = [p for p in now if p["pod"] in names]
            return found if {p["pod"] for p in found} == names else []

        try:
            return list(wait_until(ready, f"app stand-in playing {sorted(names)}", timeout))
        except pytest.fail.Exception:
            pytest.fail(
                f"app stand-in playing {sorted(names)}: not after {timeout:.0f}s\n"
                + self.why_not_playing(namespace, names)
            )

    def why_not_playing(self, namespace: str, names: Iterable[str]) -> str:
        """What the API server says of each pod, what the stand-in plays, its log's tail."""
        lines = []
        for name in sorted(names):
            try:
                pod = self.kube.core.read_namespaced_pod(name, namespace)
            except ApiException as exc:
                lines.append(f"  pod {name}: HTTP {exc.status}")
                continue
            except Exception as exc:  # a diagnostic: never hide the timeout
                lines.append(f"  pod {name}: not read: {exc!r}")
                continue
            conditions = [f"{c.type}={c.status}" for c in (pod.status.conditions or []) if c.type]
            lines.append(
                f"  pod {name}: phase {pod.status.phase}, node {pod.spec.node_name}, "
                f"IP {pod.status.pod_ip}, {' '.join(conditions)}"
            )
        try:
            played = [f"{p['namespace']}/{p['pod']}" for p in self.playing()]
            lines.append(f"  the stand-in plays {played}")
        except Exception as exc:  # a diagnostic: never hide the timeout
            lines.append(f"  the stand-in did not say what it plays: {exc!r}")
        log_file = self.kube.lab.dir / "logs" / f"{apps.PROC}.log"
        try:
            tail = log_file.read_text(errors="replace").splitlines()[-15:]
        except OSError as exc:
            tail = [f"not read: {exc!r}"]
        lines.append(f"  {log_file} ends:\n    " + "\n    ".join(tail))
        return "\n".join(lines)

    def query(self, promql: str) -> list[Sample]:
        """An instant query on the lab's Prometheus: (labels, value) per series."""
        url = f"{self.prometheus_url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 (lab loopback)
            doc = json.loads(resp.read())
        assert doc["status"] == "success", doc
        return [(dict(r["metric"]), float(r["value"][1])) for r in doc["data"]["result"]]

    def wait_query(
        self,
        promql: str,
        check: Callable[[list[Sample]], bool],
        what: str,
        timeout: float = 30.0,
    ) -> list[Sample]:
        """Query until ``check(samples)`` holds; the samples then."""
        last: list[list[Sample]] = [[]]

        def ok() -> bool:
            last[0] = self.query(promql)
            return check(last[0])

        try:
            wait_until(ok, what, timeout)
        except pytest.fail.Exception:
            pytest.fail(f"{what}: not after {timeout:.0f}s; last answer {last[0]} to {promql}")
        return last[0]

    def proxy_get(self, namespace: str, pod: str, path: str = "/healthz") -> tuple[int, str]:
        """GET ``path`` on the pod's port 8080 through the API server's pod proxy (as gpuops
        reaches it): status and body."""
        try:
            resp = self.kube.core.connect_get_namespaced_pod_proxy_with_path(
                f"{pod}:{APP_PORT}", namespace, path.lstrip("/"), _preload_content=False
            )
        except ApiException as exc:
            return int(exc.status), str(exc.body)
        return int(resp.status), resp.data.decode()


@pytest.fixture(scope="session")
def metrics_lab(kube_lab: KubeLab) -> Iterator[MetricsLab]:
    lab = kube_lab.lab
    started = time.monotonic()
    try:
        result = lab.up(["apps", "pushgateway", "prometheus"])
    except BaseException:
        lab.stop(["apps", "pushgateway", "prometheus"])
        raise
    timings = {k: float(v) for k, v in result["started_s"].items()}
    timings["total"] = round(time.monotonic() - started, 3)
    try:
        yield MetricsLab(
            kube=kube_lab,
            prometheus_url=str(lab.facts("prometheus")["url"]),
            exporter_url=str(lab.facts("apps")["metrics"]),
            pushgateway_url=str(lab.facts("pushgateway")["url"]),
            startup_s=timings,
        )
    finally:
        lab.stop(["apps", "pushgateway", "prometheus"])
