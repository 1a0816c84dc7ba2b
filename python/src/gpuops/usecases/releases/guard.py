"""What gpuops left on a Deployment, and whether someone else changed it since.

A person may change a Deployment while gpuops releases it (``kubectl set image`` during the
rollout). Every write gpuops makes to a Deployment after its first read is conditional on the
Deployment being what gpuops left: its ``metadata.generation`` (every change of the spec,
by anyone, raises it) and the fields gpuops owns (the container's image, the model version
where the environment mounts it, the release annotations and the change cause). The
resourceVersion is *not* what is compared: every status update of the deployment controller
changes it, and a status update is nobody's change of the release.

How a write is made conditional (:func:`patch_if_ours`): a fresh GET, the check above on what
it returned, then the strategic merge patch with that GET's ``metadata.resourceVersion`` as the
API server's own precondition, so the patch applies to exactly the object that was checked;
a 409 Conflict (the object moved meanwhile, most often a status update) means: read again and
check again. JSON Patch ``test`` operations were the other candidate; they were not chosen
because (a) JSON Patch addresses list items by position (``containers/0``, ``env/3``) where the
release patch merges containers and variables by name as ``kubectl set image`` does, so the
positions would come from a GET anyway; and (b) a failed ``test`` is answered 422, the same
status as a malformed patch, so a foreign change could not be told apart from a defect of
gpuops, while a stale resourceVersion is the typed 409 Conflict.

Who changed it is read from the object's managed fields (``metadata.managedFields``): the
manager that owns the changed field (``kubectl-set`` for ``kubectl set image``) and the time
of its last write. gpuops writes as field manager :data:`MANAGER`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuops.adapters.kube import Conflict, KubeClient
from gpuops.adapters.kube import apps as kubeapps
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasehistory import CHANGE_CAUSE, RELEASE_ANNOTATION, ROLLED_BACK_ANNOTATION
from gpuops.core.releasepatch import MODEL_ANNOTATION, model_value
from gpuops.errors import OperationFailed

#: The field manager gpuops' own writes are recorded under.
MANAGER = kubeapps.FIELD_MANAGER
_OWNED_ANNOTATIONS = (RELEASE_ANNOTATION, ROLLED_BACK_ANNOTATION, CHANGE_CAUSE)
_RETRIES = 8


@dataclass(frozen=True)
class Left:
    """A Deployment as gpuops left it (or, before its first write, as gpuops read it)."""

    name: str
    generation: int
    owned: tuple[tuple[str, str | None], ...]

    def value(self, field: str) -> str | None:
        return dict(self.owned).get(field)


@dataclass(frozen=True)
class Foreign:
    """Someone else's change of a Deployment gpuops was releasing."""

    deployment: str
    changed: tuple[str, ...]  # what differs: "image", "model", "generation", an annotation
    manager: str | None
    operation: str | None
    time: str | None
    image: str  # what its template runs now
    model: str | None

    @property
    def who(self) -> str:
        if self.manager is None:
            return "someone (the API server recorded no field manager)"
        when = f" at {self.time}" if self.time else ""
        return f"{self.manager}{when}"

    def message(self, namespace: str) -> str:
        model = f", model {self.model}" if self.model else ""
        return (
            f"Deployment {namespace}/{self.deployment} was changed by {self.who} "
            f"({', '.join(self.changed)}): it runs {self.image}{model} now"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "deployment": self.deployment,
            "changed": list(self.changed),
            "manager": self.manager,
            "operation": self.operation,
            "time": self.time,
            "image": self.image,
            "model": self.model,
        }


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def owned_fields(obj: Mapping[str, Any], env: Environment) -> tuple[tuple[str, str | None], ...]:
    container = next(
        (c for c in kubeapps.containers_of(obj) if c.get("name") == env.container), {}
    )  # a container someone removed or renamed is a change of its image, not an input error
    notes = kubeapps.annotations_of(obj)
    fields: list[tuple[str, str | None]] = [("image", _text(container.get("image")))]
    if env.model is not None:
        fields.append(("model", model_value(obj, env.container, env.model)))
    fields.extend((key, _text(notes.get(key))) for key in _OWNED_ANNOTATIONS)
    return tuple(fields)


def left_of(obj: Mapping[str, Any], env: Environment) -> Left:
    meta = obj.get("metadata") or {}
    return Left(str(meta.get("name", "")), _generation(obj), owned_fields(obj, env))


def _generation(obj: Mapping[str, Any]) -> int:
    value = (obj.get("metadata") or {}).get("generation")
    return value if type(value) is int else -1


def foreign_change(left: Left, obj: Mapping[str, Any], env: Environment) -> Foreign | None:
    """Someone else's change of ``obj`` since gpuops left it as ``left``; None when the
    generation and every owned field are as gpuops left them (status updates do not count)."""
    now = dict(owned_fields(obj, env))
    changed = [f for f, v in left.owned if now.get(f) != v]
    if _generation(obj) != left.generation:
        changed.append("generation")
    if not changed:
        return None
    manager, operation, time = who_changed(obj, changed, env)
    return Foreign(
        left.name,
        tuple(changed),
        manager,
        operation,
        time,
        now.get("image") or "",
        now.get("model"),
    )


def _field_paths(field: str, env: Environment) -> list[tuple[str, ...]]:
    """Where ``field`` is in a managedFields ``fieldsV1`` tree."""
    by_name = "k:" + json.dumps({"name": env.container}, separators=(",", ":"))
    container = ("f:spec", "f:template", "f:spec", "f:containers", by_name)
    if field == "image":
        return [(*container, "f:image")]
    if field == "model" and env.model is not None:
        mount = env.model
        if mount.kind == "env":
            var = "k:" + json.dumps({"name": mount.name}, separators=(",", ":"))
            return [(*container, "f:env", var)]
        key = mount.name if mount.kind == "annotation" else MODEL_ANNOTATION
        return [("f:spec", "f:template", "f:metadata", "f:annotations", f"f:{key}")]
    if field == "generation":
        return [("f:spec",)]
    return [("f:metadata", "f:annotations", f"f:{field}")]


def _has(tree: Any, path: Sequence[str]) -> bool:
    for step in path:
        if not isinstance(tree, Mapping) or step not in tree:
            return False
        tree = tree[step]
    return True


def who_changed(
    obj: Mapping[str, Any], changed: Sequence[str], env: Environment
) -> tuple[str | None, str | None, str | None]:
    """(manager, operation, time) of the newest write, by a manager other than gpuops, to a
    field that changed; (None, None, None) when the object carries no such managed fields."""
    entries = [  # subresources included: ``kubectl scale`` or an HPA write spec.replicas
        e  # through /scale (a new generation); a status update owns only f:status
        for e in (obj.get("metadata") or {}).get("managedFields") or ()
        if isinstance(e, Mapping) and isinstance(e.get("manager"), str)
    ]
    # an owned field names its writer; a bare new generation (replicas, resources...) only
    # says "someone wrote the spec"
    named = [f for f in changed if f != "generation"] or list(changed)
    paths = [p for f in named for p in _field_paths(f, env)]
    owners = [e for e in entries if any(_has(e.get("fieldsV1"), p) for p in paths)]
    others = [e for e in owners if e.get("manager") != MANAGER] or owners
    if not others:
        return None, None, None
    newest = max(others, key=lambda e: str(e.get("time") or ""))
    return (
        str(newest["manager"]),
        _text(newest.get("operation")),
        _text(newest.get("time")),
    )


def patch_if_ours(
    kube: KubeClient,
    env: Environment,
    expect: Left,
    patch: Mapping[str, Any],
) -> tuple[Any, Foreign | None]:
    """Patch the Deployment only while it is as gpuops left it (``expect``): (the patched
    object, None), or (the object as read, the foreign change) with nothing written."""
    for _ in range(_RETRIES):
        obj = kubeapps.get_deployment(kube, env.namespace, expect.name, env.source)
        foreign = foreign_change(expect, obj, env)
        if foreign is not None:
            return obj, foreign
        version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        try:
            made = kubeapps.patch_deployment(kube, env.namespace, expect.name, patch, version)
        except Conflict:
            continue  # it moved since the GET (a status update?): read it and check again
        return made, None
    raise OperationFailed(
        f"Deployment {env.namespace}/{expect.name} kept changing while gpuops wrote it",
        hint="something updates it constantly; see its managedFields (kubectl get -o yaml)",
    )


def check(kube: KubeClient, env: Environment, expect: Left) -> tuple[Any, Foreign | None]:
    """A fresh read of the Deployment and its foreign change, if any."""
    obj = kubeapps.get_deployment(kube, env.namespace, expect.name, env.source)
    return obj, foreign_change(expect, obj, env)
