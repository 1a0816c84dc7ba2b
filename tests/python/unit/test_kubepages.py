"""Typed LIST-page decoding (gpuops.adapters.kube.pages) against the dict decoders it replaces
on the headroom path: for any node or pod the API could send, the same model objects."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuops.adapters.kube.decode import node_from_api, pod_from_api
from gpuops.adapters.kube.pages import (
    ListReader,
    PageError,
    node_page,
    node_reader,
    pod_page,
    pod_reader,
)
from gpuops.errors import OperationFailed

GPU = "nvidia.com/gpu"
KEEP = frozenset({GPU, "pods"})

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=12)
quantities = st.sampled_from(["0", "1", "2", "8", "100m", "1500m", "128Mi", "2Gi", "1e3", "110"])
amounts = st.dictionaries(st.sampled_from([GPU, "cpu", "memory", "pods", "ex.com/x"]), quantities)
junk = st.dictionaries(
    st.sampled_from(["managedFields", "uid", "image", "x"]), st.integers(-(2**31), 2**31)
)


def optional(key: str, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """``{key: value}`` or ``{}``: the API omits empty fields."""
    return st.one_of(st.just({}), strategy.map(lambda v: {key: v}))


@st.composite
def api_nodes(draw: st.DrawFn) -> dict[str, Any]:
    conditions = draw(
        st.lists(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["Ready", "MemoryPressure"])},
                optional={
                    "status": st.sampled_from(["True", "False", "Unknown"]),
                    "reason": st.sampled_from(["KubeletReady", "NodeStatusUnknown", ""]),
                },
            ),
            max_size=3,
        )
    )
    taint = st.fixed_dictionaries(
        {"key": names, "effect": st.sampled_from(["NoSchedule", "NoExecute"])},
        optional={"value": st.one_of(st.none(), names)},
    )
    return {
        "metadata": {
            "name": draw(names),
            **draw(optional("labels", st.dictionaries(names, names, max_size=3))),
            **draw(junk),
        },
        "spec": {
            **draw(optional("taints", st.lists(taint, max_size=2))),
            **draw(optional("unschedulable", st.booleans())),
        },
        "status": {
            "conditions": conditions,
            **draw(optional("allocatable", amounts)),
            **draw(optional("capacity", amounts)),
            **draw(junk),
        },
    }


container = st.fixed_dictionaries(
    {"name": names},
    optional={
        "resources": st.fixed_dictionaries({}, optional={"requests": amounts, "limits": amounts}),
        "restartPolicy": st.just("Always"),
        "image": names,
    },
)


@st.composite
def api_pods(draw: st.DrawFn) -> dict[str, Any]:
    owner = st.fixed_dictionaries(
        {"kind": st.sampled_from(["ReplicaSet", "Job"]), "name": names},
        optional={"controller": st.booleans()},
    )
    return {
        "metadata": {
            "name": draw(names),
            "namespace": draw(names),
            **draw(optional("ownerReferences", st.lists(owner, max_size=2))),
            **draw(junk),
        },
        "spec": {
            **draw(optional("nodeName", names)),
            "containers": draw(st.lists(container, min_size=1, max_size=3)),
            **draw(optional("initContainers", st.lists(container, max_size=2))),
            **draw(optional("overhead", amounts)),
        },
        "status": draw(optional("phase", st.sampled_from(["Running", "Pending", "Failed"]))),
    }


def page(items: list[dict[str, Any]], token: str = "") -> bytes:
    meta = {"resourceVersion": "7", **({"continue": token} if token else {})}
    return orjson.dumps({"kind": "List", "apiVersion": "v1", "metadata": meta, "items": items})


@settings(max_examples=80, deadline=None)
@given(st.lists(api_nodes(), max_size=4), st.sampled_from([KEEP, None]))
def test_node_pages_decode_like_node_from_api(items: list[dict[str, Any]], keep: Any) -> None:
    assert node_page(page(items, "tok"), keep) == (
        "tok",
        [node_from_api(o, resources=keep) for o in items],
    )


@settings(max_examples=80, deadline=None)
@given(st.lists(api_pods(), max_size=4), st.sampled_from([KEEP, None]))
def test_pod_pages_decode_like_pod_from_api(items: list[dict[str, Any]], keep: Any) -> None:
    assert pod_page(page(items), keep) == ("", [pod_from_api(o, resources=keep) for o in items])


def test_pages_that_cannot_be_read_are_errors_never_empty_lists() -> None:
    with pytest.raises(PageError) as err:
        pod_page(b'{"kind":"PodList","metadata":{}}')  # no items: not "no pods"
    assert not err.value.invalid
    for bad in (b'{"items":[1]}', b'{"items":[{"metadata":[]}]}', b'{"items":{}}'):
        with pytest.raises(PageError):
            node_page(bad)
    with pytest.raises(PageError) as err:
        node_page(b'{"items":[')
    assert err.value.invalid


def test_a_bad_quantity_names_the_object() -> None:
    bad = {
        "metadata": {"name": "p", "namespace": "t"},
        "spec": {"containers": [{"resources": {"requests": {GPU: "lots"}}}]},
    }
    with pytest.raises(OperationFailed, match="pod t/p: cannot read quantity 'lots' of nvidia"):
        pod_page(page([bad]), KEEP)


def feed(reader: ListReader[Any], raw: bytes, cuts: list[int]) -> list[Any]:
    """Feed ``raw`` to ``reader`` in pieces ending at ``cuts``; every item it gives back."""
    out: list[Any] = []
    start = 0
    for cut in sorted({*cuts, len(raw)}):
        out += reader.feed(raw[start:cut])
        start = cut
    return out + reader.end()


@settings(max_examples=80, deadline=None)
@given(
    st.lists(api_pods(), max_size=6),
    st.lists(st.integers(0, 4000), max_size=8),
    st.booleans(),
    st.sampled_from([KEEP, None]),
)
def test_a_list_fed_in_any_pieces_decodes_like_the_whole_page(
    items: list[dict[str, Any]], cuts: list[int], nested: bool, keep: Any
) -> None:
    if nested and items:  # an item holding what looks like the start of the next item
        items[0]["spec"]["volumes"] = [{"name": "a"}, {"metadata": {"name": "v"}, "x": [1]}]
    raw = page(items, "tok")
    reader = pod_reader(keep)
    assert feed(reader, raw, cuts) == pod_page(raw, keep)[1]
    assert reader.token == "tok"


def test_a_list_of_another_layout_is_decoded_whole_and_bad_ones_are_errors() -> None:
    nodes = [
        {"metadata": {"name": f"n{i}"}, "status": {"allocatable": {GPU: "8"}}} for i in range(3)
    ]
    pretty = orjson.dumps({"items": nodes, "metadata": {}}, option=orjson.OPT_INDENT_2)
    assert [n.name for n in feed(node_reader(), pretty, [7, 100])] == ["n0", "n1", "n2"]
    raw = page(nodes)
    with pytest.raises(PageError) as err:
        feed(node_reader(), raw[:-5], [50])  # cut short
    assert err.value.invalid
    with pytest.raises(PageError) as err:
        feed(node_reader(), raw.replace(b'"n1"', b"7"), [40])  # a name that is not a string
    assert not err.value.invalid
    with pytest.raises(PageError):
        feed(node_reader(), b'{"kind":"NodeList","metadata":{}}', [])  # no items
    assert feed(node_reader(), page([]), [3]) == []


def test_a_cut_inside_an_item_waits_for_the_rest_of_it() -> None:
    nested = {
        "metadata": {"name": "p0", "namespace": "t"},
        "spec": {
            "volumes": [{"name": "a"}, {"metadata": {"name": "v"}}],
            "containers": [{"resources": {"requests": {GPU: "2"}}}],
        },
    }
    other = {"metadata": {"name": "p1", "namespace": "t"}, "spec": {"containers": []}}
    raw = page([nested, other])
    false_cut = raw.index(b'},{"metadata":{"name":"v"')
    reader = pod_reader(KEEP)
    assert reader.feed(raw[: false_cut + 20]) == []  # only the false cut so far: nothing
    pods = reader.feed(raw[false_cut + 20 :]) + reader.end()
    assert [(p.name, p.requests) for p in pods] == [("p0", {GPU: 2}), ("p1", {})]


def test_an_absent_metadata_spec_or_status_reads_as_the_shapes_defaults() -> None:
    """The conversion's stand-ins for what a JSON item lacks (gpuops.adapters.kube.items) hold
    the defaults of the shapes msgspec decodes into."""
    from gpuops.adapters.kube import items, pages

    for stand_in, shape in [
        (items._NO_NODE_META, pages._NodeMeta()),
        (items._NO_NODE_SPEC, pages._NodeSpec()),
        (items._NO_NODE_STATUS, pages._NodeStatus()),
        (items._NO_POD_META, pages._PodMeta()),
        (items._NO_POD_SPEC, pages._PodSpec()),
    ]:
        fields = {f: getattr(shape, f) for f in shape.__struct_fields__}
        assert vars(stand_in) == fields, type(shape).__name__
