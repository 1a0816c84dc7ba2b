"""Options several command groups share, declared once."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click

from gpuops.cli.types import Text
from gpuops.core.values import shown
from gpuops.errors import InvalidInput

F = TypeVar("F", bound=Callable[..., Any])


def _path(value: str) -> str:
    return value


def _namespace(value: str) -> str:
    from gpuops.core.kubeinput import dns_label  # noqa: PLC0415 - only when a namespace is given

    return dns_label(value, "namespace")


def namespace_option(help_text: str, default: str = "default") -> Callable[[F], F]:
    return click.option(
        "-n",
        "--namespace",
        default=default,
        show_default=True,
        type=Text("namespace", _namespace),
        help=help_text,
    )


def cluster_options(f: F) -> F:
    """``--kubeconfig`` and ``--context``, handed to the command as ``cluster`` (a
    :class:`gpuops.usecases.cluster.Cluster`)."""

    @functools.wraps(f)
    def wrapper(*args: Any, kubeconfig: str | None, context: str | None, **kwargs: Any) -> Any:
        # imported when the command runs: a group's other commands need no Kubernetes adapter
        from gpuops.usecases.cluster import Cluster  # noqa: PLC0415

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
    from gpuops.fsio import OutDir  # noqa: PLC0415 - stdlib only, when the option is given

    OutDir(value, option="report_dir")  # a link or a file there is exit 2 now, not at the end
    return Path(value)


def report_dir_option(what: str) -> Callable[[F], F]:
    """``--report-dir``: also write the command's HTML report there (Jenkins archives it)."""
    return click.option(
        "--report-dir",
        type=Text("path", _report_dir),
        help=f"Also write the HTML report ({what}) and its stylesheet into this folder.",
    )


def report_line(report: Mapping[str, Any]) -> str:
    """The text line for a result's ``report`` (the page written beside it, or why not)."""
    if report.get("status") == "written":
        return f"{report['kind']} report: {report['page']}"
    return f"report not written: {report.get('detail', '')}"


def env_name(value: str) -> str:
    """The name of an environment variable (which holds a secret: never its value)."""
    if not value.isascii() or not (value[:1].isalpha() or value[:1] == "_"):
        raise InvalidInput(f"{shown(value)} is not an environment variable name")
    if not value.replace("_", "a").isalnum():
        raise InvalidInput(f"{shown(value)} is not an environment variable name")
    return value


def http_url(value: str) -> str:
    """An http(s) URL that is shown to people (a link put into alerts and records): parsed
    (host, port), and without ``user:password@``."""
    from gpuops.core.urls import parse_http  # noqa: PLC0415 - stdlib only

    parse_http(value, "")
    return value


def server_url(value: str) -> str:
    """An http(s) URL gpuops connects to (the Jenkins controller), parsed before anything
    connects. A ``user:password@`` in it is accepted, its password treated as a secret, and
    never shown: messages and results name the URL without it."""
    from gpuops.core.urls import parse_http  # noqa: PLC0415 - stdlib only

    parse_http(value, "", userinfo=True)
    return value


#: What ``--docker-host`` may name (Docker's own DOCKER_HOST schemes).
_DOCKER_SCHEMES = ("unix", "tcp", "http", "https", "ssh")


def docker_host(value: str) -> str:
    """A Docker or Podman API address (``unix:///run/podman.sock``, ``tcp://h:2375``,
    ``ssh://user@h``): parsed (scheme, host or socket path, port) before anything connects,
    like :func:`http_url` for the http(s) options; no password in it."""
    from gpuops.core.urls import password_of, remember_userinfo, split_url  # noqa: PLC0415

    remember_userinfo(value)
    bad = f"{shown(value)} is not a Docker API address ({', '.join(_DOCKER_SCHEMES)}://...)"
    if password_of(value):  # before parsing: a password may hold what stops a parser
        raise InvalidInput(f"{bad}: it carries a password")
    parts = split_url(value, bad)
    host = parts.hostname
    if parts.scheme not in _DOCKER_SCHEMES:
        raise InvalidInput(f"{bad}: unknown scheme")
    if parts.scheme == "unix" and not parts.path.startswith("/"):
        raise InvalidInput(f"{bad}: a unix socket needs an absolute path")
    if parts.scheme != "unix" and not host:
        raise InvalidInput(f"{bad}: it names no host")
    return value


def registry_options(f: F) -> F:
    """``--plain-http``, ``--registry-ca`` and the credential variable names, handed to the
    command as ``access`` (a :class:`gpuops.usecases.images.registryops.RegistryAccess`)."""
    # stdlib only (no Docker SDK): the use case's defaults name the credential variables
    from gpuops.usecases.images.registryops import RegistryAccess  # noqa: PLC0415

    default = RegistryAccess()

    @functools.wraps(f)
    def wrapper(
        *args: Any,
        plain_http: bool,
        registry_ca: str | None,
        registry_username_env: str,
        registry_password_env: str,
        **kwargs: Any,
    ) -> Any:
        access = RegistryAccess(
            plain_http, registry_ca, registry_username_env, registry_password_env
        )
        return f(*args, access=access, **kwargs)

    options = [
        click.option(
            "--plain-http",
            is_flag=True,
            help="Talk plain HTTP to the registry (a loopback or lab registry); default: TLS.",
        ),
        click.option(
            "--registry-ca",
            envvar="GPUOPS_REGISTRY_CA",
            type=Text("path", _path),
            help="CA file (PEM) for the registry's TLS certificate [env: GPUOPS_REGISTRY_CA; "
            "default: the system's CAs].",
        ),
        click.option(
            "--registry-username-env",
            default=default.username_env,
            show_default=True,
            type=Text("env", env_name),
            help="Environment variable holding the registry user name.",
        ),
        click.option(
            "--registry-password-env",
            default=default.password_env,
            show_default=True,
            type=Text("env", env_name),
            help="Environment variable holding the registry password or token.",
        ),
    ]
    decorated: Any = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]
