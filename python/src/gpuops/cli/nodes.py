"""``gpuops nodes``: roll changes over GPU nodes, inspect their health, label them.

Each command parses its options, calls one use case (:mod:`gpuops.usecases.nodes`), which
decides the verdict and writes the files, and renders its result. Heavy libraries (ansible,
ansible-runner, kubernetes) load in the use cases, on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from gpuops.cli.base import GpuOpsGroup, Shown, show
from gpuops.cli.budget import budget_options
from gpuops.cli.common import (
    cluster_options,
    env_name,
    http_url,
    registry_options,
    report_dir_option,
    report_line,
    server_url,
)
from gpuops.cli.options import renamed
from gpuops.cli.types import Choice, Integer, Text
from gpuops.core.headroom import DEFAULT_RESOURCE
from gpuops.core.kubeinput import extended_resource
from gpuops.core.nodehistory import valid_id
from gpuops.core.rollout import BatchSize, parse_batch_size
from gpuops.core.values import shown
from gpuops.errors import InvalidInput
from gpuops.usecases.headroom import WEBHOOK_ENV

F = TypeVar("F", bound=Callable[..., Any])

CHANGES = {
    "all": ("node_init", "nvidia_driver"),
    "driver": ("nvidia_driver",),
    "node-init": ("node_init",),
}


def _pattern(value: str) -> str:
    """An Ansible host pattern: names and groups, ``a:b``. No ``@`` anywhere: Ansible reads
    the hosts of ``@file`` (or of ``a:@file``) from that file; no white space of any kind."""
    if "@" in value:
        raise InvalidInput(
            f"{shown(value)}: '@' would make Ansible read host names from a file",
            hint="name hosts or groups (gpu_h800, gpu-a100-03, gpu_h800:gpu_l40s)",
        )
    if value.startswith("-") or any(c in value for c in "\"'`$;|&<>\\"):
        raise InvalidInput(f"{shown(value)} is not an Ansible host pattern (name, group, a:b)")
    if any(c.isspace() for c in value):
        raise InvalidInput(f"{shown(value)} is not an Ansible host pattern: it holds a space")
    return value


def _alert_matchers(value: str) -> Any:
    from gpuops.core.alertmatchers import parse  # noqa: PLC0415 - stdlib only

    return parse(value)


def _window(value: str) -> str:
    """A maintenance window's text, checked as the option is read (core/window.py)."""
    from gpuops.core.window import parse  # noqa: PLC0415

    return parse(value).text


def _duration(value: str) -> str:
    from gpuops.core.window import parse_duration  # noqa: PLC0415

    parse_duration(value)
    return value.strip()


def _namespace(value: str) -> str:
    from gpuops.core.kubeinput import dns_label  # noqa: PLC0415

    return dns_label(value, "namespace")


def _mount(value: str) -> str:
    if not value.startswith("/"):
        raise InvalidInput(f"{shown(value)} is not an absolute path")
    return value


def inventory_options(f: F) -> F:
    """``--inventory``, ``--limit``, ``--group``, ``--parallel``: the hosts a command acts on."""
    for option in reversed(
        [
            click.option(
                "-i",
                "--inventory",
                required=True,
                type=Text("path"),
                help="Ansible inventory (file or folder with group_vars).",  # S-6, S-27
            ),
            click.option(
                "-l",
                "--limit",
                type=Text("pattern", _pattern),
                help="Ansible host pattern narrowing the hosts (e.g. gpu_h800).",
            ),
            click.option(
                "--group",
                default="gpu_nodes",
                show_default=True,
                type=Text("pattern", _pattern),
                help="Inventory group of GPU nodes.",
            ),
            click.option(
                "--parallel",
                default=50,
                show_default=True,
                type=Integer(min=1, max=500),
                help="Hosts worked on at once.",
            ),
        ]
    ):
        f = option(f)
    return f


def known_hosts_option(f: F) -> F:
    """``--known-hosts``: the host keys the nodes must present (checked always)."""
    return click.option(
        "--known-hosts",
        envvar="GPUOPS_KNOWN_HOSTS",
        type=Text("path"),
        help="Known-hosts file the nodes' host keys are checked against [default: known_hosts "
        "beside the inventory, else ssh's own]. A host whose key is unknown or differs is "
        "unreachable.",
    )(f)


@click.group(cls=GpuOpsGroup)
def nodes() -> None:
    """Roll changes over GPU nodes (canary, batches, drain), inspect their health, label them."""


@nodes.command()
@inventory_options
@click.option(
    "--change",
    default="all",
    show_default=True,
    type=Choice(list(CHANGES)),
    # node-init: S-11, S-12; driver: S-13..S-15
    help="What to change: node-init (host set-up: hostname, time, kernel, ssh, agents), "
    "driver (the NVIDIA driver) or all.",
)
@click.option(
    "--canary",
    default=1,
    show_default=True,
    type=Integer(min=0, max=1000),
    help="Hosts changed first, alone; 0 for none.",
)
@click.option(
    "--batch-size",
    default="20%",
    show_default=True,
    type=Text("count or %", parse_batch_size),
    help="Hosts per batch after the canary: a count (5) or a share of them (20%).",
)
@click.option(
    "--failure-budget",
    default=0,
    show_default=True,
    type=Integer(min=0, max=10**6),
    help="Failed hosts tolerated before the rollout stops.",
)
@click.option(
    "--reserve",
    default=0,
    show_default=True,
    type=Integer(min=0, max=10**9),
    help="GPUs that must stay free in the cluster while a batch is out.",
)
@click.option(
    "--resource",
    default=DEFAULT_RESOURCE,
    show_default=True,
    type=Text("resource", lambda v: extended_resource(v, "resource")),
    help="Extended resource of the GPUs.",
)
@click.option(
    "--gpu-pods-timeout",
    default=3600,
    show_default=True,
    type=Integer(min=0, max=7 * 86400),
    help="Seconds to wait for running GPU pods on a cordoned node to finish.",
)
@click.option(
    "--on-timeout",
    default="fail",
    show_default=True,
    type=Choice(["fail", "evict"]),
    help="When GPU pods outlive the wait: fail the host, or evict them.",
)
@click.option(
    "--drain-timeout",
    default=300,
    show_default=True,
    type=Integer(min=0, max=86400),
    help="Seconds for evicted pods to leave a node.",
)
@click.option(
    "--ready-timeout",
    default=300,
    show_default=True,
    type=Integer(min=0, max=86400),
    help="Seconds for a changed node to be Ready again.",
)
@click.option(
    "--validation-level",
    type=Integer(min=1, max=3),
    help="DCGM diagnostic level after the driver (dcgmi diag -r N: 1 seconds, 2 minutes, 3 "
    "longer) for every group [default: each group's gpu_nodes_validation_level].",
)
@click.option(
    "--rollback/--no-rollback",
    default=True,
    show_default=True,
    help="Put a host whose install, verification or validation failed back to the driver it "
    "ran before (only that host). --no-rollback: it stays cordoned on the failed driver; "
    "pre-flight then accepts hosts whose previous driver is not in the repository.",
)
@click.option(
    "--after-rollback",
    default="keep-cordoned",
    show_default=True,
    type=Choice(["keep-cordoned", "uncordon"]),
    help="A rolled-back node: keep it cordoned and tainted for a person to look at, or "
    "uncordon it (and release gpuops' taint) at once.",
)
@click.option("--no-kube", is_flag=True, help="The hosts are no Kubernetes nodes: no drain.")
@cluster_options
@renamed(
    "--dry-run",
    "--check",
    "dry_run",
    keys=["check"],
    is_flag=True,
    help="Show the plan and the diff; change nothing (--check as in ansible-playbook).",
)
@click.option(
    "--artifacts-dir",
    type=Text("path"),
    help="Folder for reports and Ansible artifacts [default: ./gpuops-artifacts/...].",
)
@known_hosts_option
@click.option(
    "--learn-host-keys",
    is_flag=True,
    help="Accept the key of a host not in the known-hosts file (a changed key is still "
    "refused); the keys learned are written to the artifacts folder for review.",
)
@registry_options
@click.option(
    "--window",
    type=Text("window", _window),
    help="Maintenance window: a batch starts only inside it and only if its expected time "
    "fits before it closes, else the run is held (exit 3) and --resume continues it. "
    "'Sat 22:00-Sun 06:00 Europe/Berlin' or 'daily 22:00-06:00 UTC' (wall-clock times of "
    "the zone, across daylight saving changes).",
)
@click.option(
    "--batch-estimate",
    type=Text("duration", _duration),
    help="Expected time of a batch (40m, 1h30m) until this run has timed one (then the mean "
    "of its batches) [default: none: the first batch only needs the window open].",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Continue the latest run of this inventory, limit and change that was held or "
    "aborted (its node history record): only the hosts it left, none of those it did, no "
    "canary when its canary passed.",
)
@budget_options
@click.option(
    "--alerts-url",
    type=Text("url", http_url),
    help="Alertmanager (API v2) asked before each batch: matching firing alerts hold the "
    "rollout; unreachable holds it too (fail closed). Bearer token: env GPUOPS_ALERTS_TOKEN.",
)
@click.option(
    "--alerts-selector",
    type=Text("matchers", _alert_matchers),
    help="Alertmanager matchers of the alerts that hold a batch, comma-separated: "
    'severity="critical",team=~"gpu|infra" (with --alerts-url).',
)
@click.option(
    "--alerts-wait",
    default=300,
    show_default=True,
    type=Integer(min=0, max=86400),
    help="Seconds to keep asking (every 5 s) while matching alerts fire before holding.",
)
@click.option(
    "--alerts-ca-file",
    type=Text("path"),
    help="PEM CA file for an https --alerts-url [default: the system's CAs].",
)
def update(
    inventory: str,
    limit: str | None,
    group: str,
    parallel: int,
    change: str,
    canary: int,
    batch_size: BatchSize,
    failure_budget: int,
    reserve: int,
    resource: str,
    gpu_pods_timeout: int,
    on_timeout: str,
    drain_timeout: int,
    ready_timeout: int,
    validation_level: int | None,
    rollback: bool,
    after_rollback: str,
    no_kube: bool,
    cluster: Any,
    dry_run: bool,
    artifacts_dir: str | None,
    known_hosts: str | None,
    learn_host_keys: bool,
    access: Any,
    window: str | None,
    batch_estimate: str | None,
    resume: bool,
    budget: Any,
    alerts_url: str | None,
    alerts_selector: Any,
    alerts_wait: int,
    alerts_ca_file: str | None,
) -> Shown:
    """Change GPU nodes in a rolling way: canary, batches, failure budget, drain and verify.

    Exit 1 when hosts failed (the report says which changed, failed, were rolled back and
    never started) or the run was aborted (SIGTERM/SIGINT; resumable), 6 when a failed
    host's rollback failed too (left cordoned and tainted), 3 when the headroom gate stopped
    it or a batch gate held it (resumable: the maintenance window, the disruption budget spent
    for longer than --budget-wait, firing alerts), 2/4 for bad input or unreachable hosts
    (nothing touched)."""
    from gpuops.core.rollout import AfterRollback, Policy, RollbackPolicy  # noqa: PLC0415
    from gpuops.render.nodes import update_text  # noqa: PLC0415
    from gpuops.usecases.nodes import alerts as alertsgate  # noqa: PLC0415
    from gpuops.usecases.nodes import update as usecase  # noqa: PLC0415
    from gpuops.usecases.nodes.drain import DrainPolicy  # noqa: PLC0415
    from gpuops.usecases.nodes.window import WindowSpec  # noqa: PLC0415

    alerts = alertsgate.spec(alerts_url, alerts_selector, alerts_wait, alerts_ca_file)

    if batch_estimate is not None and window is None:
        raise InvalidInput(
            "--batch-estimate is the expected time of a batch in a --window: give the window",
            field="batch_estimate",
        )
    window_gate = WindowSpec.of(window, batch_estimate) if window is not None else None
    outcome = usecase.update(
        usecase.UpdateRequest(
            inventory=inventory,
            limit=limit,
            pattern=group,
            change=CHANGES[change],
            policy=Policy(canary, batch_size, failure_budget),
            drain=DrainPolicy(
                resource, reserve, gpu_pods_timeout, on_timeout, drain_timeout, ready_timeout
            ),
            cluster=None if no_kube else cluster,
            check=dry_run,
            artifacts_dir=artifacts_dir,
            forks=parallel,
            known_hosts=known_hosts,
            learn_host_keys=learn_host_keys,
            rollback=RollbackPolicy(rollback, AfterRollback(after_rollback)),
            validation_level=validation_level,
            registry=access,
            gates=tuple(g for g in (window_gate, budget, alerts) if g is not None),
            resume=resume,
        )
    )
    text = update_text(outcome.to_dict())
    if outcome.result.report is not None:
        text += "\n" + report_line(outcome.result.report)
    return show(outcome, text)


@nodes.command()
@inventory_options
@click.option(
    "--timeout",
    default=60,
    show_default=True,
    type=Integer(min=1, max=3600),
    help="Seconds each nvidia-smi call may take on a node (a lost GPU can hang it).",
)
@click.option(
    "--mount",
    "mounts",
    multiple=True,
    default=("/", "/var"),
    show_default=True,
    type=Text("path", _mount),
    help="Mount point whose free space is checked.",
)
@click.option(
    "--report-dir",
    type=Text("path"),
    help="Write inspect.json, inspect-junit.xml and the fleet health page (fleet.html) here.",
)
@click.option(
    "--webhook-url-env",
    default=WEBHOOK_ENV,
    show_default=True,
    type=Text("env", env_name),
    help="Environment variable holding the webhook URL alerted per incident.",
)
@click.option("--link", type=Text("url", http_url), help="A URL to put in the alerts.")
@click.option(
    "--alert-state",
    type=Text("path"),
    help="JSON file remembering alerted incidents: each is alerted once.",
)
@known_hosts_option
@click.option(
    "--quarantine",
    is_flag=True,
    help="Taint each node with a critical finding gpuops.io/gpu-unhealthy (setter quarantine) "
    "and release it after --release-after healthy inspections; state in the cluster.",
)
@click.option(
    "--drain",
    is_flag=True,
    help="With --quarantine: also cordon and drain a node quarantined now, taking its share "
    "of the disruption budget (--budget-max-unavailable) while it drains.",
)
@click.option(
    "--quarantine-max-percent",
    default=10,
    show_default=True,
    type=Integer(min=1, max=100),
    help="Circuit breaker: at most this share of a class (inventory group; at least one node) "
    "quarantined at once; more opens the class's breaker until quarantine-reset.",
)
@click.option(
    "--release-after",
    default=3,
    show_default=True,
    type=Integer(min=1, max=1000),
    help="Healthy inspections in a row that release a quarantined node.",
)
@click.option(
    "--quarantine-namespace",
    default="gpuops-system",
    show_default=True,
    type=Text("namespace", _namespace),
    help="Namespace of the quarantine state ConfigMap (gpuops-quarantine).",
)
@cluster_options
@budget_options
@click.option(
    "--metrics-file",
    type=Text("path"),
    help="Write the findings as Prometheus metrics (a .prom file for node_exporter's "
    "textfile collector).",
)
@click.option(
    "--pushgateway",
    type=Text("url", server_url),
    help="Push the same metrics to this Prometheus Pushgateway (base URL). Basic auth: env "
    "GPUOPS_PUSHGATEWAY_USERNAME and GPUOPS_PUSHGATEWAY_PASSWORD.",
)
def inspect(
    inventory: str,
    limit: str | None,
    group: str,
    parallel: int,
    timeout: int,
    mounts: tuple[str, ...],
    report_dir: str | None,
    webhook_url_env: str,
    link: str | None,
    alert_state: str | None,
    known_hosts: str | None,
    quarantine: bool,
    drain: bool,
    quarantine_max_percent: int,
    release_after: int,
    quarantine_namespace: str,
    cluster: Any,
    budget: Any,
    metrics_file: str | None,
    pushgateway: str | None,
) -> Shown:
    # S-16
    """Health of every GPU node: per GPU and per host, thresholds per group.

    Exit 3 when a critical threshold is crossed (each new incident alerted to the webhook
    once) or a quarantine circuit breaker holds a critical node back, 4 when hosts could not
    be inspected (or the Pushgateway did not answer), 0 otherwise."""
    from gpuops.render.nodes import inspect_text  # noqa: PLC0415
    from gpuops.usecases.nodes import inspect as usecase  # noqa: PLC0415
    from gpuops.usecases.nodes.quarantine import QuarantinePolicy  # noqa: PLC0415

    if drain and not quarantine:
        raise InvalidInput("--drain drains quarantined nodes: it needs --quarantine")
    if drain and budget is None:
        raise InvalidInput(
            "--drain takes each drained node from the cluster's disruption budget: it needs "
            "--budget-max-unavailable",
            hint="e.g. --budget-max-unavailable 10% (the limit every gpuops run shares)",
        )
    outcome = usecase.inspect(
        usecase.InspectRequest(
            inventory=inventory,
            limit=limit,
            pattern=group,
            timeout_s=timeout,
            parallel=parallel,
            mounts=tuple(mounts) or ("/",),
            report_dir=report_dir,
            webhook_url_env=webhook_url_env,
            link=link,
            alert_state=alert_state,
            known_hosts=known_hosts,
            quarantine=QuarantinePolicy(
                share_pct=float(quarantine_max_percent),
                release_after=release_after,
                namespace=quarantine_namespace,
                drain=drain,
                budget=budget,
            )
            if quarantine
            else None,
            cluster=cluster,
            metrics_file=metrics_file,
            pushgateway=pushgateway,
        )
    )
    text = inspect_text(outcome.to_dict())
    if outcome.result.report is not None:
        text += "\n\n" + report_line(outcome.result.report)
    return show(outcome, text)


@nodes.command()
@inventory_options
@click.option(
    "--taint-effect",
    default="NoSchedule",
    show_default=True,
    type=Choice(["NoSchedule", "NoExecute", "none"]),
    help="Taint effect for a pending reboot or a critical finding; none: no taints.",
)
@cluster_options
@click.option(
    "--timeout",
    default=60,
    show_default=True,
    type=Integer(min=1, max=3600),
    help="Seconds each nvidia-smi call may take on a node.",
)
@click.option("--dry-run", is_flag=True, help="Show the changes; write nothing.")
@known_hosts_option
def label(
    inventory: str,
    limit: str | None,
    group: str,
    parallel: int,
    taint_effect: str,
    cluster: Any,
    timeout: int,
    dry_run: bool,
    known_hosts: str | None,
) -> Shown:
    """GPU facts as node labels (accelerator, gpu-driver, GFD's nvidia.com/*, rack) and taints.

    Idempotent; removes only stale labels gpuops set itself."""
    from gpuops.render.nodes import label_text  # noqa: PLC0415
    from gpuops.usecases.nodes import label as usecase  # noqa: PLC0415

    outcome = usecase.label(
        usecase.LabelRequest(
            inventory=inventory,
            limit=limit,
            pattern=group,
            taint_effect=taint_effect,
            cluster=cluster,
            timeout_s=timeout,
            parallel=parallel,
            dry_run=dry_run,
            known_hosts=known_hosts,
        )
    )
    return show(outcome, label_text(outcome.to_dict()))


# -- the node change history (gpuops.usecases.nodes.history) ----------------------------


@nodes.command("quarantine-reset")
@click.option(
    "--class",
    "classes",
    multiple=True,
    type=Text("name", _pattern),
    help="Class (inventory group) whose quarantine circuit breaker is closed; repeat; "
    "none: every open breaker.",
)
@click.option(
    "--quarantine-namespace",
    default="gpuops-system",
    show_default=True,
    type=Text("namespace", _namespace),
    help="Namespace of the quarantine state ConfigMap (gpuops-quarantine).",
)
@cluster_options
def quarantine_reset(classes: tuple[str, ...], quarantine_namespace: str, cluster: Any) -> Shown:
    """Close open quarantine circuit breakers (after a person looked at the class).

    Nodes already quarantined stay so until healthy inspections release them."""
    from gpuops.render.nodes import quarantine_reset_text  # noqa: PLC0415
    from gpuops.usecases.nodes import quarantine as usecase  # noqa: PLC0415

    outcome = usecase.reset(usecase.ResetRequest(tuple(classes), quarantine_namespace, cluster))
    return show(outcome, quarantine_reset_text(outcome.to_dict()))


@nodes.command()
@inventory_options
@cluster_options
@click.option(
    "--last",
    default=20,
    show_default=True,
    type=Integer(min=1, max=1000),
    help="Newest records shown: the last N.",
)
@report_dir_option("node history page (node-history.html)")
def history(
    inventory: str,
    limit: str | None,
    group: str,
    parallel: int,
    cluster: Any,
    last: int,
    report_dir: Path | None,
) -> Shown:
    """The fleet's node changes, newest first: who ran each update, when, from which build
    and inventory revision, each group's drivers before and after, each host's outcome.

    The fleet is the inventory's gpuops_environment; --limit only narrows which inventory
    is read (the history is the whole fleet's)."""
    from gpuops.render.nodehistory import history_text  # noqa: PLC0415
    from gpuops.usecases.nodes import history as usecase  # noqa: PLC0415

    outcome = usecase.history(
        usecase.HistoryRequest(inventory, limit, group, cluster, last, report_dir)
    )
    text = history_text(outcome.result.to_dict())
    if outcome.result.report is not None:
        text += "\n" + report_line(outcome.result.report.to_dict())
    return show(outcome, text)


@nodes.command()
@inventory_options
@click.option(
    "--to",
    type=Text("record", valid_id),
    help="The record whose end state to restore: its number or <fleet>-<number> (gpuops "
    "nodes history). Each host gets the driver it ran when that record ended.",
)
@click.option(
    "--before",
    type=Text("record", valid_id),
    help="Undo this record instead: each host gets the driver it ran before that record ran.",
)
@click.option(
    "--canary",
    default=1,
    show_default=True,
    type=Integer(min=0, max=1000),
    help="Hosts changed first, alone; 0 for none.",
)
@click.option(
    "--batch-size",
    default="20%",
    show_default=True,
    type=Text("count or %", parse_batch_size),
    help="Hosts per batch after the canary: a count (5) or a share of them (20%).",
)
@click.option(
    "--failure-budget",
    default=0,
    show_default=True,
    type=Integer(min=0, max=10**6),
    help="Failed hosts tolerated before it stops.",
)
@click.option(
    "--reserve",
    default=0,
    show_default=True,
    type=Integer(min=0, max=10**9),
    help="GPUs that must stay free in the cluster while a batch is out.",
)
@click.option(
    "--resource",
    default=DEFAULT_RESOURCE,
    show_default=True,
    type=Text("resource", lambda v: extended_resource(v, "resource")),
    help="Extended resource of the GPUs.",
)
@click.option(
    "--gpu-pods-timeout",
    default=3600,
    show_default=True,
    type=Integer(min=0, max=7 * 86400),
    help="Seconds to wait for running GPU pods on a cordoned node to finish.",
)
@click.option(
    "--on-timeout",
    default="fail",
    show_default=True,
    type=Choice(["fail", "evict"]),
    help="When GPU pods outlive the wait: fail the host, or evict them.",
)
@click.option(
    "--drain-timeout",
    default=300,
    show_default=True,
    type=Integer(min=0, max=86400),
    help="Seconds for evicted pods to leave a node.",
)
@click.option(
    "--ready-timeout",
    default=300,
    show_default=True,
    type=Integer(min=0, max=86400),
    help="Seconds for a changed node to be Ready again.",
)
@cluster_options
@click.option("--check", is_flag=True, help="Show the plan and the diff; change nothing.")
@click.option(
    "--artifacts-dir",
    type=Text("path"),
    help="Folder for reports and Ansible artifacts [default: ./gpuops-artifacts/...].",
)
@click.option(
    "--validation-level",
    type=Integer(min=1, max=3),
    help="DCGM diagnostic level after the driver (dcgmi diag -r N: 1 seconds, 2 minutes, 3 "
    "longer) for every group [default: each group's gpu_nodes_validation_level].",
)
@click.option(
    "--rollback/--no-rollback",
    default=True,
    show_default=True,
    help="Put a host whose install, verification or validation failed back to the driver it "
    "ran before (only that host). --no-rollback: it stays cordoned on the failed driver; "
    "pre-flight then accepts hosts whose previous driver is not in the repository.",
)
@click.option(
    "--after-rollback",
    default="keep-cordoned",
    show_default=True,
    type=Choice(["keep-cordoned", "uncordon"]),
    help="A rolled-back node: keep it cordoned and tainted for a person to look at, or "
    "uncordon it (and release gpuops' taint) at once.",
)
@known_hosts_option
@registry_options
def rollback(
    inventory: str,
    limit: str | None,
    group: str,
    parallel: int,
    to: str | None,
    before: str | None,
    canary: int,
    batch_size: BatchSize,
    failure_budget: int,
    reserve: int,
    resource: str,
    gpu_pods_timeout: int,
    on_timeout: str,
    drain_timeout: int,
    ready_timeout: int,
    cluster: Any,
    check: bool,
    artifacts_dir: str | None,
    validation_level: int | None,
    rollback: bool,
    after_rollback: str,
    known_hosts: str | None,
    access: Any,
) -> Shown:
    """Put the fleet (or --limit of it) back to the drivers an earlier record left, through
    the same rolling update: canary, batches, headroom gate, validation; recorded as a
    rollback record.

    Exit codes as for nodes update; 2 when the record is unknown or does not say a host's
    driver (--limit the host out)."""
    from gpuops.core.rollout import AfterRollback, Policy, RollbackPolicy  # noqa: PLC0415
    from gpuops.render.nodes import update_text  # noqa: PLC0415
    from gpuops.usecases.nodes import history as usecase  # noqa: PLC0415
    from gpuops.usecases.nodes.drain import DrainPolicy  # noqa: PLC0415
    from gpuops.usecases.nodes.update import UpdateRequest  # noqa: PLC0415

    if (to is None) == (before is None):
        raise InvalidInput("give one of --to and --before", field="to")
    outcome = usecase.rollback_to(
        UpdateRequest(
            inventory=inventory,
            limit=limit,
            pattern=group,
            change=("nvidia_driver",),
            policy=Policy(canary, batch_size, failure_budget),
            drain=DrainPolicy(
                resource, reserve, gpu_pods_timeout, on_timeout, drain_timeout, ready_timeout
            ),
            cluster=cluster,
            check=check,
            artifacts_dir=artifacts_dir,
            forks=parallel,
            known_hosts=known_hosts,
            rollback=RollbackPolicy(rollback, AfterRollback(after_rollback)),
            validation_level=validation_level,
            registry=access,
        ),
        to or before or "",
        before=before is not None,
    )
    text = update_text(outcome.to_dict())
    if outcome.result.record:
        text += f"\nnode history: record {outcome.result.record}"
    if outcome.result.report is not None:
        text += "\n" + report_line(outcome.result.report)
    return show(outcome, text)
