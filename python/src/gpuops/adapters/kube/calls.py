"""One call to the Kubernetes API and what its answer means.

:func:`call` sends a request over the transport (:mod:`.transport`) and turns the HTTP status
of the answer into a :mod:`gpuops.errors` exception naming the server and what was asked
(:func:`check_status`); :func:`parse_json` reads a JSON answer. The error bodies the API
server sends are Kubernetes ``Status`` objects, as JSON or, to a LIST that asked for it, as
protobuf (:mod:`.proto`); their reason and message are read from either.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import orjson

from gpuops.adapters.kube.paths import PROTOBUF_MAGIC
from gpuops.adapters.kube.transport import Transport
from gpuops.errors import OperationFailed, Unreachable


class NotFound(OperationFailed):
    """404: the object (or its namespace) does not exist; callers that know which input
    named it turn it into an :class:`~gpuops.errors.InvalidInput`."""


class Conflict(OperationFailed):
    """409: the object exists already, or changed since it was read (resourceVersion)."""


class ExpiredError(OperationFailed):
    """410 Gone: a paged list's continue token expired (the pager starts the list over)."""


def call(
    http: Transport,
    server: str,
    verb: str,
    path: str,
    query: Mapping[str, Any] | None,
    body: bytes | None,
    content_type: str,
    *,
    what: str,
) -> bytes:
    """Send one request; the answer's body when its status is 2xx, else the error it means."""
    target = path + ("?" + urlencode(query) if query else "")
    # transport failures (refused, reset, timed out, TLS) raise Unreachable there
    status, data = http.request(verb, target, body, content_type, what=what)
    check_status(server, status, data, what, path)
    return data


def parse_json(server: str, data: bytes, what: str) -> Any:
    """An answer's JSON; invalid JSON is a failure naming ``what`` and the server."""
    try:
        # orjson: LIST pages of a large cluster are tens of MB; it parses them ~3x faster
        return orjson.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise OperationFailed(
            f"the Kubernetes API at {server} sent invalid JSON for {what}"
        ) from None


def check_status(server: str, status: int, data: bytes, what: str, path: str) -> None:
    """Raise the error an HTTP status means; nothing for 2xx."""
    if status == 404:
        if status_reason(data) != "NotFound":  # no Kubernetes Status: not an API path
            raise OperationFailed(
                f"{what}: {server} answered HTTP 404 without a Kubernetes Status: "
                f"{path} is not a Kubernetes API path there",
                hint="check the kubeconfig's server URL (a proxy's path prefix?)",
            )
        raise NotFound(f"{what}: not found on {server}")
    if status == 409:
        raise Conflict(f"{what}: conflict on {server}: {status_message(data)}")
    if status == 410:
        raise ExpiredError(
            f"{what}: the Kubernetes API at {server} answered HTTP 410 (Gone: the "
            "list's continue token or resourceVersion expired)",
            hint="retry; lower GPUOPS_KUBE_PAGE_SIZE if it persists",
        )
    if status in (401, 403):
        raise OperationFailed(
            f"the Kubernetes API at {server} refused {what}: HTTP {status} {status_message(data)}",
            hint="check the kubeconfig's credentials and RBAC (needs get/list on nodes, "
            "pods, resourcequotas, namespaces, deployments, jobs)",
        )
    if status >= 500:
        raise Unreachable(
            f"the Kubernetes API at {server} failed {what}: HTTP {status} {status_message(data)}"
        )
    if not 200 <= status < 300:
        raise OperationFailed(
            f"the Kubernetes API at {server} answered {what} with HTTP {status}: "
            f"{status_message(data)}"
        )


def _status_doc(data: bytes) -> Any:
    """A Status answer (or any JSON answer) as JSON; ``None`` when it is neither."""
    if data.startswith(PROTOBUF_MAGIC):  # protobuf, to a LIST that asked for it first
        from gpuops.adapters.kube import proto  # noqa: PLC0415 - protobuf only when answered

        return proto.status(data)
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def status_reason(data: bytes) -> str:
    """The ``reason`` of a Kubernetes Status answer, "" when the body is not one."""
    doc = _status_doc(data)
    if isinstance(doc, dict) and doc.get("kind") == "Status":
        return str(doc.get("reason", ""))
    return ""


def status_message(data: bytes) -> str:
    """The ``message`` of a Status (or other JSON) answer, "" when there is none."""
    doc = _status_doc(data)
    return str(doc.get("message", "")) if isinstance(doc, dict) else ""
