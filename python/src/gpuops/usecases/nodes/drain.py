"""The Kubernetes side of a batch: headroom first, then cordon, wait for running GPU pods to
finish (never silently kill training: on timeout fail, or evict by policy), drain, and, after
the change, uncordon what this run cordoned (an administrator's cordon stays)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuops.adapters.kube import KubeClient
from gpuops.adapters.kube import nodes as kubenodes
from gpuops.core import rollout
from gpuops.core.headroom import DEFAULT_RESOURCE
from gpuops.usecases.nodes import taints
from gpuops.usecases.nodes.records import HostRecord

FAIL, EVICT = "fail", "evict"
CORDON_NOTE = "gpuops nodes update"
#: who sets the ``gpuops.io/gpu-unhealthy`` taint of a host whose change failed
TAINT_SETTER = "nodes-update"
UNHEALTHY = "gpuops.io/gpu-unhealthy"


@dataclass(frozen=True)
class DrainPolicy:
    resource: str = DEFAULT_RESOURCE
    reserve: int = 0
    gpu_pods_timeout_s: int = 3600
    on_timeout: str = FAIL
    drain_timeout_s: int = 300
    ready_timeout_s: int = 300


Say = Callable[[str, str], None]  # host, message


class Guard:
    """Kubernetes operations of one rollout (one API connection)."""

    def __init__(self, kube: KubeClient, policy: DrainPolicy, say: Say) -> None:
        self.kube = kube
        self.policy = policy
        self.say = say

    def headroom(self, records: Sequence[HostRecord]) -> rollout.BatchHeadroom:
        nodes, pods, _ = self.kube.list_nodes_and_bound_pods(
            frozenset({self.policy.resource, "pods"})
        )
        batch = [r.node for r in records if r.node]
        return rollout.batch_headroom(
            nodes,
            pods,
            [n for n in batch if n],
            resource=self.policy.resource,
            reserve=self.policy.reserve,
        )

    def prepare(self, records: Sequence[HostRecord]) -> list[HostRecord]:
        """Cordon, wait for GPU pods, drain; returns the hosts ready for the change (the
        others are failed, and stay cordoned)."""
        ready = []
        for r in records:
            if r.node is None:
                ready.append(r)
                continue
            started = time.monotonic()
            info = kubenodes.get_node(self.kube, r.node)
            r.cordoned_before = info.unschedulable and not info.cordoned_by_us
            if info.cordoned_by_us:
                r.cordoned = True  # ours, from an earlier run that did not finish
            elif not info.unschedulable:
                kubenodes.cordon(self.kube, r.node, CORDON_NOTE)
                r.cordoned = True
                self.say(r.host, f"cordoned node {r.node}")
            else:
                self.say(r.host, f"node {r.node} was cordoned by an administrator: kept so")
            r.phases_s["cordon"] = round(time.monotonic() - started, 3)
        deadline = time.monotonic() + self.policy.gpu_pods_timeout_s
        for r in records:
            if r.node is None:
                continue
            started = time.monotonic()
            left = self._wait_gpu_pods(r, deadline)
            r.phases_s["wait_gpu_pods"] = round(time.monotonic() - started, 3)
            if left:
                self._fail(
                    r,
                    f"GPU pods still running after {self.policy.gpu_pods_timeout_s}s "
                    f"({', '.join(left)}); not evicted (--on-timeout fail)",
                )
                continue
            started = time.monotonic()
            rest = kubenodes.wait_for(
                self.kube,
                r.node,
                self.policy.resource,
                which="drain",
                timeout_s=self.policy.drain_timeout_s,
                evict_after=True,
            )
            r.phases_s["drain"] = round(time.monotonic() - started, 3)
            if rest:
                self._fail(
                    r,
                    f"drain incomplete after {self.policy.drain_timeout_s}s: "
                    f"{', '.join(kubenodes.names(rest))} (disruption budget?)",
                )
                continue
            ready.append(r)
        return ready

    def _wait_gpu_pods(self, r: HostRecord, deadline: float) -> list[str]:
        assert r.node is not None  # noqa: S101 - callers check
        pods = kubenodes.wait_for(self.kube, r.node, self.policy.resource, which="gpu", timeout_s=0)
        if pods:
            r.waited_for = kubenodes.names(pods)
            self.say(
                r.host,
                f"waiting for {len(pods)} running GPU pod(s) to finish: " + ", ".join(r.waited_for),
            )
            pods = kubenodes.wait_for(
                self.kube,
                r.node,
                self.policy.resource,
                which="gpu",
                timeout_s=max(0.0, deadline - time.monotonic()),
                poll_s=2.0,
            )
        if pods and self.policy.on_timeout == EVICT:
            r.evicted = kubenodes.names(pods)
            self.say(r.host, f"evicting {len(pods)} GPU pod(s) by policy: {', '.join(r.evicted)}")
            pods = kubenodes.wait_for(
                self.kube,
                r.node,
                self.policy.resource,
                which="gpu",
                timeout_s=self.policy.drain_timeout_s,
                evict_after=True,
            )
        return kubenodes.names(pods)

    def _fail(self, r: HostRecord, reason: str) -> None:
        r.status, r.reason = rollout.FAILED, reason
        self.say(r.host, f"failed: {reason}")

    def taint(self, r: HostRecord, reason: str) -> None:
        """A host whose change failed: ``gpuops.io/gpu-unhealthy`` with our reason on the node
        (setter ``nodes-update``), so nothing schedules there even once uncordoned."""
        if r.node is None:
            return
        taints.mark_unhealthy(self.kube, r.node, TAINT_SETTER, reason)
        r.tainted = True
        self.say(r.host, f"tainted node {r.node} {UNHEALTHY}: {reason}")

    def release(self, r: HostRecord, *, untaint: bool = False) -> None:
        """After a successful change: the node Ready again, then uncordoned if this run (or an
        unfinished earlier one) cordoned it; ``untaint``: our taint goes too (another setter's
        reason keeps it). A node not Ready fails the host and stays cordoned; one that was
        rolled back stays ``rolled-back`` (its driver is known), cordoned and tainted."""
        if r.node is None:
            return
        started = time.monotonic()
        deadline = started + self.policy.ready_timeout_s
        info = kubenodes.get_node(self.kube, r.node)
        while not info.ready and time.monotonic() < deadline:
            time.sleep(1.0)
            info = kubenodes.get_node(self.kube, r.node)
        if not info.ready and r.status == rollout.ROLLED_BACK:  # back on its driver: stays so
            r.reason += "; not Ready; left cordoned"
            self.say(r.host, f"node {r.node} not Ready after the rollback; left cordoned")
            return
        if not info.ready:
            self._fail(
                r,
                f"node {r.node} not Ready {self.policy.ready_timeout_s}s after the "
                "change; left cordoned",
            )
            return
        if untaint:  # our claim goes (also one an earlier run left); another setter's stays
            gone = taints.release_unhealthy(self.kube, r.node, TAINT_SETTER)
            if r.tainted:
                self.say(
                    r.host,
                    f"released our {UNHEALTHY} claim on node {r.node}"
                    + ("" if gone else " (another setter keeps the taint)"),
                )
            r.tainted = False
        if r.cordoned and not r.cordoned_before:
            kubenodes.uncordon(self.kube, r.node)
            r.uncordoned = True
            self.say(r.host, f"uncordoned node {r.node}")
        r.phases_s["uncordon"] = round(time.monotonic() - started, 3)
