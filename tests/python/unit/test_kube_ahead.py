"""What is fetched or made ahead (gpuops.adapters.kube.ahead): a taker gets a value only for
its own key (the identical request, the identical call), waits for one that is on its way,
and does every other one itself; nothing the fetching process writes (or fails to write)
can make the taker raise. And the calls made ahead for ``headroom check`` are the ones its
use case makes.

The two ends of a real pipe, no process: frames written by the fetching process's own writer
(``Frames``), read by the taking side (``Channel``). The whole path, forked process and
client included, runs against the lab's API server in
tests/python/integration/test_headroom_ahead_lab.py.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from test_headroom import node, pod, shape
from unit.test_kubeproto import envelope

from gpuops.adapters.kube import ahead, client, pager, paths, wire
from gpuops.adapters.kube.creds import Credentials
from gpuops.core.headroom import Policy
from gpuops.usecases import headroom

TOKEN = "t0ken"
CREDS = Credentials(
    server="https://127.0.0.1:6443", ca_pem="CA", authorization=lambda: f"Bearer {TOKEN}"
)
GPU = frozenset({"nvidia.com/gpu", "pods"})
LIST = "/api/v1/pods?limit=1000"


def key(creds: Credentials = CREDS, method: str = "list_nodes_and_bound_pods", *args: Any) -> str:
    return client.call_key(ahead.identity(creds), method, *(args or (GPU,)))


def headers(accept: str = paths.LIST_ACCEPT, token: str = TOKEN) -> dict[str, str]:
    return {"Accept": accept, "User-Agent": "gpuops/x", "Authorization": f"Bearer {token}"}


@pytest.fixture
def pipe() -> Iterator[tuple[ahead.Frames, ahead.Channel]]:
    read_fd, write_fd = os.pipe()
    out, channel = ahead.Frames(write_fd), ahead.Channel(0, read_fd)  # no process behind it
    yield out, channel
    out.close()
    channel.close()


def test_the_identical_call_takes_the_result_once(
    pipe: tuple[ahead.Frames, ahead.Channel],
) -> None:
    out, channel = pipe
    lists = ([node("a")], [pod("x", "a", 4)], {"list_nodes": 0.1})
    out.will([key()])
    out.result(key(), lists)
    monkey = ahead._channel
    ahead._channel = channel
    try:
        assert ahead.take_result(key()) == (True, lists)
        assert ahead.take_result(key()) == (False, None)  # taken: the next one is made here
    finally:
        ahead._channel = monkey


def test_the_identical_request_takes_the_answer(
    pipe: tuple[ahead.Frames, ahead.Channel],
) -> None:
    out, channel = pipe
    request = ahead.request_key(CREDS, LIST, headers())
    out.will([request])
    out.answer(request, ahead.Answer(200, paths.PROTOBUF_MEDIA, b"k8s\x00page"))
    value = channel.take(request)
    assert value is not None
    answer = ahead.Answer.from_value(value)
    assert (answer.status, answer.media) == (200, paths.PROTOBUF_MEDIA)
    read = answer.reader()
    assert [read(3), read(3), read(3), read(3)] == [b"k8s", b"\x00pa", b"ge", b""]


def token_callback(token: str) -> Any:
    return lambda: f"Bearer {token}"


@pytest.mark.parametrize(
    "other",
    [
        key(replace(CREDS, authorization=token_callback("another"))),  # another user
        key(replace(CREDS, authorization=None)),
        key(replace(CREDS, ca_pem="another CA")),
        key(replace(CREDS, server="https://127.0.0.1:6444")),
        key(replace(CREDS, verify=False)),
        key(replace(CREDS, tls_server_name="kube.example")),
        key(replace(CREDS, cert_pem=b"cert", key_pem=b"key")),
        key(CREDS, "list_nodes_and_bound_pods", frozenset({"nvidia.com/mig-1g.10gb", "pods"})),
        key(CREDS, "list_nodes_and_bound_pods", None),
        key(CREDS, "quota_limits", "default", "nvidia.com/gpu"),
        ahead.request_key(CREDS, LIST, headers(token="another")),
        ahead.request_key(CREDS, LIST, headers(accept="application/json")),
        ahead.request_key(replace(CREDS, ca_pem="another CA"), LIST, headers()),
        ahead.request_key(CREDS, LIST + "&continue=x", headers()),
    ],
)
def test_any_other_call_or_request_is_made_by_the_taker(
    pipe: tuple[ahead.Frames, ahead.Channel], other: str
) -> None:
    out, channel = pipe
    request = ahead.request_key(CREDS, LIST, headers())
    out.will([key(), request])
    out.result(key(), "the nodes and pods")
    out.answer(request, ahead.Answer(200, paths.PROTOBUF_MEDIA, b"k8s\x00page"))
    out.close()
    assert other not in (key(), request)
    assert channel.take(other) is None


def test_another_paging_is_another_call(monkeypatch: pytest.MonkeyPatch) -> None:
    made = key()
    monkeypatch.setattr(pager, "PAGE_SIZE", 2)
    assert key() != made
    monkeypatch.undo()
    monkeypatch.setattr(pager, "LIST_ACCEPT", "application/json")
    assert key() != made


def test_a_set_argument_is_the_same_call_in_any_order() -> None:
    assert key(CREDS, "m", frozenset(["b", "a", "c"])) == key(CREDS, "m", frozenset("cab"))


def test_what_is_on_its_way_is_waited_for_and_what_was_never_announced_is_not(
    pipe: tuple[ahead.Frames, ahead.Channel],
) -> None:
    out, channel = pipe
    ns = key(CREDS, "ensure_namespace", "default")
    out.will([ns, key()])
    asked = threading.Event()

    def later() -> None:  # nothing more is written until the unannounced call was asked for
        asked.wait()
        time.sleep(0.2)  # the taker waits for what was announced
        out.result(ns, None)
        time.sleep(0.2)
        out.result(key(), "the lists")

    threading.Thread(target=later).start()
    # never announced: answered at once (were it waited for, nothing would ever come)
    assert channel.take(key(CREDS, "quota_limits", "default", "nvidia.com/gpu")) is None
    asked.set()
    assert channel.take(key()) is not None
    assert channel.take(ns) is not None


def test_what_the_fetching_process_gave_up_or_never_sent_is_done_by_the_taker(
    pipe: tuple[ahead.Frames, ahead.Channel],
) -> None:
    out, channel = pipe
    ns = key(CREDS, "ensure_namespace", "default")
    out.will([ns, key()])
    out.gave_up(ns)
    assert channel.take(ns) is None
    out.close()  # the process ended without the lists
    assert channel.take(key()) is None


def test_frames_that_cannot_be_read_end_it_without_an_error() -> None:
    for garbage in (
        b"W" + (10).to_bytes(4, "big") + bytes(8) + b"\xff" * 10,  # not ASCII
        b"W" + (5).to_bytes(4, "big") + (1 << 40).to_bytes(8, "big"),  # longer than any
        b"W" + (10).to_bytes(4, "big") + bytes(8) + b"short",  # cut off
        b"X" + (2).to_bytes(4, "big") + bytes(8) + b"??",  # no such frame
    ):
        read_fd, write_fd = os.pipe()
        channel = ahead.Channel(0, read_fd)
        os.write(write_fd, garbage)
        os.close(write_fd)
        assert channel.take(key()) is None
        channel.close()


def test_nothing_is_taken_when_nothing_was_started() -> None:
    assert not ahead.expecting()
    assert ahead.take_result(key()) == (False, None)
    assert ahead.take_answer(CREDS, LIST, headers()) is None


def test_the_continue_token_is_read_from_the_head_of_a_protobuf_answer() -> None:
    pod_item = {"metadata": {"name": "p1", "namespace": "a"}, "spec": {"nodeName": "n1"}}
    page = envelope("Pod", [pod_item, pod_item], "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ")
    assert wire.list_continue(page) == "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"
    head = page[: page.index(b"eyJ2") + 30]  # the token whole, no item yet
    assert wire.list_continue(head) == "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"
    assert wire.list_continue(head[:-1]) is None  # the metadata not whole yet
    assert wire.list_continue(page[:2]) is None
    assert wire.list_continue(envelope("Pod", [pod_item])) == ""  # the last page
    with pytest.raises(wire.Corrupt):
        wire.list_continue(b"{}")
    with pytest.raises(wire.Corrupt):
        wire.list_continue(b"k8s\x00" + b"\x0a\x02ab\x12\x04\x12\x02\x0a\x00")  # items first


class Recording:
    """The client calls a use case makes (pure unit: answers as the lab would)."""

    server = "https://kube.test:6443"

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        answers = {
            "ensure_namespace": None,
            "quota_limits": [],
            "list_nodes_and_bound_pods": ([node("a")], [pod("x", "a", 4)], {}),
        }

        def call(*args: Any) -> Any:
            self.calls.append((name, args))
            return answers[name]

        return call if name in answers else (lambda: None)


def test_nothing_is_made_ahead_for_a_namespace_or_resource_the_command_refuses() -> None:
    from gpuops.usecases import ahead as usecase

    assert usecase._check_calls("default", None) == headroom.check_calls("default", GPU_NAME)
    assert usecase._check_calls("Not_A_Namespace", None) == []
    assert usecase._check_calls("default", "cpu") == []  # not an extended resource


GPU_NAME = "nvidia.com/gpu"


@pytest.mark.parametrize(
    ("namespace", "resource"),
    [("default", "nvidia.com/gpu"), ("team", "nvidia.com/mig-1g.10gb")],
)
def test_the_calls_made_ahead_are_the_calls_of_the_check(namespace: str, resource: str) -> None:
    kube = Recording()
    request = headroom.CheckRequest(
        replace(shape(2), namespace=namespace, resource=resource), Policy()
    )
    headroom.check(request, lambda cluster: kube)  # type: ignore[arg-type,return-value]
    made_ahead = headroom.check_calls(namespace, resource)
    assert kube.calls == [call for group in made_ahead for call in group]
