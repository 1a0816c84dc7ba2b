"""Use cases on images in a registry: resolve a reference, copy (move) a tag, inspect.

:func:`copy_tag` and :func:`inspect` are the building blocks other use cases call (build,
compat, promote); :func:`move_tag` and :func:`inspect_image` are ``image tag`` and
``image inspect``, returning an :class:`~gpuops.usecases.outcome.Outcome` (always ok: what
goes wrong raises).

A tag is moved by copying the manifest bytes the registry stores to the new tag (index or
single manifest, media type unchanged): no layer is read or written, so the cost does not grow
with the image. Within one repository that is one GET and one PUT; across repositories of one
registry, blobs the target lacks are mounted (the registry links them; no data moves). The new
tag is read back and must resolve to the source digest; if the registry stored anything else,
the previous target is put back.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired, TypedDict, cast

from gpuops.adapters.registry import (
    PASSWORD_ENV,
    USERNAME_ENV,
    BlobsMissing,
    Credentials,
    Manifest,
    ManifestUnknown,
    Registry,
    RegistryConfig,
)
from gpuops.core.imageref import ImageRef, platform_parts
from gpuops.core.values import json_kind, shown
from gpuops.errors import InvalidInput, OperationFailed
from gpuops.usecases.outcome import Outcome


@dataclass(frozen=True)
class RegistryAccess:
    """How a use case reaches registries: TLS or plain HTTP, a CA file, and the names of the
    environment variables that hold the credentials (never the credentials themselves)."""

    plain_http: bool = False
    ca_file: str | None = None
    username_env: str = USERNAME_ENV
    password_env: str = PASSWORD_ENV
    timeout_s: float = 30.0

    def credentials(self) -> Credentials | None:
        return Credentials.from_env(self.username_env, self.password_env)

    def open(self, host: str) -> Registry:
        config = RegistryConfig(self.plain_http, self.ca_file, self.credentials(), self.timeout_s)
        return Registry(host, config)


def _manifest(reg: Registry, ref: ImageRef, what: str, field_name: str | None) -> Manifest:
    try:
        return reg.get_manifest(ref.repository, ref.reference)
    except ManifestUnknown:
        raise InvalidInput(
            f"{what} {ref} does not exist in the registry",
            hint="check the tag (or digest) and the repository",
            field=field_name,
        ) from None


def resolve(ref: ImageRef, access: RegistryAccess | None = None) -> str:
    """The manifest digest ``ref`` names in its registry (a digest reference is checked to
    exist). InvalidInput when it does not exist."""
    with (access or RegistryAccess()).open(ref.registry) as reg:
        digest = reg.head_manifest(ref.repository, ref.reference)
    if digest is None:
        raise InvalidInput(f"image {ref} does not exist in the registry", field="image")
    return digest


class TagMoveDocument(TypedDict):
    """The ``result`` of ``gpuops image tag``."""

    source: str
    target: str
    digest: str
    media_type: str
    previous_digest: str | None  # None: the target tag is new
    changed: bool
    mounted_blobs: int
    copied_manifests: int
    requests: dict[str, int]  # HTTP method -> requests made
    elapsed_s: float
    message: str


@dataclass
class TagMove:
    """What a tag copy did."""

    source: str
    target: str
    digest: str
    media_type: str
    previous_digest: str | None  # what the target tag named before (None: it is new)
    mounted_blobs: int = 0
    copied_manifests: int = 0  # an index's child manifests put into another repository
    requests: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def changed(self) -> bool:
        return self.previous_digest != self.digest

    @property
    def message(self) -> str:
        if not self.changed:
            return f"{self.target} already names {self.digest}: nothing to do"
        was = f" (was {self.previous_digest})" if self.previous_digest else " (new tag)"
        return f"{self.target} -> {self.digest}{was}"

    def to_dict(self) -> TagMoveDocument:
        return {
            "source": self.source,
            "target": self.target,
            "digest": self.digest,
            "media_type": self.media_type,
            "previous_digest": self.previous_digest,
            "changed": self.changed,
            "mounted_blobs": self.mounted_blobs,
            "copied_manifests": self.copied_manifests,
            "requests": dict(sorted(self.requests.items())),
            "elapsed_s": round(self.elapsed_s, 4),
            "message": self.message,
        }


def _make_present(reg: Registry, manifest: Manifest, src: str, dst: str, move: TagMove) -> None:
    """Give repository ``dst`` what ``manifest`` refers to, from ``src``, without moving data:
    child manifests of an index are put by digest, blobs are mounted."""
    for child in manifest.children():
        digest = str(child.get("digest"))
        if reg.head_manifest(dst, digest) == digest:
            continue
        sub = reg.get_manifest(src, digest)
        _make_present(reg, sub, src, dst, move)
        reg.put_manifest(dst, digest, sub)
        move.copied_manifests += 1
    for blob in manifest.blobs():
        digest = str(blob.get("digest"))
        if reg.blob_exists(dst, digest):
            continue
        if not reg.mount_blob(dst, digest, src):
            raise OperationFailed(
                f"the registry {reg.host} would not mount blob {digest[:19]} from {src} into "
                f"{dst}; no tag was moved",
                hint="a tag copy never uploads layers: move the tag within one repository, or "
                "grant the account pull on the source repository",
            )
        move.mounted_blobs += 1


def copy_tag(src: ImageRef, dst: ImageRef, access: RegistryAccess | None = None) -> TagMove:
    """Point ``dst`` (a tag, same registry) at the manifest ``src`` names; verified by reading
    ``dst`` back. Nothing is changed when any step before the final PUT fails."""
    if dst.tag is None or dst.digest is not None:
        raise InvalidInput(f"target {dst} must be a tag", field="target")
    if src.registry != dst.registry:
        raise InvalidInput(
            f"target {dst} is not in the registry of {src}: copies stay within one registry",
            field="target",
        )
    started = time.perf_counter()
    with (access or RegistryAccess()).open(src.registry) as reg:
        manifest = _manifest(reg, src, "source", "source")
        move = TagMove(
            str(src),
            str(dst),
            manifest.digest,
            manifest.media_type,
            reg.head_manifest(dst.repository, dst.tag),
        )
        if move.changed:  # else the target names the digest already (just read): nothing to do
            _put_verified(reg, manifest, src, dst, move)
        move.requests = dict(reg.requests)
    move.elapsed_s = time.perf_counter() - started
    return move


def _put_verified(
    reg: Registry, manifest: Manifest, src: ImageRef, dst: ImageRef, move: TagMove
) -> None:
    assert dst.tag is not None  # noqa: S101 - checked by copy_tag
    try:
        stored = reg.put_manifest(dst.repository, dst.tag, manifest)
    except BlobsMissing:
        if src.same_repository(dst):
            raise
        _make_present(reg, manifest, src.repository, dst.repository, move)
        stored = reg.put_manifest(dst.repository, dst.tag, manifest)
    resolved = reg.head_manifest(dst.repository, dst.tag)
    if stored == manifest.digest and resolved == manifest.digest:
        return
    restored = ""
    if move.previous_digest is not None:
        previous = reg.get_manifest(dst.repository, move.previous_digest)
        reg.put_manifest(dst.repository, dst.tag, previous)
        restored = f"; {dst} was put back to {move.previous_digest}"
    raise OperationFailed(
        f"digest mismatch after copying {src} to {dst}: expected {manifest.digest}, the registry "
        f"stored {stored} and resolves {resolved}{restored}",
        hint="the registry changed the manifest (conversion?); check its configuration",
    )


class PlatformDocument(TypedDict):
    """One image of an index: its platform, and its digest and size as the index gives them."""

    platform: str  # os/architecture[/variant]
    digest: Any
    size: Any


class ImageInfoDocument(TypedDict):
    """The ``result`` of ``gpuops image inspect``."""

    reference: str
    digest: str
    media_type: str
    platform: str | None
    platforms: list[Annotated[dict[str, Any], PlatformDocument]]  # an index's images
    manifest_digest: str
    config_digest: str
    labels: dict[str, str]
    cuda_version: str  # a version, "unknown" or "unreadable"
    cuda_source: str
    cuda_problem: NotRequired[str]  # why the declared CUDA version cannot be read
    size_bytes: int
    layers: int
    created: Annotated[Any, {"description": "the config's creation time, as it holds it"}]


@dataclass
class ImageInfo:
    """An image as its registry serves it."""

    reference: str
    digest: str
    media_type: str
    platform: str | None  # the platform described (an index's chosen child), else the config's
    platforms: list[dict[str, Any]]  # an index's children: platform, digest, size
    manifest_digest: str  # the image manifest described (the child, for an index)
    config_digest: str
    labels: dict[str, str]
    env: list[str]
    cuda_version: str  # "unknown" when none is declared, "unreadable" when it cannot be read
    cuda_source: str
    size_bytes: int  # config + layers as stored (compressed)
    layers: int
    created: str | None
    cuda_problem: str = ""  # why a declared CUDA version cannot be read (the gate refuses it)

    def to_dict(self) -> ImageInfoDocument:
        doc = {
            "reference": self.reference,
            "digest": self.digest,
            "media_type": self.media_type,
            "platform": self.platform,
            "platforms": self.platforms,
            "manifest_digest": self.manifest_digest,
            "config_digest": self.config_digest,
            "labels": dict(sorted(self.labels.items())),
            "cuda_version": self.cuda_version,
            "cuda_source": self.cuda_source,
            **({"cuda_problem": self.cuda_problem} if self.cuda_problem else {}),
            "size_bytes": self.size_bytes,
            "layers": self.layers,
            "created": self.created,
        }
        return cast("ImageInfoDocument", doc)  # cuda_problem in its place, when there is one


def _platform_of(desc: dict[str, Any]) -> str:
    p = desc.get("platform") or {}
    parts = [str(p.get("os", "?")), str(p.get("architecture", "?"))]
    if p.get("variant"):
        parts.append(str(p["variant"]))
    return "/".join(parts)


def _pick(children: list[dict[str, Any]], platform: str) -> dict[str, Any]:
    os_, arch, variant = platform_parts(platform)
    for child in children:
        p = child.get("platform") or {}
        if (
            p.get("os") == os_
            and p.get("architecture") == arch
            and (not variant or p.get("variant") == variant)
        ):
            return child
    offered = ", ".join(_platform_of(c) for c in children) or "none"
    raise InvalidInput(
        f"the image index offers no {platform} image (it has: {offered})", field="platform"
    )


def _config_labels_env(ref: ImageRef, config: Any) -> tuple[dict[str, Any], list[str]]:
    """The labels (values as the config holds them) and the environment of an image config,
    decoded strictly: what the registry holds that is not the format is an error naming it."""
    if not isinstance(config, dict):
        raise OperationFailed(f"the config of {ref} is a JSON {json_kind(config)}, not an object")
    inner = config.get("config")
    if inner is None:
        return {}, []
    if not isinstance(inner, dict):
        raise OperationFailed(f"the config of {ref}: 'config' is a JSON {json_kind(inner)}")
    labels, env = inner.get("Labels"), inner.get("Env")
    if labels is not None and not isinstance(labels, dict):
        raise OperationFailed(f"the config of {ref}: Labels is a JSON {json_kind(labels)}")
    if env is not None and not (isinstance(env, list) and all(isinstance(e, str) for e in env)):
        raise OperationFailed(f"the config of {ref}: Env is not a list of strings")
    return dict(labels or {}), list(env or [])


def inspect(
    ref: ImageRef, access: RegistryAccess | None = None, platform: str = "linux/amd64"
) -> ImageInfo:
    """Digest, labels, CUDA version, size and creation time of ``ref`` (a tag or a digest);
    for an index, of its ``platform`` image, with every platform listed."""
    with (access or RegistryAccess()).open(ref.registry) as reg:
        top = _manifest(reg, ref, "image", "image")
        manifest, platforms, chosen = top, [], None
        if top.is_index:
            children = top.children()
            platforms = [
                {"platform": _platform_of(c), "digest": c.get("digest"), "size": c.get("size")}
                for c in children
            ]
            chosen = _pick(children, platform)
            manifest = reg.get_manifest(ref.repository, str(chosen["digest"]))
        doc = manifest.doc()
        config_desc = doc.get("config") or {}
        config_digest = str(config_desc.get("digest") or "")
        try:
            config = json.loads(reg.get_blob(ref.repository, config_digest))
        except (ValueError, RecursionError):
            raise OperationFailed(f"the config of {ref} is not JSON") from None
    from gpuops.core.cuda import CUDA_LABEL, declared_cuda  # noqa: PLC0415 - `image tag` needs none

    raw_labels, env = _config_labels_env(ref, config)
    found = declared_cuda(raw_labels, env)
    # the CUDA label's value is the gate's to judge (exit 3 when unreadable); every other label
    # is a string, as the image config format says
    labels = {k: v for k, v in raw_labels.items() if isinstance(v, str)}
    odd = sorted(k for k, v in raw_labels.items() if not isinstance(v, str) and k != CUDA_LABEL)
    if odd:
        raise OperationFailed(
            f"the config of {ref}: label {shown(odd[0])} is not a string "
            f"({shown(raw_labels[odd[0]])})"
        )
    blobs = manifest.blobs()
    own = "/".join(str(config.get(k)) for k in ("os", "architecture") if config.get(k))
    return ImageInfo(
        reference=str(ref),
        digest=top.digest,
        media_type=top.media_type,
        platform=_platform_of(chosen) if chosen else (own or None),
        platforms=platforms,
        manifest_digest=manifest.digest,
        config_digest=config_digest,
        labels=labels,
        env=env,
        cuda_version=str(found.version)
        if found.version
        else ("unreadable" if found.unreadable else "unknown"),
        cuda_source=found.source,
        cuda_problem=found.problem,
        size_bytes=sum(int(b.get("size") or 0) for b in blobs),
        layers=len(blobs) - 1,
        created=config.get("created"),
    )


def move_tag(
    src: ImageRef, dst: ImageRef, access: RegistryAccess | None = None
) -> Outcome[TagMove]:
    """``gpuops image tag``: :func:`copy_tag` as the command's outcome."""
    return Outcome(copy_tag(src, dst, access))


def inspect_image(
    ref: ImageRef, access: RegistryAccess | None = None, platform: str = "linux/amd64"
) -> Outcome[ImageInfo]:
    """``gpuops image inspect``: :func:`inspect` as the command's outcome."""
    return Outcome(inspect(ref, access, platform))
