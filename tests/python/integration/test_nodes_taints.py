"""The unhealthy taint's setters on the lab's real kube-apiserver: each records its reason in
the node's annotation, ``nodes label`` (inspection) leaves a taint ``nodes update`` set, the
last release removes it, and a taint set by hand is never removed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from integration.conftest_nodes import NodesLab

from gpuops.usecases.cluster import Cluster
from gpuops.usecases.nodes import taints

pytestmark = [pytest.mark.lab, pytest.mark.timeout(300)]

NODE = "gpu-l40s-01"
TAINT = "gpuops.io/gpu-unhealthy"
BY = "gpuops.io/gpu-unhealthy-by"


@pytest.fixture
def node(nodes_lab: NodesLab) -> Iterator[str]:
    """The node, put back afterwards as it was: taints, labels and annotations (``nodes label``
    writes labels the other node tests expect to find missing)."""
    meta = nodes_lab.node(NODE).metadata
    labels, notes = dict(meta.labels or {}), dict(meta.annotations or {})
    taints_before = nodes_lab.node(NODE).spec.taints
    yield NODE
    now = nodes_lab.node(NODE).metadata
    back = {
        "labels": {**dict.fromkeys(now.labels or {}), **labels},
        "annotations": {**dict.fromkeys(now.annotations or {}), **notes},
    }
    nodes_lab.kube.core.patch_node(
        NODE,
        {
            "spec": {
                "taints": [
                    {"key": t.key, "value": t.value, "effect": t.effect}
                    for t in taints_before or []
                ]
                or None
            },
            "metadata": back,
        },
    )


def _state(nodes_lab: NodesLab) -> tuple[list[tuple[str, str, str]], dict[str, str] | None]:
    """The unhealthy taints and the claims (the record of the taint gpuops added checked: it
    names one of the taints on the node, as added)."""
    n = nodes_lab.node(NODE)
    found = [(t.key, t.value, t.effect) for t in n.spec.taints or [] if t.key == TAINT]
    text = (n.metadata.annotations or {}).get(BY)
    claims = json.loads(text) if text else None
    if claims and (added := claims.pop("@taint", None)) is not None:
        assert (TAINT, added["value"], added["effect"]) in found
    return found, claims


def test_inspection_keeps_the_taint_nodes_update_set_and_the_last_release_removes_it(
    nodes_lab: NodesLab, node: str, tmp_path: Path
) -> None:
    kube = Cluster(str(nodes_lab.kube.kubeconfig)).connect()
    try:
        taints.mark_unhealthy(kube, node, "nodes-update", "validation failed: dcgmi diag -r 1")
        assert _state(nodes_lab) == (
            [(TAINT, "nodes-update", "NoSchedule")],
            {"nodes-update": "validation failed: dcgmi diag -r 1"},
        )
        inv = nodes_lab.fleet.facts["inventory"]
        run = nodes_lab.gpuops("nodes", "label", "-i", inv, "-l", node, tmp=tmp_path)
        assert run.rc == 0, run.stderr
        (host,) = run.result["hosts"]
        assert host["health"] == "ok"  # inspection finds nothing critical: it has no claim
        assert _state(nodes_lab)[0] == [(TAINT, "nodes-update", "NoSchedule")]
        # inspection's own claim next to it: releasing one keeps the taint
        taints.mark_unhealthy(kube, node, "nodes-inspect", "critical ecc")
        assert taints.release_unhealthy(kube, node, "nodes-update") is False
        assert _state(nodes_lab) == (
            [(TAINT, "nodes-update", "NoSchedule")],
            {"nodes-inspect": "critical ecc"},
        )
        assert taints.release_unhealthy(kube, node, "nodes-inspect") is True
        assert _state(nodes_lab) == ([], None)
        # a taint set by hand: a release changes nothing, a claim and its release keep it
        nodes_lab.kube.core.patch_node(
            node, {"spec": {"taints": [{"key": TAINT, "value": "hand", "effect": "NoExecute"}]}}
        )
        added = _time_added(nodes_lab)  # the API server's, or none: kept as it was either way
        assert taints.release_unhealthy(kube, node, "nodes-update") is False
        taints.mark_unhealthy(kube, node, "nodes-update", "rollback failed")
        assert taints.release_unhealthy(kube, node, "nodes-update") is False
        found, claims = _state(nodes_lab)
        assert found == [(TAINT, "hand", "NoExecute")] and claims is not None
        assert set(claims) == {"untracked"}
        assert _time_added(nodes_lab) == added
    finally:
        kube.close()


def _time_added(nodes_lab: NodesLab) -> dict[str, str]:
    return {
        t.key: t.time_added.isoformat()
        for t in nodes_lab.node(NODE).spec.taints or []
        if t.time_added
    }


def test_an_admin_s_hand_taint_outlives_a_stale_claim_and_time_added_is_kept(
    nodes_lab: NodesLab, node: str
) -> None:
    """The admin removes gpuops' taint but not the annotation, later taints by hand
    (ops-ticket-123, NoExecute, with timeAdded as kubectl sets it): the release keeps it."""
    kube = Cluster(str(nodes_lab.kube.kubeconfig)).connect()
    try:
        taints.mark_unhealthy(kube, node, "nodes-update", "validation failed")
        at = "2026-11-30T10:00:00Z"
        stamp = datetime(2026, 11, 30, 10, tzinfo=UTC).isoformat()
        hand = {"key": TAINT, "value": "ops-ticket-123", "effect": "NoExecute", "timeAdded": at}
        other = {"key": "team/drain", "value": "x", "effect": "NoExecute", "timeAdded": at}
        nodes_lab.kube.core.patch_node(node, {"spec": {"taints": [hand, other]}})
        assert _time_added(nodes_lab) == {TAINT: stamp, "team/drain": stamp}
        assert taints.release_unhealthy(kube, node, "nodes-update") is False
        found, claims = _state(nodes_lab)
        assert found == [(TAINT, "ops-ticket-123", "NoExecute")] and claims is not None
        assert set(claims) == {"untracked"}
        # rewriting the taint list (a claim by another setter) keeps each timeAdded
        taints.mark_unhealthy(kube, node, "nodes-inspect", "critical ecc")
        assert _time_added(nodes_lab) == {TAINT: stamp, "team/drain": stamp}
        # why it must be sent back: a merge patch of the list without it loses the original
        rv = nodes_lab.node(NODE).metadata.resource_version
        kube.request(
            "PATCH",
            f"/api/v1/nodes/{node}",
            what="rewrite the taint list without timeAdded",
            body={
                "metadata": {"resourceVersion": rv},
                "spec": {"taints": [{"key": "team/drain", "value": "x", "effect": "NoExecute"}]},
            },
            content_type="application/merge-patch+json",
        )
        assert _time_added(nodes_lab).get("team/drain") != stamp
    finally:
        kube.close()
