"""Options several command groups share, declared once."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from gpuops.cli.types import Text
from gpuops.core.kubeinput import dns_label
from gpuops.errors import InvalidInput

F = TypeVar("F", bound=Callable[..., Any])


def _path(value: str) -> str:
    return value


def env_name(value: str) -> str:
    """An environment variable name (where a secret such as a webhook URL is read from)."""
    if not value.isascii() or not (value[:1].isalpha() or value[:1] == "_"):
        raise InvalidInput(f"{value!r} is not an environment variable name")
    if not value.replace("_", "a").isalnum():
        raise InvalidInput(f"{value!r} is not an environment variable name")
    return value


def http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")) or any(c.isspace() for c in value):
        raise InvalidInput(f"{value[:60]!r} is not an http(s) URL")
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
