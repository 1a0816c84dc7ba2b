"""The canary Deployment of a progressive release in the cluster: made, sized, moved into the
stable's place when the GPUs are full, and removed (:mod:`gpuops.core.canary` holds the pure
part: its body, the proof it is gpuops' own, the in-place schedule).

Every write is conditional (:mod:`.guard`): the canary and the stable are written only while
each is as gpuops left it; someone else's change raises :class:`ForeignChange` and is never
overwritten. A canary is created, scaled or deleted only when it is provably gpuops' own.

In place, one batch of at most ``max_unavailable`` pods at a time: the headroom of the new
pod where each stable pod would leave its GPUs is checked first (and that no more replicas are
down than allowed), the stable gives the batch back, its pods are gone, then the canary takes
their GPUs and is watched until Ready. The stable carries its replicas and strategy before
(:data:`gpuops.core.canary.IN_PLACE_ANNOTATION`) while it is smaller, so that the next run can
put it back if this one stops.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuops.adapters.kube import Conflict, KubeClient
from gpuops.adapters.kube import apps as kubeapps
from gpuops.adapters.kube.decode import pod_from_api
from gpuops.core import canary as core
from gpuops.core import deploywatch
from gpuops.core.deploywatch import Problem
from gpuops.core.releaseconfig import Environment
from gpuops.core.releasepatch import Content
from gpuops.core.releasestrategy import canary_name
from gpuops.errors import GpuOpsError, OperationFailed
from gpuops.usecases.releases import guard
from gpuops.usecases.releases.analysis import PodRef
from gpuops.usecases.releases.guard import Foreign, Left
from gpuops.usecases.releases.watch import ABORTED, Say, WatchResult, poll_interval, watch

SURGE, IN_PLACE = "surge", "in-place"


class ForeignChange(Exception):
    """Someone else changed the stable or the canary: the release ends ``aborted``."""

    def __init__(self, foreign: Foreign) -> None:
        super().__init__(foreign.deployment)
        self.foreign = foreign


@dataclass
class Canary:
    """One progressive release's canary and the stable it comes from.

    ``left`` is the release's own map of each Deployment as gpuops left it (the stable by
    its name, the canary by its own), updated after every write."""

    kube: KubeClient
    env: Environment
    deployment: str  # the stable's name
    release: int
    content: Content  # what the canary runs
    cause: str  # its change cause
    mode: str  # surge | in-place
    max_unavailable: int  # in place
    stable_replicas: int  # the stable's replicas when the release began
    stable_strategy: dict[str, Any]  # ... and its rollout strategy
    left: dict[str, Left]
    say: Say
    renew: Callable[[], None] = lambda: None
    uid: str | None = None  # the canary gpuops created
    replicas: int = 0  # the canary's pods (as gpuops set them)
    stable_now: int = -1  # the stable's replicas as gpuops set them (-1: untouched)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    @property
    def name(self) -> str:
        return canary_name(self.deployment)

    @property
    def ns(self) -> str:
        return self.env.namespace

    # -- the record ------------------------------------------------------------------------
    def to_record(self) -> dict[str, Any]:
        """What the release record keeps, so that ``release resume`` and the next run know
        the canary, how it runs, and what the stable had."""
        doc: dict[str, Any] = {
            "deployment": self.deployment,
            "name": self.name,
            "mode": self.mode,
            "uid": self.uid,
            "replicas": self.replicas,
            "stable_replicas": self.stable_replicas,
            "stable_strategy": self.stable_strategy,
            "stable_now": self.stable_now,
        }
        if self.mode == IN_PLACE:
            doc["max_unavailable"] = self.max_unavailable
        for name in (self.deployment, self.name):
            if name in self.left:
                doc.setdefault("generations", {})[name] = self.left[name].generation
        return doc

    # -- reading ---------------------------------------------------------------------------
    def read(self) -> Any | None:
        return kubeapps.find_deployment(self.kube, self.ns, self.name)

    def pods(self) -> list[PodRef]:
        """The canary's pods now (by owner), not terminating."""
        obj = self.read()
        if obj is None:
            return []
        out = []
        for p in kubeapps.pods_of_deployment(self.kube, obj):
            meta, spec = p.get("metadata") or {}, p.get("spec") or {}
            if meta.get("deletionTimestamp"):
                continue
            out.append(PodRef(str(meta.get("name", "")), spec.get("nodeName") or None))
        return out

    def _check(self, name: str) -> Any:
        obj, foreign = guard.check(self.kube, self.env, self.left[name])
        if foreign is not None:
            raise ForeignChange(foreign)
        return obj

    def _patch(self, name: str, patch: Mapping[str, Any]) -> Any:
        made, foreign = guard.patch_if_ours(self.kube, self.env, self.left[name], patch)
        if foreign is not None:
            raise ForeignChange(foreign)
        self.left[name] = guard.left_of(made, self.env)
        return made

    def _watch(self, name: str) -> WatchResult:
        result = watch(
            self.kube,
            self.ns,
            [name],
            self.env.rollout,
            say=self.say,
            renew=self.renew,
            guard=lambda n, obj: guard.foreign_change(self.left[n], obj, self.env),
            sleep=self.sleep,
        )
        if result.state == ABORTED and result.foreign is not None:
            raise ForeignChange(result.foreign)
        return result

    # -- the canary's size -----------------------------------------------------------------
    def create(self, stable: Mapping[str, Any], replicas: int) -> Any:
        """Make the canary with ``replicas`` pods (refused: one of its name exists)."""
        body = core.canary_body(
            stable,
            container=self.env.container,
            mount=self.env.model,
            new=self.content,
            release=self.release,
            replicas=replicas,
            change_cause=self.cause,
        )
        try:
            made = kubeapps.create_deployment(self.kube, body)
        except Conflict:
            raise OperationFailed(
                f"Deployment {self.ns}/{self.name} appeared while gpuops was about to make it "
                "as the canary: gpuops did not touch it",
                hint="find out who made it (its managedFields), then release again",
            ) from None
        self.uid = str((made.get("metadata") or {}).get("uid", ""))
        self.left[self.name] = guard.left_of(made, self.env)
        self.replicas = replicas
        self.say(f"created the canary {self.ns}/{self.name} with {replicas} pod(s)")
        return made

    def scale_to(self, wanted: int) -> Problem | None:
        """The canary runs ``wanted`` pods (beside the stable, or in place) and they are
        Ready; a rollout problem (unschedulable, crash loop...) is returned."""
        if self.mode == IN_PLACE:
            for batch in core.moves(self.replicas, wanted, self.max_unavailable):
                problem = self._move(batch)
                if problem is not None:
                    return problem
            return None
        if self.uid is None:
            self.create(self._stable(), wanted)
        elif wanted != self.replicas:
            self._patch(self.name, {"spec": {"replicas": wanted}})
            self.replicas = wanted
        result = self._watch(self.name)
        return result.problem if result.state != deploywatch.COMPLETE else None

    def _stable(self) -> Any:
        return self._check(self.deployment)

    def _move(self, batch: int) -> Problem | None:
        """In place, ``batch`` > 0 pods from the stable to the canary: budget and headroom
        first, then the stable gives them back, then the canary takes their GPUs."""
        problem = self._budget(batch)
        if problem is None:
            problem = self._headroom()
        if problem is not None:
            return problem
        stable = self.stable_now if self.stable_now >= 0 else self.stable_replicas
        self._set_stable(stable - batch)
        problem = self._wait_pods(self.deployment, stable - batch)
        if problem is not None:
            return problem
        self.say(
            f"in place: the stable {self.deployment} gave back {batch} pod(s) "
            f"({stable - batch} left); the canary takes their GPUs"
        )
        if self.uid is None:
            self.create(self._stable(), batch)
        else:
            self._patch(self.name, {"spec": {"replicas": self.replicas + batch}})
            self.replicas += batch
        result = self._watch(self.name)
        return result.problem if result.state != deploywatch.COMPLETE else None

    def _set_stable(self, replicas: int) -> None:
        """The stable's replicas, with what it had before on its annotation the first time."""
        patch: dict[str, Any] = {"spec": {"replicas": replicas}}
        if self.stable_now < 0:
            note = core.in_place_note(self.release, self.stable_replicas, self.stable_strategy)
            patch["metadata"] = {"annotations": {core.IN_PLACE_ANNOTATION: note}}
        self._patch(self.deployment, patch)
        self.stable_now = replicas

    def _budget(self, batch: int) -> Problem | None:
        """No more than ``max_unavailable`` replicas down once ``batch`` more go: waits up
        to the rollout's ``ready_seconds`` for replicas down for another reason."""
        deadline = time.monotonic() + self.env.rollout.ready_s
        while True:
            available = self._available(self.deployment)
            if self.uid is not None:
                available += self._available(self.name)
            down = self.stable_replicas - available
            if down + batch <= self.max_unavailable:
                return None
            if time.monotonic() >= deadline:
                return Problem(
                    "in-place",
                    self.deployment,
                    f"{down} of {self.stable_replicas} replicas are not available: taking "
                    f"{batch} more down would exceed max_unavailable {self.max_unavailable}",
                )
            self.renew()
            self.sleep(self.env.rollout.poll_s)

    def _available(self, name: str) -> int:
        obj = self._check(name)
        return kubeapps.deployment_state(obj).available

    def _headroom(self) -> Problem | None:
        """The new pod fits where each stable pod would leave its GPUs."""
        stable = self._check(self.deployment)
        keys = [
            f"{self.ns}/{(p.get('metadata') or {}).get('name', '')}"
            for p in kubeapps.pods_of_deployment(self.kube, stable)
        ]
        nodes, bound, _ = self.kube.list_nodes_and_bound_pods()
        fit = core.in_place_fit(new_pod(stable, self.ns), nodes, bound, keys, self.env.group_by)
        if fit.fits:
            return None
        holders = "; ".join(fit.holders[:4])
        return Problem(
            "in-place",
            self.deployment,
            f"no place for the new pod: {fit.message}"
            + (f"; GPUs held: {holders}" if holders else ""),
        )

    def _wait_pods(self, name: str, at_most: int) -> Problem | None:
        """Until at most ``at_most`` pods of Deployment ``name`` exist (terminating ones
        included: they hold their GPUs until they are gone)."""
        started = time.monotonic()
        policy = self.env.rollout
        while True:
            obj = self._check(name)
            pods = [
                p
                for p in kubeapps.pods_of_deployment(self.kube, obj)
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            ]
            if len(pods) <= at_most:
                return None
            waited = time.monotonic() - started
            if waited >= policy.timeout_s:
                return Problem(
                    "timeout",
                    name,
                    f"Deployment {name}: {len(pods)} pods still there after {waited:.0f}s "
                    f"(waiting for at most {at_most})",
                )
            self.renew()
            self.sleep(poll_interval(waited, policy.poll_s))

    # -- after "all", and on the way back --------------------------------------------------
    def give_back(self) -> Problem | None:
        """In place, after the stable took the new release: the canary's pods go back to
        the stable one batch at a time (the canary frees them, the stable takes them)."""
        if self.mode != IN_PLACE or self.replicas == 0:
            return None
        for batch in core.moves(self.replicas, 0, self.max_unavailable):
            size = -batch
            self._patch(self.name, {"spec": {"replicas": self.replicas - size}})
            self.replicas -= size
            problem = self._wait_pods(self.name, self.replicas)
            if problem is None:
                self._set_stable(self.stable_now + size)
                result = self._watch(self.deployment)
                problem = result.problem if result.state != deploywatch.COMPLETE else None
            if problem is not None:
                return problem
        return None

    def remove(self) -> str | None:
        """Scale the canary to 0, wait until its pods are gone, delete it (conditional on
        its uid and resourceVersion). Returns what was done, None when there was none."""
        if self.uid is None:
            return None
        obj = self.read()
        if obj is None:
            return f"the canary {self.name} was gone already"
        if not core.is_ours(obj, self.deployment, {self.release}, self.uid):
            return f"the canary {self.name} is no longer gpuops' own: left as it is"
        if core.replicas_of(obj) != 0:
            self._patch(self.name, {"spec": {"replicas": 0}})
            self.replicas = 0
        problem = self._wait_pods(self.name, 0)
        if problem is not None:
            raise OperationFailed(problem.message)
        return delete(self.kube, self.env, self.name, self.uid, self.say)

    def restore_stable_patch(self) -> dict[str, Any]:
        """In place: what puts the stable's replicas and strategy back as they were."""
        if self.stable_now < 0:
            return {}
        return {
            "spec": {"replicas": self.stable_replicas, "strategy": self.stable_strategy},
            "metadata": {"annotations": {core.IN_PLACE_ANNOTATION: None}},
        }

    def restore_stable(self) -> WatchResult | None:
        """After a failed step: the stable's replicas and strategy as they were, watched."""
        patch = self.restore_stable_patch()
        if not patch:
            return None
        self._patch(self.deployment, patch)
        self.stable_now = -1
        return self._watch(self.deployment)

    def finish_stable(self) -> None:
        """After a successful release in place: the stable's strategy as it was (its
        replicas are back already), the annotation off."""
        if self.stable_now < 0:
            return
        self._patch(
            self.deployment,
            {
                "spec": {"strategy": self.stable_strategy},
                "metadata": {"annotations": {core.IN_PLACE_ANNOTATION: None}},
            },
        )
        self.stable_now = -1


def new_pod(stable: Mapping[str, Any], namespace: str) -> Any:
    """A pod of the stable's template (the canary's differs only in its image and labels)."""
    template = (stable.get("spec") or {}).get("template") or {}
    return pod_from_api(
        {"metadata": {"namespace": namespace, "name": "new-pod"}, "spec": template.get("spec")},
        with_placement=True,
    )


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


__all__ = ["IN_PLACE", "SURGE", "Canary", "ForeignChange", "GpuOpsError", "clean_up", "leftover"]
