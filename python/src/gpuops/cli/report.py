"""``gpuops report``: static HTML pages (no scripts, CSP-clean) from commands' JSON results."""

from __future__ import annotations

from pathlib import Path

import click

from gpuops.cli.base import GpuOpsGroup, Shown, show
from gpuops.cli.types import Text
from gpuops.usecases import reports as usecase


def _path(value: str) -> Path:
    return Path(value)


_input = click.option(
    "--input",
    "input_path",
    required=True,
    type=Text("path", _path),
    help="JSON result (or error) document of the command the page shows.",
)
_out = click.option(
    "--out",
    required=True,
    type=Text("path", _path),
    help="Folder to write the page and its stylesheet into (created if missing).",
)


@click.group(cls=GpuOpsGroup)
def report() -> None:
    """HTML reports for people (and Jenkins' archived-artifact pages)."""


def _render(kind: str, input_path: Path, out: Path) -> Shown:
    outcome = usecase.render(usecase.ReportRequest(kind, input_path, out))
    return show(outcome, f"{kind} report: {outcome.result.written.page}")


@report.command()
@_input
@_out
def capacity(input_path: Path, out: Path) -> Shown:
    """GPU capacity per node class from 'gpuops headroom check --show-nodes'."""
    return _render("capacity", input_path, out)


@report.command()
@_input
@_out
def fleet(input_path: Path, out: Path) -> Shown:
    """GPU fleet health per group and host from 'gpuops nodes inspect'."""
    return _render("fleet", input_path, out)


@report.command(name="node-history")
@_input
@_out
def node_history(input_path: Path, out: Path) -> Shown:
    """A fleet's node changes, record by record, from 'gpuops nodes history'."""
    return _render("node-history", input_path, out)


@report.command(name="node-update")
@_input
@_out
def node_update(input_path: Path, out: Path) -> Shown:
    """A rolling node update batch by batch, host by host, from 'gpuops nodes update'."""
    return _render("node-update", input_path, out)


@report.command()
@_input
@_out
def prune(input_path: Path, out: Path) -> Shown:
    """Registry retention: what goes and why the rest stays, from 'gpuops image prune'."""
    return _render("prune", input_path, out)


@report.command()
@_input
@_out
def releases(input_path: Path, out: Path) -> Shown:
    """An environment's release history from 'gpuops release history'."""
    return _render("releases", input_path, out)
