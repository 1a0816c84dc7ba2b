"""The Kubernetes adapter: gpuops's own client of the Kubernetes API.

Rooms, from the wire up:

- the transport: :mod:`.transport` (HTTPS to one API server), :mod:`.creds` (credentials
  without the official client), :mod:`.config` (a kubeconfig checked in our words first);
- one call and its answer: :mod:`.calls` (HTTP status to :mod:`gpuops.errors`);
- LISTs: :mod:`.paths` (what is asked, in pages of what size), :mod:`.pager` (pages, pages
  ahead, the one retry of an expired list);
- the decoders: :mod:`.pages` (LIST pages by shape, JSON), :mod:`.proto` (LIST pages in
  protobuf; :mod:`.wire` reads the wire format without the protobuf library), :mod:`.items`
  (the items of either into model objects), :mod:`.decode` (other answers, as dicts),
  :mod:`.shape` (shape checks);
- the client and what is built on it: :mod:`.client` (:class:`KubeClient`: LISTs, quotas,
  one workload, single calls), :mod:`.nodes` (cordon, drain, labels), :mod:`.apps`
  (Deployments, Leases, ConfigMaps of a release).

The names below are loaded on first use: importing one room (the credentials and the
transport) does not load the client and its decoders.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuops.adapters.kube.client import (
        BOUND_PODS,
        WORKLOAD_KINDS,
        Conflict,
        KubeClient,
        NotFound,
        PodObject,
    )
    from gpuops.adapters.kube.pager import LIST_ACCEPT
    from gpuops.adapters.kube.paths import PAGE_SIZE, PAGE_SIZE_ENV

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

#: Where each name of :data:`__all__` is defined.
_HOME = {
    "BOUND_PODS": "client",
    "WORKLOAD_KINDS": "client",
    "Conflict": "client",
    "KubeClient": "client",
    "NotFound": "client",
    "PodObject": "client",
    "LIST_ACCEPT": "pager",
    "PAGE_SIZE": "paths",
    "PAGE_SIZE_ENV": "paths",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:  # a room of the package (``from gpuops.adapters.kube import apps``)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # looked up once
    return value
