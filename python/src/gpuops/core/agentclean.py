"""What ``gpuops image clean`` removes from a build agent's image store, and why it keeps the
rest. Pure: the use case lists the daemon's images, this module decides, the use case removes.

**Ours** is an image carrying :data:`~gpuops.core.imagerecord.REPOSITORY_LABEL`, the label every
``gpuops image build`` sets (value: the repository built, ``registry/team/app``). Podman gives
a build's labels to its intermediate images too, so the build cache of our builds is ours as
well. An image without that label (another tenant's, a base image, one with only OCI labels:
any tool can set those) is never removed unless ``daemon_wide``.

**The last builds** of a repository are its ``keep_last`` newest *complete* builds: images of
ours that carry a tag of that repository, grouped by their
``org.opencontainers.image.created`` label (one value per build), newest first. Untagged
leftovers (a failed or cancelled build, layers of a build that was removed) are not builds.

**Kept**, in every mode: the images of the last builds; the base images they name
(``org.opencontainers.image.base.name``: a tag or a digest reference); every image younger than
``min_age_s`` (a build may be running on it); and every ancestor (``ParentId``) of any image
that stays (kept, or not ours), so a removal never needs force and never takes a layer chain
from under an image that stays. In the labelled mode also an image of ours that carries
a tag of another repository (someone else tagged it: not ours to untag).

**Removed**: labelled mode: our images not kept. ``daemon_wide``: every image not kept
(another tenant's too, as ``docker image prune --all`` would, but the last builds and their bases
stay). Children come before their parents, so each removal is a plain (unforced) one; the daemon
still refuses an image a container uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from gpuops.core.imagerecord import OCI_BASE_NAME, OCI_CREATED, REPOSITORY_LABEL

#: Default of ``--keep-last``: the newest build of each repository stays (its cache and base
#: serve the next build on this agent).
KEEP_LAST = 1
#: Default of ``--min-age``: longer than ``image build``'s default timeout (1800 s), so an image
#: a build on this daemon is still making or pushing is never taken from under it.
MIN_AGE_S = 3600


@dataclass(frozen=True)
class LocalImage:
    """One image as the daemon lists it (``GET /images/json?all=1``)."""

    id: str  # sha256:<hex>
    tags: tuple[str, ...] = ()  # registry/repo:tag (the daemon's "<none>:<none>" dropped)
    digests: tuple[str, ...] = ()  # registry/repo@sha256:... (RepoDigests)
    labels: Mapping[str, str] = field(default_factory=dict)
    parent: str | None = None  # ParentId, when the daemon records one
    created: float = 0.0  # when the daemon made (or pulled) it: seconds since the epoch
    size: int = 0  # the daemon's Size: the image with its parents' layers

    @property
    def short(self) -> str:
        return self.id.removeprefix("sha256:")[:12]

    @property
    def repository(self) -> str | None:
        """The repository a gpuops build made it for; None: not ours."""
        return self.labels.get(REPOSITORY_LABEL) or None


class CleanEntryDocument(TypedDict):
    """One image ``image clean`` removed (or would remove), or one of ours it kept."""

    id: str  # 12 hex digits
    tags: list[str]
    repository: str | None  # the gpuops repository label; None: not a gpuops build
    own_bytes: int  # what the image adds to its parent (its Size less the parent's)
    reason: str


@dataclass(frozen=True)
class Entry:
    image: LocalImage
    own_bytes: int
    reason: str

    def to_dict(self) -> CleanEntryDocument:
        return {
            "id": self.image.short,
            "tags": list(self.image.tags),
            "repository": self.image.repository,
            "own_bytes": self.own_bytes,
            "reason": self.reason,
        }


@dataclass
class Plan:
    remove: list[Entry]  # children before parents
    keep: list[Entry]  # our images kept, and (daemon-wide) every image kept
    last_builds: dict[str, list[str]]  # repository -> created labels of the builds kept
    bases: list[str]  # base image references the last builds name
    others: int  # images not ours, left alone (labelled mode)


def repository_of(ref: str) -> str:
    """``registry:5000/team/app:tag`` -> ``registry:5000/team/app``."""
    name, _, tag = ref.rpartition(":")
    return name if name and "/" not in tag else ref


def own_bytes(image: LocalImage, by_id: Mapping[str, LocalImage]) -> int:
    """What ``image`` adds on top of its parent: its Size less the parent's (all of it
    without a known parent)."""
    parent = by_id.get(image.parent or "")
    return max(0, image.size - parent.size) if parent else image.size


def store_bytes(images: Iterable[LocalImage]) -> int:
    """The image store's size by the daemon's figures: each image's own bytes summed (what
    Docker's ``LayersSize`` counts; Podman's compat API reports that as 0)."""
    listed = list(images)
    by_id = {i.id: i for i in listed}
    return sum(own_bytes(i, by_id) for i in listed)


def _ancestors(start: Iterable[str], by_id: Mapping[str, LocalImage]) -> set[str]:
    out: set[str] = set()
    todo = list(start)
    while todo:
        current = todo.pop()
        if current in out or current not in by_id:
            continue
        out.add(current)
        parent = by_id[current].parent
        if parent:
            todo.append(parent)
    return out


def _depth(image: LocalImage, by_id: Mapping[str, LocalImage]) -> int:
    depth, seen, current = 0, set(), image.parent
    while current and current in by_id and current not in seen:
        seen.add(current)
        depth += 1
        current = by_id[current].parent
    return depth


def _named(ref: str, images: Sequence[LocalImage]) -> list[LocalImage]:
    """The images a base reference names: by tag or by digest."""
    return [i for i in images if ref in i.tags or ref in i.digests]


def plan(
    images: Sequence[LocalImage],
    *,
    now: float,
    keep_last: int = KEEP_LAST,
    min_age_s: float = MIN_AGE_S,
    daemon_wide: bool = False,
) -> Plan:
    """Decide; see the module docstring."""
    by_id = {i.id: i for i in images}
    reasons: dict[str, str] = {}  # image id -> why it is kept

    builds: dict[str, dict[str, list[LocalImage]]] = {}  # repository -> created -> images
    for image in images:
        repo = image.repository
        if repo and any(repository_of(t) == repo for t in image.tags):
            builds.setdefault(repo, {}).setdefault(image.labels.get(OCI_CREATED, ""), []).append(
                image
            )
    last_builds: dict[str, list[str]] = {}
    bases: list[str] = []
    for repo in sorted(builds):
        newest = sorted(builds[repo], reverse=True)[:keep_last]
        last_builds[repo] = newest
        for created in newest:
            for image in builds[repo][created]:
                reasons.setdefault(image.id, f"one of the last {keep_last} build(s) of {repo}")
                base = image.labels.get(OCI_BASE_NAME)
                if base and base not in bases:
                    bases.append(base)
    for base in bases:
        for image in _named(base, images):
            reasons.setdefault(image.id, f"the base image {base} of a last build")
    for image in images:
        if now - image.created < min_age_s:
            reasons.setdefault(image.id, f"younger than {min_age_s:.0f} s: a build may be using it")
        elif not daemon_wide and image.repository:
            foreign = [t for t in image.tags if repository_of(t) != image.repository]
            if foreign:
                reasons.setdefault(image.id, f"also tagged {foreign[0]} (not gpuops' tag)")
    # every parent of an image that stays, stays: of a kept image, and (labelled mode) of an
    # image not ours, such as another tenant's built FROM one of our builds. Podman removes an
    # untagged parent even while a child lists it (measured in the lab), so this is the plan's
    # job, not the daemon's.
    candidates = [i for i in images if daemon_wide or i.repository]
    staying = [i.id for i in images if i.id in reasons or i not in candidates]
    for kept in staying:
        for ancestor in _ancestors([kept], by_id) - {kept}:
            reasons.setdefault(ancestor, f"a parent of {by_id[kept].short}, which stays")

    remove: list[Entry] = []
    keep: list[Entry] = []
    others = 0
    for image in images:
        if not daemon_wide and not image.repository:
            others += 1
            continue
        size = own_bytes(image, by_id)
        if image.id in reasons:
            keep.append(Entry(image, size, reasons[image.id]))
        elif image.repository:
            why = (
                "an older build of its repository"
                if any(repository_of(t) == image.repository for t in image.tags)
                else "build cache or leftovers of a gpuops build (untagged)"
            )
            remove.append(Entry(image, size, why))
        else:
            remove.append(Entry(image, size, "not gpuops' (daemon-wide prune)"))
    remove.sort(key=lambda e: (-_depth(e.image, by_id), e.image.id))
    keep.sort(key=lambda e: e.image.id)
    return Plan(remove, keep, last_builds, bases, others)
