"""The steps of a release that touch the cluster and the registry beside the rollout itself:
reading what runs, restoring it, finishing records an earlier run left open, keeping the
environment's registry tag on what runs, and the ConfigMap of a model mount."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuops.adapters.kube import Conflict, KubeClient
from gpuops.adapters.kube import apps as kubeapps
from gpuops.core import deploywatch
from gpuops.core import releasehistory as hist
from gpuops.core.deploywatch import Problem
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasehistory import (
    CHANGE_CAUSE,
    RELEASE_ANNOTATION,
    ROLLED_BACK_ANNOTATION,
    Release,
)
from gpuops.core.releasepatch import Content, change_cause, model_value, release_patch
from gpuops.core.values import shown
from gpuops.errors import GpuOpsError, OperationFailed
from gpuops.usecases.releases import guard
from gpuops.usecases.releases import model as m
from gpuops.usecases.releases.gates import Registry
from gpuops.usecases.releases.guard import Foreign, Left
from gpuops.usecases.releases.store import HistoryStore
from gpuops.usecases.releases.watch import ABORTED, Say, WatchResult, watch


@dataclass
class Live:
    """One Deployment as read: the object, its resourceVersion, what it runs."""

    name: str
    obj: Mapping[str, Any]
    version: str
    content: Content
    release: int | None
    rolled_back: int | None


_NUMBER = re.compile(r"[1-9][0-9]{0,8}")


def _number(obj: Mapping[str, Any], key: str, env: Environment) -> int | None:
    """A release number gpuops put on the Deployment; anything else there is a damaged
    annotation named as such (exit 1), never a crash nor a number taken for another."""
    value = kubeapps.annotations_of(obj).get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not _NUMBER.fullmatch(value):
        name = (obj.get("metadata") or {}).get("name", "")
        raise OperationFailed(
            f"Deployment {env.namespace}/{name}: annotation {key} is {shown(value, 40)}, not a "
            "release number",
            hint="it is gpuops' own annotation: remove it or set it to the number of the "
            "release the Deployment runs (gpuops release history)",
        )
    return int(value)


def read_live(kube: KubeClient, env: Environment) -> list[Live]:
    out = []
    for name in env.deployments:
        obj = kubeapps.get_deployment(kube, env.namespace, name, env.source)
        container = kubeapps.container_of(obj, env.container, env.source)
        content = Content(
            str(container.get("image", "")), model_value(obj, env.container, env.model)
        )
        version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        out.append(
            Live(
                name,
                obj,
                version,
                content,
                _number(obj, hist.RELEASE_ANNOTATION, env),
                _number(obj, hist.ROLLED_BACK_ANNOTATION, env),
            )
        )
    return out


def restore(
    kube: KubeClient,
    env: Environment,
    applied: list[Live],
    left: dict[str, Left],
    wanted: m.Wanted,
    record: Release,
    current: Release | None,
    old_cm: str | bool | None,
    say: Say,
    *,
    extra: Mapping[str, Any] | None = None,
) -> tuple[WatchResult | None, Foreign | None]:
    """Put back what ran before on every Deployment that was changed, and watch it: only
    while each is as gpuops left it (``left``, updated with what the restore leaves).
    Someone else's change is never overwritten: it is returned, and nothing more is restored.
    ``extra``: more of the Deployment to put back in the same patch (a release in place: its
    replicas and rollout strategy)."""
    if old_cm is not False:
        write_model_configmap(
            kube, env, old_cm if isinstance(old_cm, str) else None, expect=wanted.model, say=say
        )
    if not applied:
        return None, None
    cause = change_cause(
        f"gpuops #{record.number} failed: restored "
        + (current.label if current else applied[0].content.image)
    )
    for x in applied:
        patch = merged(
            release_patch(
                env.container,
                env.model,
                Content(wanted.image, wanted.model),
                x.content,
                release=x.release,
                change_cause=cause,
                rolled_back=record.number,
            ),
            extra or {},
        )
        made, foreign = guard.patch_if_ours(kube, env, left[x.name], patch)
        if foreign is not None:
            return None, foreign
        left[x.name] = guard.left_of(made, env)
    names = [x.name for x in applied]
    result = watch(
        kube,
        env.namespace,
        names,
        env.rollout,
        say=say,
        guard=lambda name, obj: guard.foreign_change(left[name], obj, env),
    )
    if result.state == ABORTED:
        return result, result.foreign
    for name in names:  # the watch's last read may precede a change: "restored" must be true
        _, foreign = guard.check(kube, env, left[name])
        if foreign is not None:
            return result, foreign
    if result.state == deploywatch.COMPLETE:
        was = current.label if current else applied[0].content.image
        say(f"rolled back: {env.name} runs {was} again")
    else:
        say(f"the rollback did not complete either: {result.problem and result.problem.message}")
    return result, None


def merged(patch: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``patch`` with ``extra`` merged in, mappings key by key (``extra`` wins elsewhere)."""
    out = dict(patch)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def disown(
    kube: KubeClient, env: Environment, left: Left, foreign: Foreign, record: Release
) -> list[str]:
    """After someone else changed the Deployment it no longer runs the release its
    annotations name: gpuops takes back its own annotations where they are still exactly as
    gpuops set them (the release number and the restored-after number: the next run must not
    take their change for a gpuops release; the change cause, which the deployment controller
    would copy onto the ReplicaSet of their change). Nothing of theirs is touched: the patch
    holds annotations only, on the object as just read (its resourceVersion the
    precondition). Returns what was taken back."""
    for _ in range(5):
        obj = kubeapps.get_deployment(kube, env.namespace, left.name, env.source)
        notes = kubeapps.annotations_of(obj)
        change: dict[str, str | None] = {}
        for key in (RELEASE_ANNOTATION, ROLLED_BACK_ANNOTATION):
            mine = left.value(key)
            if mine is not None and notes.get(key) == mine:
                change[key] = None
        cause = left.value(CHANGE_CAUSE)
        if cause is not None and notes.get(CHANGE_CAUSE) == cause:
            change[CHANGE_CAUSE] = change_cause(
                f"not a gpuops release: changed by {foreign.who}: {foreign.image} "
                f"(gpuops #{record.number} aborted)"
            )
        if not change:
            return []
        version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        try:
            kubeapps.patch_deployment(
                kube, env.namespace, left.name, {"metadata": {"annotations": change}}, version
            )
        except Conflict:
            continue
        return sorted(change)
    return []


def reconcile(
    kube: KubeClient,
    env: Environment,
    store: HistoryStore,
    live: list[Live],
    out: m.ReleaseOutcome,
    say: Say,
) -> list[Release]:
    """Finish the records earlier runs left ``pending`` (under the lock): what a stopped
    progressive release left (its canary, the stable's replicas in place) goes first, only
    what is provably gpuops' own; then each record from what the cluster says."""
    from gpuops.usecases.releases.canary import clean_up  # noqa: PLC0415 - progressive only

    records = store.read()
    if not any(r.status == hist.PENDING for r in records):
        return records
    cleaned: dict[int, list[str]] = {}
    for r in records:
        if r.status == hist.PENDING and (r.canary is not None or r.paused is not None):
            cleaned[r.number] = clean_up(kube, env, env.deployments[0], r.number, say)
    if any(cleaned.values()):
        live[:] = read_live(kube, env)  # the stable may be other than it was read
    complete = all(deploywatch.is_complete(kubeapps.deployment_state(x.obj)) for x in live)
    fixed = hist.reconcile(
        records, live[0].release, live[0].rolled_back, complete, hist.now_iso(), cleaned
    )
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


def write_model_configmap(
    kube: KubeClient,
    env: Environment,
    value: str | None,
    *,
    expect: str | bool | None = False,
    say: Say | None = None,
) -> bool:
    """Write the model version; with ``expect`` (a restore), only while the ConfigMap still
    holds what gpuops wrote: someone else's value is left as it is (False)."""
    mount = env.model
    assert mount is not None  # noqa: S101 - only called for a ConfigMap mount
    cm = kubeapps.get_configmap(kube, env.namespace, mount.name)
    if cm is None:
        raise OperationFailed(f"ConfigMap {env.namespace}/{mount.name} (the model mount) is gone")
    data = dict(cm.get("data") or {})
    if expect is not False and data.get(mount.key) != expect:
        if say is not None:
            say(
                f"ConfigMap {env.namespace}/{mount.name} was changed by someone else "
                f"({mount.key} is {shown(data.get(mount.key), 40)}): left as it is"
            )
        return False
    if value is None:
        data.pop(mount.key, None)
    else:
        data[mount.key] = value
    kubeapps.replace_configmap_data(kube, cm, data)  # its resourceVersion: the precondition
    return True
