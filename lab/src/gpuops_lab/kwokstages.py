"""kwok's pod lifecycle in the lab, plus three staged container faults for marked images.

kwok plays the kubelet: it never pulls an image or runs a container, so on its own every pod
it schedules becomes Running and Ready. Scheduling is real (kube-scheduler); what happens on
the node is staged. To test how gpuops reacts to what a kubelet reports when an image cannot be
pulled, a container crashes, or a pod never becomes ready, the lab stages exactly what a
kubelet writes (container state, reason, message, restart count, conditions, Events) for pods
whose image tag carries a marker:

=================================  ================================================================
image tag contains                 the pod shows (as kubelet 1.36 would)
=================================  ================================================================
``-labfault-pullerror``            Pending; ``ErrImagePull`` then ``ImagePullBackOff``, Events
                                   ``Failed`` / ``BackOff`` (as when nodes lack the pull secret)
``-labfault-crashloop``            Running, not Ready; ``CrashLoopBackOff``, restarts, last exit 1
``-labfault-notready``             Running, containers started, never Ready (a failing probe)
=================================  ================================================================

Every other pod goes through kwok's own "fast" stages, plus one a kubelet has and kwok lacks:
when kube-controller-manager marks a node's pods not Ready because the node stopped reporting
(its lease not renewed, as while the lab's API server is down), a kubelet sets them Ready again
once it reports; kwok leaves them not Ready for ever (kubernetes-sigs/kwok#1464), which no real
cluster does. ``lab-pod-ready-again`` is that kubelet step: a Running pod whose containers are
ready but which is not Ready (the node controller's mark) becomes Ready again.

The marker is in the tag, so a test pushes a real image under such a tag; gpuops resolves it
and sets it by digest (``repo:tag@sha256:...``) like any other. :func:`write` derives the
lab's stages file from the one ``scripts/build-kube.sh`` took from the kwok module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MARKER = "-labfault-"
PULL_ERROR, CRASH_LOOP, NOT_READY = "pullerror", "crashloop", "notready"
FAULTS = (PULL_ERROR, CRASH_LOOP, NOT_READY)


def _has(fault: str) -> str:
    """A kwok (gojq) query: does any container's image tag carry the marker?"""
    return f'[.spec.containers[].image | test(":[^/@]*{MARKER}{fault}")] | any'


_ANY_FAULT = f'[.spec.containers[].image | test(":[^/@]*{MARKER}")] | any'


def _selector(fault: str, *extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "matchExpressions": [
            {"key": _has(fault), "operator": "In", "values": ["true"]},
            {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
            {"key": ".spec.nodeName", "operator": "Exists"},
            *extra,
        ]
    }


def _stage(
    name: str,
    selector: dict[str, Any],
    status: str,
    event: dict[str, str] | None,
    delay_ms: int = 0,
) -> dict[str, Any]:
    next_: dict[str, Any] = {"statusTemplate": status}
    if event:
        next_["event"] = event
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": selector,
        "next": next_,
    }
    if delay_ms:
        spec["delay"] = {"durationMilliseconds": delay_ms}
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": spec,
    }


_NO_STATUS = {"key": ".status.containerStatuses", "operator": "DoesNotExist"}
_PHASE_PENDING = {"key": ".status.phase", "operator": "In", "values": ["Pending"]}


_NOT_READY_CONDITION = 'status: "False", reason: ContainersNotReady'
_CONDITIONS = "".join(
    f"- {{type: {kind}, {state}, lastTransitionTime: {{{{ $now | Quote }}}}}}\n"
    for kind, state in (
        ("Initialized", 'status: "True"'),
        ("Ready", _NOT_READY_CONDITION),
        ("ContainersReady", _NOT_READY_CONDITION),
    )
)
_CONDITIONS = "conditions:\n" + _CONDITIONS


def _waiting(reason: str, message: str, phase: str, extra: str = "", restarts: int = 0) -> str:
    return f"""{{{{ $now := Now }}}}
{_CONDITIONS}containerStatuses:
{{{{ range .spec.containers }}}}
- image: {{{{ .image | Quote }}}}
  name: {{{{ .name | Quote }}}}
  ready: false
  started: false
  restartCount: {restarts}
  state:
    waiting:
      reason: {reason}
      message: {{{{ printf "{message}" .image | Quote }}}}
{extra}{{{{ end }}}}
{{{{ with NodeIPWith .spec.nodeName }}}}
hostIP: {{{{ . | Quote }}}}
{{{{ end }}}}
phase: {phase}
startTime: {{{{ $now | Quote }}}}
"""


_CRASHED = """  lastState:
    terminated:
      exitCode: 1
      reason: Error
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
"""

_NOT_READY = (
    """{{ $now := Now }}
"""
    + _CONDITIONS
    + """containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
{{ with NodeIPWith .spec.nodeName }}
hostIP: {{ . | Quote }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
"""
)


def fault_stages() -> list[dict[str, Any]]:
    pull = "Failed to pull image %s: unexpected status from HEAD request: 401 Unauthorized"
    return [
        _stage(
            "lab-pod-image-pull-error",
            _selector(PULL_ERROR, _PHASE_PENDING, _NO_STATUS),
            _waiting("ErrImagePull", pull, "Pending"),
            {"type": "Warning", "reason": "Failed", "message": "Error: ErrImagePull"},
        ),
        _stage(
            "lab-pod-image-pull-backoff",
            _selector(
                PULL_ERROR,
                _PHASE_PENDING,
                {
                    "key": ".status.containerStatuses.[].state.waiting.reason",
                    "operator": "In",
                    "values": ["ErrImagePull"],
                },
            ),
            _waiting("ImagePullBackOff", "Back-off pulling image %s", "Pending"),
            {"type": "Normal", "reason": "BackOff", "message": "Back-off pulling image"},
            delay_ms=2000,
        ),
        _stage(
            "lab-pod-crash-loop",
            _selector(CRASH_LOOP, _PHASE_PENDING, _NO_STATUS),
            _waiting(
                "CrashLoopBackOff",
                "back-off 10s restarting failed container (image %s)",
                "Running",
                _CRASHED,
                restarts=3,
            ),
            {
                "type": "Warning",
                "reason": "BackOff",
                "message": "Back-off restarting failed container",
            },
            delay_ms=1000,
        ),
        _stage(
            "lab-pod-never-ready",
            _selector(NOT_READY, _PHASE_PENDING, _NO_STATUS),
            _NOT_READY,
            {
                "type": "Warning",
                "reason": "Unhealthy",
                "message": "Readiness probe failed: HTTP 503",
            },
        ),
    ]


def _condition(kind: str) -> str:
    return f'.status.conditions.[] | select( .type == "{kind}" ) | .status'


_READY_AGAIN = """{{ $now := Now }}
conditions:
- {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: PodScheduled, status: "True", lastTransitionTime: {{ $now | Quote }}}
{{ range .spec.readinessGates }}
- {type: {{ .conditionType | Quote }}, status: "True", lastTransitionTime: {{ $now | Quote }}}
{{ end }}
"""


def ready_again_stage() -> dict[str, Any]:
    """The kubelet setting a pod Ready again after the node controller marked it not Ready
    (containers ready, pod not Ready: only the node lifecycle controller leaves that mark)."""
    return _stage(
        "lab-pod-ready-again",
        {
            "matchExpressions": [
                {"key": _ANY_FAULT, "operator": "NotIn", "values": ["true"]},
                {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                {"key": _condition("ContainersReady"), "operator": "In", "values": ["True"]},
                {"key": _condition("Ready"), "operator": "In", "values": ["False"]},
            ]
        },
        _READY_AGAIN,
        None,
        delay_ms=1000,
    )


def write(kwok_stages: Path, out: Path) -> Path:
    """kwok's stages from ``kwok_stages`` with ``pod-ready`` leaving marked pods alone, plus
    :func:`ready_again_stage` and :func:`fault_stages`, written to ``out``."""
    docs = [d for d in yaml.safe_load_all(kwok_stages.read_text()) if d]
    for doc in docs:
        if doc["metadata"]["name"] == "pod-ready":
            doc["spec"]["selector"]["matchExpressions"].append(
                {"key": _ANY_FAULT, "operator": "NotIn", "values": ["true"]}
            )
    stages = [*docs, ready_again_stage(), *fault_stages()]
    out.write_text(yaml.safe_dump_all(stages, sort_keys=False))
    return out
