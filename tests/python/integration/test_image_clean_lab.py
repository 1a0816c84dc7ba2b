"""``gpuops image clean`` against the lab's Podman API (the session's image lab): gpuops'
builds are pruned to the last one per repository, their bases stay, another tenant's images
(OCI labels only, or none; even tagged in the same repository) survive, an image a container
uses is refused and never forced, and the space freed is the daemon's own figure. One test:
the builds are its set-up cost."""

from __future__ import annotations

import io
import tarfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from imagelab import cli_env, context, gpuops
from integration.conftest_registry import RegistryLab

from gpuops.adapters.builder import Builder
from gpuops.core.imagerecord import REPOSITORY_LABEL
from gpuops.core.imageref import parse_repository
from gpuops.usecases.images.build import BuildRequest
from gpuops.usecases.images.build import build as run_build

pytestmark = pytest.mark.lab


def _build(rlab: RegistryLab, tmp_path: Path, repo: str, number: str, dockerfile: str) -> str:
    """One real ``image build --no-push`` (the use case in-process: the labels it sets are the
    point, a process start per build is not); the image id."""
    ctx = context(tmp_path, dockerfile, {"u": uuid.uuid4().hex})
    outcome = run_build(
        BuildRequest(
            image=parse_repository(repo),
            tags=[number],
            context=ctx,
            push=False,
            docker_host=str(rlab.builder["base_url"]),
            docker_api_version="1.41",
        ),
        connect=lambda r: Builder.connect(r.docker_host, r.docker_api_version),
    )
    return outcome.result.image_id


def _tenant(rlab: RegistryLab, ref: str | None, dockerfile: str, labels: dict[str, str]) -> str:
    """Another tenant's build, straight through the Docker API (not gpuops)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in {"Dockerfile": dockerfile, "f": uuid.uuid4().hex}.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    image, _ = rlab.docker.images.build(
        fileobj=buf, custom_context=True, tag=ref, labels=labels or None, rm=True, forcerm=True
    )
    return str(image.id)


def _images(rlab: RegistryLab) -> dict[str, dict[str, Any]]:
    return {str(i["Id"]): i for i in rlab.docker.api.images(all=True)}


@dataclass
class Scene:
    repo: str
    base_repo: str
    base_1: str  # gpuops-built base of the app's last build (its repository's older build)
    base_2: str
    old_1: str  # an older app build, a container uses it
    old_2: str
    last: str
    oci_only: str  # another tenant's, tagged in the app's repository
    unlabelled: str
    used: Any  # the container

    def short(self, image: str) -> str:
        return image.removeprefix("sha256:")[:12]


def _scene(rlab: RegistryLab, tmp_path: Path) -> Scene:
    suffix = uuid.uuid4().hex[:6]
    repo, base_repo = f"{rlab.url}/test/clean-{suffix}", f"{rlab.url}/test/cleanbase-{suffix}"
    app = "FROM {base}\nCOPY u /u\n"
    # a base image built by gpuops: build 1 is the FROM of the app's last build, build 2 is
    # newer (so build 1 stays only because a last build uses it)
    base_1 = _build(rlab, tmp_path, base_repo, "1", app.format(base=rlab.base_image))
    base_2 = _build(rlab, tmp_path, base_repo, "2", app.format(base=rlab.base_image))
    old_1 = _build(rlab, tmp_path, repo, "1", app.format(base=rlab.base_image))
    old_2 = _build(rlab, tmp_path, repo, "2", app.format(base=rlab.base_image))
    last = _build(rlab, tmp_path, repo, "3", app.format(base=f"{base_repo}:1"))
    # another tenant: OCI labels only (any tool sets them), tagged in the same repository;
    # and one with no label at all
    oci_only = _tenant(
        rlab,
        f"{repo}:tenant",
        f"FROM {rlab.base_image}\nCOPY f /f\nCOPY f /g\n",  # untagged cache, OCI-labelled
        {"org.opencontainers.image.created": "2020-01-01T00:00:00Z"},
    )
    unlabelled = _tenant(rlab, f"{rlab.url}/test/other-{suffix}:1", "FROM scratch\nCOPY f /f\n", {})
    # and an untagged one with OCI labels: only gpuops' own label makes an image ours
    _tenant(rlab, None, "FROM scratch\nCOPY f /h\n", {"org.opencontainers.image.created": "2021"})
    used = rlab.docker.containers.create(f"{repo}:1", ["true"])  # a container uses build 1
    return Scene(repo, base_repo, base_1, base_2, old_1, old_2, last, oci_only, unlabelled, used)


def _dry_runs(
    rlab: RegistryLab, env: dict[str, str], tmp_path: Path, sc: Scene, before: dict[str, Any]
) -> str:
    """What the dry runs say (and that they remove nothing); the lab base's image id."""
    base_repo, base_1, base_2, old_1, old_2, last = (
        sc.base_repo,
        sc.base_1,
        sc.base_2,
        sc.old_1,
        sc.old_2,
        sc.last,
    )
    oci_only, unlabelled = sc.oci_only, sc.unlabelled
    # the default min-age protects what a build may still be using: everything here is new
    young = gpuops(["image", "clean", "--dry-run"], env, tmp_path)
    assert young.returncode == 0, young.error
    mine = {old_1, old_2, last, base_1, base_2}
    short = {i: sc.short(i) for i in [*mine, oci_only, unlabelled]}
    assert not {short[i] for i in mine} & {e["id"] for e in young.result["removed"]}
    assert {e["reason"] for e in young.result["kept"] if e["id"] == short[old_2]} == {
        "younger than 3600 s: a build may be using it"
    }

    # daemon-wide, as a dry run only (this daemon serves the whole session): the tenants'
    # images would go, the last builds and their bases would not
    wide = gpuops(["image", "clean", "--dry-run", "--daemon-wide", "--min-age", "0"], env, tmp_path)
    assert wide.returncode == 0, wide.error
    would = {e["id"] for e in wide.result["removed"]}
    assert {short[oci_only], short[unlabelled], short[old_2]} <= would
    assert not {short[last], short[base_1], short[base_2]} & would
    lab_base = next(i for i, v in before.items() if rlab.base_image in (v["RepoTags"] or []))
    assert lab_base.removeprefix("sha256:")[:12] not in would  # the base of the last builds
    assert f"{base_repo}:1" in wide.result["bases"] and rlab.base_image in wide.result["bases"]
    assert _images(rlab).keys() == before.keys()  # a dry run removes nothing

    return lab_base


def test_clean_prunes_old_gpuops_builds_and_keeps_bases_tenants_and_images_in_use(
    registry_lab: RegistryLab, tmp_path: Path
) -> None:
    rlab = registry_lab
    env = cli_env(rlab, tmp_path / "home")
    sc = _scene(rlab, tmp_path)
    repo, base_repo = sc.repo, sc.base_repo
    base_1, base_2, old_1, old_2, last = sc.base_1, sc.base_2, sc.old_1, sc.old_2, sc.last
    oci_only, unlabelled = sc.oci_only, sc.unlabelled
    before = _images(rlab)
    assert before[old_2]["Labels"][REPOSITORY_LABEL] == repo
    assert oci_only in before and unlabelled in before

    lab_base = _dry_runs(rlab, env, tmp_path, sc, before)
    short = {i: sc.short(i) for i in [old_1, old_2, last, base_1, base_2, oci_only, unlabelled]}

    run = gpuops(["image", "clean", "--min-age", "0", "--keep-last", "1"], env, tmp_path)
    after = _images(rlab)
    # build 1 is in use: refused, never forced; the rest went
    assert run.returncode == 1, run.doc
    assert run.doc["verdict"] == "partial"
    result = run.result
    assert [e["id"] for e in result["refused"]] == [short[old_1]]
    assert old_1 in after
    assert old_2 not in after and f"{repo}:2" not in str(after)
    assert {last, base_1, base_2} <= after.keys()
    assert result["last_builds"].keys() >= {repo, base_repo}
    # no image without gpuops' label went, whoever built it (the session's others included)
    foreign = {i for i, v in before.items() if not (v.get("Labels") or {}).get(REPOSITORY_LABEL)}
    assert foreign <= after.keys()
    assert {oci_only, unlabelled} <= foreign
    assert f"{repo}:tenant" in after[oci_only]["RepoTags"]
    # the last build's parent chain (its build cache) stays, down to its base and the lab's
    chain, current = [], last
    while current:
        chain.append(current)
        parent = after[current].get("ParentId") or ""
        current = parent if not parent or ":" in parent else f"sha256:{parent}"
    assert base_1 in chain and lab_base in chain
    assert len(chain) > 3  # intermediate images (Podman's build cache) between them
    base_kept = {e["reason"] for e in result["kept"] if e["id"] == short[base_1]}
    assert base_kept == {f"the base image {base_repo}:1 of a last build"}
    # the space freed: the daemon's figures before and after, and exactly what went
    space = result["space"]
    assert space["freed_bytes"] == space["before_bytes"] - space["after_bytes"] > 0
    assert space["freed_bytes"] == sum(e["own_bytes"] for e in result["removed"])
    assert "LayersSize" in space["measured_by"]

    sc.used.remove()  # the container goes: build 1 can go too
    again = gpuops(["image", "clean", "--min-age", "0"], env, tmp_path)
    assert again.returncode == 0, again.error
    assert old_1 not in _images(rlab)
    assert short[old_1] in {e["id"] for e in again.result["removed"]}
    assert {last, base_1, oci_only, unlabelled} <= _images(rlab).keys()
