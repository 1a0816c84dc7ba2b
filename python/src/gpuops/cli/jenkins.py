"""``gpuops jenkins``: jobs as code. ``apply`` creates or updates an application's build,
release and rollback jobs from the library's job template (python-jenkins); the rollback jobs'
choices are the environments' real release histories."""

from __future__ import annotations

import click

from gpuops.cli.base import GpuOpsGroup, Shown, show
from gpuops.cli.common import cluster_options, env_name, server_url
from gpuops.cli.options import renamed
from gpuops.cli.types import Text
from gpuops.core.releaseconfig import DEFAULT_FILE
from gpuops.usecases.cluster import Cluster


@click.group(cls=GpuOpsGroup)
def jenkins() -> None:
    """Jobs as code for the gpu-ops pipelines (python-jenkins)."""


@jenkins.command()
@click.option(
    "--config",
    default=DEFAULT_FILE,
    show_default=True,
    envvar="GPUOPS_RELEASE_CONFIG",
    type=Text("path"),
    help="The application's release environments file, with its jenkins section.",
)
@click.option(
    "--url",
    required=True,
    envvar="JENKINS_URL",
    type=Text("url", server_url),
    help="The Jenkins controller [env: JENKINS_URL].",
)
@click.option(
    "--user",
    envvar="GPUOPS_JENKINS_USER",
    type=Text("user"),
    help="Jenkins user whose API token is in --token-env [env: GPUOPS_JENKINS_USER].",
)
@click.option(
    "--token-env",
    default="GPUOPS_JENKINS_TOKEN",
    show_default=True,
    type=Text("env", env_name),
    help="Environment variable holding the user's API token (never an argument).",
)
@renamed(
    "--dry-run",
    "--check",
    "dry_run",
    hidden=["--check"],
    keys=["check"],
    is_flag=True,
    help="Print what would change (a diff); change nothing.",
)
@cluster_options
def apply(
    config: str, url: str, user: str | None, token_env: str, dry_run: bool, cluster: Cluster
) -> Shown:
    """Create or update the build, release and rollback jobs (idempotent)."""
    from gpuops.render.jenkinsjobs import apply_text  # noqa: PLC0415
    from gpuops.usecases import jenkinsjobs  # noqa: PLC0415

    request = jenkinsjobs.ApplyRequest(
        config, url, user, token_env, dry_run, cluster.kubeconfig, cluster.context
    )
    outcome = jenkinsjobs.apply(request)
    return show(outcome, apply_text(outcome.result))
