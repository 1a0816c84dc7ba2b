"""Answers fetched ahead (gpuops.adapters.kube.ahead): the command takes one only for the
identical request, waits for one that is on its way, and sends every other request itself;
nothing the fetching process writes (or fails to write) can make the command raise.

The two ends of a real pipe, no process: the frames are written by the fetching process's
own writer (``Frames``), the command's side reads them (``_Ahead``). The whole path, forked
process and transport included, runs against the lab's API server in
tests/python/integration/test_headroom_ahead_lab.py.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from gpuops.adapters.kube import ahead, paths, wire
from gpuops.adapters.kube.creds import Credentials

TOKEN = "t0ken"
CREDS = Credentials(
    server="https://127.0.0.1:6443", ca_pem="CA", authorization=lambda: f"Bearer {TOKEN}"
)
LIST = "/api/v1/pods?limit=1000"
NEXT = "/api/v1/pods?limit=1000&continue=abc"


def headers(accept: str = paths.LIST_ACCEPT, token: str = TOKEN) -> dict[str, str]:
    return {"Accept": accept, "User-Agent": "gpuops/x", "Authorization": f"Bearer {token}"}


@pytest.fixture
def pipe() -> Iterator[tuple[ahead.Frames, ahead._Ahead]]:
    read_fd, write_fd = os.pipe()
    out, taker = ahead.Frames(write_fd), ahead._Ahead(0, read_fd)  # no process behind it
    yield out, taker
    out.close()
    taker.close()


def answer(out: ahead.Frames, target: str, body: bytes, creds: Credentials = CREDS) -> None:
    key = ahead.request_key(creds, target, headers())
    out.answer(target, paths.LIST_ACCEPT, key, ahead.Answer(200, paths.PROTOBUF_MEDIA, body))


def test_the_identical_request_takes_the_answer_once(
    pipe: tuple[ahead.Frames, ahead._Ahead],
) -> None:
    out, taker = pipe
    out.will([(LIST, paths.LIST_ACCEPT)])
    answer(out, LIST, b"k8s\x00page")
    got = taker.take(CREDS, LIST, headers())
    assert got is not None
    assert (got.status, got.media, got.body) == (200, paths.PROTOBUF_MEDIA, b"k8s\x00page")
    assert taker.take(CREDS, LIST, headers()) is None  # taken: the next one goes out


@pytest.mark.parametrize(
    ("creds", "sent"),
    [
        (CREDS, headers(token="another")),  # another token (a refreshed one, another user)
        (CREDS, headers(accept="application/json")),  # asked for JSON only
        (replace(CREDS, ca_pem="another CA"), headers()),
        (replace(CREDS, server="https://127.0.0.1:6444"), headers()),
        (replace(CREDS, verify=False), headers()),
        (replace(CREDS, tls_server_name="kube.example"), headers()),
        (replace(CREDS, cert_pem=b"cert", key_pem=b"key"), headers()),
    ],
)
def test_any_other_request_is_sent_by_the_command(
    pipe: tuple[ahead.Frames, ahead._Ahead], creds: Credentials, sent: dict[str, str]
) -> None:
    out, taker = pipe
    out.will([(LIST, paths.LIST_ACCEPT)])
    answer(out, LIST, b"k8s\x00page")
    out.close()
    assert taker.take(creds, LIST, sent) is None


def test_a_request_on_its_way_is_waited_for_and_one_never_announced_is_not(
    pipe: tuple[ahead.Frames, ahead._Ahead],
) -> None:
    out, taker = pipe
    out.will([(LIST, paths.LIST_ACCEPT)])
    asked_for_nodes = threading.Event()

    def later() -> None:  # nothing more is written until the nodes were asked for
        asked_for_nodes.wait()
        time.sleep(0.2)  # the command waits for what was announced
        out.will([(NEXT, paths.LIST_ACCEPT)])  # the next page, announced before this answer
        answer(out, LIST, b"k8s\x00first")
        time.sleep(0.2)
        answer(out, NEXT, b"k8s\x00second")

    threading.Thread(target=later).start()
    # never announced: answered at once (were it waited for, nothing would ever come)
    assert taker.take(CREDS, "/api/v1/nodes?limit=1000", headers()) is None
    asked_for_nodes.set()
    first = taker.take(CREDS, LIST, headers())
    assert first is not None and first.body == b"k8s\x00first"
    second = taker.take(CREDS, NEXT, headers())
    assert second is not None and second.body == b"k8s\x00second"


def test_what_the_fetching_process_gave_up_or_never_sent_is_sent_by_the_command(
    pipe: tuple[ahead.Frames, ahead._Ahead],
) -> None:
    out, taker = pipe
    out.will([(LIST, paths.LIST_ACCEPT), (NEXT, paths.LIST_ACCEPT)])
    out.gave_up(LIST, paths.LIST_ACCEPT)
    assert taker.take(CREDS, LIST, headers()) is None
    out.close()  # the process ended without NEXT
    assert taker.take(CREDS, NEXT, headers()) is None


def test_frames_that_cannot_be_read_end_it_without_an_error() -> None:
    for garbage in (
        b"W" + (10).to_bytes(4, "big") + bytes(8) + b"\xff" * 10,  # not UTF-8
        b"W" + (5).to_bytes(4, "big") + (1 << 40).to_bytes(8, "big"),  # longer than any
        b"W" + (10).to_bytes(4, "big") + bytes(8) + b"short",  # cut off
        b"X" + (2).to_bytes(4, "big") + bytes(8) + b"??",  # no such frame
        b"A" + (3).to_bytes(4, "big") + bytes(8) + b"a\tb",  # an answer without its lines
    ):
        read_fd, write_fd = os.pipe()
        taker = ahead._Ahead(0, read_fd)
        os.write(write_fd, garbage)
        os.close(write_fd)
        assert taker.take(CREDS, LIST, headers()) is None
        taker.close()


def test_nothing_is_taken_when_nothing_was_started() -> None:
    assert not ahead.expecting()
    assert ahead.take(CREDS, LIST, headers()) is None


def test_the_continue_token_is_read_from_the_head_of_a_protobuf_answer() -> None:
    from unit.test_kubeproto import envelope

    pod = {"metadata": {"name": "p1", "namespace": "a"}, "spec": {"nodeName": "n1"}}
    page = envelope("Pod", [pod, pod], "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ")
    assert wire.list_continue(page) == "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"
    head = page[: page.index(b"eyJ2") + 30]  # the token whole, no item yet
    assert wire.list_continue(head) == "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"
    assert wire.list_continue(head[:-1]) is None  # the metadata not whole yet
    assert wire.list_continue(page[:2]) is None
    assert wire.list_continue(envelope("Pod", [pod])) == ""  # the last page
    with pytest.raises(wire.Corrupt):
        wire.list_continue(b"{}")
    with pytest.raises(wire.Corrupt):
        wire.list_continue(b"k8s\x00" + b"\x0a\x02ab\x12\x04\x12\x02\x0a\x00")  # items first
