"""Releases on the lab's real control plane (kube-apiserver, controller-manager, scheduler,
kwok) with images built and pushed to the lab registry: promote by digest, history in the
cluster and in ``kubectl rollout history``, rollback, model releases (S-22), approval."""

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
    make_target,
    own_nodes,
    pair,
)

from gpuops.adapters.kube import KubeClient
from gpuops.errors import GateRefused, InvalidInput
from gpuops.usecases import releases
from gpuops.usecases.releases import model as m
from gpuops.usecases.releases.status import history, status

pytestmark = pytest.mark.timeout(600)


def deps(kube: KubeLab, rlab: RegistryLab, target: Target) -> releases.Deps:
    return releases.Deps(
        registry_for=lambda env: LabRegistry(rlab),
        say=target.say,
        connect=lambda cluster: KubeClient.connect(str(kube.kubeconfig)),
    )


def where(target: Target, env: str = "staging") -> m.Target:
    return m.Target(str(target.config), env)


def promote(
    t: Target, d: releases.Deps, tag: str | None, env: str = "staging", **kw: Any
) -> tuple[m.ReleaseOutcome, Any]:
    return pair(releases.promote(m.PromoteRequest(where(t, env), tag=tag, **kw), d))


@pytest.fixture
def target(kube_lab: KubeLab, release_images: Images, tmp_path: Path) -> Target:
    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        return {
            "staging": environment(ns, name, repo, registry_tag="staging"),
            "production": environment(
                ns, name, repo, approval={"required": True, "approvers": ["release-managers"]}
            ),
        }

    return make_target(kube_lab, release_images, tmp_path, "rel", envs=envs)


def test_promote_sets_the_image_by_digest_and_records_the_release(
    target: Target, kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images
) -> None:
    d = deps(kube_lab, registry_lab, target)
    who = m.Who(
        reason="new tokenizer", requested_by="ci", git_revision="0123abcd", link="https://ci/1"
    )

    out, error = promote(target, d, "1.1.0", who=who)

    assert error is None, error
    assert out.state == "succeeded"
    assert target.image() == release_images.ref("1.1.0")
    [record] = target.history("staging")
    assert record["number"] == 1 and record["status"] == "succeeded"
    assert record["tag"] == "1.1.0" and record["digest"] == release_images.digests["1.1.0"]
    assert (record["reason"], record["git_revision"], record["link"]) == (
        "new tokenizer",
        "0123abcd",
        "https://ci/1",
    )
    assert "previous" not in record  # the first release: it replaced no gpuops release
    assert target.release_number() == 1
    assert target.change_causes()[-1].startswith("gpuops #1 promote staging: 1.1.0 (sha256:")
    assert not target.leases(), "the lock is given back"
    assert any("rollout complete" in line for line in target.lines), target.lines
    assert [g.name for g in out.gates] == ["image", "compat", "headroom"]
    compat = out.gates[1]  # the image's CUDA (its label) against the H800 class's drivers
    assert compat.ok and compat.details["cuda_version"].startswith("12.2"), compat
    # the environment's registry tag follows what runs
    assert (
        LabRegistry(registry_lab).resolve(release_images.repository, "staging")
        == (release_images.digests["1.1.0"])
    )

    again, error = promote(target, d, "1.1.0")
    assert error is None and again.state == "unchanged"
    assert len(target.history("staging")) == 1, "re-running a release changes nothing (S-28)"


def test_rollback_to_previous_and_to_a_tag_reuses_the_recorded_digest(
    target: Target, kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images
) -> None:
    d = deps(kube_lab, registry_lab, target)
    for tag in ("1.1.0", "1.2.0", "1.3.0"):
        _, error = promote(target, d, tag)
        assert error is None, error

    back, error = pair(
        releases.rollback(m.RollbackRequest(where(target), "previous", m.Who(reason="p99")), d)
    )

    assert error is None, error
    assert back.state == "succeeded" and back.wanted is not None
    assert back.wanted.tag == "1.2.0"
    assert target.image() == release_images.ref("1.2.0")
    records = {r["number"]: r for r in target.history("staging")}
    assert records[4]["action"] == "rollback" and records[4]["previous"] == 3
    assert records[3]["rolled_back_by"] == 4, "the release rolled back from is marked"
    assert "rollback staging: 1.2.0" in target.change_causes()[-1]

    # previous now skips 1.3.0 (rolled back) and 1.2.0 (what runs): 1.1.0
    listed = history(where(target), 10, d.connect).result
    assert listed.previous is not None and listed.previous.tag == "1.1.0"
    assert [r.tag for r in listed.choices] == ["1.1.0"]

    to, error = pair(releases.rollback(m.RollbackRequest(where(target), "1.1.0"), d))
    assert error is None and to.state == "succeeded"
    assert target.image() == release_images.ref("1.1.0")

    with pytest.raises(InvalidInput, match=r"no successful release of tag '9\.9\.9'") as info:
        releases.rollback(m.RollbackRequest(where(target), "9.9.9"), d)
    assert info.value.field == "to"


def test_production_needs_an_approver_who_is_recorded(
    target: Target, kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images
) -> None:
    d = deps(kube_lab, registry_lab, target)
    before = target.image()

    out, error = promote(target, d, "1.1.0", env="production")

    assert isinstance(error, GateRefused) and "requires an approval" in error.message
    assert out.state == "refused" and target.image() == before and not target.history("production")

    plan, error = promote(target, d, "1.1.0", env="production", dry_run=True)
    assert error is None and plan.state == "planned"
    assert plan.approval["required"] is True and plan.approval["approvers"] == ["release-managers"]
    assert plan.lock["resource"].endswith(f"/{target.namespace}/infer")
    assert target.image() == before, "a dry run changes nothing"

    out, error = promote(target, d, "1.1.0", env="production", who=m.Who(approved_by="alice"))
    assert error is None, error
    [record] = target.history("production")
    assert record["approved_by"] == "alice"
    assert "approved by alice" in target.change_causes()[-1]


def test_a_tag_that_does_not_exist_is_refused_before_anything_changes(
    target: Target, kube_lab: KubeLab, registry_lab: RegistryLab
) -> None:
    d = deps(kube_lab, registry_lab, target)
    before = target.image()

    out, error = promote(target, d, "7.7.7")

    assert isinstance(error, GateRefused)
    assert "tag 7.7.7 does not exist" in error.message
    assert target.image() == before and not target.history("staging") and not target.leases()
    assert out.gates[-1].name == "image" and not out.gates[-1].ok


def test_an_image_the_node_class_drivers_cannot_run_is_refused_before_anything_changes(
    kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images, tmp_path: Path
) -> None:
    node_class = f"old-driver-{uuid.uuid4().hex[:5]}"
    nodes = own_nodes(kube_lab, node_class, count=1, driver="470.82.01")  # CUDA 11.4 at most

    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        return {"staging": environment(ns, name, repo, node_class=node_class)}

    # runs before gpuops on the class (1.0.0, no GPU: it need not fit); 1.1.0 needs CUDA 12.2
    t = make_target(kube_lab, release_images, tmp_path, "compat", envs=envs, gpus=0)
    d = deps(kube_lab, registry_lab, t)
    before = t.image()

    out, error = promote(t, d, "1.1.0")

    assert isinstance(error, GateRefused), error
    gate = out.gates[-1]
    assert gate.name == "compat" and not gate.ok
    assert gate.details["offending"] == nodes, gate
    assert error.message.startswith("CUDA 12.2"), error.message
    assert f"{nodes[0]} (470.82.01)" in error.message, error.message
    assert t.image() == before and not t.history("staging") and not t.leases()


def test_status_reads_what_runs(
    target: Target, kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images
) -> None:
    d = deps(kube_lab, registry_lab, target)
    promote(target, d, "1.2.0")

    now = status(where(target), d).result

    assert now.current is not None and now.current.tag == "1.2.0"
    assert now.complete and now.deployments[0]["image"] == release_images.ref("1.2.0")
    assert now.registry_tag is not None and now.registry_tag["matches_current"] is True
    assert now.locks == [] and now.open == {}


def test_a_model_release_changes_only_the_mounted_version_and_rolls_back(
    kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images, tmp_path: Path
) -> None:
    """S-22: a new model version without a new image, through the same gates and history."""

    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        return {"staging": environment(ns, name, repo, model={"env": "MODEL_VERSION"})}

    t = make_target(
        kube_lab, release_images, tmp_path, "relm", envs=envs, env={"MODEL_VERSION": "v1"}
    )
    d = deps(kube_lab, registry_lab, t)
    _, error = promote(t, d, "1.1.0")
    assert error is None

    out, error = promote(t, d, None, model="v2")

    assert error is None, error
    assert out.wanted is not None and (out.wanted.tag, out.wanted.model) == ("1.1.0", "v2")
    container = t.deployment().spec.template.spec.containers[0]
    assert {e.name: e.value for e in container.env} == {"MODEL_VERSION": "v2"}
    assert container.image == release_images.ref("1.1.0"), "the image is not rebuilt or changed"
    assert "model v2" in t.change_causes()[-1]
    assert [(r["tag"], r["model"]) for r in t.history("staging")] == [
        ("1.1.0", "v1"),
        ("1.1.0", "v2"),
    ]

    back, error = pair(releases.rollback(m.RollbackRequest(where(t), "previous"), d))
    assert error is None and back.wanted is not None and back.wanted.model == "v1"
    container = t.deployment().spec.template.spec.containers[0]
    assert {e.name: e.value for e in container.env} == {"MODEL_VERSION": "v1"}


def test_a_model_in_a_configmap_rolls_the_pods_and_is_restored_on_failure(
    kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images, tmp_path: Path
) -> None:
    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        mount = {"configmap": "model-config", "key": "version"}
        return {"staging": environment(ns, name, repo, model=mount)}

    t = make_target(kube_lab, release_images, tmp_path, "relc", envs=envs)
    kube_lab.core.create_namespaced_config_map(
        t.namespace,
        {"metadata": {"name": "model-config"}, "data": {"version": "v1", "path": "/models"}},
    )
    d = deps(kube_lab, registry_lab, t)

    out, error = promote(t, d, "1.1.0", model="v2")

    assert error is None, error
    cm = kube_lab.core.read_namespaced_config_map("model-config", t.namespace)
    assert cm.data == {"version": "v2", "path": "/models"}
    annotations = t.deployment().spec.template.metadata.annotations
    assert annotations["gpuops.io/model-version"] == "v2", "the pods roll with the version"

    out, error = promote(t, d, "2.0.0-labfault-crashloop", model="v3")

    assert error is not None and out.state == "failed"
    cm = kube_lab.core.read_namespaced_config_map("model-config", t.namespace)
    assert cm.data == {"version": "v2", "path": "/models"}, "the model version is restored too"
    assert t.image() == release_images.ref("1.1.0")
