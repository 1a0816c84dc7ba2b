"""LIST pages in Kubernetes' protobuf encoding (gpuops.adapters.kube.proto): for any node or
pod the API could send, the same model objects as its JSON gives; any split of the stream;
a truncated or corrupt answer is an error, never a shorter list. The lab's real API server's
answers are compared with JSON in integration/test_kube_transport.py."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from unit.test_kubepages import KEEP, api_nodes, api_pods, feed, page

from gpuops.adapters.kube import proto as kubeproto
from gpuops.adapters.kube.pages import PageError, node_page, pod_page
from gpuops.errors import OperationFailed


def _quantities(values: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if values is None else {k: {"string": v} for k, v in values.items()}


def _proto_shaped(kind: str, item: dict[str, Any]) -> dict[str, Any]:
    """A JSON item in the shape of its protobuf message: quantities are ``Quantity``
    messages there (JSON writes them as strings)."""
    item = copy.deepcopy(item)
    if kind == "Node":
        status = item.get("status") or {}
        for field in ("allocatable", "capacity"):
            if field in status:
                status[field] = _quantities(status[field])
        return item
    spec = item.get("spec") or {}
    if "overhead" in spec:
        spec["overhead"] = _quantities(spec["overhead"])
    for c in [*spec.get("containers", []), *spec.get("initContainers", [])]:
        res = c.get("resources") or {}
        for field in ("requests", "limits"):
            if field in res:
                res[field] = _quantities(res[field])
    return item


def envelope(kind: str, items: list[dict[str, Any]], token: str = "") -> bytes:
    """What the API server sends for a LIST asked for as protobuf: ``k8s\\0`` and a
    ``runtime.Unknown`` holding the list, fields other than ours skipped as the server's
    unknown ones would be."""
    lst = kubeproto.message_type(f"{kind}List")()
    setattr(lst.metadata, "continue", token)  # "continue" is a keyword
    for item in items:
        json_format.ParseDict(
            _proto_shaped(kind, item), lst.items.add(), ignore_unknown_fields=True
        )
    unknown = kubeproto.message_type("Unknown")(raw=lst.SerializeToString())
    unknown.typeMeta.apiVersion, unknown.typeMeta.kind = "v1", f"{kind}List"
    unknown.contentEncoding, unknown.contentType = "", ""
    return kubeproto.MAGIC + unknown.SerializeToString()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(api_nodes(), max_size=4),
    st.lists(st.integers(0, 3000), max_size=6),
    st.sampled_from([KEEP, None]),
)
def test_node_lists_decode_like_their_json(
    items: list[dict[str, Any]], cuts: list[int], keep: Any
) -> None:
    reader = kubeproto.node_reader(keep)
    assert feed(reader, envelope("Node", items, "tok"), cuts) == node_page(page(items), keep)[1]
    assert reader.head_read and reader.token == "tok"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(api_pods(), max_size=6),
    st.lists(st.integers(0, 3000), max_size=6),
    st.sampled_from([KEEP, None]),
)
def test_pod_lists_fed_in_any_pieces_decode_like_their_json(
    items: list[dict[str, Any]], cuts: list[int], keep: Any
) -> None:
    reader = kubeproto.pod_reader(keep)
    assert feed(reader, envelope("Pod", items), cuts) == pod_page(page(items), keep)[1]
    assert reader.head_read and reader.token == ""


def sample_pods(n: int) -> list[dict[str, Any]]:
    return [
        {
            "metadata": {"name": f"p{i}", "namespace": "train"},
            "spec": {
                "nodeName": "gpu-1",
                "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2"}}}],
            },
            "status": {"phase": "Running"},
        }
        for i in range(n)
    ]


def test_the_continue_token_is_read_before_the_items_arrive() -> None:
    raw = envelope("Pod", sample_pods(150), "next-page")  # items decoded in runs of 64
    reader = kubeproto.pod_reader()
    assert reader.feed(raw[:80]) == [] and reader.head_read and reader.token == "next-page"
    got = reader.feed(raw[80:]) + reader.end()
    assert [p.name for p in got] == [f"p{i}" for i in range(150)]
    assert got[0].requests == {"nvidia.com/gpu": 2} and got[0].node_name == "gpu-1"


def test_an_answer_cut_short_is_never_a_shorter_list() -> None:
    """Cut anywhere up to the list's last byte: an error. Cut in the envelope's trailing
    fields (after the list): an error, or (cut between them) the whole list."""
    raw = envelope("Pod", sample_pods(3), "tok")
    whole = kubeproto.pod_reader().feed(raw)
    list_end = len(raw) - len(b"\x1a\x00\x22\x00")  # contentEncoding, contentType: empty
    for cut in range(len(raw)):
        reader = kubeproto.pod_reader()
        try:
            got = reader.feed(raw[:cut]) + reader.end()
        except PageError as err:
            assert err.invalid and err.encoding == "protobuf"
            continue
        assert cut >= list_end and got == whole and len(whole) == 3


@pytest.mark.parametrize(
    ("name", "corrupt"),
    [
        ("not the magic", lambda raw: b"k8s\x01" + raw[4:]),
        ("JSON", lambda raw: b'{"items":[]}'),
        ("garbage after the envelope", lambda raw: raw + b"\xff\xff"),
        ("an item running past the list", None),
        ("a field number 0", lambda raw: raw[:4] + b"\x00" + raw[4:]),
    ],
)
def test_a_corrupt_answer_is_an_error_never_a_shorter_list(name: str, corrupt: Any) -> None:
    raw = (corrupt or _longer_last_item)(envelope("Pod", sample_pods(3)))
    with pytest.raises(PageError) as err:
        feed(kubeproto.pod_reader(), raw, [])
    assert err.value.invalid, name


def _longer_last_item(raw: bytes) -> bytes:
    """The envelope with the list's length unchanged but its last item's length prefix one
    more than it is (so it would run into the envelope's trailing fields)."""
    lst = kubeproto.message_type("PodList")()
    unknown = kubeproto.message_type("Unknown").FromString(raw[4:])
    lst.MergeFromString(unknown.raw)
    last = lst.items[-1].SerializeToString()
    body = unknown.raw
    at = body.rindex(bytes([0x12, len(last)]) + last)
    assert len(last) < 126
    unknown.raw = body[:at] + bytes([0x12, len(last) + 1]) + last
    return raw[:4] + unknown.SerializeToString()


def test_a_bad_quantity_names_the_object_as_from_json() -> None:
    bad = sample_pods(1)
    bad[0]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "lots"
    with pytest.raises(OperationFailed, match="pod train/p0: cannot read quantity 'lots' of"):
        feed(kubeproto.pod_reader(KEEP), envelope("Pod", bad), [])


def test_a_status_answer_reads_like_its_json() -> None:
    status = kubeproto.message_type("Status")(message='pods "x" not found', reason="NotFound")
    status.code = 404
    unknown = kubeproto.message_type("Unknown")(raw=status.SerializeToString())
    unknown.typeMeta.apiVersion, unknown.typeMeta.kind = "v1", "Status"
    assert kubeproto.status(kubeproto.MAGIC + unknown.SerializeToString()) == {
        "kind": "Status",
        "message": 'pods "x" not found',
        "reason": "NotFound",
        "code": 404,
    }
    assert kubeproto.status(envelope("Pod", [])) is None  # a list, not a Status
    assert kubeproto.status(b'{"kind":"Status"}') is None
    assert kubeproto.status(kubeproto.MAGIC + b"\xff\xff\xff") is None
