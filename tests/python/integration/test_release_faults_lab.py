"""A release stopped at the worst moments leaves history, registry tags and cluster agreeing.

The faults are real: the lab registry and kube-apiserver processes are stopped and started
again (gpuops_lab.registry / gpuops_lab.kube), two releases of one target run at once against
the real API server, and a lock is held by another (fresh or silent) holder. The moment is
chosen through the release's own progress lines: a line is said right after the release is
recorded as pending and before the Deployment is changed, and then while the rollout runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_kube import KubeLab
from integration.conftest_registry import RegistryLab
from integration.releaselab import Images, LabRegistry, Target, environment, make_target, pair
from kubernetes import client

from gpuops.adapters.kube import KubeClient
from gpuops.core import releaselock
from gpuops.errors import GateRefused, OperationFailed, Unreachable
from gpuops.usecases import releases
from gpuops.usecases.releases import model as m
from gpuops.usecases.releases.status import status
from gpuops_lab import kube as labkube
from gpuops_lab import registry as labregistry

pytestmark = pytest.mark.timeout(900)
LEASE_S = 8


def deps(kube: KubeLab, rlab: RegistryLab, say: Callable[[str], None]) -> releases.Deps:
    return releases.Deps(
        registry_for=lambda env: LabRegistry(rlab),
        say=say,
        connect=lambda cluster: KubeClient.connect(str(kube.kubeconfig)),
    )


@pytest.fixture
def target(kube_lab: KubeLab, release_images: Images, tmp_path: Path) -> Target:
    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        # no test here is about readiness; after an apiserver restart kwok may take longer than
        # the lab's 6 s to report Ready on a loaded machine, so readiness gets a wide window
        return {
            "staging": environment(
                ns, name, repo, registry_tag="staging", rollout={"ready_seconds": 60}
            )
        }

    return make_target(kube_lab, release_images, tmp_path, "relx", envs=envs)


def release(t: Target, d: releases.Deps, tag: str) -> tuple[m.ReleaseOutcome, Any]:
    return pair(releases.promote(m.PromoteRequest(m.Target(str(t.config), "staging"), tag=tag), d))


def on(t: Target, starts: str, action: Callable[[], None]) -> Callable[[str], None]:
    """A console that runs ``action`` once, when a line starting with ``starts`` is said."""
    done = threading.Event()

    def say(line: str) -> None:
        t.say(line)
        if line.startswith(starts) and not done.is_set():
            done.set()
            action()

    return say


def agree(t: Target, rlab: RegistryLab, images: Images) -> dict[str, Any]:
    """History, registry tag and cluster tell the same story; returns the current record."""
    records = {r["number"]: r for r in t.history("staging")}
    current = records[t.release_number() or 0]
    assert current["status"] == "succeeded", current
    assert t.image() == images.ref(current["tag"])
    assert LabRegistry(rlab).resolve(images.repository, "staging") == current["digest"]
    assert not [r for r in records.values() if r["status"] == "pending"], records
    return current


def test_the_registry_down_before_the_release_refuses_it(
    target: Target, kube_lab: KubeLab, registry_lab: RegistryLab
) -> None:
    was = target.image()
    labregistry.stop_registry(registry_lab.lab)
    try:
        with pytest.raises(Unreachable):
            release(target, deps(kube_lab, registry_lab, target.say), "1.1.0")
    finally:
        labregistry.start_registry(registry_lab.lab)
    assert target.image() == was and not target.history("staging") and not target.leases()


def test_the_registry_down_before_the_tag_move_rolls_the_release_back(
    target: Target, kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images
) -> None:
    """The rollout succeeds, then the environment's tag cannot be moved: the release is not
    half done: the cluster goes back, the record says why, the tag never moved."""
    _, error = release(target, deps(kube_lab, registry_lab, target.say), "1.1.0")
    assert error is None
    stop = on(target, "release #2:", lambda: labregistry.stop_registry(registry_lab.lab))
    try:
        out, error = release(target, deps(kube_lab, registry_lab, stop), "1.2.0")
    finally:
        labregistry.start_registry(registry_lab.lab)

    assert isinstance(error, OperationFailed) and out.state == "failed"
    assert out.rollout is not None and out.rollout.state == "complete"
    record = target.history("staging")[-1]
    assert record["status"] == "failed" and record["failure"]["kind"] == "registry-tag"
    current = agree(target, registry_lab, release_images)
    assert current["tag"] == "1.1.0"


def test_the_apiserver_down_before_the_change_leaves_nothing_half_done(
    target: Target, kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images
) -> None:
    """The release is recorded as pending, then the API server goes away before the
    Deployment is changed: the run stops (unreachable); the next release finds the record,
    sees the cluster never got it, and says so, after taking over the silent lock."""
    _, error = release(target, deps(kube_lab, registry_lab, target.say), "1.1.0")
    assert error is None
    stop = on(target, "release #2:", lambda: labkube.stop_apiserver(kube_lab.lab))
    try:
        out, error = release(target, deps(kube_lab, registry_lab, stop), "1.2.0")
    finally:
        labkube.start_apiserver(kube_lab.lab)

    assert isinstance(error, Unreachable) and out.state == "interrupted"
    assert [r["status"] for r in target.history("staging")] == ["succeeded", "pending"]
    assert target.image() == release_images.ref("1.1.0")
    assert target.leases(), "the lock could not be given back while the API server was down"

    target.wait_leases_silent()  # the interrupted run's lock (lease LEASE_S) goes silent
    out, error = release(target, deps(kube_lab, registry_lab, target.say), "1.3.0")

    assert error is None, error
    assert out.reconciled == [{"release": 2, "was": "pending", "now": "aborted"}]
    assert (
        out.lock["taken_over"] and out.lock["taken_over"][0]["lease"] == "gpuops-release-lock.infer"
    )
    assert any(line.startswith("took over the stale lock") for line in target.lines)
    assert agree(target, registry_lab, release_images)["tag"] == "1.3.0"


def test_the_apiserver_down_during_the_rollout_is_finished_by_the_next_release(
    target: Target, kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images
) -> None:
    """The Deployment was changed, then the API server stays away longer than the watch
    waits: the run stops with the release pending and the tag unmoved. Kubernetes finishes
    the rollout on its own; the next release records it as succeeded and moves the tag."""
    _, error = release(target, deps(kube_lab, registry_lab, target.say), "1.1.0")
    assert error is None
    stop = on(target, "infer: ", lambda: labkube.stop_apiserver(kube_lab.lab))
    try:
        out, error = release(target, deps(kube_lab, registry_lab, stop), "1.2.0")
    finally:
        labkube.start_apiserver(kube_lab.lab)

    assert isinstance(error, Unreachable) and out.state == "interrupted"
    assert any("is not answering; retrying for 5s" in line for line in target.lines)
    target.wait_rolled_out()
    assert target.image() == release_images.ref("1.2.0")
    listed = status(
        m.Target(str(target.config), "staging"), deps(kube_lab, registry_lab, target.say)
    ).result
    assert "the cluster says succeeded" in listed.open[2], listed.to_dict()

    target.wait_leases_silent()  # the interrupted run's lock (lease LEASE_S) goes silent
    again, error = release(target, deps(kube_lab, registry_lab, target.say), "1.2.0")

    assert error is None and again.state == "unchanged"
    assert again.reconciled == [{"release": 2, "was": "pending", "now": "succeeded"}]
    assert any("moved" in n and ":staging back to #2" in n for n in again.notes), again.notes
    assert agree(target, registry_lab, release_images)["number"] == 2


def test_an_apiserver_blip_during_the_rollout_is_ridden_out(
    target: Target, kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images
) -> None:
    restart = threading.Timer(2.0, labkube.start_apiserver, args=(kube_lab.lab,))

    def blip() -> None:
        labkube.stop_apiserver(kube_lab.lab)
        restart.start()

    try:
        _, error = release(
            target, deps(kube_lab, registry_lab, on(target, "infer: ", blip)), "1.1.0"
        )
    finally:
        restart.join(60)

    assert error is None, error
    assert any("answers again after" in line for line in target.lines), target.lines
    assert agree(target, registry_lab, release_images)["tag"] == "1.1.0"


def test_two_releases_of_one_target_at_once_exactly_one_proceeds(
    target: Target, kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images
) -> None:
    results: dict[str, tuple[Any, Any]] = {}
    start = threading.Barrier(2)
    ended = {tag: threading.Event() for tag in ("1.1.0", "1.2.0")}

    def go(tag: str) -> None:
        # The release that reaches its rollout holds the lock; it waits there for the other
        # to end (less than the lease, so its lock stays fresh), so the two overlap even when
        # the machine is slow to start the other one (a clean-clone run saw the second begin
        # only after the first had finished: both succeeded, one after the other).
        (other,) = set(ended) - {tag}
        say = on(target, "infer: ", lambda: ended[other].wait(LEASE_S * 5 / 8))
        start.wait()
        try:
            results[tag] = release(target, deps(kube_lab, registry_lab, say), tag)
        finally:
            ended[tag].set()

    threads = [threading.Thread(target=go, args=(tag,)) for tag in ("1.1.0", "1.2.0")]
    for th in threads:
        th.start()
    for th in threads:
        th.join(300)

    errors = {tag: err for tag, (_, err) in results.items()}
    winners = [tag for tag, err in errors.items() if err is None]
    losers = [tag for tag, err in errors.items() if err is not None]
    assert len(winners) == 1 and len(losers) == 1, errors
    refusal = errors[losers[0]]
    assert isinstance(refusal, GateRefused)
    assert "is being released by" in refusal.message and "since" in refusal.message
    assert f"{winners[0]} to staging" in refusal.message
    assert [r["tag"] for r in target.history("staging")] == winners
    assert agree(target, registry_lab, release_images)["tag"] == winners[0]


def test_a_fresh_lock_is_refused_and_a_silent_one_taken_over(
    target: Target, kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images
) -> None:
    leases = client.CoordinationV1Api(kube_lab.api)
    name = releaselock.lease_name("infer")
    now = datetime.now(UTC)
    body = releaselock.lease_body(
        name, target.namespace, "jenkins-7/pid-1", "promote 0.9 to staging", 60, now
    )
    leases.create_namespaced_lease(target.namespace, body)
    was = target.image()

    out, error = release(target, deps(kube_lab, registry_lab, target.say), "1.1.0")

    assert isinstance(error, GateRefused) and out.state == "refused"
    assert "jenkins-7/pid-1 (promote 0.9 to staging), since " in error.message
    assert target.image() == was and not target.history("staging")

    silent = releaselock.lease_body(
        name,
        target.namespace,
        "jenkins-7/pid-1",
        "promote 0.9 to staging",
        60,
        now - timedelta(seconds=120),
        resource_version=leases.read_namespaced_lease(
            name, target.namespace
        ).metadata.resource_version,
    )
    leases.replace_namespaced_lease(name, target.namespace, silent)

    out, error = release(target, deps(kube_lab, registry_lab, target.say), "1.1.0")

    assert error is None, error
    [taken] = out.lock["taken_over"]
    assert taken["holder"] == "jenkins-7/pid-1" and taken["silent_for_s"] >= 120
    assert agree(target, registry_lab, release_images)["tag"] == "1.1.0"
