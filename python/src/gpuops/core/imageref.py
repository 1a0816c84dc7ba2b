"""Image references, tags and digests: parsing and validation, pure.

A reference is ``registry/repository[:tag][@digest]`` in the grammar of the distribution
project's ``reference`` package (what Docker, Podman and every OCI registry accept), with one
difference on purpose: the registry host is never implied. ``team/app:1`` would mean Docker Hub
to Docker; on an air-gapped GPU cluster (S-5) that is always a mistake, so it is an input error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from gpuops.core.values import shown
from gpuops.errors import InvalidInput

_HOST_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = re.compile(rf"^(?:{_HOST_PART}(?:\.{_HOST_PART})*|\[[0-9a-fA-F:]+\])(?::[0-9]{{1,5}})?$")
_PATH_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^(?:sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$")
_GIT_REVISION = re.compile(r"^[0-9a-f]{7,64}$")
_MAX_NAME = 255
#: Characters of a git revision that go into its tag (``git-0123456789ab``).
GIT_TAG_CHARS = 12


@dataclass(frozen=True)
class ImageRef:
    """``registry/repository`` with a tag, a digest, both or neither."""

    registry: str  # host[:port]
    repository: str  # e.g. team/infer
    tag: str | None = None
    digest: str | None = None

    @property
    def name(self) -> str:
        """``registry/repository``: what ``docker push`` calls the repository."""
        return f"{self.registry}/{self.repository}"

    @property
    def reference(self) -> str:
        """What the registry API addresses: the digest when there is one, else the tag."""
        if self.digest:
            return self.digest
        if self.tag:
            return self.tag
        raise InvalidInput(f"image {self.name} has neither a tag nor a digest")

    def with_tag(self, tag: str) -> ImageRef:
        return replace(self, tag=check_tag(tag), digest=None)

    def with_digest(self, digest: str) -> ImageRef:
        return replace(self, tag=None, digest=check_digest(digest))

    def same_repository(self, other: ImageRef) -> bool:
        return (self.registry, self.repository) == (other.registry, other.repository)

    def __str__(self) -> str:
        text = self.name
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def check_tag(value: str, what: str = "tag") -> str:
    """A tag: letters, digits, ``_``, ``.``, ``-``; not starting with ``.`` or ``-``; <= 128."""
    if not isinstance(value, str) or not _TAG.fullmatch(value):
        raise InvalidInput(
            f"{what} {shown(value)} is not a valid tag: up to 128 letters, digits, '_', '.' "
            "or '-', not starting with '.' or '-'"
        )
    return value


def check_digest(value: str, what: str = "digest") -> str:
    if not isinstance(value, str) or not _DIGEST.fullmatch(value):
        raise InvalidInput(
            f"{what} {shown(value)} is not a digest: write sha256: and 64 lowercase hex digits"
        )
    return value


def check_git_revision(value: str, what: str = "git revision") -> str:
    """A commit id: 7 to 64 lowercase hex digits (a short or full SHA-1 or SHA-256 id)."""
    if not isinstance(value, str) or not _GIT_REVISION.fullmatch(value):
        raise InvalidInput(
            f"{what} {shown(value)} is not a commit id: 7 to 64 lowercase hex digits "
            "(git rev-parse HEAD)"
        )
    return value


def _split_registry(text: str, what: str) -> tuple[str, str]:
    first, slash, rest = text.partition("/")
    is_host = bool(slash) and (
        "." in first or ":" in first or first == "localhost" or first.startswith("[")
    )
    if not is_host:
        raise InvalidInput(
            f"{what} {shown(text)} names no registry: write the registry host first, "
            "e.g. harbor.example.com/team/app:tag",
            hint="images are never looked up on Docker Hub implicitly (air-gapped clusters)",
        )
    if not _HOST.fullmatch(first):
        raise InvalidInput(f"{what} {shown(text)}: {shown(first)} is not a registry host[:port]")
    port = first.rsplit(":", 1)[1] if ":" in first and not first.endswith("]") else None
    if port is not None and not 0 < int(port) < 65536:
        raise InvalidInput(f"{what} {shown(text)}: port {port} is out of range")
    return first, rest


def parse_reference(
    value: str,
    what: str = "image reference",
    *,
    tag_required: bool = False,
    allow_digest: bool = True,
    allow_tag: bool = True,
) -> ImageRef:
    """``registry/repo[:tag][@digest]`` -> :class:`ImageRef`, or InvalidInput naming ``what``."""
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{what} must be a non-empty string")
    if any(c.isspace() for c in value):
        raise InvalidInput(f"{what} {shown(value)} contains white space")
    name, at, digest = value.partition("@")
    if at:
        if not allow_digest:
            raise InvalidInput(f"{what} {shown(value)} must not carry a digest (@sha256:...)")
        check_digest(digest, f"{what} {shown(value)}: digest")
    registry, rest = _split_registry(name, what)
    tag = None
    last_slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > last_slash:
        rest, tag = rest[:colon], rest[colon + 1 :]
        if not allow_tag:
            raise InvalidInput(
                f"{what} {shown(value)} must be a repository without a tag",
                hint="give tags separately",
            )
        check_tag(tag, f"{what} {shown(value)}: tag")
    if not rest:
        raise InvalidInput(f"{what} {shown(value)} names no repository after the registry host")
    for part in rest.split("/"):
        if not _PATH_COMPONENT.fullmatch(part):
            raise InvalidInput(
                f"{what} {shown(value)}: repository path component {shown(part)} is not valid: "
                "lowercase letters and digits, separated by '.', '_', '__' or '-'"
            )
    if len(registry) + 1 + len(rest) > _MAX_NAME:
        raise InvalidInput(f"{what} {shown(value)}: the name is longer than {_MAX_NAME} characters")
    if tag_required and tag is None and not at:
        raise InvalidInput(f"{what} {shown(value)} needs a tag (:tag) or a digest (@sha256:...)")
    return ImageRef(registry, rest, tag, digest or None)


def parse_repository(value: str, what: str = "image") -> ImageRef:
    """A repository without tag or digest: ``registry/team/app``."""
    return parse_reference(value, what, allow_digest=False, allow_tag=False)


def parse_target(value: str, source: ImageRef, what: str = "target") -> ImageRef:
    """The target of a tag copy: a bare tag (same repository as ``source``) or a full
    ``registry/repo:tag`` in the same registry."""
    if "/" not in value:
        return source.with_tag(check_tag(value, what))
    target = parse_reference(value, what, allow_digest=False)
    if target.tag is None:
        raise InvalidInput(f"{what} {shown(value)} needs a tag (:tag)")
    if target.registry != source.registry:
        raise InvalidInput(
            f"{what} {shown(value)} is in registry {target.registry}, the source in "
            f"{source.registry}: a tag is copied within one registry only",
            hint="copying between registries moves layers; use skopeo copy or a replication rule",
        )
    return target


def build_tags(
    build_number: str | None, git_revision: str | None, extra: Iterable[str] = ()
) -> list[str]:
    """Tags of a build (S-19): the build number, ``git-<first 12 of the revision>``, then the
    extra tags; each once, in that order."""
    tags: list[str] = []
    if build_number:
        tags.append(check_tag(build_number, "build number"))
    if git_revision:
        tags.append(f"git-{check_git_revision(git_revision)[:GIT_TAG_CHARS]}")
    for tag in extra:
        tags.append(check_tag(tag))
    out: list[str] = []
    for tag in tags:
        if tag not in out:
            out.append(tag)
    return out


def parse_platform(value: str, what: str = "platform") -> str:
    """``os/arch[/variant]``, e.g. ``linux/amd64`` or ``linux/arm64/v8``."""
    parts = value.split("/") if isinstance(value, str) else []
    if not 2 <= len(parts) <= 3 or not all(re.fullmatch(r"[a-z0-9_]+", p) for p in parts):
        raise InvalidInput(f"{what} {shown(value)} is not os/arch[/variant] (e.g. linux/amd64)")
    return value


def platform_parts(value: str) -> tuple[str, str, str]:
    parts = parse_platform(value).split("/")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else ""


def parse_key_values(
    value: str | dict[str, object] | Sequence[str] | None, what: str
) -> dict[str, str]:
    """``K=V,K2=V2`` text, a JSON object, or a list of ``K=V`` strings -> dict (build args,
    labels). Keys are non-empty without ``=``, white space or control characters."""
    if value is None or value == "":
        return {}
    items: list[tuple[str, object]] = []
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except RecursionError:
            raise InvalidInput(f"{what}: nested too deeply") from None
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{what}: not valid JSON: {exc.msg} at column {exc.colno}") from None
        if not isinstance(value, dict):
            raise InvalidInput(f"{what}: the JSON must be an object")
    if isinstance(value, dict):
        items = list(value.items())
    else:
        parts = value.split(",") if isinstance(value, str) else list(value)
        for part in parts:
            if not isinstance(part, str):
                raise InvalidInput(f"{what}: {shown(part)} is not a KEY=VALUE string")
            key, eq, val = part.partition("=")
            if not eq:
                raise InvalidInput(f"{what}: {shown(part)} is not KEY=VALUE")
            items.append((key.strip(" "), val))
    out: dict[str, str] = {}
    for key, raw in items:
        if not key or re.search(r"[\s=\x00-\x1f\x7f]", key):
            raise InvalidInput(f"{what}: key {shown(key)} must be non-empty, without '=' or spaces")
        if not isinstance(raw, str):
            raise InvalidInput(
                f"{what}: the value of {shown(key)} must be a string, not {shown(raw)}"
            )
        val = raw
        if re.search(r"[\x00-\x1f\x7f]", val):
            raise InvalidInput(f"{what}: the value of {shown(key)} contains a control character")
        if key in out and out[key] != val:
            raise InvalidInput(f"{what}: {shown(key)} is given twice")
        out[key] = val
    return out
