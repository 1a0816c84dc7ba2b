"""Jobs (``batch/v1``) a release runs, e.g. a canary's smoke test: create, read, how one
ended, its pods' exit, and delete only the one gpuops created (uid precondition, Background
propagation: the API server removes the Job now, the garbage collector its pods after).

Single calls through :meth:`gpuops.adapters.kube.KubeClient.request` (which translates every
transport and HTTP error into :mod:`gpuops.errors`), in the conventions of :mod:`.apps`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from gpuops.adapters.kube.apps import owned_items
from gpuops.adapters.kube.client import KubeClient, NotFound
from gpuops.adapters.kube.decode import label_selector
from gpuops.core.kubeinput import dns_label, dns_subdomain

FIELD_MANAGER = "gpuops"
_AS_GPUOPS = {"fieldManager": FIELD_MANAGER}
COMPLETE, FAILED = "Complete", "Failed"


def _job_path(namespace: str, name: str = "") -> str:
    dns_label(namespace, "namespace")
    base = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    return f"{base}/{quote(dns_subdomain(name, 'job name'))}" if name else base


def create_job(kube: KubeClient, body: Mapping[str, Any]) -> Any:
    """Create the Job ``body``; :class:`~gpuops.adapters.kube.Conflict` when one of that name
    exists."""
    meta = body["metadata"]
    return kube.request(
        "POST",
        _job_path(meta["namespace"]),
        what=f"create job {meta['namespace']}/{meta['name']}",
        query=_AS_GPUOPS,
        body=body,
    )


def get_job(kube: KubeClient, namespace: str, name: str) -> Any | None:
    """The Job, or None when there is none of that name."""
    try:
        return kube.request("GET", _job_path(namespace, name), what=f"get job {namespace}/{name}")
    except NotFound:
        return None


def delete_job(kube: KubeClient, namespace: str, name: str, uid: str) -> bool:
    """Delete the Job only if it is still the one of ``uid`` (409 Conflict when another of
    that name replaced it); its pods go in the background. False when it was already gone."""
    try:
        kube.request(
            "DELETE",
            _job_path(namespace, name),
            what=f"delete job {namespace}/{name}",
            body={
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "propagationPolicy": "Background",
                "preconditions": {"uid": uid},
            },
        )
    except NotFound:
        return False
    return True


@dataclass(frozen=True)
class JobEnd:
    """How a Job ended: ``Complete`` or ``Failed`` (None while it runs), the condition's
    reason and message (``BackoffLimitExceeded``, ``DeadlineExceeded``)."""

    state: str | None
    reason: str = ""
    message: str = ""


def job_end(job: Mapping[str, Any]) -> JobEnd:
    """The Job's end from its conditions (a Job ends with ``Complete`` or ``Failed`` True;
    both, which no Job controller writes, is ``Failed``)."""
    ends = [
        c
        for c in (job.get("status") or {}).get("conditions") or ()
        if isinstance(c, Mapping)
        and c.get("type") in (COMPLETE, FAILED)
        and c.get("status") == "True"
    ]
    for c in sorted(ends, key=lambda c: c.get("type") != FAILED):
        return JobEnd(str(c["type"]), str(c.get("reason") or ""), str(c.get("message") or ""))
    return JobEnd(None)


def job_pods(kube: KubeClient, job: Mapping[str, Any]) -> list[Any]:
    """The Job's pods (its selector, then its uid among their owners), oldest first."""
    meta = job.get("metadata") or {}
    namespace, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid")
    owned = owned_items(
        kube,
        f"/api/v1/namespaces/{namespace}/pods",
        label_selector((job.get("spec") or {}).get("selector"), f"job {namespace}/{name}"),
        uid,
        f"list pods of job {namespace}/{name}",
    )
    return sorted(owned, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp")))


@dataclass(frozen=True)
class PodExit:
    """How a pod's (first terminated) container ended, as its kubelet reported it."""

    pod: str
    phase: str
    container: str = ""
    exit_code: int | None = None
    reason: str = ""  # the container's (Error, OOMKilled, ...) or else the pod's (DeadlineExceeded)
    message: str = ""


def pod_exit(pod: Mapping[str, Any]) -> PodExit:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    name, phase = str(meta.get("name", "")), str(status.get("phase", ""))
    for c in status.get("containerStatuses") or ():
        done = ((c or {}).get("state") or {}).get("terminated") if isinstance(c, Mapping) else None
        if isinstance(done, Mapping):
            code = done.get("exitCode")
            return PodExit(
                name,
                phase,
                str(c.get("name", "")),
                code if isinstance(code, int) and not isinstance(code, bool) else None,
                str(done.get("reason") or ""),
                str(done.get("message") or ""),
            )
    return PodExit(
        name,
        phase,
        reason=str(status.get("reason") or ""),
        message=str(status.get("message") or ""),
    )
