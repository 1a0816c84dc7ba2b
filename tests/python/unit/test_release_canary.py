"""The canary's pure part (gpuops.core.canary): its Deployment from the stable's, the proof it
is gpuops' own, the in-place schedule and fit, and how records of progressive releases that a
run left open are finished (gpuops.core.releasehistory.reconcile)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gpuops.core import canary
from gpuops.core import releasehistory as hist
from gpuops.core.kubemodel import Node, Placement, Pod
from gpuops.core.releaseconfig import ModelMount
from gpuops.core.releasehistory import Release
from gpuops.core.releasepatch import Content

GPU = "nvidia.com/gpu"


def stable() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "infer",
            "namespace": "ai",
            "labels": {"team": "ml"},
            "annotations": {"gpuops.io/release": "3", "kubernetes.io/change-cause": "x"},
            "uid": "u-stable",
        },
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": "infer"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
            "progressDeadlineSeconds": 120,
            "template": {
                "metadata": {"labels": {"app": "infer"}, "annotations": {"keep": "me"}},
                "spec": {
                    "containers": [
                        {
                            "name": "infer",
                            "image": "r/infer:1@sha256:a",
                            "env": [{"name": "MODEL", "value": "v1"}, {"name": "X", "value": "1"}],
                        },
                        {"name": "sidecar", "image": "r/side:1"},
                    ]
                },
            },
        },
    }


def test_the_canary_is_the_stables_template_running_the_new_release_on_its_own_track() -> None:
    before = stable()
    original = copy.deepcopy(before)

    body = canary.canary_body(
        before,
        container="infer",
        mount=ModelMount("env", "MODEL"),
        new=Content("r/infer:2@sha256:b", "v2"),
        release=4,
        replicas=1,
        change_cause="gpuops #4 canary",
    )

    assert before == original, "the stable's object is not touched"
    meta, spec = body["metadata"], body["spec"]
    assert meta["name"] == "infer-canary" and meta["namespace"] == "ai"
    assert meta["labels"] == {"team": "ml", "gpuops.io/track": "canary"}
    assert meta["annotations"] == {
        "gpuops.io/canary-of": "infer",
        "gpuops.io/release": "4",
        "kubernetes.io/change-cause": "gpuops #4 canary",
    }
    assert spec["replicas"] == 1 and spec["progressDeadlineSeconds"] == 120
    # its ReplicaSet never adopts the stable's pods; the Service (app=infer) selects both
    assert spec["selector"] == {"matchLabels": {"app": "infer", "gpuops.io/track": "canary"}}
    template = spec["template"]
    assert template["metadata"]["labels"] == {"app": "infer", "gpuops.io/track": "canary"}
    assert template["metadata"]["annotations"] == {"keep": "me"}
    main, side = template["spec"]["containers"]
    assert main["image"] == "r/infer:2@sha256:b" and side["image"] == "r/side:1"
    assert {e["name"]: e["value"] for e in main["env"]} == {"MODEL": "v2", "X": "1"}
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}


@pytest.mark.parametrize(
    ("mount", "where"),
    [
        (ModelMount("annotation", "example.com/model"), "example.com/model"),
        (ModelMount("configmap", "model-config", "version"), "gpuops.io/model-version"),
    ],
)
def test_a_model_in_an_annotation_or_configmap_goes_on_the_canarys_template(
    mount: ModelMount, where: str
) -> None:
    body = canary.canary_body(
        stable(),
        container="infer",
        mount=mount,
        new=Content("r/infer:1@sha256:a", "v9"),
        release=5,
        replicas=2,
        change_cause="c",
    )
    assert body["spec"]["template"]["metadata"]["annotations"] == {"keep": "me", where: "v9"}


def test_only_a_canary_gpuops_made_for_an_open_release_is_its_own() -> None:
    made = {
        "metadata": {
            "uid": "u1",
            "annotations": {"gpuops.io/canary-of": "infer", "gpuops.io/release": "7"},
        }
    }
    assert canary.is_ours(made, "infer", {7}) and canary.is_ours(made, "infer", {7}, "u1")
    assert not canary.is_ours(made, "infer", {7}, "u2"), "another object of that name"
    assert not canary.is_ours(made, "infer", {6}), "a release the history does not hold open"
    assert not canary.is_ours(made, "other", {7}), "the canary of another Deployment"
    theirs = {"metadata": {"uid": "u1", "annotations": {"gpuops.io/release": "7"}}}
    assert not canary.is_ours(theirs, "infer", {7}), "no canary-of: someone's own Deployment"
    odd = {"metadata": {"annotations": {"gpuops.io/canary-of": "infer", "gpuops.io/release": "7x"}}}
    assert canary.canary_release(odd, "infer") is None


@pytest.mark.parametrize(
    ("now", "target", "limit", "batches"),
    [
        (0, 3, 1, [1, 1, 1]),
        (0, 3, 2, [2, 1]),
        (1, 2, 5, [1]),
        (3, 0, 2, [-2, -1]),
        (2, 2, 1, []),
    ],
)
def test_in_place_moves_never_take_more_than_max_unavailable_at_once(
    now: int, target: int, limit: int, batches: list[int]
) -> None:
    assert canary.moves(now, target, limit) == batches
    assert all(abs(b) <= limit for b in batches)


def test_in_place_needs_at_least_one_pod_per_move() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        canary.moves(0, 1, 0)


def test_the_stables_in_place_note_is_read_back_only_in_gpuops_shape() -> None:
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}
    note = canary.in_place_note(4, 3, strategy)
    obj = {"metadata": {"annotations": {canary.IN_PLACE_ANNOTATION: note}}}
    assert canary.read_in_place_note(obj) == {"release": 4, "replicas": 3, "strategy": strategy}
    for bad in ("{", "[]", json.dumps({"release": "4", "replicas": 3, "strategy": {}}),
                json.dumps({"release": 4, "replicas": -1, "strategy": {}}),
                json.dumps({"release": 4, "replicas": 3, "strategy": []})):  # fmt: skip
        assert (
            canary.read_in_place_note(
                {"metadata": {"annotations": {canary.IN_PLACE_ANNOTATION: bad}}}
            )
            is None
        )
    assert canary.in_place_strategy(2) == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 2},
    }


def node(name: str, gpus: int = 2, **kw: Any) -> Node:
    return Node(
        name=name,
        labels={"accelerator": "h800"},
        allocatable={GPU: gpus, "cpu": 64000, "memory": 256 << 30, "pods": 110},
        capacity={GPU: gpus},
        **kw,
    )


def pod(name: str, on: str, gpus: int = 1, ns: str = "ai") -> Pod:
    return Pod(ns, name, node_name=on, phase="Running", requests={GPU: gpus, "cpu": 100})


NEW = Pod("ai", "new", requests={GPU: 1, "cpu": 100}, placement=Placement({"accelerator": "h800"}))


def test_in_place_fits_where_every_stable_pod_frees_a_place_for_the_new_one() -> None:
    nodes = [node("a"), node("b")]
    bound = [pod("s1", "a"), pod("s2", "a"), pod("s3", "b"), pod("train", "b", ns="ml")]

    fit = canary.in_place_fit(NEW, nodes, bound, ["ai/s1", "ai/s2", "ai/s3"], "accelerator")

    assert fit.fits, fit
    assert "each of the stable's 3 pods" in fit.message


def test_in_place_does_not_fit_where_a_stable_pod_sits_on_a_cordoned_node() -> None:
    """The ReplicaSet controller picks which pod goes: one on a cordoned node frees GPUs the
    new pod cannot take, so in place is refused, naming the pod, the node and the holders."""
    nodes = [node("a"), node("b", unschedulable=True)]
    bound = [pod("s1", "a"), pod("train", "a", ns="ml"), pod("s2", "b"), pod("s3", "b")]

    fit = canary.in_place_fit(NEW, nodes, bound, ["ai/s1", "ai/s2", "ai/s3"], "accelerator")

    assert not fit.fits
    assert set(fit.blocked) == {"ai/s2", "ai/s3"}
    assert "cordoned" in fit.blocked["ai/s2"]
    assert "2 of the stable's 3 pods" in fit.message
    assert fit.holders == (
        "a (h800): 2/2 held by ai/s1 (1), ml/train (1)",
        "b (h800): 2/2 held by ai/s2 (1), ai/s3 (1)",
    )


def test_in_place_does_not_fit_without_a_running_stable_pod() -> None:
    fit = canary.in_place_fit(NEW, [node("a")], [pod("x", "a", 2, ns="ml")], [], "accelerator")
    assert not fit.fits and "no running pod" in fit.message
    assert fit.holders == ("a (h800): 2/2 held by ml/x (2)",)


def rel(n: int, status: str = hist.PENDING, **kw: Any) -> Release:
    return Release(n, "prod", "promote", status, "2026-01-01T00:00:00Z", tag=f"1.{n}", **kw)


def test_open_progressive_records_are_finished_from_what_the_cluster_says() -> None:
    canary_doc = {"deployment": "infer", "name": "infer-canary", "mode": "surge"}
    records = [
        rel(1, hist.SUCCEEDED),
        rel(2, canary=canary_doc),  # stopped during its steps
        rel(3, canary=canary_doc, paused={"step": 2}),  # waited on its approval
        rel(4, canary=canary_doc),  # the stable runs it: "all" was reached
    ]
    cleaned = {2: ["removed the canary ai/infer-canary"], 3: [], 4: ["x"]}

    got = {f.record.number: f for f in hist.reconcile(records, 1, None, True, "now", cleaned)}

    assert got[2].record.status == hist.INTERRUPTED and got[2].record.rolled_back_to == 1
    assert got[2].record.note is not None
    assert got[2].record.note.endswith(
        "previous release restored; removed the canary ai/infer-canary"
    )
    assert got[3].record.status == hist.ABORTED and got[3].record.paused is None
    assert "approval (step 3)" in (got[3].record.note or "")
    four = hist.reconcile([rel(4, canary=canary_doc)], 4, None, True, "now", cleaned)
    assert four[0].record.status == hist.SUCCEEDED


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("steps", "all", "field 'steps' must be a list of steps"),
        ("steps", [{"index": "0", "kind": "pause", "state": "passed"}], "field 'steps'"),
        ("steps", [{"index": True, "kind": "pause", "state": "passed"}], "field 'steps'"),
        ("canary", {"deployment": "infer", "name": "infer-canary"}, "a string 'mode'"),
        ("paused", {"step": "2"}, "field 'paused' must be an object with a number 'step'"),
    ],
)
def test_a_damaged_progressive_record_is_named_never_coerced(
    field: str, value: Any, says: str
) -> None:
    doc = rel(1).to_dict()
    doc[field] = value
    with pytest.raises(Exception, match=says):
        hist.decode(json.dumps([doc]), "ConfigMap ai/gpuops-releases-prod")


def test_progressive_records_round_trip() -> None:
    record = rel(
        1,
        steps=[{"index": 0, "kind": "replicas", "state": "passed", "replicas": 1}],
        canary={"deployment": "infer", "name": "infer-canary", "mode": "in-place"},
        paused={"step": 1, "approvers": ["a"]},
    )
    [back] = hist.decode(hist.encode([record]), "x")
    assert back == record
