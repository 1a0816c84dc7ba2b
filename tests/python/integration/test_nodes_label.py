"""``gpuops nodes label`` on the lab (fleet hosts = kwok nodes), for real: labels matching
what each host's nvidia-smi says and the inventory's rack, stale labels gpuops owns removed
and no others, taints for a pending reboot and a critical finding, a second run writing
nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from integration.conftest_nodes import NodesLab

from gpuops_lab import hoststate

pytestmark = pytest.mark.timeout(600)
OWNED = "gpuops.io/labels"


def facts(nl: NodesLab, host: str) -> tuple[str, str, int, str]:
    out = nl.fleet.ssh(
        host,
        "nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader,nounits",
    ).stdout.splitlines()
    name, memory, driver = out[0].split(", ")
    return name, memory, len(out), driver


def test_labels_match_each_host_and_a_second_run_writes_nothing(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    inv = nodes_lab.fleet.facts["inventory"]
    core = nodes_lab.kube.core
    hosts = [h["name"] for h in nodes_lab.fleet.hosts]
    # drift: a wrong driver label, a missing product label, a stale label gpuops owned,
    # and a label of someone else's
    core.patch_node(
        "gpu-a100-01",
        {
            "metadata": {
                "labels": {"gpu-driver": "1.2.3", "team": "ml", "gpuops-old": "x"},
                "annotations": {OWNED: "gpu-driver,gpuops-old"},
            }
        },
    )
    core.patch_node("gpu-l40s-01", {"metadata": {"labels": {"nvidia.com/gpu.product": None}}})
    hoststate.set_reboot_pending(nodes_lab.lab, "gpu-h800-02", "570.133.20")
    try:
        run = nodes_lab.gpuops("nodes", "label", "-i", inv, tmp=tmp_path)
        assert run.rc == 0, run.stderr
        status = {h["host"]: h["status"] for h in run.result["hosts"]}
        assert set(status.values()) == {"updated"}  # rack is new on every node
        for host in hosts:
            labels = nodes_lab.node(host).metadata.labels
            name, memory, count, driver = (
                facts(nodes_lab, host)
                if host != "gpu-h800-02"
                else ("NVIDIA H800", "81559", 8, "550.90.07")
            )
            assert labels["nvidia.com/gpu.product"] == name.replace(" ", "-"), host
            assert labels["nvidia.com/gpu.memory"] == memory
            assert labels["nvidia.com/gpu.count"] == str(count)
            assert labels["gpu-driver"] == driver
            major, minor, rev = driver.split(".")
            assert (
                labels["nvidia.com/cuda.driver.major"],
                labels["nvidia.com/cuda.driver.minor"],
                labels["nvidia.com/cuda.driver.rev"],
            ) == (major, minor, rev)
            group = next(h["group"] for h in nodes_lab.fleet.hosts if h["name"] == host)
            assert (
                labels["accelerator"]
                == {
                    "gpu_a100": "nvidia-a100-80g",
                    "gpu_h800": "nvidia-h800",
                    "gpu_l40s": "nvidia-l40s",
                }[group]
            )
            assert labels["rack"] in ("r01", "r02")
        a1 = nodes_lab.node("gpu-a100-01").metadata
        # gpuops-old is in the annotation but is no label gpuops sets: it is not removed (the
        # annotation only narrows gpuops' own fixed list), and it leaves the annotation
        assert a1.labels["gpuops-old"] == "x" and a1.labels["team"] == "ml"
        assert "gpu-driver" in a1.annotations[OWNED].split(",")
        assert "gpuops-old" not in a1.annotations[OWNED].split(",")
        # taints by policy: the pending reboot, the faulty card; the labels gpu-h800-02's
        # nvidia-smi cannot give now are kept as they were
        taints = {
            h: [(t.key, t.value, t.effect) for t in nodes_lab.node(h).spec.taints or []]
            for h in hosts
        }
        assert taints["gpu-h800-02"] == [("gpuops.io/reboot-pending", "true", "NoSchedule")]
        assert taints["gpu-a100-03"] == [("gpuops.io/gpu-unhealthy", "temperature", "NoSchedule")]
        assert all(taints[h] == [] for h in hosts if h not in ("gpu-h800-02", "gpu-a100-03"))
        # idempotent: nothing to write
        again = nodes_lab.gpuops("nodes", "label", "-i", inv, tmp=tmp_path)
        assert again.rc == 0 and {h["status"] for h in again.result["hosts"]} == {"unchanged"}
        # rebooted: the taint goes, the driver labels follow the new driver
        hoststate.set_gpu_state(nodes_lab.lab, "gpu-h800-02", driver="570.133.20")
        third = nodes_lab.gpuops("nodes", "label", "-i", inv, "-l", "gpu-h800-02", tmp=tmp_path)
        assert third.rc == 0
        node = nodes_lab.node("gpu-h800-02")
        assert node.metadata.labels["gpu-driver"] == "570.133.20"
        assert node.metadata.labels["nvidia.com/cuda.runtime.minor"] == "8"
        assert not node.spec.taints
    finally:
        hoststate.set_gpu_state(nodes_lab.lab, "gpu-h800-02", driver="550.90.07")
        nodes_lab.gpuops("nodes", "label", "-i", inv, "--taint-effect", "none", tmp=tmp_path)
        for host in hosts:
            core.patch_node(host, {"spec": {"taints": None}})
        core.patch_node("gpu-a100-01", {"metadata": {"labels": {"gpuops-old": None}}})


def _state(nl: NodesLab) -> dict[str, tuple[Any, ...]]:
    """What ``nodes label`` may write on each node: labels, annotations, taints."""
    out = {}
    for h in nl.fleet.hosts:
        node = nl.node(h["name"])
        taints = [(t.key, t.value, t.effect) for t in node.spec.taints or []]
        out[h["name"]] = (
            dict(node.metadata.labels or {}),
            dict(node.metadata.annotations or {}),
            taints,
        )
    return out


def _last_host(nl: NodesLab) -> str:
    """The inventory's last host (groups in order: gpu_a100, gpu_h800, gpu_l40s): a run that
    refused it half way would already have written the others."""
    return sorted(str(h["name"]) for h in nl.fleet.hosts if h["group"] == "gpu_l40s")[-1]


def test_a_nodes_own_annotation_cannot_make_gpuops_remove_other_labels(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    inv = nodes_lab.fleet.facts["inventory"]
    core = nodes_lab.kube.core
    node = "gpu-a100-02"
    hostile = {"node-restriction.kubernetes.io/pool": "gpu", "team": "ml"}
    listed = "kubernetes.io/hostname,node-restriction.kubernetes.io/pool,team,gpu-driver"
    core.patch_node(node, {"metadata": {"labels": hostile, "annotations": {OWNED: listed}}})
    try:
        run = nodes_lab.gpuops(
            "nodes", "label", "-i", inv, "-l", node, "--taint-effect", "none", tmp=tmp_path
        )
        assert run.rc == 0, run.stderr
        (host,) = run.result["hosts"]
        assert host["change"]["remove_labels"] == []
        meta = nodes_lab.node(node).metadata
        assert meta.labels["kubernetes.io/hostname"] == node
        assert meta.labels["node-restriction.kubernetes.io/pool"] == "gpu"
        assert meta.labels["team"] == "ml"
        owned = set(meta.annotations[OWNED].split(","))
        assert "gpu-driver" in owned and owned.isdisjoint(
            {"kubernetes.io/hostname", "node-restriction.kubernetes.io/pool", "team"}
        )
    finally:
        core.patch_node(
            node,
            {
                "metadata": {
                    "labels": {
                        "kubernetes.io/hostname": node,
                        "node-restriction.kubernetes.io/pool": None,
                        "team": None,
                    }
                }
            },
        )


@pytest.mark.parametrize("value", ["gpu-driver,,rack", "gpu-driver, rack", "bad key!"])
def test_a_malformed_ownership_annotation_stops_the_run_before_any_write(
    nodes_lab: NodesLab, tmp_path: Path, value: str
) -> None:
    inv = nodes_lab.fleet.facts["inventory"]
    core = nodes_lab.kube.core
    last = _last_host(nodes_lab)
    kept = nodes_lab.node(last).metadata.annotations.get(OWNED)
    driver = nodes_lab.node("gpu-a100-01").metadata.labels["gpu-driver"]
    core.patch_node("gpu-a100-01", {"metadata": {"labels": {"gpu-driver": "1.2.3"}}})
    core.patch_node(last, {"metadata": {"annotations": {OWNED: value}}})
    try:
        before = _state(nodes_lab)
        run = nodes_lab.gpuops("nodes", "label", "-i", inv, tmp=tmp_path)
        assert run.rc == 1, run.stderr
        assert run.doc is not None
        message = str(run.doc["error"]["message"])
        assert f"node {last}" in message and OWNED in message and repr(value) in message
        assert _state(nodes_lab) == before  # the drift on gpu-a100-01 was not mended either
    finally:
        core.patch_node(last, {"metadata": {"annotations": {OWNED: kept}}})
        core.patch_node("gpu-a100-01", {"metadata": {"labels": {"gpu-driver": driver}}})


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("gpu_nodes_accelerator", "nvidia l40s"),  # the API refused it half way through a run
        ("rack", "r01/a"),  # silently made r01-a
        ("rack", "r01\u00a0"),
    ],
)
def test_inventory_label_values_are_refused_before_any_node_is_touched(
    nodes_lab: NodesLab, tmp_path: Path, var: str, value: str
) -> None:
    inv = nodes_lab.inventory(tmp_path)
    last = _last_host(nodes_lab)
    (inv.parent / "host_vars").mkdir(exist_ok=True)
    (inv.parent / "host_vars" / f"{last}.yml").write_text(f'{var}: "{value}"\n')
    core = nodes_lab.kube.core
    driver = nodes_lab.node("gpu-a100-01").metadata.labels["gpu-driver"]
    core.patch_node("gpu-a100-01", {"metadata": {"labels": {"gpu-driver": "1.2.3"}}})
    try:
        before = _state(nodes_lab)
        run = nodes_lab.gpuops("nodes", "label", "-i", str(inv), tmp=tmp_path / "run")
        assert run.rc == 2, run.stderr
        assert run.doc is not None
        error = run.doc["error"]
        assert error["field"] == "inventory"
        assert f"host {last}" in error["message"] and var in error["message"]
        assert _state(nodes_lab) == before
    finally:
        core.patch_node("gpu-a100-01", {"metadata": {"labels": {"gpu-driver": driver}}})
