"""The build record: what a build produced, as the build pipeline archives it and the release
pipeline reads it (S-20: the two are linked by an image tag; the record makes the tag's
digest, revision and CUDA needs explicit). Also the OCI labels a build sets. Pure.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from gpuops.logs import SECRET_ENV

RECORD_SCHEMA = "gpuops.image-build-record/v1"
#: The OCI annotation keys a build sets as labels (OCI image spec, annotations.md).
OCI_REVISION = "org.opencontainers.image.revision"
OCI_SOURCE = "org.opencontainers.image.source"
OCI_CREATED = "org.opencontainers.image.created"
OCI_VERSION = "org.opencontainers.image.version"
OCI_BASE_NAME = "org.opencontainers.image.base.name"
OCI_KEYS = (OCI_REVISION, OCI_SOURCE, OCI_CREATED, OCI_VERSION, OCI_BASE_NAME)
#: gpuops' own label on every image it builds: the repository built (``registry/team/app``).
#: ``gpuops image clean`` finds its builds by it (OCI labels alone prove nothing: any tool sets
#: them). Podman copies a build's labels to its intermediate images, the build cache.
REPOSITORY_LABEL = "io.gpuops.build.repository"


def rfc3339(now: datetime.datetime) -> str:
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def oci_labels(
    *,
    created: str,
    revision: str | None = None,
    source: str | None = None,
    version: str | None = None,
    base_name: str | None = None,
) -> dict[str, str]:
    """The OCI labels of a build; keys without a value are left out."""
    pairs = {
        OCI_CREATED: created,
        OCI_REVISION: revision,
        OCI_SOURCE: source,
        OCI_VERSION: version,
        OCI_BASE_NAME: base_name,
    }
    return {k: v for k, v in pairs.items() if v}


def shown_build_args(build_args: Mapping[str, str]) -> dict[str, str]:
    """Build args for the record: values of secret-looking names (``*TOKEN*``, ``*PASSWORD*``,
    ...) are replaced by ``****`` (a secret should be a build secret, not an argument)."""
    return {k: ("****" if SECRET_ENV.search(k) else v) for k, v in sorted(build_args.items())}


_STEP = re.compile(r"^(?:\[\d+/\d+\] )?STEP \d+/\d+: |^Step \d+/\d+ : ")
_CACHED = re.compile(r"^--> Using cache |^ ---> Using cache")


@dataclass
class StepCount:
    """Steps and cache hits counted from a build log (Podman and Docker's classic builder)."""

    steps: int = 0
    cached: int = 0

    def feed(self, line: str) -> None:
        if _STEP.search(line):
            self.steps += 1
        elif _CACHED.search(line):
            self.cached += 1


class BuildRecordDocument(TypedDict):
    """The build record as JSON: ``--record-file`` and the ``result`` of ``image build``."""

    schema: str  # RECORD_SCHEMA
    image: str
    reference: str
    tags: list[str]
    digest: str | None
    media_type: str | None
    pushed: bool
    git_revision: str | None
    build_url: str | None
    base_image: str
    cuda_version: str
    cuda_source: str
    size_bytes: int | None
    local_size_bytes: int | None
    image_id: str
    created: str
    labels: dict[str, str]
    build_args: dict[str, str]
    target: str | None
    platform: str | None
    steps: int
    cached_steps: int
    timings_s: dict[str, float]
    cleanup: dict[str, Any] | None
    summary: str  # one line for a build description (buildImage sets it)


@dataclass
class BuildRecord:
    """One build, as ``gpuops image build`` writes it (``--record-file``) and returns it."""

    image: str  # registry/repository
    tags: list[str]  # the full references pushed (or built, without push)
    digest: str | None  # the manifest digest the registry serves for them; None without push
    git_revision: str | None
    build_url: str | None
    base_image: str
    cuda_version: str  # "unknown" when the image declares none
    cuda_source: str
    size_bytes: int | None  # in the registry: config + layers, compressed; None without push
    local_size_bytes: int | None  # as the builder stores it, uncompressed
    image_id: str
    created: str
    labels: dict[str, str]
    build_args: dict[str, str]
    target: str | None = None
    platform: str | None = None
    media_type: str | None = None
    pushed: bool = False
    steps: int = 0
    cached_steps: int = 0
    timings_s: dict[str, float] = field(default_factory=dict)
    cleanup: dict[str, Any] | None = None

    @property
    def reference(self) -> str:
        """``registry/repository@digest`` (pinned) when pushed, else the first tag."""
        return f"{self.image}@{self.digest}" if self.digest else self.tags[0]

    @property
    def summary(self) -> str:
        """One line for a build description: first tag, digest, CUDA."""
        short = self.digest.split(":", 1)[1][:12] if self.digest else "not pushed"
        cuda = f"CUDA {self.cuda_version}" if self.cuda_version != "unknown" else "no CUDA"
        return f"{self.tags[0]} ({short}, {cuda})"

    def to_dict(self) -> BuildRecordDocument:
        return {
            "schema": RECORD_SCHEMA,
            "image": self.image,
            "reference": self.reference,
            "tags": list(self.tags),
            "digest": self.digest,
            "media_type": self.media_type,
            "pushed": self.pushed,
            "git_revision": self.git_revision,
            "build_url": self.build_url,
            "base_image": self.base_image,
            "cuda_version": self.cuda_version,
            "cuda_source": self.cuda_source,
            "size_bytes": self.size_bytes,
            "local_size_bytes": self.local_size_bytes,
            "image_id": self.image_id,
            "created": self.created,
            "labels": dict(sorted(self.labels.items())),
            "build_args": shown_build_args(self.build_args),
            "target": self.target,
            "platform": self.platform,
            "steps": self.steps,
            "cached_steps": self.cached_steps,
            "timings_s": dict(self.timings_s),
            "cleanup": self.cleanup,
            "summary": self.summary,
        }
