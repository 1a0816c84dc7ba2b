"""``gpuops image``: build and record an image, move tags by manifest, inspect, and the
CUDA-vs-driver gate. Each command parses its options, calls one use case
(:mod:`gpuops.usecases.images`), which decides the verdict, and renders the result; heavy
libraries are imported only by the use case that needs them (``image tag`` imports neither
Docker nor Kubernetes).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gpuops.cli.base import GpuOpsGroup, Shown, show
from gpuops.cli.common import cluster_options, docker_host, http_url, registry_options
from gpuops.cli.types import Integer, Structured, Text
from gpuops.core.imageref import (
    ImageRef,
    check_git_revision,
    check_tag,
    parse_key_values,
    parse_platform,
    parse_reference,
    parse_repository,
)
from gpuops.errors import InvalidInput

if TYPE_CHECKING:
    from gpuops.core.cuda import Version
    from gpuops.usecases.cluster import Cluster

_API_VERSION = re.compile(r"^(?:auto|1\.[0-9]{2})$")


def _path(value: str) -> str:
    return value


def _api_version(value: str) -> str:
    if not _API_VERSION.fullmatch(value):
        raise InvalidInput(f"{value!r} is not a Docker API version like 1.41 (or auto)")
    return value


def _tags(value: Any) -> list[str]:
    """``tag,tag2`` (spaces after the commas allowed) or a JSON array of tags; each item as
    given (nothing stripped, an empty item refused); "" or [] is no tag."""
    if value in ("", []):
        return []
    items = [t.lstrip(" ") for t in value.split(",")] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise InvalidInput("tags must be tag,tag2 or a JSON array of tags")
    return [check_tag(t) for t in items]


# Validators that need a bigger core module import it when they run: `gpuops image tag` must
# start as fast as an interpreter allows (it is timed against skopeo in bench/).
def _stage(value: str) -> str:
    from gpuops.core.dockerfile import check_stage_name  # noqa: PLC0415

    return check_stage_name(value)


def _cuda(value: str) -> Version:
    from gpuops.core.cuda import Version  # noqa: PLC0415

    return Version.parse(value, "CUDA version")


def _selector(value: Any) -> dict[str, str]:
    from gpuops.core.kubeinput import parse_node_selector  # noqa: PLC0415

    return parse_node_selector(value)


def _key_values(what: str) -> Structured:
    return Structured("key-values", lambda v: parse_key_values(v, what), ("string", "object"))


_platform = click.option(
    "--platform",
    type=Text("platform", parse_platform),
    help="os/arch[/variant] to build, or to describe from an index (default linux/amd64).",
)


def _daemon_options(f: Any) -> Any:
    """The image builder's daemon: ``image build`` and ``image clean``."""
    f = click.option(
        "--docker-api-version",
        envvar="DOCKER_API_VERSION",
        type=Text("version", _api_version),
        help="API version, e.g. 1.41 for Podman 4 [env: DOCKER_API_VERSION; default: ask].",
    )(f)
    return click.option(
        "--docker-host",
        envvar="DOCKER_HOST",
        type=Text("url", docker_host),
        help="Docker or Podman API [env: DOCKER_HOST; else the local socket].",
    )(f)


@click.group(cls=GpuOpsGroup)
def image() -> None:
    """Build, record, tag and check container images."""


@image.command()
@click.option(
    "--image",
    required=True,
    type=Text("image", parse_repository),
    help="Repository to build and push, with its registry: harbor.example.com/team/infer.",
)
@click.option(
    "--context",
    default=".",
    show_default=True,
    type=Text("path", _path),
    help="Build context directory (what the Dockerfile can COPY).",
)
@click.option(
    "--dockerfile",
    type=Text("path", _path),
    help="Dockerfile, relative to the working directory [default: <context>/Dockerfile].",
)
@click.option(
    "--build-number",
    type=Text("tag", lambda v: check_tag(v, "build number")),
    help="CI build number: becomes a tag and the default image version.",  # S-19
)
@click.option(
    "--git-revision",
    type=Text("revision", check_git_revision),
    help="Commit built: tag git-<first 12>, label org.opencontainers.image.revision.",
)
@click.option(
    "--tags",
    type=Structured("tags", _tags, ("string", "array")),
    help="More tags: tag,tag2 or a JSON array.",
)
@click.option(
    "--build-args",
    type=_key_values("build args"),
    help="KEY=VALUE,... or a JSON object (not for secrets).",
)
@click.option("--labels", type=_key_values("labels"), help="More labels: KEY=VALUE,... or JSON.")
@click.option("--target", type=Text("stage", _stage), help="Build stage to build.")
@_platform
@click.option(
    "--source", type=Text("url", http_url), help="Source repository URL (OCI source label)."
)
@click.option(
    "--image-version",
    type=Text("version"),
    help="OCI version label [default: the build number].",
)
@click.option("--link", type=Text("url", http_url), help="The CI build's URL, for the record.")
@click.option("--no-push", is_flag=True, help="Build and tag locally only (no digest).")
@click.option(
    "--cleanup",
    is_flag=True,
    help="Afterwards remove the local tags, images and cache layers this build made.",  # S-36
)
@click.option(
    "--timeout",
    type=Integer(min=1, max=86_400),
    default=1800,
    show_default=True,
    help="Seconds the build and push may take together.",  # S-21
)
@click.option(
    "--record-file",
    type=Text("path", _path),
    help="Write the build record (JSON) here as well.",
)
@_daemon_options
@registry_options
def build(
    image: ImageRef,
    context: str,
    dockerfile: str | None,
    build_number: str | None,
    git_revision: str | None,
    tags: list[str] | None,
    build_args: dict[str, str] | None,
    labels: dict[str, str] | None,
    target: str | None,
    platform: str | None,
    source: str | None,
    image_version: str | None,
    link: str | None,
    no_push: bool,
    cleanup: bool,
    timeout: int,
    record_file: str | None,
    docker_host: str | None,
    docker_api_version: str | None,
    access: Any,
) -> Shown:
    """Build an image, tag it by build number and revision, push it and record its digest."""
    from gpuops.core.imageref import build_tags  # noqa: PLC0415
    from gpuops.logs import progress_line  # noqa: PLC0415
    from gpuops.render.images import build_summary  # noqa: PLC0415
    from gpuops.usecases.images.build import BuildRequest  # noqa: PLC0415
    from gpuops.usecases.images.build import build as run_build  # noqa: PLC0415

    def on_line(line: str) -> None:  # the secrets known now: the registry's are read later
        click.echo(progress_line(line), err=True)  # after its time, as every progress line

    request = BuildRequest(
        image=image,
        tags=build_tags(build_number, git_revision, tags or ()),
        context=Path(context),
        dockerfile=Path(dockerfile) if dockerfile else None,
        build_args=build_args or {},
        labels=labels or {},
        target=target,
        platform=platform,
        git_revision=git_revision,
        source=source,
        version=image_version or build_number,
        link=link,
        push=not no_push,
        cleanup=cleanup,
        timeout_s=timeout,
        record_file=Path(record_file) if record_file else None,
        docker_host=docker_host,
        docker_api_version=docker_api_version,
        access=access,
    )
    outcome = run_build(request, on_line)
    return show(outcome, build_summary(outcome.result))


@image.command()
@click.option(
    "--source",
    required=True,
    type=Text("image", lambda v: parse_reference(v, "source", tag_required=True)),
    help="Image to point the tag at: registry/repo:tag or registry/repo@sha256:...",
)
@click.option(
    "--target",
    required=True,
    type=Text("tag", lambda v: v),
    help="Tag to add or move: a tag (same repository) or registry/repo:tag (same registry).",
)
@registry_options
def tag(source: ImageRef, target: str, access: Any) -> Shown:
    """Add or move a tag by copying the manifest in the registry (no layer moves)."""
    from gpuops.core.imageref import parse_target  # noqa: PLC0415
    from gpuops.render.images import tag_move  # noqa: PLC0415
    from gpuops.usecases.images.registryops import move_tag  # noqa: PLC0415

    try:
        dst = parse_target(target, source)
    except InvalidInput as exc:
        exc.field = "target"
        raise
    outcome = move_tag(source, dst, access)
    return show(outcome, tag_move(outcome.to_dict()))


@image.command()
@click.option(
    "--image",
    required=True,
    type=Text("image", lambda v: parse_reference(v, "image", tag_required=True)),
    help="registry/repo:tag or registry/repo@sha256:...",
)
@_platform
@registry_options
def inspect(
    image: ImageRef,
    platform: str | None,
    access: Any,
) -> Shown:
    """Digest, labels, CUDA version, size and creation time of an image in its registry."""
    from gpuops.render.images import inspection  # noqa: PLC0415
    from gpuops.usecases.images.registryops import inspect_image  # noqa: PLC0415

    outcome = inspect_image(image, access, platform or "linux/amd64")
    return show(outcome, inspection(outcome.to_dict()))


@image.command()
@click.option(
    "--image",
    type=Text("image", lambda v: parse_reference(v, "image", tag_required=True)),
    help="registry/repo:tag or @sha256:...; its config gives the CUDA version.",
)
@click.option(
    "--node-selector",
    required=True,
    type=Structured("selector", _selector, ("string", "object")),
    help="The node class: k=v,k2=v2 or a JSON object.",
)
@click.option(
    "--cuda-version",
    type=Text("version", _cuda),
    help="CUDA version to check instead of the one the image declares.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Require the table's minimum for the exact CUDA release (no minor-version compat).",
)
@_platform
@registry_options
@cluster_options
def compat(
    image: ImageRef | None,
    node_selector: dict[str, str],
    cuda_version: Version | None,
    strict: bool,
    platform: str | None,
    access: Any,
    cluster: Cluster,
) -> Shown:
    """Can every node of a class run the image's CUDA? Exit 3 naming the nodes that cannot."""
    from gpuops.render.images import compat_table  # noqa: PLC0415
    from gpuops.usecases.images.compat import CompatRequest  # noqa: PLC0415
    from gpuops.usecases.images.compat import compat as run_compat  # noqa: PLC0415

    outcome = run_compat(
        CompatRequest(
            node_selector=node_selector,
            image=image,
            cuda_version=cuda_version,
            strict=strict,
            platform=platform or "linux/amd64",
            access=access,
            cluster=cluster,
        )
    )
    return show(outcome, compat_table(outcome.to_dict()))


@image.command()
@click.option(
    "--keep-last",
    type=Integer(min=0, max=1000),
    default=1,
    show_default=True,
    help="Builds kept per repository (newest first), with their cache and base images.",
)
@click.option(
    "--min-age",
    type=Integer(min=0, max=30 * 86_400),
    default=3600,
    show_default=True,
    help="Seconds: an image younger than this stays (a build may be using it).",
)
@click.option(
    "--daemon-wide",
    is_flag=True,
    help="Also remove every other image no container uses (any tenant's) and prune the "
    "daemon's build cache; the last builds and their bases stay.",
)
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
@_daemon_options
def clean(
    keep_last: int,
    min_age: int,
    daemon_wide: bool,
    dry_run: bool,
    docker_host: str | None,
    docker_api_version: str | None,
) -> Shown:
    """Prune the images and build cache gpuops' builds left on this agent's daemon (found by
    their io.gpuops.build.repository label); report the space freed."""
    from gpuops.render.images import clean_summary  # noqa: PLC0415
    from gpuops.usecases.images.clean import CleanRequest  # noqa: PLC0415
    from gpuops.usecases.images.clean import clean as run_clean  # noqa: PLC0415

    outcome = run_clean(
        CleanRequest(
            keep_last=keep_last,
            min_age_s=min_age,
            daemon_wide=daemon_wide,
            dry_run=dry_run,
            docker_host=docker_host,
            docker_api_version=docker_api_version,
        )
    )
    return show(outcome, clean_summary(outcome.to_dict()))


_DURATION = re.compile(r"([0-9]{1,6})([smhdw])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def _duration(value: str) -> int:
    """``90d``, ``12h``, ``30m``, ``2w`` or ``45s``: seconds."""
    match = _DURATION.fullmatch(value)
    if match is None:
        raise InvalidInput(f"{value!r} is not a duration like 30d, 12h, 30m or 2w")
    return int(match.group(1)) * _SECONDS[match.group(2)]


def _tag_pattern(value: str) -> str:
    if not value or len(value) > 128 or not re.fullmatch(r"[A-Za-z0-9_.*?\[\]!-]+", value):
        raise InvalidInput(
            f"{value!r} is not a tag pattern (tag characters and the shell wildcards * ? [])"
        )
    return value


def _environments_option(f: Any) -> Any:
    from gpuops.core.releaseconfig import DEFAULT_FILE  # noqa: PLC0415

    return click.option(
        "--config",
        default=DEFAULT_FILE,
        show_default=True,
        envvar="GPUOPS_RELEASE_CONFIG",
        type=Text("path", _path),
        help="The release environments file: its repositories, histories and clusters "
        "[env: GPUOPS_RELEASE_CONFIG].",
    )(f)


def _prune_options(f: Any) -> Any:
    for option in reversed(
        [
            click.option(
                "--repository",
                "repositories",
                multiple=True,
                type=Text("image", lambda v: str(parse_repository(v, "repository"))),
                help="Only this repository (repeatable); each must be an environment's "
                "image in the environments file [default: every one it names].",
            ),
            click.option(
                "--keep-last",
                type=Integer(min=0, max=100_000),
                default=10,
                show_default=True,
                help="Keep the last N builds (by the OCI created label, else the config's "
                "created date).",
            ),
            click.option(
                "--keep-tags",
                multiple=True,
                type=Text("pattern", _tag_pattern),
                help="Keep tags matching this shell pattern, e.g. 'release-*' (repeatable).",
            ),
            click.option(
                "--keep-younger-than",
                type=Text("duration", _duration),
                help="Keep images younger than this: 30d, 12h, 2w.",
            ),
        ]
    ):
        f = option(f)
    return _environments_option(f)


@image.command()
@_prune_options
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say what would be deleted and why the rest is kept; delete nothing.",
)
@cluster_options
def prune(
    config: str,
    repositories: tuple[str, ...],
    keep_last: int,
    keep_tags: tuple[str, ...],
    keep_younger_than: int | None,
    dry_run: bool,
    cluster: Cluster,
) -> Shown:
    """Delete old manifests by digest, never one a rollback, a cluster or a release in flight
    needs. Exit 3 (nothing deleted) when a release holds a lock or the registry does not
    delete; 4 when a history or cluster cannot be reached."""
    from gpuops.core.retention import Policy  # noqa: PLC0415
    from gpuops.render.images import prune_summary  # noqa: PLC0415
    from gpuops.usecases.retention.prune import PruneRequest  # noqa: PLC0415
    from gpuops.usecases.retention.prune import prune as run_prune  # noqa: PLC0415

    request = PruneRequest(
        config,
        Policy(keep_last, keep_tags, keep_younger_than),
        repositories,
        dry_run,
        cluster.kubeconfig,
        cluster.context,
    )
    outcome = run_prune(request, lambda c: c.connect())
    return show(outcome, prune_summary(outcome.to_dict()))


@image.command()
@click.option(
    "--registry-config",
    required=True,
    type=Text("path", _path),
    help="The registry's own config file (distribution, filesystem storage): naming it is "
    "what lets gpuops run its garbage-collect here.",
)
@click.option(
    "--delete-untagged",
    is_flag=True,
    help="Also delete untagged manifests; refused unless every digest prune keeps for "
    "--config's environments is held by a tag.",
)
@_environments_option
@cluster_options
def gc(registry_config: str, delete_untagged: bool, config: str, cluster: Cluster) -> Shown:
    """Run the registry's garbage collection (it must be read-only or stopped: exit 3
    otherwise) and measure the bytes freed on disk."""
    from gpuops.core.retention import Policy  # noqa: PLC0415
    from gpuops.render.images import gc_summary  # noqa: PLC0415
    from gpuops.usecases.retention.gc import GcRequest, collect  # noqa: PLC0415
    from gpuops.usecases.retention.prune import PruneRequest  # noqa: PLC0415

    prune_request = PruneRequest(config, Policy(), (), True, cluster.kubeconfig, cluster.context)
    outcome = collect(
        GcRequest(registry_config, delete_untagged, prune_request if delete_untagged else None),
        lambda c: c.connect(),
    )
    return show(outcome, gc_summary(outcome.to_dict()))
