"""Options several command groups share, declared once."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click

from gpuops.cli.types import Text
from gpuops.core.kubeinput import dns_label
from gpuops.errors import GpuOpsError, InvalidInput

F = TypeVar("F", bound=Callable[..., Any])


def _path(value: str) -> str:
    return value


def namespace_option(help_text: str, default: str = "default") -> Callable[[F], F]:
    return click.option(
        "-n",
        "--namespace",
        default=default,
        show_default=True,
        type=Text("namespace", lambda v: dns_label(v, "namespace")),
        help=help_text,
    )


def cluster_options(f: F) -> F:
    """``--kubeconfig`` and ``--context``, handed to the command as ``cluster`` (a
    :class:`gpuops.usecases.cluster.Cluster`)."""
    from gpuops.usecases.cluster import Cluster  # noqa: PLC0415 - light, no client import

    @functools.wraps(f)
    def wrapper(*args: Any, kubeconfig: str | None, context: str | None, **kwargs: Any) -> Any:
        return f(*args, cluster=Cluster(kubeconfig, context), **kwargs)

    wrapped = click.option(
        "--context", type=Text("context"), help="Kubeconfig context (default: current)."
    )(wrapper)
    return click.option(  # type: ignore[return-value]
        "--kubeconfig",
        envvar="KUBECONFIG",
        type=Text("path", _path),
        help="Kubeconfig file [env: KUBECONFIG; else ~/.kube/config, else in-cluster].",
    )(wrapped)


def _report_dir(value: str) -> Path:
    path = Path(value)
    if path.exists() and (not path.is_dir() or path.is_symlink()):
        raise InvalidInput(f"{value!r} exists and is not a directory")
    return path


def report_dir_option(what: str) -> Callable[[F], F]:
    """``--report-dir``: also write the command's HTML report there (Jenkins archives it)."""
    return click.option(
        "--report-dir",
        type=Text("path", _report_dir),
        help=f"Also write the HTML report ({what}) and its stylesheet into this folder.",
    )


def write_report(
    data: dict[str, Any], out: Path, kind: str, full: Callable[[], Mapping[str, Any]]
) -> str:
    """Render the ``kind`` page of ``full()`` into ``out``; record the outcome in
    ``data["report"]``. A report that cannot be written is said beside the result and never
    changes the command's verdict or exit code."""
    from gpuops.usecases import reports  # noqa: PLC0415 - Jinja2 and pygal only when asked

    try:
        written = reports.render(reports.ReportRequest(kind, out, out), result=full())
    except GpuOpsError as exc:
        data["report"] = {"status": "failed", "detail": exc.message}
        return f"report not written: {exc.message}"
    data["report"] = {"status": "written", **written.to_dict()}
    return f"{kind} report: {written.written.page}"
