"""The Kubernetes adapter: gpuops's own client of the Kubernetes API.

Rooms, from the wire up:

- the transport: :mod:`.transport` (HTTPS to one API server), :mod:`.creds` (credentials
  without the official client), :mod:`.config` (a kubeconfig checked in our words first);
- one call and its answer: :mod:`.calls` (HTTP status to :mod:`gpuops.errors`);
- LISTs: :mod:`.pager` (pages, pages ahead, the one retry of an expired list);
- the decoders: :mod:`.pages` (LIST pages by shape, JSON), :mod:`.proto` (LIST pages in
  protobuf), :mod:`.decode` (other answers, as dicts), :mod:`.shape` (shape checks);
- the client and what is built on it: :mod:`.client` (:class:`KubeClient`: LISTs, quotas,
  one workload, single calls), :mod:`.nodes` (cordon, drain, labels), :mod:`.apps`
  (Deployments, Leases, ConfigMaps of a release).
"""

from gpuops.adapters.kube.client import (
    BOUND_PODS,
    WORKLOAD_KINDS,
    Conflict,
    KubeClient,
    NotFound,
    PodObject,
)
from gpuops.adapters.kube.pager import LIST_ACCEPT, PAGE_SIZE, PAGE_SIZE_ENV

__all__ = [
    "BOUND_PODS",
    "LIST_ACCEPT",
    "PAGE_SIZE",
    "PAGE_SIZE_ENV",
    "WORKLOAD_KINDS",
    "Conflict",
    "KubeClient",
    "NotFound",
    "PodObject",
]
