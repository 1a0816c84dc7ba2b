"""Kubernetes objects a release touches: Deployments, their ReplicaSets and pods, Leases,
ConfigMaps. Single calls through :meth:`gpuops.adapters.kube.KubeClient.request` (which
translates every transport and HTTP error into :mod:`gpuops.errors`), and decoders that turn
the API's JSON into the pure models of :mod:`gpuops.core.deploywatch`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from gpuops.adapters.kube.client import Conflict, KubeClient, NotFound
from gpuops.adapters.kube.decode import label_selector
from gpuops.core.deploywatch import (
    Condition,
    ContainerState,
    DeploymentState,
    PodState,
)
from gpuops.core.values import shown
from gpuops.errors import InvalidInput, OperationFailed

SMP = "application/strategic-merge-patch+json"
#: The field manager of gpuops' writes: the managed fields say which fields gpuops set, so that
#: another manager's change of them (``kubectl-set``, ``kubectl-edit``) can be named.
FIELD_MANAGER = "gpuops"
_AS_GPUOPS = {"fieldManager": FIELD_MANAGER}
REVISION = "deployment.kubernetes.io/revision"


def _deploy_path(namespace: str, name: str = "") -> str:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    return f"{base}/{quote(name)}" if name else base


# -- Deployments -----------------------------------------------------------------------------
def get_deployment(kube: KubeClient, namespace: str, name: str, source: str = "") -> Any:
    """The Deployment; a missing one is an input error naming where it was configured."""
    try:
        return kube.request(
            "GET", _deploy_path(namespace, name), what=f"get deployment {namespace}/{name}"
        )
    except NotFound:
        where = f" (from {source})" if source else ""
        raise InvalidInput(
            f"Deployment {shown(name)} not found in namespace {shown(namespace)} "
            f"on {kube.server}{where}",
            hint="check the environment's namespace and deployments, and the kubeconfig context",
            field="environment",
        ) from None


def patch_deployment(
    kube: KubeClient, namespace: str, name: str, patch: Mapping[str, Any], resource_version: str
) -> Any:
    """A strategic merge patch (what ``kubectl set image`` sends), conditional on
    ``resource_version``: a Deployment changed since it was read gives 409 Conflict."""
    body = {**patch, "metadata": {**patch.get("metadata", {}), "resourceVersion": resource_version}}
    return kube.request(
        "PATCH",
        _deploy_path(namespace, name),
        what=f"patch deployment {namespace}/{name}",
        query=_AS_GPUOPS,
        body=body,
        content_type=SMP,
    )


def find_deployment(kube: KubeClient, namespace: str, name: str) -> Any | None:
    """The Deployment, or None when there is none of that name."""
    try:
        return kube.request(
            "GET", _deploy_path(namespace, name), what=f"get deployment {namespace}/{name}"
        )
    except NotFound:
        return None


def create_deployment(kube: KubeClient, body: Mapping[str, Any]) -> Any:
    """Create as field manager gpuops; :class:`~gpuops.adapters.kube.Conflict` when one of
    that name exists already (nothing is overwritten)."""
    meta = body["metadata"]
    return kube.request(
        "POST",
        _deploy_path(meta["namespace"]),
        what=f"create deployment {meta['namespace']}/{meta['name']}",
        query=_AS_GPUOPS,
        body=body,
    )


def delete_deployment(
    kube: KubeClient, namespace: str, name: str, uid: str, resource_version: str
) -> bool:
    """Delete exactly the Deployment read (preconditions: its uid and resourceVersion: 409
    Conflict when it is another object or changed since), its ReplicaSets and pods after it
    (propagation Background). False when it was gone already."""
    try:
        kube.request(
            "DELETE",
            _deploy_path(namespace, name),
            what=f"delete deployment {namespace}/{name}",
            body={
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "propagationPolicy": "Background",
                "preconditions": {"uid": uid, "resourceVersion": resource_version},
            },
        )
    except NotFound:
        return False
    return True


def pods_of_deployment(kube: KubeClient, deployment: Mapping[str, Any]) -> list[Any]:
    """Every pod of every ReplicaSet the Deployment owns, by owner (never by label selector
    alone: a canary's pods match its stable's selector too)."""
    return [p for rs in replicasets(kube, deployment) for p in pods_of_replicaset(kube, rs)]


def containers_of(deployment: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    return list(spec.get("containers") or [])


def container_of(deployment: Mapping[str, Any], name: str, source: str = "") -> Mapping[str, Any]:
    for c in containers_of(deployment):
        if c.get("name") == name:
            return c
    meta = deployment.get("metadata") or {}
    names = ", ".join(str(c.get("name")) for c in containers_of(deployment))
    raise InvalidInput(
        f"Deployment {meta.get('namespace')}/{meta.get('name')} has no container {shown(name)} "
        f"(it has: {names}){f'; see {source}' if source else ''}",
        field="environment",
    )


def template_annotations(deployment: Mapping[str, Any]) -> dict[str, str]:
    meta = ((deployment.get("spec") or {}).get("template") or {}).get("metadata") or {}
    return dict(meta.get("annotations") or {})


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def deployment_state(obj: Mapping[str, Any]) -> DeploymentState:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    conditions = {
        str(c.get("type")): Condition(
            str(c.get("status", "")), str(c.get("reason", "")), str(c.get("message", ""))
        )
        for c in status.get("conditions") or ()
    }
    replicas = spec.get("replicas")
    return DeploymentState(
        name=str(meta.get("name", "")),
        generation=int(meta.get("generation") or 0),
        observed_generation=int(status.get("observedGeneration") or 0),
        replicas=1 if replicas is None else int(replicas),
        current=int(status.get("replicas") or 0),
        updated=int(status.get("updatedReplicas") or 0),
        ready=int(status.get("readyReplicas") or 0),
        available=int(status.get("availableReplicas") or 0),
        conditions=conditions,
    )


# -- ReplicaSets and pods --------------------------------------------------------------------
def new_replicaset(kube: KubeClient, deployment: Mapping[str, Any]) -> Any | None:
    """The Deployment's ReplicaSet for its current revision (what ``kubectl rollout status``
    watches), or None while the controller has not made it yet."""
    revision = annotations_of(deployment).get(REVISION)
    if revision is None:
        return None
    return next(
        (
            rs
            for rs in replicasets(kube, deployment)
            if annotations_of(rs).get(REVISION) == revision
        ),
        None,
    )


def replicasets(kube: KubeClient, deployment: Mapping[str, Any]) -> list[Any]:
    """Every ReplicaSet the Deployment owns, oldest revision first."""
    meta = deployment.get("metadata") or {}
    namespace, uid = meta.get("namespace", ""), meta.get("uid")
    owned = owned_items(
        kube,
        f"/apis/apps/v1/namespaces/{namespace}/replicasets",
        label_selector((deployment.get("spec") or {}).get("selector")),
        uid,
        f"list replicasets of deployment {namespace}/{meta.get('name')}",
    )
    return sorted(owned, key=lambda rs: int(annotations_of(rs).get(REVISION, "0") or 0))


def pods_of_replicaset(kube: KubeClient, rs: Mapping[str, Any]) -> list[Any]:
    meta = rs.get("metadata") or {}
    namespace = meta.get("namespace", "")
    return owned_items(
        kube,
        f"/api/v1/namespaces/{namespace}/pods",
        label_selector((rs.get("spec") or {}).get("selector")),
        meta.get("uid"),
        f"list pods of replicaset {namespace}/{meta.get('name')}",
    )


def owned_items(kube: KubeClient, path: str, selector: str, uid: Any, what: str) -> list[Any]:
    """The items of the LIST ``path`` that match ``selector`` and name ``uid`` among their
    owners: a label match alone may be another controller's object."""
    doc = kube.request("GET", path, what=what, query={"labelSelector": selector})
    return [
        item
        for item in doc.get("items") or ()
        if any(
            o.get("uid") == uid for o in (item.get("metadata") or {}).get("ownerReferences") or ()
        )
    ]


def pod_state(obj: Mapping[str, Any]) -> PodState:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    conditions = {str(c.get("type")): c for c in status.get("conditions") or ()}
    scheduled = conditions.get("PodScheduled") or {}
    unschedulable = ""
    if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        unschedulable = str(scheduled.get("message") or "Unschedulable")
    containers = []
    for c in status.get("containerStatuses") or ():
        state, last = c.get("state") or {}, (c.get("lastState") or {}).get("terminated") or {}
        waiting = state.get("waiting") or {}
        containers.append(
            ContainerState(
                name=str(c.get("name", "")),
                ready=bool(c.get("ready")),
                running="running" in state,
                restarts=int(c.get("restartCount") or 0),
                waiting=str(waiting.get("reason", "")),
                waiting_message=str(waiting.get("message", "")),
                last_exit_code=last.get("exitCode")
                if isinstance(last.get("exitCode"), int)
                else None,
            )
        )
    return PodState(
        name=str(meta.get("name", "")),
        phase=str(status.get("phase", "Pending")),
        node=str(spec.get("nodeName") or ""),
        unschedulable=unschedulable,
        ready=(conditions.get("Ready") or {}).get("status") == "True",
        deleting=bool(meta.get("deletionTimestamp")),
        containers=tuple(containers),
    )


# -- Leases ----------------------------------------------------------------------------------
def _lease_path(namespace: str, name: str = "") -> str:
    base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    return f"{base}/{quote(name)}" if name else base


def get_lease(kube: KubeClient, namespace: str, name: str) -> Any | None:
    try:
        return kube.request(
            "GET", _lease_path(namespace, name), what=f"get lease {namespace}/{name}"
        )
    except NotFound:
        return None


def create_lease(kube: KubeClient, body: Mapping[str, Any]) -> Any:
    """Create; :class:`~gpuops.adapters.kube.Conflict` when someone else created it first."""
    meta = body["metadata"]
    return kube.request(
        "POST",
        _lease_path(meta["namespace"]),
        what=f"create lease {meta['namespace']}/{meta['name']}",
        body=body,
    )


def replace_lease(kube: KubeClient, body: Mapping[str, Any]) -> Any:
    """Replace, conditional on the body's resourceVersion (409 Conflict when it moved)."""
    meta = body["metadata"]
    return kube.request(
        "PUT",
        _lease_path(meta["namespace"], meta["name"]),
        what=f"update lease {meta['namespace']}/{meta['name']}",
        body=body,
    )


def delete_lease(kube: KubeClient, namespace: str, name: str, uid: str, version: str) -> None:
    """Delete only the Lease we hold: preconditions on its uid and resourceVersion."""
    try:
        kube.request(
            "DELETE",
            _lease_path(namespace, name),
            what=f"delete lease {namespace}/{name}",
            body={
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "preconditions": {"uid": uid, "resourceVersion": version},
            },
        )
    except NotFound:
        return


def ensure_namespace(kube: KubeClient, namespace: str) -> None:
    """Create the namespace when it is missing (gpuops-system for the disruption budget);
    one that exists (409) is fine."""
    body = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {"app.kubernetes.io/managed-by": "gpuops"}},
    }
    try:
        kube.request("POST", "/api/v1/namespaces", what=f"create namespace {namespace}", body=body)
    except Conflict:
        return


def daemonset_annotations(kube: KubeClient, namespace: str, name: str) -> dict[str, str] | None:
    """A DaemonSet's annotations (Kured keeps its lock there); None when there is none."""
    try:
        obj = kube.request(
            "GET",
            f"/apis/apps/v1/namespaces/{quote(namespace)}/daemonsets/{quote(name)}",
            what=f"get daemonset {namespace}/{name}",
        )
    except NotFound:
        return None
    return annotations_of(require(obj, f"daemonset {namespace}/{name}"))


# -- ConfigMaps ------------------------------------------------------------------------------
def _cm_path(namespace: str, name: str = "") -> str:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    return f"{base}/{quote(name)}" if name else base


def get_configmap(kube: KubeClient, namespace: str, name: str) -> Any | None:
    try:
        return kube.request(
            "GET", _cm_path(namespace, name), what=f"get configmap {namespace}/{name}"
        )
    except NotFound:
        return None


def create_configmap(kube: KubeClient, namespace: str, name: str, data: Mapping[str, str]) -> Any:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "gpuops"},
        },
        "data": dict(data),
    }
    return kube.request(
        "POST",
        _cm_path(namespace),
        what=f"create configmap {namespace}/{name}",
        query=_AS_GPUOPS,
        body=body,
    )


def replace_configmap_data(kube: KubeClient, cm: Mapping[str, Any], data: Mapping[str, str]) -> Any:
    """Replace the ConfigMap's data with ``data``; the resourceVersion it was read at is the
    precondition (409 Conflict when someone wrote it since)."""
    meta = cm.get("metadata") or {}
    body = {**cm, "data": dict(data)}
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    return kube.request(
        "PUT",
        _cm_path(namespace, name),
        what=f"update configmap {namespace}/{name}",
        query=_AS_GPUOPS,
        body=body,
    )


def require(obj: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise OperationFailed(
            f"{what}: the Kubernetes API answered something that is not an object"
        )
    return obj
