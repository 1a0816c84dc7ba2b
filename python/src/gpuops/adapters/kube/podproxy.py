"""A GET of a pod's HTTP endpoint through the API server's pod proxy
(``/api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy{path}``).

That is how gpuops reaches a canary pod: a Jenkins agent outside the cluster network reaches
the API server, and the API server reaches the pod (needs ``get`` on ``pods/proxy``). The
answer is the pod's, whatever its status; what the API server says itself (a Kubernetes
``Status``: the pod is gone, it could not reach the pod, it refused us) becomes an error:
:class:`~gpuops.adapters.kube.NotFound` (no such pod), :class:`PodUnreachable` (the API
server could not reach the pod: nothing listens, the pod has no IP yet), and the errors of
:func:`.calls.check_status` for the rest (401/403 refused, 5xx the API server failing).
"""

from __future__ import annotations

import json
import time
from typing import Any, NamedTuple
from urllib.parse import quote

from gpuops.adapters.kube import calls
from gpuops.adapters.kube.client import KubeClient
from gpuops.core.kubeinput import dns_label, dns_subdomain
from gpuops.errors import InvalidInput, OperationFailed

DEFAULT_TIMEOUT_S = 10.0
MAX_BODY = 1024 * 1024  # bytes of a pod's answer kept (a health endpoint answers a few)


class PodUnreachable(OperationFailed):
    """The API server answered that it could not reach the pod (502/503 with a Status):
    the pod does not answer (a failed measurement, not a missing API server)."""


class ProxyAnswer(NamedTuple):
    status: int  # the pod's HTTP status
    seconds: (
        float  # from sending the request to the end of the answer, the API server's hop included
    )
    body: bytes  # at most MAX_BODY bytes


def proxy_path(namespace: str, pod: str, port: int, path: str) -> str:
    """The pod proxy's path for ``path`` (which starts with ``/``, may carry a query)."""
    dns_label(namespace, "namespace")
    dns_subdomain(pod, "pod name")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise InvalidInput(f"port {port!r} is not a port number from 1 to 65535")
    if not path.startswith("/") or any(c.isspace() or ord(c) < 32 or c == "#" for c in path):
        raise InvalidInput(f"{path[:80]!r} is not an HTTP path starting with '/'")
    return f"/api/v1/namespaces/{namespace}/pods/{quote(pod)}:{port}/proxy{path}"


def get(
    kube: KubeClient,
    namespace: str,
    pod: str,
    port: int,
    path: str,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> ProxyAnswer:
    """GET ``path`` on ``port`` of ``pod`` through the API server; (status, seconds, body)."""
    target = proxy_path(namespace, pod, port, path)
    what = f"GET {path[:80]} of pod {namespace}/{pod} port {port} (the API server's pod proxy)"
    started = time.perf_counter()
    status, body = kube.request_raw("GET", target, what=what, timeout=timeout)
    seconds = time.perf_counter() - started
    if status >= 400 and _is_status(body):  # the API server's own answer
        if status in (502, 503):
            raise PodUnreachable(
                f"the API server at {kube.server} could not reach pod {namespace}/{pod} port "
                f"{port}: {calls.status_message(body)[:200]}",
                hint="is the pod running, does it listen on that port?",
            )
        calls.check_status(kube.server, status, body, what, target)
    return ProxyAnswer(status, seconds, body[:MAX_BODY])


def _is_status(body: bytes) -> bool:
    """Whether an answer is a Kubernetes ``Status`` (the API server's words, not the pod's)."""
    try:
        doc: Any = json.loads(body[:65536])
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(doc, dict) and doc.get("kind") == "Status" and doc.get("apiVersion") == "v1"
