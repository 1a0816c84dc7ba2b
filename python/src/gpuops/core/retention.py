"""Registry retention for one repository: which manifests ``gpuops image prune`` deletes and
why it keeps every other one. Pure: the use case reads the registry and the clusters and
hands the facts in; this module only decides.

The unit is a manifest digest (a delete in the distribution API removes a manifest and every
tag that names it). A digest is deleted only when nothing keeps it:

- **protected** (always wins): a digest some environment's release history can roll back to,
  a digest running in a cluster, the digest of an environment's registry tag, a release in
  flight; the use case names each reason;
- a manifest an index that is kept lists (``child of``); the signature and attestation tags
  ``sha256-<hex>.sig`` / ``.att`` of a kept digest (``signature of``);
- the **policy**: one of the last ``keep_last`` images by build (the OCI created label, else
  the config's ``created``; a digest without either counts as newest, so it is kept), a tag
  that matches one of ``keep_tags`` (shell patterns, ``fnmatch``), an image younger than
  ``keep_younger_s``.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypedDict

from gpuops.errors import InvalidInput

#: Cosign's tags for a digest's signature and attestation (``sha256-<hex>.sig``).
ATTACHED_TAG = re.compile(r"sha256-([0-9a-f]{64})\.(sig|att)")
KEEP = "keep"
DELETE = "delete"


@dataclass(frozen=True)
class Policy:
    keep_last: int = 10
    keep_tags: tuple[str, ...] = ()
    keep_younger_s: int | None = None

    def __post_init__(self) -> None:
        if self.keep_last < 0:
            raise InvalidInput("keep-last must be 0 or more", field="keep_last")
        for pattern in self.keep_tags:
            if not pattern or len(pattern) > 128:
                raise InvalidInput(
                    f"keep-tags: {pattern!r} is not a tag pattern (1-128 characters)",
                    field="keep_tags",
                )


@dataclass(frozen=True)
class Image:
    """One manifest of the repository, as the registry lists it."""

    digest: str
    tags: tuple[str, ...]
    created: datetime | None = None
    children: tuple[str, ...] = ()  # the manifests an index lists


class DecisionDocument(TypedDict):
    digest: str
    tags: list[str]
    action: str  # keep | delete
    reasons: list[str]
    created: str | None


@dataclass
class Decision:
    digest: str
    tags: list[str]
    action: str
    reasons: list[str] = field(default_factory=list)
    created: datetime | None = None

    def to_dict(self) -> DecisionDocument:
        return {
            "digest": self.digest,
            "tags": self.tags,
            "action": self.action,
            "reasons": self.reasons,
            "created": self.created.strftime("%Y-%m-%dT%H:%M:%SZ") if self.created else None,
        }


def attached_subject(tag: str) -> str | None:
    """The digest a ``sha256-<hex>.sig`` / ``.att`` tag belongs to, else None."""
    match = ATTACHED_TAG.fullmatch(tag)
    return f"sha256:{match.group(1)}" if match else None


def decide(
    images: Sequence[Image],
    policy: Policy,
    protected: Mapping[str, Sequence[str]],
    now: datetime,
) -> list[Decision]:
    """A decision for every image, newest first; ``protected``: digest -> why."""
    by_digest = {i.digest: i for i in images}
    reasons: dict[str, list[str]] = {i.digest: [] for i in images}
    for digest, why in protected.items():
        if digest in reasons:
            reasons[digest].extend(f"protected: {w}" for w in why)

    def is_attached(image: Image) -> bool:
        return bool(image.tags) and all(attached_subject(t) for t in image.tags)

    # newest first; no date sorts as newest (never deleted for being old when we cannot tell)
    ordered = sorted(
        images,
        key=lambda i: (i.created is not None, -(i.created.timestamp()) if i.created else 0.0),
    )
    builds = [i for i in ordered if not is_attached(i) and not _is_child_only(i, images)]
    for rank, image in enumerate(builds):
        if rank < policy.keep_last:
            reasons[image.digest].append(f"one of the last {policy.keep_last} builds")
    for image in images:
        if image.created is None and not is_attached(image):
            reasons[image.digest].append("no creation date: cannot tell its age")
        elif (
            policy.keep_younger_s is not None
            and image.created is not None
            and (now - image.created).total_seconds() < policy.keep_younger_s
        ):
            reasons[image.digest].append(f"younger than {policy.keep_younger_s}s")
        for tag in image.tags:
            for pattern in policy.keep_tags:
                if fnmatch.fnmatchcase(tag, pattern):
                    reasons[image.digest].append(f"tag {tag} matches {pattern}")
    # a kept index keeps what it lists; repeat until nothing changes (indexes of indexes)
    changed = True
    while changed:
        changed = False
        for image in images:
            if not reasons[image.digest]:
                continue
            for child in image.children:
                why = f"listed by the kept index {image.digest[:19]}"
                if child in reasons and why not in reasons[child]:
                    reasons[child].append(why)
                    changed = True
    # signatures and attestations follow their subject; one whose subject this repository
    # does not list is kept (we cannot tell whether a protected digest needs it)
    for image in images:
        if not is_attached(image):
            continue
        for tag in image.tags:
            subject = attached_subject(tag)
            if subject not in by_digest:
                reasons[image.digest].append(f"{tag}: its subject is not listed here")
            elif reasons[subject]:
                reasons[image.digest].append(f"{tag}: signature/attestation of a kept digest")
    return [
        Decision(
            i.digest,
            sorted(i.tags),
            KEEP if reasons[i.digest] else DELETE,
            reasons[i.digest] or ["none of the policy's rules and nothing protected keeps it"],
            i.created,
        )
        for i in ordered
    ]


def _is_child_only(image: Image, images: Sequence[Image]) -> bool:
    """An untagged manifest an index lists is a platform of that index, not a build."""
    return not image.tags and any(image.digest in i.children for i in images)


def untagged_kept(
    images: Sequence[Image], protected: Mapping[str, object], decisions: Sequence[Decision]
) -> list[str]:
    """Digests that must stay but no tag holds (``garbage-collect --delete-untagged`` would
    delete them): protected digests the repository lists without a tag or does not list, and
    kept manifests without a tag (an index's platform manifests)."""
    tagged = {i.digest for i in images if i.tags}
    kept = {d.digest for d in decisions if d.action == KEEP and not d.tags}
    return sorted({d for d in protected if d not in tagged} | kept)
