"""kwok's pod lifecycle in the lab, plus staged container faults and Job exits for marked images.

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

Pods of a Job (an owner reference of kind Job) end as a kubelet reports a container's exit:

=================================  ================================================================
image tag contains                 the Job's pod shows (as kubelet 1.36 would)
=================================  ================================================================
``-labfault-smokefail``            ``restartPolicy: Never``: ``Failed``, container terminated with
                                   exit code 1, reason ``Error``, Ready/ContainersReady False
                                   (``PodFailed``); ``OnFailure``: Running, not Ready,
                                   ``CrashLoopBackOff``, 3 restarts, last exit 1 (the Job fails
                                   once restarts reach its ``backoffLimit``)
anything else                      ``Succeeded``, exit code 0, reason ``Completed`` (kwok's own
                                   ``pod-complete`` stage, unchanged)
=================================  ================================================================

The tags ``-labfault-errors``, ``-labfault-slow`` and ``-labfault-degraded`` (:data:`APP_FAULTS`)
change nothing here: such pods become Running and Ready like any other; the lab's app stand-in
(:mod:`gpuops_lab.appstandin`) plays their containers' answers and metrics.

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
#: Container faults the kwok stages play (the pod never becomes Ready).
FAULTS = (PULL_ERROR, CRASH_LOOP, NOT_READY)
#: A Job's pod in such an image exits 1 (the smoke test fails).
SMOKE_FAIL = "smokefail"
ERRORS, SLOW, DEGRADED = "errors", "slow", "degraded"
#: Behaviours the app stand-in plays for a Running, Ready pod (kwok stages ignore them).
APP_FAULTS = (ERRORS, SLOW, DEGRADED)


def _has(fault: str) -> str:
    """A kwok (gojq) query: does any container's image tag carry the marker?"""
    return f'[.spec.containers[].image | test(":[^/@]*{MARKER}{fault}")] | any'


#: Any of the container faults (:data:`FAULTS`): kwok's pod-ready leaves such pods alone.
_ANY_FAULT = f'[.spec.containers[].image | test(":[^/@]*{MARKER}({"|".join(FAULTS)})")] | any'
_JOB_OWNED = '[.metadata.ownerReferences[]? | .kind == "Job"] | any'


def _smoke_fails(restart_policy: str) -> str:
    """A Job's pod in a smoke-failing image with this restart policy (a gojq query)."""
    return (
        f"({_JOB_OWNED}) and ({_has(SMOKE_FAIL)}) "
        f'and ((.spec.restartPolicy // "Always") == "{restart_policy}")'
    )


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


_JOB_FAILED = (
    """{{ $now := Now }}
conditions:
"""
    + "".join(
        f'- {{type: {kind}, status: "False", reason: PodFailed, '
        "lastTransitionTime: {{ $now | Quote }}}\n"
        for kind in ("Ready", "ContainersReady")
    )
    + """containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated:
      exitCode: 1
      reason: Error
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
phase: Failed
"""
)


def job_stages() -> list[dict[str, Any]]:
    """A Job's pod in a ``-labfault-smokefail`` image: its container exits 1."""
    running = {"key": ".status.phase", "operator": "In", "values": ["Running"]}
    alive = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
    return [
        _stage(
            "lab-job-pod-failed",
            {
                "matchExpressions": [
                    {"key": _smoke_fails("Never"), "operator": "In", "values": ["true"]},
                    alive,
                    running,
                ]
            },
            _JOB_FAILED,
            None,
        ),
        _stage(
            "lab-job-pod-restarting",
            {
                "matchExpressions": [
                    {"key": _smoke_fails("OnFailure"), "operator": "In", "values": ["true"]},
                    alive,
                    running,
                    {
                        "key": ".status.containerStatuses.[].state.waiting.reason",
                        "operator": "NotIn",
                        "values": ["CrashLoopBackOff"],
                    },
                ]
            },
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


def stages(kwok_stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """kwok's stages with ``pod-ready`` leaving pods with a container fault alone and
    ``pod-complete`` leaving a smoke-failing Job's pods alone, plus :func:`ready_again_stage`,
    :func:`fault_stages` and :func:`job_stages` (each pod matches one stage at most: kwok picks
    at random among several)."""
    docs = [dict(d) for d in kwok_stages]
    for doc in docs:
        exprs = doc["spec"]["selector"]["matchExpressions"]
        if doc["metadata"]["name"] == "pod-ready":
            exprs.append({"key": _ANY_FAULT, "operator": "NotIn", "values": ["true"]})
        if doc["metadata"]["name"] == "pod-complete":
            for policy in ("Never", "OnFailure"):
                exprs.append({"key": _smoke_fails(policy), "operator": "NotIn", "values": ["true"]})
    return [*docs, ready_again_stage(), *fault_stages(), *job_stages()]


def write(kwok_stages: Path, out: Path) -> Path:
    """:func:`stages` from kwok's stages file ``kwok_stages``, written to ``out``."""
    docs = [d for d in yaml.safe_load_all(kwok_stages.read_text()) if d]
    out.write_text(yaml.safe_dump_all(stages(docs), sort_keys=False))
    return out
