"""What a run that stopped half way left of a progressive release (its canary, the stable's
replicas in place), found and put back by the next release under the lock: only what is
provably gpuops' own (:func:`gpuops.core.canary.is_ours`, the stable's in-place annotation
naming the open release)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gpuops.adapters.kube import Conflict, KubeClient
from gpuops.adapters.kube import apps as kubeapps
from gpuops.core import canary as core
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasestrategy import canary_name
from gpuops.errors import OperationFailed
from gpuops.usecases.releases.watch import Say, poll_interval, watch


def delete(kube: KubeClient, env: Environment, name: str, uid: str, say: Say) -> str:
    """Delete the canary ``name`` (uid ``uid``), read fresh for its resourceVersion."""
    for _ in range(5):
        obj = kubeapps.find_deployment(kube, env.namespace, name)
        if obj is None or (obj.get("metadata") or {}).get("uid") != uid:
            return f"the canary {name} was gone already"
        version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        try:
            kubeapps.delete_deployment(kube, env.namespace, name, uid, version)
        except Conflict:
            continue
        said = f"removed the canary {env.namespace}/{name}"
        say(said)
        return said
    raise OperationFailed(
        f"Deployment {env.namespace}/{name} kept changing while gpuops deleted it"
    )


def leftover(
    kube: KubeClient, env: Environment, deployment: str, open_releases: set[int]
) -> tuple[Any | None, int | None]:
    """A canary of ``deployment`` in the cluster: (it, the release it names when that is one
    of ``open_releases``, else None: not provably gpuops' leftover)."""
    obj = kubeapps.find_deployment(kube, env.namespace, canary_name(deployment))
    if obj is None:
        return None, None
    number = core.canary_release(obj, deployment)
    return obj, number if number in open_releases else None


def clean_up(
    kube: KubeClient,
    env: Environment,
    deployment: str,
    release: int,
    say: Say,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """What a run that stopped half way left of release ``release`` (still open in the
    history): its canary (scaled to 0, its pods gone, deleted) and the stable's replicas
    and strategy before an in-place move (its annotation names the release). Only what is
    provably gpuops' own; returns what was done."""
    done: list[str] = []
    name = canary_name(deployment)
    for _ in range(5):
        obj, number = leftover(kube, env, deployment, {release})
        if obj is None or number != release:
            break
        meta = obj.get("metadata") or {}
        uid, version = str(meta.get("uid", "")), str(meta.get("resourceVersion", ""))
        if core.replicas_of(obj) != 0:
            try:
                kubeapps.patch_deployment(
                    kube, env.namespace, name, {"spec": {"replicas": 0}}, version
                )
            except Conflict:
                continue  # it moved since it was read: read it and prove it again
        _wait_gone(kube, env, name, sleep)
        done.append(delete(kube, env, name, uid, say))
        break
    stable = kubeapps.get_deployment(kube, env.namespace, deployment, env.source)
    note = core.read_in_place_note(stable)
    if note is None or note["release"] != release:
        return done
    # a stable that took the release in place finishes that rollout first (switching its
    # strategy back to surge pods on a full cluster would stall it), then gets its replicas
    # and strategy back
    watch(kube, env.namespace, [deployment], env.rollout, say=say, sleep=sleep)
    for _ in range(5):
        stable = kubeapps.get_deployment(kube, env.namespace, deployment, env.source)
        again = core.read_in_place_note(stable)
        if again != note:
            return done  # someone else took it (or put it back) meanwhile: theirs
        version = str((stable.get("metadata") or {}).get("resourceVersion", ""))
        patch = {
            "spec": {"replicas": note["replicas"], "strategy": note["strategy"]},
            "metadata": {"annotations": {core.IN_PLACE_ANNOTATION: None}},
        }
        try:
            kubeapps.patch_deployment(kube, env.namespace, deployment, patch, version)
        except Conflict:
            continue
        said = f"put the stable {deployment} back to {note['replicas']} replicas and its strategy"
        say(said)
        done.append(said)
        watch(kube, env.namespace, [deployment], env.rollout, say=say, sleep=sleep)
        break
    return done


def _wait_gone(
    kube: KubeClient, env: Environment, name: str, sleep: Callable[[float], None]
) -> None:
    started = time.monotonic()
    while time.monotonic() - started < env.rollout.timeout_s:
        obj = kubeapps.find_deployment(kube, env.namespace, name)
        if obj is None or not kubeapps.pods_of_deployment(kube, obj):
            return
        sleep(poll_interval(time.monotonic() - started, env.rollout.poll_s))
    raise OperationFailed(
        f"the pods of {env.namespace}/{name} did not go within the rollout's timeout"
    )
