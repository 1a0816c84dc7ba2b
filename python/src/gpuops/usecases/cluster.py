"""How a use case reaches a Kubernetes cluster."""

from __future__ import annotations

from dataclasses import dataclass

from gpuops.adapters.kube import KubeClient


@dataclass(frozen=True)
class Cluster:
    """A kubeconfig (else $KUBECONFIG, ~/.kube/config, in-cluster) and a context (else the
    kubeconfig's current one)."""

    kubeconfig: str | None = None
    context: str | None = None

    def connect(self) -> KubeClient:
        return KubeClient.connect(self.kubeconfig, self.context)
