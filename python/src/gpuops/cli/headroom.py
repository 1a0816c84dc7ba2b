"""``gpuops headroom``: free GPU capacity per node class, a release gate, and explanations.

Each command parses its options into typed input, calls one use case
(:mod:`gpuops.usecases.headroom`), which decides the verdict, and renders its result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gpuops.cli.base import GpuOpsGroup, Shown, show
from gpuops.cli.common import (
    cluster_options,
    env_name,
    http_url,
    namespace_option,
    report_dir_option,
    report_line,
)
from gpuops.cli.types import Integer, Structured, Text, shown
from gpuops.core import headroom as core
from gpuops.core.kubeinput import (
    dns_label,
    dns_subdomain,
    extended_resource,
    parse_class_counts,
    parse_node_affinity,
    parse_node_selector,
    parse_tolerations,
    qualified_name,
)
from gpuops.core.kubemodel import Placement
from gpuops.core.releaseconfig import DEFAULT_FILE
from gpuops.errors import InvalidInput
from gpuops.usecases import headroom as usecase
from gpuops.usecases.cluster import Cluster

_KINDS = {
    "pod": "pod",
    "pods": "pod",
    "po": "pod",
    "deployment": "deployment",
    "deployments": "deployment",
    "deploy": "deployment",
    "job": "job",
    "jobs": "job",
}


_group_by = click.option(
    "--group-by",
    default=core.DEFAULT_GROUP_BY,
    show_default=True,
    type=Text("label", lambda v: qualified_name(v, "group-by label")),
    help="Node label naming a node's class (falls back to nvidia.com/gpu.product).",
)


@click.group(cls=GpuOpsGroup)
def headroom() -> None:
    """Free GPU capacity the scheduler can really use, as a gate and as an explanation."""


@headroom.command()
@click.option(
    "--gpus-per-pod",
    type=Integer(min=1, max=1024),
    required=True,
    help="GPUs (units of --resource) each pod needs, all on one node.",
)
@click.option(
    "--pods",
    type=Integer(min=1, max=100_000),
    default=1,
    show_default=True,
    help="Number of pods.",
)
@click.option(
    "--node-selector",
    type=Structured("selector", parse_node_selector, ("string", "object")),
    help="k=v,k2=v2 or a JSON object: the workload's nodeSelector.",
)
@click.option(
    "--node-affinity",
    type=Structured("affinity", parse_node_affinity, ("string", "array")),
    help="JSON list of nodeSelectorTerms (required node affinity).",
)
@click.option(
    "--tolerations",
    type=Structured("tolerations", parse_tolerations, ("string", "array")),
    help="JSON list of tolerations, or key=value:Effect,key:Effect.",
)
@namespace_option("Namespace of the workload (its ResourceQuota counts).")
@click.option(
    "--resource",
    default=core.DEFAULT_RESOURCE,
    show_default=True,
    type=Text("resource", lambda v: extended_resource(v, "resource")),
    help="Extended resource to count (e.g. nvidia.com/mig-1g.10gb).",
)
@click.option(
    "--reserve",
    type=Integer(min=0, max=10**9),
    default=0,
    show_default=True,
    help="GPUs that must stay free in the whole cluster after placing the pods.",
)
@click.option(
    "--reserve-per-class",
    type=Structured(
        "counts", lambda v: parse_class_counts(v, "reserve per class"), ("string", "object")
    ),
    help="class=n,... or a JSON object: GPUs that must stay free per class.",
)
@_group_by
@cluster_options
@click.option(
    "--webhook-url-env",
    default=usecase.WEBHOOK_ENV,
    show_default=True,
    type=Text("env", env_name),
    help="Environment variable holding the webhook URL notified on shortage.",
)
@click.option(
    "--link",
    type=Text("url", http_url),
    help="A URL to put in the shortage notification, e.g. the CI build that asked.",
)
@click.option(
    "--show-nodes",
    is_flag=True,
    help="Add per-node rows (free, usable, reasons) to the result and the table.",
)
@report_dir_option("GPU capacity page (capacity.html)")
@click.option(
    "-e",
    "--environment",
    type=Text("environment", lambda v: dns_label(v, "environment")),
    help="Take the namespace, node class (as node selector), group-by label, reserve and "
    "cluster of this environment of --release-config, instead of the options above.",
)
@click.option(
    "--release-config",
    default=DEFAULT_FILE,
    show_default=True,
    envvar="GPUOPS_RELEASE_CONFIG",
    type=Text("path"),
    help="The application's release environments file, read with --environment "
    "[env: GPUOPS_RELEASE_CONFIG].",
)
def check(
    gpus_per_pod: int,
    pods: int,
    node_selector: dict[str, str] | None,
    node_affinity: Any,
    tolerations: Any,
    namespace: str,
    resource: str,
    reserve: int,
    reserve_per_class: dict[str, int] | None,
    group_by: str,
    cluster: Cluster,
    webhook_url_env: str,
    link: str | None,
    show_nodes: bool,
    report_dir: Path | None,
    environment: str | None,
    release_config: str,
) -> Shown:
    """Does a workload shape fit now? Exit 3 (gate refused) when it does not."""
    from gpuops.render.headroom import headroom_table  # noqa: PLC0415

    policy = core.Policy(reserve, reserve_per_class or {}, group_by)
    if environment is not None:
        _not_given_twice(environment, release_config)
        from gpuops.usecases.releases.config import headroom_settings  # noqa: PLC0415 - YAML on use

        settings = headroom_settings(release_config, environment, cluster)
        namespace, node_selector = settings.namespace, settings.node_selector
        policy, cluster = settings.policy, settings.cluster
    elif _given("release_config"):
        raise InvalidInput(
            "--release-config is read only with --environment",
            hint="add --environment NAME, or leave --release-config out",
            field="release_config",
        )
    request = usecase.CheckRequest(
        shape=core.Shape(
            gpus_per_pod=gpus_per_pod,
            pods=pods,
            resource=resource,
            placement=Placement(node_selector or {}, node_affinity, tolerations or ()),
            namespace=namespace,
        ),
        policy=policy,
        cluster=cluster,
        notify=usecase.Notify(webhook_url_env, link),
        show_nodes=show_nodes,
        report_dir=report_dir,
    )
    outcome = usecase.check(request)
    checked = outcome.result
    text = headroom_table(checked.result, with_nodes=show_nodes)
    if checked.report is not None:
        text += "\n" + report_line(checked.report.to_dict())
    if checked.notification is not None and checked.notification.status == "failed":
        text += f"\nnotification not delivered: {checked.notification}"
    return show(outcome, text)


#: The options an environment of the release file sets (settings written once).
_FROM_ENVIRONMENT = ("namespace", "node_selector", "reserve", "reserve_per_class", "group_by")


def _given(name: str) -> bool:
    """Whether the user set option ``name`` (flag, environment variable or params file)."""
    source = click.get_current_context().get_parameter_source(name)
    return source not in (None, click.core.ParameterSource.DEFAULT)


def _not_given_twice(environment: str, release_config: str) -> None:
    for name in _FROM_ENVIRONMENT:
        if _given(name):
            flag = "--" + name.replace("_", "-")
            raise InvalidInput(
                f"{flag} comes from environments.{environment} of {shown(release_config, 200)} "
                "with --environment: give one or the other",
                hint=f"leave {flag} out, or change it in {shown(release_config, 200)}",
                field=name,
            )


def parse_target(target: str) -> tuple[str, str]:
    """``pod/NAME``, ``deployment/NAME``, ``job/NAME`` or ``NAME`` (a pod)."""
    kind, slash, name = target.partition("/")
    if not slash:
        kind, name = "pod", target
    if kind.lower() not in _KINDS:
        raise InvalidInput(
            f"workload {shown(target)}: kind {shown(kind)} is not pod, deployment or job",
            hint="write pod/NAME, deployment/NAME, job/NAME or just the pod's NAME",
        )
    return _KINDS[kind.lower()], dns_subdomain(name, f"{_KINDS[kind.lower()]} name")


@headroom.command()
@click.argument("target", type=Text("workload", parse_target))
@namespace_option("Namespace of the workload.")
@_group_by
@cluster_options
@click.option("--all-nodes", is_flag=True, help="List every node, also those that fit.")
def explain(
    target: tuple[str, str],
    namespace: str,
    group_by: str,
    cluster: Cluster,
    all_nodes: bool,
) -> Shown:
    """Why a pending pod (or a Deployment's / Job's pending pods) does not fit, per node.

    TARGET is pod/NAME, deployment/NAME, job/NAME or just NAME (a pod), as kubectl writes
    them (po/, deploy/ and the plurals too), in --namespace."""
    from gpuops.render.headroom import explanation  # noqa: PLC0415

    kind, name = target
    outcome = usecase.explain(
        usecase.ExplainRequest(kind, name, namespace, group_by, cluster=cluster)
    )
    found = outcome.result
    if found.explanation is None:
        return show(outcome, found.nothing_pending())
    text = explanation(found.explanation, all_nodes=all_nodes)
    if len(found.pending) > 1:
        text = (
            f"{found.target}: {len(found.pending)} pending pods; "
            f"explaining {found.pending[0].pod.key}\n{text}"
        )
    return show(outcome, text)
