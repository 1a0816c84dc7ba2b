"""Releases that fail during the rollout are caught early and rolled back by themselves.

Scheduling is the real kube-scheduler's (FailedScheduling with its message, which ``headroom
explain`` must agree with); what a node's kubelet reports for an image that cannot be pulled, a
container that crash-loops or never becomes ready is staged by the lab's kwok for images whose
tag carries a ``-labfault-`` marker (gpuops_lab.kwokstages); the progress deadline is the real
deployment controller's.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_kube import KubeLab
from integration.conftest_registry import RegistryLab
from integration.releaselab import (
    Images,
    LabRegistry,
    Target,
    environment,
    fill_memory,
    make_target,
    own_nodes,
    pair,
)

from gpuops.adapters.kube import KubeClient
from gpuops.errors import OperationFailed
from gpuops.usecases import releases
from gpuops.usecases.releases import model as m

pytestmark = pytest.mark.timeout(600)


def deps(kube: KubeLab, rlab: RegistryLab, target: Target) -> releases.Deps:
    return releases.Deps(
        registry_for=lambda env: LabRegistry(rlab),
        say=target.say,
        connect=lambda cluster: KubeClient.connect(str(kube.kubeconfig)),
    )


@pytest.fixture
def node_class(kube_lab: KubeLab) -> str:
    """Two H800 nodes of a class of the test's own (64 GiB memory each)."""
    cls = f"rel-{uuid.uuid4().hex[:6]}"
    own_nodes(kube_lab, cls, count=2, memory="64Gi")
    return cls


def make(kube: KubeLab, images: Images, tmp: Path, node_class: str, **deploy: Any) -> Target:
    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        return {"staging": environment(ns, name, repo, node_class=node_class)}

    return make_target(
        kube, images, tmp, "relf", envs=envs, node_class=node_class, memory="16Gi", **deploy
    )


def release(t: Target, d: releases.Deps, tag: str) -> tuple[m.ReleaseOutcome, Any]:
    return pair(releases.promote(m.PromoteRequest(m.Target(str(t.config), "staging"), tag=tag), d))


def assert_rolled_back(
    t: Target, out: m.ReleaseOutcome, error: Any, kind: str, was: str
) -> dict[str, Any]:
    assert isinstance(error, OperationFailed), error
    assert out.state == "failed"
    assert out.rollout is not None and out.rollout.problem is not None
    assert out.rollout.problem.kind == kind, out.rollout.problem
    assert out.restore is not None and out.restore.state == "complete"
    assert t.image() == was, "the previous image runs again"
    record = t.history("staging")[-1]
    assert record["status"] == "failed" and record["failure"]["kind"] == kind
    assert "rolled back to" in error.message
    assert t.change_causes()[-1].startswith(f"gpuops #{record['number']} failed: restored")
    assert t.release_number() == record.get("rolled_back_to")
    assert not t.leases()
    t.wait_rolled_out()
    return record


def test_a_release_that_cannot_be_scheduled_is_rolled_back_with_the_reasons(
    kube_lab: KubeLab,
    registry_lab: RegistryLab,
    release_images: Images,
    tmp_path: Path,
    node_class: str,
) -> None:
    """GPUs are free (the GPU gate passes) but a data-loading job took the memory the surge
    pod needs: the scheduler says Insufficient memory; gpuops says so within seconds, with
    explain's per-node reasons, and restores the previous release."""
    t = make(kube_lab, release_images, tmp_path, node_class)
    d = deps(kube_lab, registry_lab, t)
    out, error = release(t, d, "1.1.0")
    assert error is None, error
    was = t.image()
    fill_memory(kube_lab, t.namespace, own_nodes_of(kube_lab, node_class), "40Gi")

    out, error = release(t, d, "1.2.0")

    record = assert_rolled_back(t, out, error, "unschedulable", was)
    assert record["rolled_back_to"] == 1
    assert "Insufficient memory" in record["failure"]["scheduler_message"]
    assert [g.name for g in out.gates] == ["image", "compat", "headroom"]
    assert all(g.ok for g in out.gates)
    assert out.explanation is not None
    assert out.explanation["agrees_with_scheduler"] is True, out.explanation
    assert {n["name"] for n in out.explanation["nodes"]} >= set(own_nodes_of(kube_lab, node_class))
    assert any("to be scheduled" in line for line in t.lines), "progress says what it waits for"


def own_nodes_of(kube: KubeLab, node_class: str) -> list[str]:
    return sorted(
        n.metadata.name
        for n in kube.core.list_node(label_selector=f"accelerator={node_class}").items
    )


@pytest.mark.parametrize(
    ("tag", "kind", "says"),
    [
        ("2.0.0-labfault-pullerror", "image-pull", "ImagePullBackOff"),
        ("2.0.0-labfault-crashloop", "crash-loop", "restarted 3 times, last exit code 1"),
        ("2.0.0-labfault-notready", "not-ready", "never Ready"),
    ],
)
def test_container_troubles_are_caught_and_rolled_back(
    kube_lab: KubeLab,
    registry_lab: RegistryLab,
    release_images: Images,
    tmp_path: Path,
    node_class: str,
    tag: str,
    kind: str,
    says: str,
) -> None:
    t = make(kube_lab, release_images, tmp_path, node_class, replicas=1)
    d = deps(kube_lab, registry_lab, t)
    was = t.image()

    out, error = release(t, d, tag)

    record = assert_rolled_back(t, out, error, kind, was)
    assert says in record["failure"]["message"]
    assert "rolled_back_to" not in record, "the Deployment ran no gpuops release before"


def test_the_progress_deadline_is_the_deployment_controllers_verdict(
    kube_lab: KubeLab,
    registry_lab: RegistryLab,
    release_images: Images,
    tmp_path: Path,
    node_class: str,
) -> None:
    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        slow = {"ready_seconds": 300, "unschedulable_seconds": 300}
        return {"staging": environment(ns, name, repo, node_class=node_class, rollout=slow)}

    t = make_target(
        kube_lab,
        release_images,
        tmp_path,
        "reld",
        envs=envs,
        node_class=node_class,
        replicas=1,
        progress_deadline_s=3,
    )
    d = deps(kube_lab, registry_lab, t)
    was = t.image()

    out, error = release(t, d, "2.0.0-labfault-notready")

    record = assert_rolled_back(t, out, error, "progress-deadline", was)
    assert "has timed out progressing" in record["failure"]["message"]
