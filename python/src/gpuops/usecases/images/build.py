"""Use case ``image build``: build, tag, push, resolve the digest from the registry, record.

Order of operations (S-19, S-21, S-36):

1. check the input before anything runs: the context and Dockerfile exist, the target names a
   stage, tags and labels are valid (exit 2, nothing built);
2. build through the daemon with the OCI labels, streaming its log, under one deadline for
   build and push;
3. push the first tag through the daemon, then ask the registry what digest that tag names
   (the registry's answer, not the daemon's guess) and give every other tag the same manifest
   by a registry-side copy (so all tags provably name one digest);
4. read the pushed config back for the CUDA version and size, write the build record (the
   outcome's ``files["record"]``);
5. on request, remove the local tags, images and build-cache layers this build made (also when
   it failed): only what it can prove it made.
"""

from __future__ import annotations

import datetime
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuops import fsio
from gpuops.adapters.builder import Builder, BuildSpec, BuiltImage, Deadline
from gpuops.adapters.registry import Credentials
from gpuops.contract import write_document
from gpuops.core import dockerfile as dockerfile_core
from gpuops.core.cuda import declared_cuda
from gpuops.core.imagerecord import REPOSITORY_LABEL, BuildRecord, oci_labels, rfc3339
from gpuops.core.imageref import ImageRef
from gpuops.errors import GpuOpsError, InvalidInput, OperationFailed
from gpuops.fsio import MAX_DOCUMENT_BYTES
from gpuops.usecases.images.registryops import RegistryAccess, copy_tag, inspect
from gpuops.usecases.outcome import Outcome

log = logging.getLogger(__name__)
DEFAULT_TIMEOUT_S = 1800  # S-21: 30 minutes for GPU images of several GB


@dataclass(frozen=True)
class BuildRequest:
    image: ImageRef  # registry/repository, no tag
    tags: list[str]  # at least one
    context: Path
    dockerfile: Path | None = None  # None: <context>/Dockerfile; relative to the working dir
    build_args: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    target: str | None = None
    platform: str | None = None
    git_revision: str | None = None
    source: str | None = None  # org.opencontainers.image.source
    version: str | None = None  # org.opencontainers.image.version
    link: str | None = None  # the CI build's URL, for the record
    push: bool = True
    cleanup: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S
    record_file: Path | None = None
    docker_host: str | None = None
    docker_api_version: str | None = None
    access: RegistryAccess = field(default_factory=RegistryAccess)


@dataclass
class _Checked:
    context: Path
    dockerfile: str  # as the daemon wants it
    base_image: str
    labels: dict[str, str]
    refs: list[str]
    created: str


def _check(request: BuildRequest, now: datetime.datetime) -> _Checked:
    context = request.context
    if not context.is_dir():
        raise InvalidInput(
            f"build context {context} is not a directory",
            field="context",
            hint="pass the directory the Dockerfile copies from (docker build's last argument)",
        )
    dockerfile = request.dockerfile or context / "Dockerfile"
    if not dockerfile.is_file():
        raise InvalidInput(f"Dockerfile {dockerfile} does not exist", field="dockerfile")
    text = fsio.read_text(
        dockerfile, cap=MAX_DOCUMENT_BYTES, what="Dockerfile", option="dockerfile"
    )
    try:
        base = dockerfile_core.base_image(text, request.build_args, request.target)
    except InvalidInput as exc:
        exc.field = "target" if request.target and "target" in exc.message else "dockerfile"
        raise
    resolved = dockerfile.resolve()
    try:  # the daemon reads a Dockerfile inside the context by its relative path
        daemon_path = str(resolved.relative_to(context.resolve()))
    except ValueError:
        daemon_path = str(resolved)  # outside the context: the SDK adds it to the context
    if not request.tags:
        raise InvalidInput(
            "no tag to build: give --build-number, --git-revision or --tags", field="build_number"
        )
    created = rfc3339(now)
    ours = oci_labels(
        created=created,
        revision=request.git_revision,
        source=request.source,
        version=request.version,
        base_name=base if base != "scratch" else None,
    )
    ours[REPOSITORY_LABEL] = request.image.name  # how `image clean` knows our builds
    clash = sorted(k for k in ours if k in request.labels and request.labels[k] != ours[k])
    if clash:
        raise InvalidInput(
            f"labels {', '.join(clash)} are set by gpuops from the build's options",
            hint="drop them from --labels (use --git-revision, --source, --image-version; "
            f"{REPOSITORY_LABEL} is --image)",
            field="labels",
        )
    refs = [str(request.image.with_tag(t)) for t in request.tags]
    return _Checked(context, daemon_path, base, {**request.labels, **ours}, refs, created)


def _registry_side(
    request: BuildRequest, refs: list[str], record: BuildRecord, on_line: Callable[[str], None]
) -> None:
    """Digest from the registry, the other tags by manifest copy, config read back."""
    first = request.image.with_tag(request.tags[0])
    info = inspect(first, request.access, request.platform or "linux/amd64")
    record.digest, record.media_type = info.digest, info.media_type
    pinned = request.image.with_digest(info.digest)
    for tag in request.tags[1:]:
        move = copy_tag(pinned, request.image.with_tag(tag), request.access)
        on_line(f"tagged {move.target} -> {move.digest} (registry-side manifest copy)")
    record.size_bytes = info.size_bytes
    record.labels = info.labels  # what the registry serves
    record.cuda_version, record.cuda_source = info.cuda_version, info.cuda_source
    record.tags = refs


def build(
    request: BuildRequest,
    on_line: Callable[[str], None] = lambda line: None,
    connect: Callable[[BuildRequest], Builder] | None = None,
) -> Outcome[BuildRecord]:
    """Build, push and record ``request``; see the module docstring for the order. Always ok
    when it returns: a build that fails raises."""
    started = time.perf_counter()
    checked = _check(request, datetime.datetime.now(datetime.UTC))
    credentials = request.access.credentials()  # a half-set pair is an input error, up front
    builder = (connect or _connect)(request)
    made: list[BuiltImage] = []
    try:
        record = _run(request, checked, credentials, builder, on_line, made)
        if request.cleanup:
            record.cleanup = builder.remove(checked.refs, made[0].produced)
    except GpuOpsError:
        if request.cleanup and made:
            done = builder.remove(checked.refs, made[0].produced)
            on_line(f"cleanup: removed {len(done['removed'])}, kept {len(done['kept'])}")
        raise
    finally:
        builder.close()
    record.timings_s["total"] = round(time.perf_counter() - started, 3)
    if request.record_file is None:
        return Outcome(record)
    _write(request.record_file, dict(record.to_dict()))
    return Outcome(record, files={"record": str(request.record_file)})


def _run(
    request: BuildRequest,
    checked: _Checked,
    credentials: Credentials | None,
    builder: Builder,
    on_line: Callable[[str], None],
    made: list[BuiltImage],
) -> BuildRecord:
    deadline = Deadline(request.timeout_s)
    started = time.perf_counter()
    spec = BuildSpec(
        context=checked.context,
        dockerfile=checked.dockerfile,
        tag=checked.refs[0],
        build_args=request.build_args,
        labels=checked.labels,
        target=request.target,
        platform=request.platform,
        base_image=checked.base_image,
        registry=request.image.registry,
        credentials=credentials,
    )
    on_line(f"building {checked.refs[0]} from {checked.context} (base {checked.base_image})")
    built = builder.build(spec, on_line, deadline)
    made.append(built)
    t_built = time.perf_counter()
    for ref in checked.refs[1:]:
        builder.tag(built.image_id, ref)
    record = _record(request, checked, built)
    record.timings_s["build"] = round(t_built - started, 3)
    if not request.push:
        return record
    on_line(f"pushing {checked.refs[0]}")
    daemon_digest = builder.push(checked.refs[0], credentials, on_line, deadline)
    t_pushed = time.perf_counter()
    record.timings_s["push"] = round(t_pushed - t_built, 3)
    _registry_side(request, checked.refs, record, on_line)
    record.pushed = True
    if daemon_digest and daemon_digest != record.digest:
        on_line(
            f"note: the daemon reported {daemon_digest}; the registry serves "
            f"{record.digest} (the record holds the registry's)"
        )
    record.timings_s["resolve"] = round(time.perf_counter() - t_pushed, 3)
    return record


def _connect(request: BuildRequest) -> Builder:
    return Builder.connect(request.docker_host, request.docker_api_version)


def _record(request: BuildRequest, checked: _Checked, built: BuiltImage) -> BuildRecord:
    config = built.config
    labels = {str(k): str(v) for k, v in (config.get("Labels") or {}).items()}
    found = declared_cuda(labels, config.get("Env") or [])
    return BuildRecord(
        image=request.image.name,
        tags=checked.refs,
        digest=None,
        git_revision=request.git_revision,
        build_url=request.link,
        base_image=checked.base_image,
        cuda_version=str(found.version)
        if found.version
        else ("unreadable" if found.unreadable else "unknown"),
        cuda_source=found.source,
        size_bytes=None,
        local_size_bytes=built.size,
        image_id=built.image_id,
        created=checked.created,
        labels=labels,
        build_args=dict(request.build_args),
        target=request.target,
        platform=request.platform,
        steps=built.steps.steps,
        cached_steps=built.steps.cached,
    )


def _write(path: Path, doc: dict[str, Any]) -> None:
    try:
        write_document(path, doc, option="record_file", parents=True)
    except GpuOpsError as exc:
        raise OperationFailed(
            f"the build record could not be written: {exc.message}",
            hint="the image was built and pushed; its record is in the command's result",
        ) from None


def read_record(path: Path) -> dict[str, Any]:
    """A build record written by :func:`build` (for the release side)."""
    text = fsio.read_text(path, cap=MAX_DOCUMENT_BYTES, what="build record")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidInput(f"build record {path} cannot be read ({type(exc).__name__})") from None
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("gpuops.image-build"):
        raise InvalidInput(f"{path} is not a gpuops build record")
    return doc
