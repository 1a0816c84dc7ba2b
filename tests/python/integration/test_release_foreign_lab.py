"""A person changes the Deployment while gpuops releases it: history, registry and cluster
still agree, and their change is never overwritten.

The change is made for real, with the lab's own ``kubectl set image`` (a strategic merge
patch under field manager ``kubectl-set``), at the moment the release's progress lines name:
while gpuops watches the rollout, and while it restores the previous release after a failed
one. A status update of the deployment controller (the resourceVersion moves, the generation
does not) is nobody's change and must not stop a release.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_kube import KubeLab, wait_until
from integration.conftest_registry import RegistryLab
from integration.releaselab import Images, LabRegistry, Target, environment, make_target, pair

from gpuops.adapters.kube import KubeClient
from gpuops.core.releasehistory import CHANGE_CAUSE
from gpuops.errors import OperationFailed
from gpuops.usecases import releases
from gpuops.usecases.releases import model as m

pytestmark = pytest.mark.timeout(600)


def deps(kube: KubeLab, rlab: RegistryLab, say: Callable[[str], None]) -> releases.Deps:
    return releases.Deps(
        registry_for=lambda env: LabRegistry(rlab),
        say=say,
        connect=lambda cluster: KubeClient.connect(str(kube.kubeconfig)),
    )


@pytest.fixture
def target(kube_lab: KubeLab, release_images: Images, tmp_path: Path) -> Target:
    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        return {
            "staging": environment(
                ns, name, repo, registry_tag="staging", rollout={"ready_seconds": 60}
            )
        }

    return make_target(kube_lab, release_images, tmp_path, "relo", envs=envs)


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


def once_after(
    t: Target, first: str, starts: str, action: Callable[[], None]
) -> Callable[[str], None]:
    """A console that runs ``action`` once, at the first line starting with ``starts`` said
    after a line starting with ``first``."""
    seen = threading.Event()
    then = on(t, starts, action)

    def say(line: str) -> None:
        if seen.is_set():
            then(line)
        else:
            t.say(line)
            if line.startswith(first):
                seen.set()

    return say


def kubectl_set_image(t: Target, image: str) -> Callable[[], None]:
    """What a person at a terminal does: ``kubectl set image deployment/infer infer=IMAGE``."""
    kubectl = Path(t.kube.facts["bin_dir"]) / "kubectl"

    def run() -> None:
        subprocess.run(
            [
                str(kubectl),
                "--kubeconfig",
                str(t.kube.kubeconfig),
                "-n",
                t.namespace,
                "set",
                "image",
                f"deployment/{t.name}",
                f"{t.name}={image}",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )

    return run


def tag_digest(rlab: RegistryLab, images: Images) -> str | None:
    return LabRegistry(rlab).resolve(images.repository, "staging")


def cause_of_replicaset_running(t: Target, image: str) -> str | None:
    for rs in t.kube.apps.list_namespaced_replica_set(
        t.namespace, label_selector=f"app={t.name}"
    ).items:
        if rs.spec.template.spec.containers[0].image == image:
            return str((rs.metadata.annotations or {}).get(CHANGE_CAUSE, ""))
    return None


def assert_aborted_by_kubectl(
    t: Target, out: m.ReleaseOutcome, error: Any, theirs: str, number: int
) -> dict[str, Any]:
    assert isinstance(error, OperationFailed), (error, out.state, t.lines)
    assert out.state == "aborted", out.to_dict()
    assert f"release #{number} " in error.message and " aborted: " in error.message
    assert "changed by kubectl-set at " in error.message and theirs in error.message, error
    record = t.history("staging")[-1]
    assert record["number"] == number and record["status"] == "aborted", record
    failure = record["failure"]
    assert failure["kind"] == "foreign-change", failure
    by = failure["changed_by"]
    assert (by["manager"], by["operation"], by["image"]) == ("kubectl-set", "Update", theirs), by
    assert by["time"] and by["time"].endswith("Z"), by
    assert t.image() == theirs, "their change was overwritten"
    assert not t.leases()
    return record


def test_kubectl_set_image_during_the_watch_aborts_the_release_and_names_who(
    target: Target, kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images
) -> None:
    """Today the watch followed their (newest) ReplicaSet, recorded gpuops' tag as
    succeeded, moved the registry tag to a digest that does not run, and gpuops' change
    cause ended up on their ReplicaSet."""
    _, error = release(target, deps(kube_lab, registry_lab, target.say), "1.1.0")
    assert error is None, error
    theirs = release_images.ref("1.3.0")
    during = on(target, "infer: ", kubectl_set_image(target, theirs))

    out, error = release(target, deps(kube_lab, registry_lab, during), "1.2.0")

    record = assert_aborted_by_kubectl(target, out, error, theirs, 2)
    assert "while gpuops watched its rollout" in record["failure"]["message"]
    assert tag_digest(registry_lab, release_images) == release_images.digests["1.1.0"]
    assert target.release_number() is None, "the Deployment does not run release #2 (nor #1)"
    target.wait_rolled_out()
    cause = wait_until(
        lambda: (
            (c := cause_of_replicaset_running(target, theirs)) is not None
            and not c.startswith("gpuops #2")
            and c
        ),
        "their ReplicaSet's change cause is not gpuops' release #2",
    )
    assert cause.startswith("not a gpuops release: changed by kubectl-set at "), cause
    assert target.change_causes()[1].startswith("gpuops #1 promote staging: 1.1.0")


def kubectl_scale(t: Target, replicas: int) -> Callable[[], None]:
    """``kubectl scale deployment/infer --replicas=N``: a new generation through /scale."""
    kubectl = Path(t.kube.facts["bin_dir"]) / "kubectl"

    def run() -> None:
        subprocess.run(
            [str(kubectl), "--kubeconfig", str(t.kube.kubeconfig), "-n", t.namespace,
             "scale", f"deployment/{t.name}", f"--replicas={replicas}"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip

    return run


def test_a_scale_during_the_watch_aborts_but_leaves_gpuops_marks_on_its_own_image(
    target: Target, kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images
) -> None:
    """``kubectl scale`` writes only the generation: the release stops (what gpuops left
    changed), but the pod template still runs gpuops' release, so its marks stay; taking them
    off labelled gpuops' own image 'not a gpuops release'."""
    _, error = release(target, deps(kube_lab, registry_lab, target.say), "1.1.0")
    assert error is None, error
    during = on(target, "infer: ", kubectl_scale(target, 3))

    out, error = release(target, deps(kube_lab, registry_lab, during), "1.2.0")

    assert isinstance(error, OperationFailed) and out.state == "aborted", (error, out.state)
    assert error.message.count("changed by ") == 1 and "generation" in error.message, error
    assert target.image() == release_images.ref("1.2.0")  # gpuops' image still runs
    assert target.release_number() == 2, "gpuops' release mark was taken off its own image"


@pytest.mark.parametrize("moment", ["before its patch", "during its watch"])
def test_kubectl_set_image_during_the_restore_is_not_overwritten(
    target: Target,
    kube_lab: KubeLab,
    registry_lab: RegistryLab,
    release_images: Images,
    moment: str,
) -> None:
    """A release fails (the image cannot be pulled) and gpuops starts restoring #1; a person
    sets an image at that moment (before gpuops' restoring patch, or while gpuops watches the
    restore). Today gpuops patched #1 over their change without a word."""
    _, error = release(target, deps(kube_lab, registry_lab, target.say), "1.1.0")
    assert error is None, error
    theirs = release_images.ref("1.3.0")
    change = kubectl_set_image(target, theirs)
    if moment == "before its patch":
        during = on(target, "rolling back to", change)
    else:
        during = once_after(target, "rolling back to", "infer: ", change)

    out, error = release(target, deps(kube_lab, registry_lab, during), "2.0.0-labfault-pullerror")

    record = assert_aborted_by_kubectl(target, out, error, theirs, 2)
    assert "while gpuops restored the previous release" in record["failure"]["message"]
    assert record["failure"]["rollout_problem"]["kind"] == "image-pull", record
    assert "rolled_back_to" not in record
    assert tag_digest(registry_lab, release_images) == release_images.digests["1.1.0"]
    target.wait_rolled_out()
    assert target.image() == theirs
    notes = target.annotations()
    assert "gpuops.io/release" not in notes and "gpuops.io/rolled-back-release" not in notes, notes


def test_a_status_update_of_the_controller_is_not_a_foreign_change(
    target: Target, kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images
) -> None:
    """Between recording the release and changing the Deployment, its status is updated
    (as the deployment controller does all the time): the resourceVersion moves, the
    generation and every field gpuops owns stay. Today that made the release abort as
    "changed by someone else"."""
    moved: dict[str, Any] = {}

    def status_update() -> None:
        before = target.deployment().metadata
        kube_lab.apps.patch_namespaced_deployment_status(
            target.name,
            target.namespace,
            [
                {
                    "op": "add",
                    "path": "/status/conditions/-",
                    "value": {"type": "LabStatusProbe", "status": "True", "reason": "Probe"},
                }
            ],
            field_manager="kube-controller-manager",
        )
        after = target.deployment().metadata
        moved["versions"] = (before.resource_version, after.resource_version)
        moved["generations"] = (before.generation, after.generation)

    out, error = release(
        target, deps(kube_lab, registry_lab, on(target, "release #1:", status_update)), "1.1.0"
    )

    a, b = moved["versions"]
    assert a != b and len(set(moved["generations"])) == 1, moved
    assert error is None, (error, target.lines)
    assert out.state == "succeeded"
    assert [r["status"] for r in target.history("staging")] == ["succeeded"]
    assert target.image() == release_images.ref("1.1.0")
    assert tag_digest(registry_lab, release_images) == release_images.digests["1.1.0"]
