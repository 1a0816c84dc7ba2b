"""What gpuops asks the API server for its capacity answers: the paths, queries and pages of
the namespace, quota, node and bound-pod reads, written once for the client (:mod:`.client`,
:mod:`.pager`) and for the process that sends them ahead (:mod:`.ahead`).

Standard library only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import urlencode

#: Kubernetes' protobuf encoding (:mod:`.proto`): its media type, and the magic its answers
#: start with. Here, so that choosing a decoder does not import protobuf.
PROTOBUF_MEDIA = "application/vnd.kubernetes.protobuf"
PROTOBUF_MAGIC = b"k8s\x00"

#: Node and pod LISTs are asked for in Kubernetes' protobuf encoding first (the API server
#: encodes it several times faster than JSON: :mod:`.proto`), JSON where a server or a
#: proxy in front of it does not offer it.
LIST_ACCEPT = f"{PROTOBUF_MEDIA}, application/json"

#: Pods that hold resources on a node: bound and not terminal.
BOUND_PODS = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
#: Every node, and the pods bound to a node: (path, query) of the two LISTs.
NODES: tuple[str, Mapping[str, str]] = ("/api/v1/nodes", {})
POD_LIST: tuple[str, Mapping[str, str]] = ("/api/v1/pods", {"fieldSelector": BOUND_PODS})


def namespace_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}"


def quotas_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/resourcequotas"


#: Objects per LIST page (0: no paging). Node and pod pages are asked for ahead
#: (:data:`PAGES_AHEAD`), so that the API server prepares several pages in parallel: measured in
#: the lab (50,000 pods, the server busy), pages of 500 one at a time 126 s, 3 ahead 70 s,
#: pages of 1,000 3 ahead 34 s (medians of 3). An unpaged LIST must be served within the
#: server's request timeout (60 s by default): on that busy server one was cut off mid-answer.
PAGE_SIZE_ENV = "GPUOPS_KUBE_PAGE_SIZE"
_PAGE_SIZE_DEFAULT, _PAGE_SIZE_MAX = 1000, 100_000


def _page_size(value: str | None) -> tuple[int, str | None]:
    """``$GPUOPS_KUBE_PAGE_SIZE`` (unset or empty: the default; 0: no paging) and what is
    wrong with it."""
    if value is None or value == "":
        return _PAGE_SIZE_DEFAULT, None
    if re.fullmatch(r"[0-9]{1,6}", value) and int(value) <= _PAGE_SIZE_MAX:
        return int(value), None
    shown = repr(value[:20])
    return _PAGE_SIZE_DEFAULT, (
        f"{PAGE_SIZE_ENV}={shown} is not a page size: a whole number from 0 (no paging) to "
        f"{_PAGE_SIZE_MAX}"
    )


#: A malformed value is reported by :meth:`.client.KubeClient.connect` (exit 2), not at import.
PAGE_SIZE, PAGE_SIZE_PROBLEM = _page_size(os.environ.get(PAGE_SIZE_ENV))


#: Node and pod LIST pages in flight at once (each on its own connection): page n+1 is asked
#: for as soon as page n's head has brought its continue token.
PAGES_AHEAD = 3
#: Bytes read from a LIST answer at a time; the first read is small, so that the head, with
#: the next page's continue token, is seen early.
READ_SIZE, HEAD_READ = 1 << 20, 1 << 14


def page_query(query: Mapping[str, str], token: str, size: int) -> dict[str, str]:
    """The query of one page of ``size`` objects: ``limit`` (0: no paging) and the
    ``continue`` token, if any."""
    q = {**query, "limit": str(size)} if size else dict(query)
    if token:
        q["continue"] = token
    return q


def target(path: str, query: Mapping[str, str]) -> str:
    """The request target of ``path`` with ``query``."""
    return f"{path}?{urlencode(query)}" if query else path
