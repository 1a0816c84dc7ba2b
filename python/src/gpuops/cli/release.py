"""``gpuops release``: promote a tag (or a model version) to an environment, roll back, and
read the history and the status. The environments come from the application's
``gpuops-release.yaml``; each command parses its options, calls one use case
(:mod:`gpuops.usecases.releases`) and renders its outcome. Progress goes to stderr as it
happens (text output), so a person watching a build's console sees the rollout."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from gpuops.cli.base import GpuOpsGroup, Runtime, Shown, pass_runtime, show
from gpuops.cli.common import cluster_options, http_url, report_dir_option, report_line
from gpuops.cli.nodes import _pattern as host_pattern
from gpuops.cli.nodes import known_hosts_option
from gpuops.cli.options import renamed
from gpuops.cli.types import Choice, Integer, Text
from gpuops.core.imageref import check_git_revision, check_tag
from gpuops.core.kubeinput import dns_label
from gpuops.core.releaseconfig import DEFAULT_FILE, check_model_version
from gpuops.core.releasehistory import NODE_CHANGE_ENV, check_node_change
from gpuops.core.values import shown
from gpuops.errors import InvalidInput

if TYPE_CHECKING:
    from gpuops.usecases import outcome as uc

F = TypeVar("F", bound=Callable[..., Any])
#: A Jenkins user id as the build cause and `input`'s submitterParameter give it: no spaces
#: (a display name is not an id), no shell or markup characters.
_USER_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+-]{0,99}")


#: Jenkins' technical ids (any case): never a person, so never a requester or an approver.
_TECHNICAL_IDS = frozenset({"anonymous", "system"})


def _user_id(value: str) -> str:
    if not _USER_ID.fullmatch(value):
        raise InvalidInput(
            f"{shown(value)} is not a Jenkins user id (letters, digits, '_.@+-', no spaces)"
        )
    if value.casefold() in _TECHNICAL_IDS:
        raise InvalidInput(f"{value} is a technical Jenkins id, not a person (four eyes)")
    return value


def _to(value: str) -> str:
    return value if value == "previous" else check_tag(value, "--to")


def _environment_options(f: F) -> F:
    f = cluster_options(f)
    f = click.option(
        "--config",
        default=DEFAULT_FILE,
        show_default=True,
        envvar="GPUOPS_RELEASE_CONFIG",
        type=Text("path"),
        help="The application's release environments file [env: GPUOPS_RELEASE_CONFIG].",
    )(f)
    return click.option(
        "-e",
        "--environment",
        required=True,
        type=Text("environment", lambda v: dns_label(v, "environment")),
        help="Environment to release to, as named in the environments file.",
    )(f)


def _who_options(f: F) -> F:
    for name, kind, check, text in reversed(
        [
            ("--reason", "text", None, "Why: recorded in the history and the change cause."),
            (
                "--approved-by",
                "user",
                _user_id,
                "Jenkins user id of who approved (required where approval is); never the "
                "requester: exit 3.",
            ),
            (
                "--requested-by",
                "user",
                _user_id,
                "Jenkins user id of who asked for the release (the build's user causes and "
                "its upstream builds'); repeat it for several. Required with --approved-by.",
            ),
            ("--link", "url", http_url, "A URL recorded with the release, e.g. the CI build."),
        ]
    ):
        many = name == "--requested-by"
        f = click.option(name, type=Text(kind, check), help=text, multiple=many)(f)
    return click.option(
        "--dry-run",
        is_flag=True,
        help="Check input and gates and say what would happen; change nothing.",
    )(f)


def _deps(runtime: Runtime) -> Any:
    from gpuops.logs import progress_line  # noqa: PLC0415
    from gpuops.usecases.releases import Deps  # noqa: PLC0415 - heavy imports on use only
    from gpuops.usecases.releases.registry import registry_for  # noqa: PLC0415

    start = time.monotonic()

    def say(line: str) -> None:
        if runtime.output == "text":
            # "2026-12-01T10:52:21Z [  12.3s] ...": the time, then the seconds since the start
            click.echo(progress_line(f"[{time.monotonic() - start:6.1f}s] {line}"), err=True)
            sys.stderr.flush()

    return Deps(registry_for=registry_for, say=say)


def _target(environment: str, config: str, cluster: Any) -> Any:
    from gpuops.usecases.releases.model import Target  # noqa: PLC0415

    return Target(config, environment, cluster.kubeconfig, cluster.context)


def _who(requested_by: tuple[str, ...] = (), *, rejected: bool = False, **kw: Any) -> Any:
    """Who asked and who approved. An approval without a requester is refused (exit 2): four
    eyes cannot be checked. A rejection needs neither (it only restores). Several requesters
    are recorded as one string, "alice, carol"."""
    from gpuops.usecases.releases.model import Who  # noqa: PLC0415

    if kw.get("approved_by") and not requested_by and not rejected:
        raise InvalidInput(
            "--approved-by needs --requested-by: four eyes needs to know who asked for this "
            "release",
            field="requested_by",
        )
    return Who(requested_by=", ".join(dict.fromkeys(requested_by)) or None, **kw)


def _released(outcome: uc.Outcome[Any]) -> Shown:
    from gpuops.render.release import release_text  # noqa: PLC0415

    return show(outcome, release_text(outcome.result))


@click.group(cls=GpuOpsGroup)
def release() -> None:
    """Promote images and model versions to environments, with gates, a lock, a history in
    the cluster, and automatic rollback when a rollout fails."""


@release.command()
@_environment_options
@click.option(
    "--tag", type=Text("tag", check_tag), help="Image tag to promote (resolved to its digest)."
)
@click.option(
    "--model",
    type=Text("version", check_model_version),
    help="Model version to release: where the environment mounts it; no new image.",  # S-22
)
@click.option(
    "--git-revision",
    type=Text("commit", check_git_revision),
    help="The commit the image was built from.",
)
@click.option(
    "--node-change",
    envvar=NODE_CHANGE_ENV,
    type=Text("record", check_node_change),
    help="The node change record made in the same build, e.g. gpu-prod-7: recorded "
    "with the release, so that rollback --with-nodes restores the nodes too [env: "
    f"{NODE_CHANGE_ENV}, which updateGpuNodes sets].",
)
@_who_options
@pass_runtime
def promote(
    runtime: Runtime,
    environment: str,
    config: str,
    cluster: Any,
    tag: str | None,
    model: str | None,
    git_revision: str | None,
    node_change: str | None,
    dry_run: bool,
    **who: Any,
) -> Shown:
    """Release TAG (and/or a model version) to an environment. Exit 3 when a gate refuses
    (tag not in the registry, incompatible, no GPU headroom, approval missing, locked); exit 1
    when the rollout failed and the previous release was restored."""
    from gpuops.usecases import releases  # noqa: PLC0415
    from gpuops.usecases.releases.model import PromoteRequest  # noqa: PLC0415

    request = PromoteRequest(
        _target(environment, config, cluster),
        tag=tag,
        model=model,
        who=_who(git_revision=git_revision, node_change=node_change or None, **who),
        dry_run=dry_run,
    )
    return _released(releases.promote(request, _deps(runtime)))


@release.command()
@_environment_options
@click.option("--previous", is_flag=True, help="Go back to the previous successful release.")
@click.option(
    "--to",
    "to",
    type=Text("tag", _to),
    help="Go back to this tag from the history ('previous' means --previous).",
)
@click.option(
    "--with-nodes",
    is_flag=True,
    help="First put the nodes back to the node change record that release ran with ("
    "canary, batches, validation), then the image; the compat gate judges the drivers they "
    "will have. Needs --inventory. A release without a node record is refused (exit 3).",
)
@click.option(
    "-i",
    "--inventory",
    type=Text("path"),
    help="With --with-nodes: the Ansible inventory of the environment's GPU nodes.",
)
@click.option(
    "-l",
    "--limit",
    type=Text("pattern", host_pattern),
    help="With --with-nodes: an Ansible host pattern narrowing the nodes (e.g. gpu_h800).",
)
@click.option(
    "--gpu-pods-timeout",
    default=3600,
    show_default=True,
    type=Integer(min=0, max=7 * 86400),
    help="With --with-nodes: seconds to wait for running GPU pods on a cordoned node to "
    "finish (the application's own serving pods never do: see --on-timeout).",
)
@click.option(
    "--on-timeout",
    default="fail",
    show_default=True,
    type=Choice(["fail", "evict"]),
    help="With --with-nodes: when GPU pods outlive the wait, fail the host or evict them.",
)
@known_hosts_option
@click.option(
    "--artifacts-dir",
    type=Text("path"),
    help="With --with-nodes: folder for the nodes rollback's reports "
    "[default: ./gpuops-artifacts/...].",
)
@_who_options
@pass_runtime
def rollback(
    runtime: Runtime,
    environment: str,
    config: str,
    cluster: Any,
    previous: bool,
    to: str | None,
    with_nodes: bool,
    inventory: str | None,
    limit: str | None,
    gpu_pods_timeout: int,
    on_timeout: str,
    known_hosts: str | None,
    artifacts_dir: str | None,
    dry_run: bool,
    **who: Any,
) -> Shown:
    """Restore an earlier release from the history: its digest and model version, no rebuild,
    through the same gates, lock and history as a promotion. With --with-nodes the nodes go
    back first; when they do not, the image is not touched (the exit code is the nodes')."""
    from gpuops.usecases import releases  # noqa: PLC0415
    from gpuops.usecases.releases.model import NodesScope, RollbackRequest  # noqa: PLC0415

    if previous == (to is not None):
        raise InvalidInput("give exactly one of --previous and --to TAG", field="to")
    scope = None
    if with_nodes:
        if not inventory:
            raise InvalidInput(
                "--with-nodes needs --inventory: the inventory of the nodes to put back",
                field="inventory",
            )
        scope = NodesScope(
            inventory, limit, known_hosts, artifacts_dir, gpu_pods_timeout, on_timeout
        )
    else:
        for name, given in (
            ("inventory", inventory),
            ("limit", limit),
            ("artifacts_dir", artifacts_dir),
        ):
            if given:
                option = "--" + name.replace("_", "-")
                raise InvalidInput(
                    f"{option} is for --with-nodes only: without it no node changes",
                    field=name,
                )
    request = RollbackRequest(
        _target(environment, config, cluster),
        to or "previous",
        who=_who(**who),
        dry_run=dry_run,
        with_nodes=scope,
    )
    return _released(releases.rollback(request, _deps(runtime)))


@release.command()
@_environment_options
@click.option(
    "--approved-by",
    type=Text("user", _user_id),
    help="Jenkins user id of who answered the approval step; never the requester: exit 3. "
    "Required, except with --reject (nobody answered: a timeout): a rejection only restores.",
)
@click.option(
    "--requested-by",
    multiple=True,
    type=Text("user", _user_id),
    help="Jenkins user id of who asked for the release; repeat it for several. Required with "
    "--approved-by, except with --reject.",
)
@click.option(
    "--reject",
    is_flag=True,
    help="The approval was refused (or timed out, or nobody may answer it): restore the "
    "previous release (exit 3). Never refused by four eyes: it changes nothing new.",
)
@click.option("--reason", type=Text("text"), help="Why: recorded with the step.")
@click.option("--link", type=Text("url", http_url), help="A URL recorded, e.g. the CI build.")
@pass_runtime
def resume(
    runtime: Runtime,
    environment: str,
    config: str,
    cluster: Any,
    approved_by: str | None,
    requested_by: tuple[str, ...],
    reject: bool,
    reason: str | None,
    link: str | None,
) -> Shown:
    """Go on with a release paused on an approval step of its strategy (state paused, exit
    0): the remaining steps, then all replicas. With --reject the previous release is
    restored (exit 3). The lock, the gates of the cluster and the history are as for
    promote; someone else's change meanwhile ends it aborted (exit 1)."""
    from gpuops.usecases import releases  # noqa: PLC0415
    from gpuops.usecases.releases.model import ResumeRequest  # noqa: PLC0415

    if not approved_by and not reject:
        raise InvalidInput(
            "release resume needs --approved-by: who answered the approval step (or --reject)",
            field="approved_by",
        )
    who = _who(requested_by, rejected=reject, approved_by=approved_by, reason=reason, link=link)
    request = ResumeRequest(_target(environment, config, cluster), who, reject=reject)
    return _released(releases.resume(request, _deps(runtime)))


@release.command()
@_environment_options
@renamed(
    "--last",
    "--limit",  # its old name; --limit is a host pattern everywhere else
    "last",
    hidden=["--limit"],
    keys=["limit"],
    type=Integer(min=1, max=1000),
    default=20,
    show_default=True,
    help="Newest records shown: the last N.",
)
@report_dir_option("release history page (releases.html)")
def history(
    environment: str, config: str, cluster: Any, last: int, report_dir: Path | None
) -> Shown:
    """The environment's releases, newest first: what ran, who approved, how it ended;
    ``kubectl rollout history`` shows the same change causes."""
    from gpuops.render.release import history_table  # noqa: PLC0415
    from gpuops.usecases.releases import status as usecase  # noqa: PLC0415

    outcome = usecase.history(_target(environment, config, cluster), last, report_dir=report_dir)
    text = history_table(outcome.result)
    if outcome.result.report is not None:
        text += "\n" + report_line(outcome.result.report.to_dict())
    return show(outcome, text)


@release.command()
@_environment_options
@pass_runtime
def status(runtime: Runtime, environment: str, config: str, cluster: Any) -> Shown:
    """What the environment runs now, its rollout, its lock, and whether its registry tag
    points at it."""
    from gpuops.render.release import status_text  # noqa: PLC0415
    from gpuops.usecases.releases import status as usecase  # noqa: PLC0415

    outcome = usecase.status(_target(environment, config, cluster), _deps(runtime))
    return show(outcome, status_text(outcome.result))
