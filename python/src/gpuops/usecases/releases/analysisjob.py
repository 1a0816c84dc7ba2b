"""A canary's smoke test: a Job in the new image running the step's command; its exit decides.

The Job ``<canary>-smoke-<release>-<n>`` (``n``: the measurement's number in the step) runs
one pod, never retried (``backoffLimit: 0``), for at most the step's ``timeout_seconds``
(``activeDeadlineSeconds``: the Job controller fails it then), in the canary's image with the
canary pod template's service account, image pull secrets, node selector, tolerations and the
container's environment, but none of its labels (the Service must not send it traffic) and no
resources (it takes no GPU: a full cluster has none free). gpuops waits for it to end,
reads how (``Complete``: passed; ``Failed``: failed, with its pod's exit code and reason),
and deletes it, only if it is still the one it created (uid precondition); its pods go in
the background. ``ttlSecondsAfterFinished`` removes one a crashed run left behind, and the
next run deletes a leftover of the same name once it proves it is gpuops' for that release.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpuops.adapters.kube import Conflict, KubeClient
from gpuops.adapters.kube import apps as kubeapps
from gpuops.adapters.kube import jobs as kubejobs
from gpuops.core.analysis import FAILED, INCONCLUSIVE, PASSED
from gpuops.core.releasestrategy import AnalysisStep, JobCheck
from gpuops.core.values import shown
from gpuops.errors import GpuOpsError, OperationFailed

log = logging.getLogger(__name__)

MANAGED_BY = "app.kubernetes.io/managed-by"
RELEASE_LABEL = "gpuops.io/release"
SMOKE_OF = "gpuops.io/smoke-of"
ANALYSIS_LABEL = "gpuops.io/analysis"
TTL_S = 3600  # a Job a crashed run left: the TTL controller removes it after an hour
GRACE_S = 60  # beyond activeDeadlineSeconds: the Job controller's time to mark it Failed
POLL_S = 1.0
GONE_S = 30.0  # how long a deleted leftover may take to go
_POD_FIELDS = (
    "serviceAccountName",
    "automountServiceAccountToken",
    "imagePullSecrets",
    "nodeSelector",
    "tolerations",
    "securityContext",
    "priorityClassName",
)
_CONTAINER_FIELDS = ("env", "envFrom", "workingDir", "securityContext", "imagePullPolicy")


@dataclass(frozen=True)
class Canary:
    """The canary a smoke test is for: its Deployment ``canary`` (of ``deployment``) in
    ``namespace``, running ``image`` for release ``release``."""

    kube: KubeClient
    namespace: str
    deployment: str
    canary: str
    release: int
    image: str


def job_name(canary: str, release: int, attempt: int) -> str:
    """``<canary>-smoke-<release>-<n>``, the canary's part cut so that it stays a label value
    (63 characters: the Job controller labels its pods with the Job's name)."""
    suffix = f"-smoke-{release}-{attempt}"
    return canary[: 63 - len(suffix)].rstrip("-.") + suffix


def job_body(
    step: AnalysisStep,
    check: JobCheck,
    target: Canary,
    name: str,
    template: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The smoke-test Job; ``template``: the canary Deployment's pod template (None: none)."""
    labels = {
        MANAGED_BY: "gpuops",
        RELEASE_LABEL: str(target.release),
        SMOKE_OF: target.canary,
        ANALYSIS_LABEL: step.name,
    }
    spec = (template or {}).get("spec") or {}
    containers = spec.get("containers") or [{}]
    source = next((c for c in containers if c.get("image") == target.image), containers[0])
    container: dict[str, Any] = {k: source[k] for k in _CONTAINER_FIELDS if k in source}
    container.update({"name": "smoke", "image": target.image, "command": list(check.command)})
    pod_spec: dict[str, Any] = {k: spec[k] for k in _POD_FIELDS if k in spec}
    pod_spec.update({"restartPolicy": "Never", "containers": [container]})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": target.namespace,
            "labels": labels,
            "annotations": {"gpuops.io/canary-of": target.deployment},
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": check.timeout_s,
            "ttlSecondsAfterFinished": TTL_S,
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def _ours(job: Mapping[str, Any], target: Canary) -> bool:
    labels = (job.get("metadata") or {}).get("labels") or {}
    return (
        labels.get(MANAGED_BY) == "gpuops"
        and labels.get(RELEASE_LABEL) == str(target.release)
        and labels.get(SMOKE_OF) == target.canary
    )


def smoke(
    step: AnalysisStep,
    check: JobCheck,
    target: Canary,
    attempt: int,
    sleep: Callable[[float], None],
    renew: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[str, float | None, str]:
    """Run the smoke test once: (verdict, exit code, detail)."""
    kube, ns = target.kube, target.namespace
    name = job_name(target.canary, target.release, attempt)
    canary = kubeapps.get_deployment(kube, ns, target.canary)
    body = job_body(step, check, target, name, (canary.get("spec") or {}).get("template"))
    job = _create(target, body, sleep, clock)
    uid = str((job.get("metadata") or {}).get("uid") or "")
    try:
        deadline = clock() + check.timeout_s + GRACE_S
        while True:
            job = kubejobs.get_job(kube, ns, name)
            if job is None or (job.get("metadata") or {}).get("uid") != uid:
                return INCONCLUSIVE, None, f"Job {name} was deleted by someone else before it ended"
            end = kubejobs.job_end(job)
            if end.state is not None:
                break
            if clock() > deadline:
                return (
                    INCONCLUSIVE,
                    None,
                    f"Job {name} did not end within {check.timeout_s + GRACE_S} s "
                    "(activeDeadlineSeconds not enforced: is the Job controller running?)",
                )
            sleep(POLL_S)
            renew()
        return _result(target, name, job, end)
    finally:
        _delete(target, name, uid)


def _create(
    target: Canary,
    body: Mapping[str, Any],
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> Any:
    """Create the Job; a leftover of that name that is gpuops' for this release is deleted
    first (a crashed run's), anyone else's is a failure naming it."""
    kube, ns, name = target.kube, target.namespace, body["metadata"]["name"]
    try:
        return kubejobs.create_job(kube, body)
    except Conflict:
        left = kubejobs.get_job(kube, ns, name)
        if left is not None:
            if not _ours(left, target):
                raise OperationFailed(
                    f"a Job {ns}/{name} exists that gpuops did not create for release "
                    f"{target.release}: the smoke test cannot run under its name",
                    hint="delete or rename that Job (kubectl get job -o yaml shows whose it is)",
                ) from None
            uid = str((left.get("metadata") or {}).get("uid") or "")
            kubejobs.delete_job(kube, ns, name, uid)
            gone_by = clock() + GONE_S
            while (now := kubejobs.get_job(kube, ns, name)) is not None and (
                (now.get("metadata") or {}).get("uid") == uid and clock() < gone_by
            ):
                sleep(POLL_S)
    return kubejobs.create_job(kube, body)


def _result(
    target: Canary, name: str, job: Any, end: kubejobs.JobEnd
) -> tuple[str, float | None, str]:
    pods = kubejobs.job_pods(target.kube, job)
    exit_ = kubejobs.pod_exit(pods[-1]) if pods else None
    code = exit_.exit_code if exit_ is not None else None
    pod = ""
    if exit_ is not None:
        why = f" ({exit_.reason})" if exit_.reason else ""
        ended = (
            f"exited {code}" if code is not None else f"ended {exit_.phase or 'without a status'}"
        )
        pod = f": pod {exit_.pod} {ended}{why}"
    if end.state == kubejobs.COMPLETE:
        return PASSED, None if code is None else float(code), f"Job {name} completed{pod}"
    reason = f" ({end.reason})" if end.reason else ""
    message = f" {shown(end.message, 160)}" if end.message and not pod else ""
    return FAILED, None if code is None else float(code), f"Job {name} failed{reason}{pod}{message}"


def _delete(target: Canary, name: str, uid: str) -> None:
    """Delete the Job gpuops created (uid precondition); a failure is logged, never raised
    over the measurement (``ttlSecondsAfterFinished`` removes it later)."""
    if not uid:
        return
    try:
        kubejobs.delete_job(target.kube, target.namespace, name, uid)
    except GpuOpsError as exc:
        log.warning("could not delete Job %s/%s: %s", target.namespace, name, exc.message)
