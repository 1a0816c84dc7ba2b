"""The steps of a release that touch the cluster and the registry beside the rollout itself:
reading what runs, restoring it, finishing records an earlier run left open, keeping the
environment's registry tag on what runs, and the ConfigMap of a model mount."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuops.adapters import kubeapps
from gpuops.adapters.kube import KubeClient
from gpuops.core import deploywatch
from gpuops.core import releasehistory as hist
from gpuops.core.deploywatch import Problem
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasehistory import Release
from gpuops.core.releasepatch import Content, change_cause, model_value, release_patch
from gpuops.errors import GpuOpsError, OperationFailed
from gpuops.usecases.releases import model as m
from gpuops.usecases.releases.gates import Registry
from gpuops.usecases.releases.store import HistoryStore
from gpuops.usecases.releases.watch import Say, WatchResult, watch


@dataclass
class Live:
    """One Deployment as read: the object, its resourceVersion, what it runs."""

    name: str
    obj: Mapping[str, Any]
    version: str
    content: Content
    release: int | None
    rolled_back: int | None


def _number(value: Any) -> int | None:
    return int(value) if isinstance(value, str) and value.isdigit() else None


def read_live(kube: KubeClient, env: Environment) -> list[Live]:
    out = []
    for name in env.deployments:
        obj = kubeapps.get_deployment(kube, env.namespace, name, env.source)
        container = kubeapps.container_of(obj, env.container, env.source)
        content = Content(
            str(container.get("image", "")), model_value(obj, env.container, env.model)
        )
        notes = kubeapps.annotations_of(obj)
        version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        out.append(
            Live(
                name,
                obj,
                version,
                content,
                _number(notes.get(hist.RELEASE_ANNOTATION)),
                _number(notes.get(hist.ROLLED_BACK_ANNOTATION)),
            )
        )
    return out


def restore(
    kube: KubeClient,
    env: Environment,
    applied: list[Live],
    wanted: m.Wanted,
    record: Release,
    current: Release | None,
    old_cm: str | bool | None,
    say: Say,
) -> WatchResult | None:
    """Put back what ran before on every Deployment that was changed, and watch it."""
    if old_cm is not False:
        write_model_configmap(kube, env, old_cm if isinstance(old_cm, str) else None)
    if not applied:
        return None
    cause = change_cause(
        f"gpuops #{record.number} failed: restored "
        + (current.label if current else applied[0].content.image)
    )
    for x in applied:
        obj = kubeapps.get_deployment(kube, env.namespace, x.name)
        patch = release_patch(
            env.container,
            env.model,
            Content(wanted.image, wanted.model),
            x.content,
            release=x.release,
            change_cause=cause,
            rolled_back=record.number,
        )
        version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        kubeapps.patch_deployment(kube, env.namespace, x.name, patch, version)
    names = [x.name for x in applied]
    result = watch(kube, env.namespace, names, env.rollout, say=say)
    if result.state == deploywatch.COMPLETE:
        was = current.label if current else applied[0].content.image
        say(f"rolled back: {env.name} runs {was} again")
    else:
        say(f"the rollback did not complete either: {result.problem and result.problem.message}")
    return result


def reconcile(
    kube: KubeClient,
    env: Environment,
    store: HistoryStore,
    live: list[Live],
    out: m.ReleaseOutcome,
    say: Say,
) -> list[Release]:
    records = store.read()
    if not any(r.status == hist.PENDING for r in records):
        return records
    complete = all(deploywatch.is_complete(kubeapps.deployment_state(x.obj)) for x in live)
    fixed = hist.reconcile(records, live[0].release, live[0].rolled_back, complete, hist.now_iso())
    for f in fixed:
        say(
            f"release #{f.record.number} was left {f.was} by an earlier run: now {f.record.status} "
            f"({f.record.note})"
        )
        out.reconciled.append({"release": f.record.number, "was": f.was, "now": f.record.status})

    def change(rs: list[Release]) -> list[Release]:
        for f in fixed:
            rs = hist.upsert(rs, f.record)
        return rs

    return store.update(change, live[0].release)


def align_registry_tag(
    env: Environment, current: Release | None, registry: Registry, out: m.ReleaseOutcome, say: Say
) -> None:
    """The environment's registry tag must point at what runs; an earlier run that stopped
    between moving it and restoring the cluster may have left it elsewhere."""
    if not env.registry_tag or current is None or not current.digest:
        return
    if registry.resolve(env.image, env.registry_tag) == current.digest:
        return
    registry.move_tag(env.image, current.digest, env.registry_tag)
    note = f"moved {env.image}:{env.registry_tag} back to {current.label} ({current.digest[:19]})"
    say(note)
    out.notes.append(note)


def move_registry_tag(
    env: Environment, wanted: m.Wanted, registry: Registry, say: Say
) -> Problem | None:
    if not env.registry_tag or not wanted.digest:
        return None
    try:
        registry.move_tag(env.image, wanted.digest, env.registry_tag)
    except GpuOpsError as exc:
        return Problem(
            "registry-tag",
            ",".join(env.deployments),
            f"could not move {env.image}:{env.registry_tag} to {wanted.digest[:19]}: {exc.message}",
        )
    say(f"moved {env.image}:{env.registry_tag} to {wanted.tag} ({wanted.digest[:19]})")
    return None


def set_model_configmap(
    kube: KubeClient, env: Environment, model: str | None, live: list[Live]
) -> str | bool | None:
    """For a ConfigMap model mount: write the new version; returns the old value (False when
    nothing was written)."""
    mount = env.model
    if mount is None or mount.kind != "configmap" or model is None:
        return False
    cm = kubeapps.get_configmap(kube, env.namespace, mount.name)
    old = ((cm or {}).get("data") or {}).get(mount.key)
    if old == model:
        return False
    write_model_configmap(kube, env, model)
    return old if isinstance(old, str) else None


def write_model_configmap(kube: KubeClient, env: Environment, value: str | None) -> None:
    mount = env.model
    assert mount is not None  # noqa: S101 - only called for a ConfigMap mount
    cm = kubeapps.get_configmap(kube, env.namespace, mount.name)
    if cm is None:
        raise OperationFailed(f"ConfigMap {env.namespace}/{mount.name} (the model mount) is gone")
    data = dict(cm.get("data") or {})
    if value is None:
        data.pop(mount.key, None)
    else:
        data[mount.key] = value
    kubeapps.replace_configmap_data(kube, cm, data)
