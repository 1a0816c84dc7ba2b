"""Calls a use case will make, made before the command has loaded (issue 17, "The start").

The executable's entry (:mod:`gpuops.cli.start`) calls this before it loads the CLI. The
Kubernetes adapter forks a process that sends the GETs and makes the use case's client calls
(:mod:`gpuops.adapters.kube.prefetch`); the use case's client takes a result only for the
identical call, so the use case's outcome is the one it would have had without.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from gpuops.adapters.kube import prefetch


def headroom_check(
    kubeconfig: str | None, context: str | None, namespace: str, resource: str | None
) -> None:
    """The client calls of :func:`gpuops.usecases.headroom.check` for a workload in
    ``namespace`` counting ``resource`` (``None``: the default), on the cluster of
    ``kubeconfig`` (else ``$KUBECONFIG``, ``~/.kube/config``) and ``context``."""
    prefetch.start(kubeconfig, context, namespace, partial(_check_calls, namespace, resource))


def _check_calls(namespace: str, resource: str | None) -> list[list[tuple[str, tuple[Any, ...]]]]:
    """Worked out in the fetching process, which loads the use case: none for a namespace or
    resource the command refuses (exit 2)."""
    from gpuops.core.headroom import DEFAULT_RESOURCE  # noqa: PLC0415 - not before the fork
    from gpuops.core.kubeinput import dns_label, extended_resource  # noqa: PLC0415
    from gpuops.errors import InvalidInput  # noqa: PLC0415
    from gpuops.usecases.headroom import check_calls  # noqa: PLC0415

    resource = resource or DEFAULT_RESOURCE
    try:
        dns_label(namespace, "namespace")
        extended_resource(resource, "resource")
    except InvalidInput:
        return []
    return check_calls(namespace, resource)
