"""Typed LIST-page decoding (gpuops.adapters.kubepages) against the dict decoders it replaces
on the headroom path: for any node or pod the API could send, the same model objects."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuops.adapters.kubedecode import node_from_api, pod_from_api
from gpuops.adapters.kubepages import PageError, node_page, pod_page
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
