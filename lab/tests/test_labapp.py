"""What the lab's app stand-in plays for a pod (gpuops_lab.labapp): pure units.

The stand-in is a lab stand-in for application containers (kwok runs none); these check the
arithmetic of its synthetic traffic and the exposition format it serves to the real
Prometheus (tests/python/integration/test_lab_metrics.py runs it for real).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from gpuops_lab import labapp


@pytest.mark.parametrize(
    ("image", "tag"),
    [
        ("127.0.0.1:5000/ai/web:1.0.0", "1.0.0"),
        (
            "127.0.0.1:5000/ai/web:1.1.0-labfault-errors@sha256:" + "ab" * 32,
            "1.1.0-labfault-errors",
        ),
        ("registry.example:443/web@sha256:" + "cd" * 32, "sha256:" + "cd" * 32),
        ("127.0.0.1:5000/ai/web", "latest"),
        ("web:2", "2"),
    ],
)
def test_the_tag_is_read_from_any_image_reference(image: str, tag: str) -> None:
    assert labapp.image_tag(image) == tag


@pytest.mark.parametrize(
    ("tag", "behaviour"),
    [
        ("1.0.0", "healthy"),
        ("1.1.0-labfault-errors", "errors"),
        ("1.1.0-labfault-slow", "slow"),
        ("1.1.0-labfault-degraded", "degraded"),
        ("1.1.0-labfault-crashloop", "healthy"),  # a kwok-stage fault, not the app's
        ("1.1.0-errors", "healthy"),  # no marker, no fault
    ],
)
def test_the_tag_decides_the_behaviour(tag: str, behaviour: str) -> None:
    assert labapp.behaviour(tag) == behaviour


def pod(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "metadata": {
            "name": "web-1",
            "namespace": "prod",
            "uid": "u1",
            "labels": {labapp.LABEL: "true", "app": "web"},
        },
        "spec": {"containers": [{"name": "main", "image": "r/web:1.1.0-labfault-degraded"}]},
        "status": {
            "phase": "Running",
            "podIP": "10.150.0.7",
            "containerStatuses": [{"state": {"running": {"startedAt": "2026-01-01T00:00:10Z"}}}],
        },
    }
    for path, value in over.items():
        section, key = path.split("__")
        doc[section][key] = value
    return doc


def test_a_running_lab_app_pod_is_played_as_its_labels_and_image_say() -> None:
    app = labapp.from_pod(pod(), started_fallback=0.0)
    assert app is not None
    assert (app.namespace, app.pod, app.app, app.track, app.ip) == (
        "prod",
        "web-1",
        "web",
        "stable",
        "10.150.0.7",
    )
    assert app.started == 1767225610.0  # the container's startedAt
    assert app.healthz() == {"status": "degraded", "version": "1.1.0-labfault-degraded"}
    canary = labapp.from_pod(
        pod(metadata__labels={labapp.LABEL: "x", "app": "web", labapp.TRACK_LABEL: "canary"}),
        0.0,
    )
    assert canary is not None and canary.track == "canary"


@pytest.mark.parametrize(
    "over",
    [
        {"metadata__labels": {"app": "web"}},  # not a lab app
        {"metadata__deletionTimestamp": "2026-01-01T00:00:00Z"},  # being deleted
        {"status__phase": "Pending"},
        {"status__phase": "Failed"},
        {"status__podIP": None},
        {"spec__containers": []},
    ],
)
def test_pods_whose_container_would_not_run_are_not_played(over: dict[str, Any]) -> None:
    assert labapp.from_pod(pod(**over), 0.0) is None


def test_exactly_three_in_ten_requests_of_an_errors_pod_fail() -> None:
    flags = [labapp.is_error(n) for n in range(1000)]
    assert sum(flags) == 300
    for start in range(0, 990, 10):  # evenly: any 10 consecutive requests hold 3 errors
        assert sum(flags[start : start + 10]) == 3


def _app(tag: str, started: float = 100.0) -> labapp.PodApp:
    return labapp.PodApp("ns", "p", "u", "10.150.0.1", "web", "canary", tag, started)


def test_traffic_rises_at_the_steady_rate_and_never_goes_back() -> None:
    t = labapp.Traffic(_app("1.1.0-labfault-errors"))
    t.advance(110.0)  # 10 s at 10/s
    assert t.done == 100
    assert t.codes == {"200": 70, "500": 30}
    t.advance(105.0)  # a clock that steps back counts nothing again
    assert t.done == 100
    t.advance(111.05)
    assert t.done == 110 and t.codes["500"] == 33


def test_latency_follows_the_behaviour() -> None:
    healthy, slow = labapp.Traffic(_app("1.0.0")), labapp.Traffic(_app("1-labfault-slow"))
    for t in (healthy, slow):
        t.advance(200.0)
        assert t.done == 1000
    assert 0.016 <= healthy.sum_s / healthy.done <= 0.024
    assert 1.6 <= slow.sum_s / slow.done <= 2.4
    le = dict(zip(labapp.BUCKETS, healthy.buckets, strict=True))
    assert le[0.01] == 0 and le[0.025] == 1000
    le = dict(zip(labapp.BUCKETS, slow.buckets, strict=True))
    assert le[1.0] == 0 and le[2.5] == 1000
    assert healthy.codes == {"200": 1000} and slow.codes == {"200": 1000}


_SAMPLE = re.compile(r'^([a-z_]+)\{((?:[a-z]+="(?:[^"\\]|\\.)*",?)*)\} (\S+)$')


def test_the_exposition_is_prometheus_text_format_with_one_series_per_pod_and_code() -> None:
    t = labapp.Traffic(_app("1.1.0-labfault-errors"))
    ok = labapp.Traffic(labapp.PodApp("ns", 'q"x', "u2", "10.150.0.2", "web", "stable", "1", 100))
    text = labapp.exposition([t, ok])
    assert text.endswith("\n")
    t.advance(101.0)  # counted only when asked: the text above is the state before
    series: dict[str, float] = {}
    types = {}
    for line in text.splitlines():
        if line.startswith("# TYPE"):
            _, _, name, kind = line.split()
            types[name] = kind
            continue
        if line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, line
        series[f"{m[1]}{{{m[2]}}}"] = float(m[3])
    assert types == {
        "lab_app_requests_total": "counter",
        "lab_app_request_duration_seconds": "histogram",
    }
    # a pod that has answered nothing yet exports no request series, but its histogram
    assert not any(k.startswith("lab_app_requests_total") for k in series)
    assert (
        'lab_app_request_duration_seconds_count{namespace="ns",pod="q\\"x",app="web",track="stable"}'
        in series
    )
    assert len([k for k in series if "_bucket" in k]) == 2 * (len(labapp.BUCKETS) + 1)
    t.advance(110.0)
    text = labapp.exposition([t])
    assert (
        'lab_app_requests_total{namespace="ns",pod="p",app="web",track="canary",code="500"} 30'
        in text
    )
    assert 'le="+Inf"} 100' in text
