"""``gpuops lab``: start, stop and inspect the local lab."""

from __future__ import annotations

import json
from pathlib import Path

import click

from gpuops.cli.base import GpuOpsGroup, Shown
from gpuops.cli.types import Integer, Text
from gpuops_lab import (
    COMPONENTS,
    LAB_DIR_ENV,
    Lab,
    LabConfig,
    default_lab_dir,
    lab_dir_value,
    parse_components,
)
from gpuops_lab.spec import DEFAULT_HOSTS


@click.group(cls=GpuOpsGroup)
def lab() -> None:
    """The local lab: registry, image builder, SSH GPU fleet, Kubernetes (for tests, demo)."""


def _default_dir() -> str:
    """The default of ``--dir`` as the text a user would give (its type checks the default
    like a given value): ``$GPUOPS_LAB_DIR``'s rules, else /tmp/gpuops-lab."""
    return str(default_lab_dir())


_dir_option = click.option(
    "--dir",
    "lab_dir",
    type=Text("path", lambda v: lab_dir_value(v, "--dir / lab_dir"), empty=True),
    default=_default_dir,
    envvar=LAB_DIR_ENV,
    show_default="$GPUOPS_LAB_DIR or /tmp/gpuops-lab",
    help="The lab's directory: 'up' creates and marks it; other commands act only on a "
    "directory 'up' marked.",
)


@lab.command()
@_dir_option
@click.option(
    "--components",
    type=Text("components", parse_components),
    default="all",
    show_default=True,
    help=f"Comma-separated subset of: {', '.join(COMPONENTS)}.",
)
@click.option(
    "--hosts",
    type=Integer(1, 500),
    default=DEFAULT_HOSTS,
    show_default=True,
    help="SSH GPU hosts in the fleet (each also a kwok node).",
)
@click.option(
    "--extra-nodes",
    type=Integer(0, 20000),
    default=0,
    show_default=True,
    help="Synthetic kwok GPU nodes beyond the fleet (scale tests).",
)
@click.option("--registry-auth", is_flag=True, help="Registry with htpasswd auth and TLS.")
def up(
    lab_dir: Path, components: list[str], hosts: int, extra_nodes: int, registry_auth: bool
) -> Shown:
    """Start the lab (idempotent: running components are kept)."""
    config = LabConfig(
        dir=lab_dir, hosts=hosts, extra_nodes=extra_nodes, registry_auth=registry_auth
    )
    result = Lab(config).up(components)
    return Shown(result, _render(result))


@lab.command()
@_dir_option
def down(lab_dir: Path) -> Shown:
    """Stop the lab and remove every process, namespace, mount and file it made."""
    result = Lab(LabConfig(dir=lab_dir)).down()
    if not result["stopped"]:
        return Shown(result, f"no lab in {result['dir']}: nothing to do")
    return Shown(result, f"lab in {result['dir']} is down")


@lab.command()
@_dir_option
def status(lab_dir: Path) -> Shown:
    """Show what runs and where (ports, kubeconfig, inventory)."""
    result = Lab(LabConfig(dir=lab_dir)).status()
    return Shown(result, _render(result))


def _render(result: dict[str, object]) -> str:
    comps = result.get("components")
    if not isinstance(comps, dict) or not comps:
        return "lab: nothing running"
    lines = []
    for name, facts in comps.items():
        healthy = facts.get("healthy") if isinstance(facts, dict) else None
        mark = "up" if healthy else "DOWN"
        summary = facts.get("summary", "") if isinstance(facts, dict) else ""
        lines.append(f"{name:<9} {mark:<5} {summary}")
    if "started_s" in result:
        lines.append(f"start times (s): {json.dumps(result['started_s'])}")
    return "\n".join(lines)
