"""The retention policy (core/retention.py): what prune deletes and why it keeps the rest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpuops.core.retention import (
    DELETE,
    KEEP,
    Image,
    Policy,
    decide,
    untagged_kept,
)
from gpuops.errors import InvalidInput

NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def d(n: int) -> str:
    return f"sha256:{n:064x}"


def img(n: int, *tags: str, age_days: float | None = None, children: tuple[str, ...] = ()) -> Image:
    created = None if age_days is None else NOW - timedelta(days=age_days)
    return Image(d(n), tags, created, children)


def actions(
    images: list[Image], policy: Policy, protected: dict[str, list[str]] | None = None
) -> dict[str, str]:
    return {x.digest: x.action for x in decide(images, policy, protected or {}, NOW)}


def test_keeps_the_last_n_by_creation_not_by_tag_order() -> None:
    images = [img(i, f"b{i}", age_days=100 - i) for i in range(1, 11)]
    got = actions(list(reversed(images)), Policy(keep_last=3))
    assert [k for k, v in got.items() if v == KEEP] == [d(10), d(9), d(8)]
    assert sum(v == DELETE for v in got.values()) == 7


def test_protected_patterns_and_age_keep_and_say_why() -> None:
    images = [
        img(1, "release-1", age_days=90),
        img(2, "b2", age_days=80),
        img(3, "b3", age_days=1),
        img(4, "b4", age_days=70),
        img(5, "b5", age_days=0.5),
    ]
    out = {
        x.digest: x
        for x in decide(
            images,
            Policy(1, ("release-*",), 2 * 86_400),
            {d(4): ["prod release #3 (succeeded)"]},
            NOW,
        )
    }
    assert out[d(1)].reasons == ["tag release-1 matches release-*"]
    assert out[d(2)].action == DELETE
    assert out[d(3)].reasons == ["younger than 172800s"]
    assert out[d(4)].reasons == ["protected: prod release #3 (succeeded)"]
    assert out[d(5)].reasons[0] == "one of the last 1 builds"


def test_a_kept_index_keeps_its_children_and_a_dropped_one_does_not() -> None:
    kept = img(1, "multi", age_days=50, children=(d(11), d(12)))
    dropped = img(2, "old-multi", age_days=60, children=(d(21),))
    images = [
        kept,
        dropped,
        img(11, age_days=50),
        img(12, age_days=50),
        img(21, age_days=60),
    ]
    got = actions(images, Policy(0), {d(1): ["staging registry tag"]})
    assert got == {d(1): KEEP, d(11): KEEP, d(12): KEEP, d(2): DELETE, d(21): DELETE}


def test_signature_and_attestation_tags_follow_their_subject() -> None:
    def sig(n: int, kind: str) -> Image:
        return img(
            100 + n + (50 if kind == "att" else 0),
            f"sha256-{n:064x}.{kind}",
            age_days=99,
        )

    images = [
        img(1, "b1", age_days=90),
        img(2, "b2", age_days=80),
        sig(1, "sig"),
        sig(1, "att"),
        sig(2, "sig"),
        sig(7, "sig"),
    ]
    got = actions(images, Policy(0), {d(1): ["prod running"]})
    assert got[d(101)] == KEEP and got[d(151)] == KEEP  # of the protected digest
    assert got[d(2)] == DELETE and got[d(102)] == DELETE  # of a deleted one
    assert got[d(107)] == KEEP  # subject not listed: cannot tell, kept


def test_no_creation_date_is_never_deleted_for_age() -> None:
    images = [img(1, "a", age_days=None), img(2, "b", age_days=5)]
    got = {x.digest: x for x in decide(images, Policy(0), {}, NOW)}
    assert got[d(1)].action == KEEP and "no creation date" in got[d(1)].reasons[0]
    assert got[d(2)].action == DELETE


def test_untagged_kept_and_policy_validation() -> None:
    index = img(4, "multi", age_days=1, children=(d(5),))
    images = [img(1, "a", age_days=1), img(2, age_days=1), index, img(5, age_days=1)]
    decisions = decide(images, Policy(10), {}, NOW)
    # protected but untagged or absent, and an index's kept platform manifest
    assert untagged_kept(images, {d(1): [], d(2): [], d(3): []}, decisions) == [d(2), d(3), d(5)]
    with pytest.raises(InvalidInput):
        Policy(keep_last=-1)
