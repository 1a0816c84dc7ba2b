"""Requests a use case will send, sent before the command has loaded (issue 17, "The start").

The executable's entry (:mod:`gpuops.cli.start`) calls this with little more than the
standard library loaded. The Kubernetes adapter forks a process that sends the requests
(:mod:`gpuops.adapters.kube.prefetch`); the use case's client takes an answer from it only
for the identical request, so the use case's outcome is the one it would have had without.
"""

from __future__ import annotations

from gpuops.adapters.kube import prefetch


def headroom_check(kubeconfig: str | None, context: str | None, namespace: str) -> None:
    """The GETs of :func:`gpuops.usecases.headroom.check` for the workload's ``namespace`` on
    the cluster of ``kubeconfig`` (else ``$KUBECONFIG``, ``~/.kube/config``) and ``context``:
    the namespace, its ResourceQuotas, the node and bound-pod LISTs."""
    prefetch.start(kubeconfig, context, namespace)
