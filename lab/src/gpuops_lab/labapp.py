"""What the lab's app stand-in plays for one pod: its behaviour, its traffic, its metrics.

Pure data and arithmetic (no sockets, no API): :mod:`gpuops_lab.appstandin` serves it.

A pod of the lab labelled ``gpuops.io/lab-app`` stands for an instance of an application
(the pod's ``app`` label names it; ``gpuops.io/track``, ``stable`` when absent, says whether it
is a canary). kwok runs no container, so the stand-in plays one: the image **tag** of the
pod's first container decides how it behaves, with the lab's fault-tag convention
(:data:`gpuops_lab.kwokstages.MARKER`):

=========================  ===========================================  =======================
image tag contains         requests (``lab_app_requests_total``)         ``GET /healthz``
=========================  ===========================================  =======================
``-labfault-errors``       30 % answered 500, the rest 200, ~20 ms      200 ``"status": "ok"``
``-labfault-slow``         all 200, ~2 s                                200 ``"ok"``, after ~2 s
``-labfault-degraded``     all 200, ~20 ms                              200 ``"degraded"``
anything else              all 200, ~20 ms                              200 ``"ok"``
=========================  ===========================================  =======================

The traffic is synthetic and steady: :data:`RATE` requests per second from the moment the
container started (its ``startedAt``), request *n* (from 0) failing when
``floor(0.3 (n+1)) > floor(0.3 n)`` (exactly 3 in every 10) and taking a latency spread
deterministically ±20 % around the behaviour's. An instrumented app exports a series only
for codes it has answered: a pod that never answered 500 has no ``code="500"`` series.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuops_lab.kwokstages import DEGRADED, ERRORS, MARKER, SLOW

LABEL = "gpuops.io/lab-app"
TRACK_LABEL = "gpuops.io/track"
APP_LABEL = "app"
PORT = 8080
#: Synthetic requests per second per pod.
RATE = 10.0
ERROR_RATIO = 0.3
HEALTHY_LATENCY_S = 0.020
SLOW_LATENCY_S = 2.0
#: Histogram buckets (seconds), the Prometheus client libraries' defaults.
BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_GOLDEN = (math.sqrt(5) - 1) / 2


def image_tag(image: str) -> str:
    """The tag of an image reference (``repo:tag``, ``repo:tag@sha256:...``); without a tag,
    the digest (``sha256:...``) or ``latest`` as a runtime would pull it."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        return last.rsplit(":", 1)[1]
    return digest or "latest"


def behaviour(tag: str) -> str:
    """``errors``, ``slow``, ``degraded`` or ``healthy`` for an image tag."""
    for fault in (ERRORS, SLOW, DEGRADED):
        if f"{MARKER}{fault}" in tag:
            return fault
    return "healthy"


@dataclass(frozen=True)
class PodApp:
    """One lab-app pod as the stand-in plays it."""

    namespace: str
    pod: str
    uid: str
    ip: str
    app: str
    track: str
    tag: str
    started: float  # epoch seconds its container started

    @property
    def behaviour(self) -> str:
        return behaviour(self.tag)

    @property
    def latency_s(self) -> float:
        return SLOW_LATENCY_S if self.behaviour == SLOW else HEALTHY_LATENCY_S

    def labels(self) -> dict[str, str]:
        return {"namespace": self.namespace, "pod": self.pod, "app": self.app, "track": self.track}

    def healthz(self) -> dict[str, str]:
        status = "degraded" if self.behaviour == DEGRADED else "ok"
        return {"status": status, "version": self.tag}

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.labels(),
            "uid": self.uid,
            "ip": self.ip,
            "tag": self.tag,
            "behaviour": self.behaviour,
            "started": self.started,
        }


def from_pod(pod: Mapping[str, Any], started_fallback: float) -> PodApp | None:
    """A :class:`PodApp` for a pod (API JSON) whose container would run now: labelled
    :data:`LABEL`, Running, with an IP, not being deleted; else None."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    status = pod.get("status") or {}
    containers = (pod.get("spec") or {}).get("containers") or []
    if (
        LABEL not in labels
        or meta.get("deletionTimestamp")
        or status.get("phase") != "Running"
        or not status.get("podIP")
        or not containers
    ):
        return None
    return PodApp(
        namespace=str(meta.get("namespace", "")),
        pod=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        ip=str(status["podIP"]),
        app=str(labels.get(APP_LABEL) or labels.get(LABEL) or meta.get("name", "")),
        track=str(labels.get(TRACK_LABEL) or "stable"),
        tag=image_tag(str(containers[0].get("image", ""))),
        started=_started(status, started_fallback),
    )


def _started(status: Mapping[str, Any], fallback: float) -> float:
    for cs in status.get("containerStatuses") or []:
        at = ((cs.get("state") or {}).get("running") or {}).get("startedAt")
        if at:
            try:
                when = datetime.datetime.fromisoformat(str(at).replace("Z", "+00:00"))
            except ValueError:
                break
            return when.timestamp()
    return fallback


def is_error(n: int) -> bool:
    """Whether synthetic request ``n`` (from 0) of an ``errors`` pod is answered 500."""
    return math.floor(ERROR_RATIO * (n + 1) + 1e-9) > math.floor(ERROR_RATIO * n + 1e-9)


def latency(n: int, base: float) -> float:
    """Synthetic request ``n``'s latency: ``base`` ±20 %, spread evenly."""
    return base * (0.8 + 0.4 * ((n * _GOLDEN) % 1.0))


@dataclass
class Traffic:
    """The counters of one pod's synthetic traffic, advanced as time passes."""

    app: PodApp
    done: int = 0
    codes: dict[str, int] = field(default_factory=dict)
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    sum_s: float = 0.0

    def advance(self, now: float) -> None:
        """Count the requests up to ``now`` (never backwards)."""
        due = max(0, math.floor((now - self.app.started) * RATE))
        errors = self.app.behaviour == ERRORS
        base = self.app.latency_s
        for n in range(self.done, due):
            code = "500" if errors and is_error(n) else "200"
            self.codes[code] = self.codes.get(code, 0) + 1
            took = latency(n, base)
            self.sum_s += took
            for i, le in enumerate(BUCKETS):
                if took <= le:
                    self.buckets[i] += 1
        self.done = max(self.done, due)


def _labels(pairs: Mapping[str, str]) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in pairs.items()) + "}"


def _num(v: float) -> str:
    return repr(float(v)) if isinstance(v, float) else str(v)


def exposition(traffic: Sequence[Traffic]) -> str:
    """The Prometheus text exposition format (0.0.4) of these pods' counters."""
    req = "lab_app_requests_total"
    dur = "lab_app_request_duration_seconds"
    lines = [
        f"# HELP {req} Requests answered (lab app stand-in: synthetic traffic, "
        f"{RATE:g}/s per pod).",
        f"# TYPE {req} counter",
    ]
    for t in traffic:
        for code in sorted(t.codes):
            lines.append(f"{req}{_labels({**t.app.labels(), 'code': code})} {t.codes[code]}")
    lines += [
        f"# HELP {dur} Request latency (lab app stand-in: synthetic traffic).",
        f"# TYPE {dur} histogram",
    ]
    for t in traffic:
        base = t.app.labels()
        for le, count in zip(BUCKETS, t.buckets, strict=True):
            lines.append(f"{dur}_bucket{_labels({**base, 'le': repr(le)})} {count}")
        lines.append(f"{dur}_bucket{_labels({**base, 'le': '+Inf'})} {t.done}")
        lines.append(f"{dur}_sum{_labels(base)} {_num(round(t.sum_s, 6))}")
        lines.append(f"{dur}_count{_labels(base)} {t.done}")
    return "\n".join(lines) + "\n"
