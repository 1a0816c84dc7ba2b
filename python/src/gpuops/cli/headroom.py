"""``gpuops headroom``: free GPU capacity per node class, a release gate, and explanations.

Parses and validates input, calls the Kubernetes adapter and the pure core, renders. The
``checkGpuHeadroom`` Jenkins step calls ``gpuops headroom check`` with JSON parameters.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import Any

import click

from gpuops.adapters import webhook
from gpuops.adapters.kube import KubeClient, PodObject
from gpuops.cli.base import GpuOpsGroup, Outcome
from gpuops.core import explain as explain_core
from gpuops.core import headroom as core
from gpuops.core.kubeinput import (
    dns_label,
    dns_subdomain,
    parse_class_counts,
    parse_node_affinity,
    parse_node_selector,
    parse_tolerations,
    qualified_name,
)
from gpuops.core.kubemodel import Placement
from gpuops.errors import GateRefused, InvalidInput

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
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


class HeadroomShortage(GateRefused):
    """The gate's refusal; ``text`` is the table shown on a terminal."""

    def __init__(self, message: str, *, hint: str, details: dict[str, Any], text: str) -> None:
        super().__init__(message, hint=hint, details=details)
        self.text = text


class _Parsed(click.ParamType[Any]):
    """A click type that runs one of the core parsers (strings or JSON-file values)."""

    def __init__(self, name: str, parse: Callable[[Any], Any]) -> None:
        self.name = name
        self._parse = parse

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return self._parse(value)
        except InvalidInput as exc:
            self.fail(exc.message, param, ctx)


def _env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise InvalidInput(f"{value!r} is not an environment variable name")
    return value


_namespace = click.option(
    "-n",
    "--namespace",
    default="default",
    show_default=True,
    type=_Parsed("namespace", lambda v: dns_label(v, "namespace")),
    help="Namespace of the workload (its ResourceQuota counts).",
)
_kubeconfig = click.option(
    "--kubeconfig",
    envvar="KUBECONFIG",
    type=click.Path(dir_okay=False),
    help="Kubeconfig file [env: KUBECONFIG; else ~/.kube/config, else in-cluster].",
)
_context = click.option("--context", help="Kubeconfig context (default: current).")
_group_by = click.option(
    "--group-by",
    default=core.DEFAULT_GROUP_BY,
    show_default=True,
    type=_Parsed("label", lambda v: qualified_name(v, "group-by label")),
    help="Node label naming a node's class (falls back to nvidia.com/gpu.product).",
)


@click.group(cls=GpuOpsGroup)
def headroom() -> None:
    """Free GPU capacity the scheduler can really use, as a gate and as an explanation."""


@headroom.command()
@click.option(
    "--gpus-per-pod",
    type=click.IntRange(min=1),
    required=True,
    help="GPUs (units of --resource) each pod needs, all on one node.",
)
@click.option(
    "--pods", type=click.IntRange(min=1), default=1, show_default=True, help="Number of pods."
)
@click.option(
    "--node-selector",
    type=_Parsed("selector", parse_node_selector),
    help="k=v,k2=v2 or a JSON object: the workload's nodeSelector.",
)
@click.option(
    "--node-affinity",
    type=_Parsed("affinity", parse_node_affinity),
    help="JSON list of nodeSelectorTerms (required node affinity).",
)
@click.option(
    "--tolerations",
    type=_Parsed("tolerations", parse_tolerations),
    help="JSON list of tolerations, or key=value:Effect,key:Effect.",
)
@_namespace
@click.option(
    "--resource",
    default=core.DEFAULT_RESOURCE,
    show_default=True,
    type=_Parsed("resource", lambda v: qualified_name(v, "resource")),
    help="Extended resource to count (e.g. nvidia.com/mig-1g.10gb).",
)
@click.option(
    "--reserve",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="GPUs that must stay free in the whole cluster after placing the pods.",
)
@click.option(
    "--reserve-per-class",
    type=_Parsed("reserve", lambda v: parse_class_counts(v, "reserve per class")),
    help="class=n,... or a JSON object: GPUs that must stay free per class.",
)
@_group_by
@_kubeconfig
@_context
@click.option(
    "--webhook-url-env",
    default=webhook.DEFAULT_ENV,
    show_default=True,
    type=_Parsed("env", _env_name),
    help="Environment variable holding the webhook URL notified on shortage.",
)
@click.option(
    "--show-nodes",
    is_flag=True,
    help="Add per-node rows (free, usable, reasons) to the result and the table.",
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
    kubeconfig: str | None,
    context: str | None,
    webhook_url_env: str,
    show_nodes: bool,
) -> Outcome:
    """Does a workload shape fit now? Exit 3 (gate refused) when it does not."""
    webhook.webhook_url(webhook_url_env)  # a malformed URL is an input error, up front
    shape = core.Shape(
        gpus_per_pod=gpus_per_pod,
        pods=pods,
        resource=resource,
        placement=Placement(node_selector or {}, node_affinity, tolerations or ()),
        namespace=namespace,
    )
    policy = core.Policy(reserve, reserve_per_class or {}, group_by)
    t0 = time.perf_counter()
    kube = KubeClient.connect(kubeconfig, context)
    try:
        kube.ensure_namespace(namespace)
        quotas = kube.quota_limits(namespace, resource)
        t1 = time.perf_counter()
        # only the counted resource and the pod-count capacity matter to the verdict
        wanted = frozenset({resource, "pods"})
        nodes = kube.list_nodes(wanted)
        t2 = time.perf_counter()
        bound = kube.list_bound_pods(wanted)
        t3 = time.perf_counter()
    finally:
        kube.close()
    result = core.check(nodes, bound, shape, policy, quotas)
    data = result.to_dict(with_nodes=show_nodes)
    data["server"] = kube.server
    data["timings_s"] = {
        "list_nodes": round(t2 - t1, 3),
        "list_pods": round(t3 - t2, 3),
        "compute": round(time.perf_counter() - t3, 3),
        "total": round(time.perf_counter() - t0, 3),
    }
    text = core.render(result, with_nodes=show_nodes)
    if result.fits:
        return Outcome(data, text)
    data["notification"] = webhook.post(webhook_url_env, _notification(data))
    raise HeadroomShortage(
        result.message,
        hint="free GPUs on the wanted class, lower the reserve, or relax the node selector; "
        "'gpuops headroom explain' says why a pending pod does not fit",
        details=data,
        text=text,
    )


def _notification(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "event": "gpu-headroom-shortage",
        "text": f"[checkGpuHeadroom] {data['message']}",
        "namespace": data["namespace"],
        "resource": data["resource"],
        "gpus_needed": data["gpus_needed"],
        "pods": data["pods"],
        "pods_placeable": data["pods_placeable"],
        "shortages": data["shortages"],
        "classes": [
            {
                k: c[k]
                for k in (
                    "node_class",
                    "free",
                    "free_usable",
                    "largest_free_block",
                    "reserve",
                    "pods_placeable",
                )
            }
            for c in data["classes"]
        ],
        "build": os.environ.get("BUILD_URL", ""),
    }


def parse_target(target: str) -> tuple[str, str]:
    """``pod/NAME``, ``deployment/NAME``, ``job/NAME`` or ``NAME`` (a pod)."""
    kind, slash, name = target.partition("/")
    if not slash:
        kind, name = "pod", target
    if kind.lower() not in _KINDS:
        raise InvalidInput(
            f"workload {target!r}: kind {kind!r} is not pod, deployment or job",
            hint="write pod/NAME, deployment/NAME, job/NAME or just the pod's NAME",
        )
    return _KINDS[kind.lower()], dns_subdomain(name, f"{_KINDS[kind.lower()]} name")


@headroom.command()
@click.argument("target", type=_Parsed("workload", parse_target))
@_namespace
@_group_by
@_kubeconfig
@_context
@click.option("--all-nodes", is_flag=True, help="List every node, also those that fit.")
def explain(
    target: tuple[str, str],
    namespace: str,
    group_by: str,
    kubeconfig: str | None,
    context: str | None,
    all_nodes: bool,
) -> Outcome:
    """Why a pending pod (or a Deployment's / Job's pending pods) does not fit, per node."""
    kind, name = target
    kube = KubeClient.connect(kubeconfig, context)
    try:
        if kind == "pod":
            objs = [kube.read_pod(namespace, name)]
        else:
            objs = kube.workload_pods(namespace, kind, name)
        pending = [o for o in objs if not o.pod.node_name and not o.pod.terminal]
        if not pending:
            return _nothing_pending(kind, name, namespace, objs)
        nodes = kube.list_nodes()
        bound = kube.list_bound_pods()
    finally:
        kube.close()
    first = pending[0]
    result = explain_core.explain(first.pod, nodes, bound, group_by)
    if first.scheduled_reason == "Unschedulable":
        result.event_message = first.scheduled_message
    data = result.to_dict()
    data.update(
        {
            "target": f"{kind}/{name}",
            "namespace": namespace,
            "pending_pods": len(pending),
            "server": kube.server,
        }
    )
    text = explain_core.render(result, all_nodes=all_nodes)
    if len(pending) > 1:
        text = f"{kind}/{name}: {len(pending)} pending pods; explaining {first.pod.key}\n" + text
    return Outcome(data, text)


def _nothing_pending(kind: str, name: str, namespace: str, objs: list[PodObject]) -> Outcome:
    placed = {o.pod.key: o.pod.node_name for o in objs if o.pod.node_name}
    if kind == "pod" and placed:
        text = f"pod {namespace}/{name} is not pending: it is bound to {objs[0].pod.node_name}"
    else:
        text = f"{kind}/{name} in {namespace} has no pending pods ({len(objs)} pod(s))"
    data = {
        "target": f"{kind}/{name}",
        "namespace": namespace,
        "pending_pods": 0,
        "bound": placed,
        "summary": text,
    }
    return Outcome(data, text)
