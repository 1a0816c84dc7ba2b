"""The pager's one retry (gpuops.adapters.kube.pager): a paged list whose continue token
expires (HTTP 410) starts over once, the same way for both readers (pages decoded while they
arrive, and pages parsed whole); expiring again fails; a 404 names the list not served.

A stub API server pages a list of pods two at a time and answers 410 where told.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from gpuops.adapters.kube import pager
from gpuops.adapters.kube.creds import Credentials
from gpuops.adapters.kube.decode import pod_from_api, pod_from_api_checked
from gpuops.adapters.kube.transport import Transport
from gpuops.core.kubemodel import Pod
from gpuops.errors import OperationFailed

PODS = [
    {
        "metadata": {"name": f"p{i}", "namespace": "ns"},
        "spec": {"nodeName": "n1", "containers": []},
        "status": {"phase": "Running"},
    }
    for i in range(5)
]
PATH = "/api/v1/pods"


def _status(code: int, reason: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
            "message": f"the server says {reason}", "code": code}  # fmt: skip


class Stub:
    """Pages of :data:`PODS` (``limit`` each); ``expire`` says how many continued requests
    are answered 410 Gone, ``missing`` answers every request 404 with a Status."""

    def __init__(self) -> None:
        self.expire = 0
        self.missing = False
        self.requests = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                stub.requests += 1
                status, doc = stub.answer(url.path, query)
                data = json.dumps(doc, separators=(",", ":")).encode()  # as the server writes
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, path: str, query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if self.missing or path != PATH:
            return 404, _status(404, "NotFound")
        start = int(query.get("continue", "0"))
        if start and self.expire:
            self.expire -= 1
            return 410, _status(410, "Expired")
        limit = int(query.get("limit", "0")) or len(PODS)
        end = start + limit
        meta = {"continue": str(end)} if end < len(PODS) else {}
        return 200, {"kind": "PodList", "metadata": meta, "items": PODS[start:end]}


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stub]:
    monkeypatch.setattr(pager, "PAGE_SIZE", 2)
    monkeypatch.setattr(pager, "LIST_ACCEPT", "application/json")
    s = Stub()
    yield s
    s.server.shutdown()
    s.server.server_close()


def _streamed(p: pager.Pager) -> list[Pod]:
    return p.list_streamed(
        PATH,
        "list pods",
        partial(pager.pod_reader, None),
        partial(pod_from_api_checked, resources=None),
        {},
    )


def _json(p: pager.Pager) -> list[Pod]:
    return p.list_json(PATH, "list pods", pod_from_api, {})


READERS: list[Callable[[pager.Pager], list[Pod]]] = [_streamed, _json]


@pytest.fixture
def pages(stub: Stub) -> Iterator[pager.Pager]:
    http = Transport(Credentials(stub.url))
    yield pager.Pager(http, stub.url)
    http.close()


@pytest.mark.parametrize("read", READERS, ids=["streamed", "json"])
def test_a_list_that_expires_while_paging_starts_over_once(
    stub: Stub, pages: pager.Pager, read: Callable[[pager.Pager], list[Pod]]
) -> None:
    stub.expire = 1
    got = [p.key for p in read(pages)]
    assert got == [f"ns/p{i}" for i in range(5)]  # whole, nothing twice
    assert stub.expire == 0 and stub.requests == 2 + 3  # the expired try, then 3 pages


@pytest.mark.parametrize("read", READERS, ids=["streamed", "json"])
def test_a_list_that_keeps_expiring_fails(
    stub: Stub, pages: pager.Pager, read: Callable[[pager.Pager], list[Pod]]
) -> None:
    stub.expire = 2
    with pytest.raises(OperationFailed, match="the list kept expiring while paging"):
        read(pages)


@pytest.mark.parametrize("read", READERS, ids=["streamed", "json"])
def test_a_list_not_served_says_so(
    stub: Stub, pages: pager.Pager, read: Callable[[pager.Pager], list[Pod]]
) -> None:
    stub.missing = True
    with pytest.raises(OperationFailed, match="this server does not serve that list"):
        read(pages)
