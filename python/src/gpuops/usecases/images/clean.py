"""Use case ``image clean``: prune what gpuops' builds left on a build agent's daemon.

1. list every image of the daemon (intermediate ones too) and measure the store by the
   daemon's own figures (``GET /system/df``: ``LayersSize`` + ``BuilderSize``; Podman's compat
   API reports no ``LayersSize``, so there it is each listed image's Size less its parent's);
2. decide with :func:`gpuops.core.agentclean.plan` (ours = the label every ``image build``
   sets; the last builds of each repository, their bases, young images and every parent of
   what is kept stay);
3. remove children before parents, each untagged then removed, never forced (the daemon
   refuses an image a container uses: listed under ``refused``, exit 1); with ``daemon_wide``
   every image not kept goes, and the daemon's build cache prune runs (Docker's
   ``POST /build/prune``; Podman 4.3 has none: said so);
4. list and measure again: the space freed is before less after (a build running meanwhile on
   the same daemon makes it smaller).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from gpuops.adapters.builder import Builder
from gpuops.core import agentclean
from gpuops.core.agentclean import CleanEntryDocument, Entry, LocalImage
from gpuops.errors import InvalidInput
from gpuops.usecases.outcome import Outcome


@dataclass(frozen=True)
class CleanRequest:
    keep_last: int = agentclean.KEEP_LAST
    min_age_s: int = agentclean.MIN_AGE_S
    daemon_wide: bool = False
    dry_run: bool = False
    docker_host: str | None = None
    docker_api_version: str | None = None


class SpaceDocument(TypedDict):
    before_bytes: int
    after_bytes: int | None  # None: a dry run
    freed_bytes: int | None
    measured_by: str


class BuildCacheDocument(TypedDict):
    pruned: bool
    reclaimed_bytes: int | None
    note: str


class CleanDocument(TypedDict):
    """The ``result`` of ``gpuops image clean``."""

    daemon: str
    mode: str  # labelled | daemon-wide
    dry_run: bool
    keep_last: int
    min_age_s: int
    removed: list[CleanEntryDocument]  # what went (a dry run: what would go)
    refused: list[CleanEntryDocument]  # planned, but the daemon would not remove it
    kept: list[CleanEntryDocument]  # gpuops' images kept (daemon-wide: every image kept)
    last_builds: dict[str, list[str]]  # repository -> created labels of its builds kept
    bases: list[str]  # the base images those builds name, kept
    other_images: int  # not gpuops' builds, left alone (labelled mode)
    build_cache: BuildCacheDocument
    space: SpaceDocument
    message: str


@dataclass
class CleanReport:
    daemon: str
    request: CleanRequest
    plan: agentclean.Plan
    removed: list[Entry] = field(default_factory=list)
    refused: list[Entry] = field(default_factory=list)
    held: list[Entry] = field(default_factory=list)  # planned, but a parent of a refused one
    before: int = 0
    after: int | None = None
    measured_by: str = ""
    cache: BuildCacheDocument = field(
        default_factory=lambda: BuildCacheDocument(
            pruned=False, reclaimed_bytes=None, note="only with --daemon-wide"
        )
    )

    @property
    def freed(self) -> int | None:
        return None if self.after is None else self.before - self.after

    @property
    def message(self) -> str:
        if self.request.dry_run:
            return (
                f"would remove {len(self.removed)} image(s) "
                f"({sum(e.own_bytes for e in self.removed)} bytes by the daemon's figures); "
                "nothing removed (dry run)"
            )
        text = f"removed {len(self.removed)} image(s), freed {self.freed} bytes"
        if self.refused:
            text += f"; the daemon refused {len(self.refused)}"
        return text

    def to_dict(self) -> CleanDocument:
        return {
            "daemon": self.daemon,
            "mode": "daemon-wide" if self.request.daemon_wide else "labelled",
            "dry_run": self.request.dry_run,
            "keep_last": self.request.keep_last,
            "min_age_s": self.request.min_age_s,
            "removed": [e.to_dict() for e in self.removed],
            "refused": [e.to_dict() for e in self.refused],
            "kept": [e.to_dict() for e in [*self.plan.keep, *self.held]],
            "last_builds": self.plan.last_builds,
            "bases": self.plan.bases,
            "other_images": self.plan.others,
            "build_cache": self.cache,
            "space": {
                "before_bytes": self.before,
                "after_bytes": self.after,
                "freed_bytes": self.freed,
                "measured_by": self.measured_by,
            },
            "message": self.message,
        }


def local_image(item: dict[str, Any]) -> LocalImage:
    """One entry of ``GET /images/json`` (Docker's and Podman's compat form)."""
    tags = tuple(str(t) for t in item.get("RepoTags") or () if t and "<none>" not in str(t))
    digests = tuple(str(d) for d in item.get("RepoDigests") or () if d and "<none>" not in str(d))
    labels = {str(k): str(v) for k, v in (item.get("Labels") or {}).items()}
    parent = str(item.get("ParentId") or "")
    if parent and ":" not in parent:  # Podman lists the parent without "sha256:", Docker with
        parent = f"sha256:{parent}"
    return LocalImage(
        id=str(item.get("Id") or ""),
        tags=tags,
        digests=digests,
        labels=labels,
        parent=parent or None,
        created=float(item.get("Created") or 0),
        size=int(item.get("Size") or 0),
    )


def measure(builder: Builder, images: list[LocalImage]) -> tuple[int, str]:
    """The store's size by the daemon's own figures, and how it was measured."""
    df = builder.system_df()
    layers = int(df.get("LayersSize") or 0)
    cache = int(df.get("BuilderSize") or 0)
    if layers > 0:
        return layers + cache, "system df: LayersSize + BuilderSize"
    listed = agentclean.store_bytes(images)
    return listed + cache, (
        "images list: each image's Size less its parent's (the daemon's system df reports "
        "no LayersSize), + BuilderSize"
    )


def _check(request: CleanRequest) -> None:
    if request.keep_last < 0:
        raise InvalidInput("keep_last must be 0 or more", field="keep_last")
    if request.min_age_s < 0:
        raise InvalidInput("min_age must be 0 or more seconds", field="min_age")


def clean(
    request: CleanRequest,
    connect: Callable[[CleanRequest], Builder] | None = None,
    now: Callable[[], float] = time.time,
) -> Outcome[CleanReport]:
    """See the module docstring. Failed (exit 1) when the daemon refused a removal."""
    _check(request)
    builder = (connect or _connect)(request)
    try:
        images = [local_image(i) for i in builder.list_images()]
        before, how = measure(builder, images)
        decided = agentclean.plan(
            images,
            now=now(),
            keep_last=request.keep_last,
            min_age_s=request.min_age_s,
            daemon_wide=request.daemon_wide,
        )
        report = CleanReport(builder.address, request, decided, before=before, measured_by=how)
        if request.dry_run:
            report.removed = list(decided.remove)
            return Outcome(report)
        _remove(builder, report)
        if request.daemon_wide:
            reclaimed, why = builder.prune_build_cache()
            report.cache = {
                "pruned": why is None,
                "reclaimed_bytes": reclaimed,
                "note": why or "the daemon's build cache prune (POST /build/prune)",
            }
        else:
            report.cache["note"] = (
                "gpuops' build cache is its intermediate images (removed above); the daemon's "
                "own build cache (BuildKit) carries no labels: --daemon-wide prunes it"
            )
        after_images = [local_image(i) for i in builder.list_images()]
        report.after, _ = measure(builder, after_images)
    finally:
        builder.close()
    if report.refused:
        return Outcome.failed(
            report,
            f"the daemon at {report.daemon} refused to remove {len(report.refused)} image(s): "
            + "; ".join(f"{e.image.short} ({e.reason})" for e in report.refused[:5]),
            hint="an image a container uses stays (gpuops never forces a removal); "
            "remove the container, then run image clean again",
            partial=bool(report.removed),
        )
    return Outcome(report)


def _remove(builder: Builder, report: CleanReport) -> None:
    gone: set[str] = set()
    parents = {e.image.id: e.image.parent for e in report.plan.remove}
    held: dict[str, str] = {}  # image id -> the refused child it stays for
    for entry in report.plan.remove:
        image = entry.image
        if image.id in gone:  # the daemon took it with its child (Podman prunes parents)
            report.removed.append(entry)
            continue
        if image.id in held:  # Podman would remove it from under its refused child
            report.held.append(
                Entry(
                    image,
                    entry.own_bytes,
                    f"a parent of {held[image.id]}, which the daemon refused to remove",
                )
            )
            continue
        refusal: str | None = None
        for tag in image.tags:
            deleted, refusal = builder.remove_one(tag)
            gone.update(deleted)
            if refusal and refusal != "gone":
                break
            refusal = None
        if refusal is None and image.id not in gone:
            deleted, refusal = builder.remove_one(image.id)
            gone.update(deleted)
            if refusal == "gone":
                refusal = None
        if refusal is None:
            report.removed.append(entry)
            continue
        report.refused.append(Entry(image, entry.own_bytes, refusal))
        parent = image.parent
        while parent and parent not in held:
            held[parent] = image.id.removeprefix("sha256:")[:12]
            parent = parents.get(parent)


def _connect(request: CleanRequest) -> Builder:
    return Builder.connect(request.docker_host, request.docker_api_version)
