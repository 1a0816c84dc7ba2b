"""core/agentclean: what ``image clean`` removes and keeps, decided from a listed store (pure)."""

from __future__ import annotations

from gpuops.core.agentclean import LocalImage, plan, repository_of, store_bytes
from gpuops.core.imagerecord import OCI_BASE_NAME, OCI_CREATED, REPOSITORY_LABEL

NOW = 1_000_000.0
OLD = NOW - 86_400
REPO = "reg.example:5000/team/app"
BASE = "reg.example:5000/lab/cuda:12"


def _ours(
    id_: str,
    *,
    tag: str | None = None,
    created: str = "",
    parent: str | None = None,
    base: str | None = None,
    repo: str = REPO,
    size: int = 100,
    age: float = 86_400,
) -> LocalImage:
    labels = {REPOSITORY_LABEL: repo, OCI_CREATED: created}
    if base:
        labels[OCI_BASE_NAME] = base
    return LocalImage(
        id=f"sha256:{id_}",
        tags=(f"{repo}:{tag}",) if tag else (),
        labels=labels,
        parent=f"sha256:{parent}" if parent else None,
        created=NOW - age,
        size=size,
    )


def _other(id_: str, *, tags: tuple[str, ...] = (), parent: str | None = None) -> LocalImage:
    return LocalImage(
        id=f"sha256:{id_}",
        tags=tags,
        labels={OCI_CREATED: "2020-01-01T00:00:00Z"},
        parent=f"sha256:{parent}" if parent else None,
        created=OLD,
        size=50,
    )


def _ids(entries: list) -> list[str]:  # type: ignore[type-arg]
    return [e.image.id.removeprefix("sha256:") for e in entries]


def test_older_builds_and_their_cache_go_the_last_build_its_chain_and_base_stay() -> None:
    images = [
        _other("base", tags=(BASE,), parent=None),
        _ours("i1", created="2026-01-01T00:00:00Z", parent="base"),
        _ours("f1", tag="1", created="2026-01-01T00:00:00Z", parent="i1", base=BASE),
        _ours("i2", created="2026-01-02T00:00:00Z", parent="base"),
        _ours("f2", tag="2", created="2026-01-02T00:00:00Z", parent="i2", base=BASE),
        _ours("orphan", created="2026-01-03T00:00:00Z"),  # a failed build: not a build
    ]
    decided = plan(images, now=NOW, keep_last=1, min_age_s=60)
    assert _ids(decided.remove) == ["f1", "i1", "orphan"]  # children before parents
    assert set(_ids(decided.keep)) == {"f2", "i2"}
    assert decided.last_builds == {REPO: ["2026-01-02T00:00:00Z"]}
    assert decided.bases == [BASE]
    assert decided.others == 1  # the base: not ours, not even listed as kept
    two = plan(images, now=NOW, keep_last=2, min_age_s=60)
    assert _ids(two.remove) == ["orphan"]


def test_a_gpuops_built_base_of_a_last_build_stays_though_older_than_its_own_last() -> None:
    base_repo = "reg.example:5000/team/base"
    images = [
        _ours("b1", tag="1", created="2026-01-01T00:00:00Z", repo=base_repo),
        _ours("b2", tag="2", created="2026-01-02T00:00:00Z", repo=base_repo),
        _ours("f", tag="9", created="2026-01-03T00:00:00Z", base=f"{base_repo}:1"),
    ]
    decided = plan(images, now=NOW, keep_last=1, min_age_s=0)
    assert decided.remove == []
    reasons = {e.image.id: e.reason for e in decided.keep}
    assert reasons["sha256:b1"] == f"the base image {base_repo}:1 of a last build"
    # with no last build of the app, nothing names it: it goes
    alone = plan(images[:2], now=NOW, keep_last=1, min_age_s=0)
    assert _ids(alone.remove) == ["b1"]


def test_another_tenants_images_are_never_ours_and_keep_their_parents() -> None:
    images = [
        _ours("f1", tag="1", created="2026-01-01T00:00:00Z"),
        _ours("f2", tag="2", created="2026-01-02T00:00:00Z"),
        _other("t", tags=(f"{REPO}:tenant",), parent="f1"),  # FROM our old build, same repo
        _other("none"),
        _ours("shared", tag="3", created="2025-12-01T00:00:00Z", repo=REPO),
    ]
    # someone else tagged one of ours into another repository: not ours to untag
    images[4] = LocalImage(
        id="sha256:shared",
        tags=(f"{REPO}:3", "reg.example:5000/other/x:1"),
        labels=images[4].labels,
        created=OLD,
    )
    decided = plan(images, now=NOW, keep_last=1, min_age_s=0)
    assert _ids(decided.remove) == []
    reasons = {e.image.id.removeprefix("sha256:"): e.reason for e in decided.keep}
    assert reasons["f1"] == "a parent of t, which stays"
    assert reasons["shared"] == "also tagged reg.example:5000/other/x:1 (not gpuops' tag)"
    assert decided.others == 2


def test_young_images_stay_whatever_they_are() -> None:
    images = [
        _ours("f1", tag="1", created="2026-01-01T00:00:00Z", age=10),
        _ours("f2", tag="2", created="2026-01-02T00:00:00Z"),
        _ours("f3", tag="3", created="2026-01-03T00:00:00Z", age=10),
    ]
    decided = plan(images, now=NOW, keep_last=0, min_age_s=3600)
    assert _ids(decided.remove) == ["f2"]
    assert {e.reason for e in decided.keep} == {"younger than 3600 s: a build may be using it"}


def test_daemon_wide_removes_every_image_but_the_last_builds_and_their_bases() -> None:
    images = [
        _other("base", tags=(BASE,)),
        _other("unused-base", tags=("reg.example:5000/lab/cuda:11",)),
        _other("t", tags=("reg.example:5000/other/y:1",)),
        _ours("f1", tag="1", created="2026-01-01T00:00:00Z", parent="base", base=BASE),
        _ours("f2", tag="2", created="2026-01-02T00:00:00Z", parent="base", base=BASE),
    ]
    decided = plan(images, now=NOW, keep_last=1, min_age_s=0, daemon_wide=True)
    assert sorted(_ids(decided.remove)) == ["f1", "t", "unused-base"]
    assert sorted(_ids(decided.keep)) == ["base", "f2"]
    labelled = plan(images, now=NOW, keep_last=1, min_age_s=0)
    assert _ids(labelled.remove) == ["f1"]


def test_sizes_are_what_each_image_adds_to_its_parent() -> None:
    images = [
        LocalImage("sha256:a", size=1000),
        LocalImage("sha256:b", parent="sha256:a", size=1100),
        LocalImage("sha256:c", parent="sha256:gone", size=700),
    ]
    assert store_bytes(images) == 1000 + 100 + 700
    assert repository_of("reg:5000/team/app:1") == "reg:5000/team/app"
    assert repository_of("reg:5000/team/app") == "reg:5000/team/app"
