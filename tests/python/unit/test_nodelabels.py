"""GPU facts as node labels and taints (core.nodelabels): GFD names, ownership, idempotence."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_gpuhealth import output

from gpuops.core import gpuhealth, gpuparse, nodelabels
from gpuops.core.gpuhealth import Thresholds
from gpuops.core.inventory import Host, Inventory
from gpuops.core.kubemodel import Taint
from gpuops.core.values import shown
from gpuops.errors import InvalidInput, OperationFailed
from gpuops_lab import gpus
from gpuops_lab.spec import GpuHost

H800 = GpuHost("gpu-h800-01", "h800", "550.90.07", "gpu_h800")
FAULTY = GpuHost("gpu-a100-03", "a100-80g", "535.161.08", "gpu_a100", faulty=True)


def health(state: object) -> gpuhealth.HostHealth:
    raw = gpuparse.split_sections(output(state))  # type: ignore[arg-type]
    return gpuhealth.evaluate("h", raw, 8, Thresholds())


def test_labels_follow_gfd_and_the_seed() -> None:
    labels, unknown = nodelabels.desired_labels(
        health(gpus.host_state(H800)), rack="r02", accelerator_name="nvidia-h800"
    )
    assert labels == {
        "rack": "r02",
        "accelerator": "nvidia-h800",
        "gpu-driver": "550.90.07",
        "nvidia.com/gpu.product": "NVIDIA-H800",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/cuda.driver.major": "550",
        "nvidia.com/cuda.driver.minor": "90",
        "nvidia.com/cuda.driver.rev": "07",
        "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "4",
    }
    assert unknown == set()
    derived, _ = nodelabels.desired_labels(health(gpus.host_state(H800)))
    assert derived["accelerator"] == "nvidia-h800" and "rack" not in derived


def test_unreadable_facts_keep_their_labels_and_reboot_pending_taints() -> None:
    pending = {**gpus.host_state(H800), "driver": "570.133.20", "loaded_driver": "550.90.07"}
    h = health(pending)
    labels, unknown = nodelabels.desired_labels(h, rack="r02")
    assert labels == {"rack": "r02"} and "gpu-driver" in unknown
    current = {"gpu-driver": "550.90.07", "rack": "r02", "team": "ml"}
    owned = {nodelabels.OWNED: "gpu-driver,rack"}
    taints = nodelabels.desired_taints(h, "NoSchedule")
    assert taints == [Taint(nodelabels.TAINT_REBOOT, "true", "NoSchedule")]
    change = nodelabels.plan_node("n", current, owned, [], labels, unknown, taints)
    assert change.set_labels == {} and change.remove_labels == []
    assert change.owned == ["gpu-driver", "rack"] and not change.owned_changed
    assert change.taints_added == ["gpuops.io/reboot-pending=true:NoSchedule"]


def test_critical_finding_taints_and_none_manages_no_taints() -> None:
    h = health(gpus.host_state(FAULTY))
    (taint,) = nodelabels.desired_taints(h, "NoExecute")
    assert (taint.key, taint.value, taint.effect) == (
        nodelabels.TAINT_UNHEALTHY,
        "temperature",
        "NoExecute",
    )
    assert nodelabels.desired_taints(h, "none") == []


def test_only_stale_owned_labels_are_removed_and_a_second_plan_is_empty() -> None:
    labels, unknown = nodelabels.desired_labels(health(gpus.host_state(H800)))
    current = {
        "team": "ml",  # someone else's
        "nvidia.com/gpu.family": "hopper",  # GFD's, not ours
        "rack": "r01",  # ours, no longer set (the inventory names no rack now)
        "old-gpuops-label": "x",  # recorded, but not a label gpuops sets: never removed
        "gpu-driver": "535.161.08",  # ours, stale value
    }
    annotations = {nodelabels.OWNED: "gpu-driver,old-gpuops-label,rack"}
    foreign = [Taint("dedicated", "training", "NoSchedule")]
    ours = [Taint(nodelabels.TAINT_REBOOT, "true", "NoSchedule")]
    change = nodelabels.plan_node("n", current, annotations, foreign + ours, labels, unknown, [])
    assert change.remove_labels == ["rack"]
    assert change.set_labels["gpu-driver"] == "550.90.07"
    assert "team" not in change.set_labels and "nvidia.com/gpu.family" not in change.set_labels
    assert change.taints == foreign and change.taints_removed == [str(ours[0])]
    after = {k: v for k, v in current.items() if k not in change.remove_labels}
    after.update(change.set_labels)
    again = nodelabels.plan_node(
        "n", after, {nodelabels.OWNED: ",".join(change.owned)}, foreign, labels, unknown, []
    )
    assert not again.changed


def test_label_values_are_valid() -> None:
    assert nodelabels.label_value(" NVIDIA A100/SXM4 (80GB) ") == "NVIDIA-A100-SXM4-80GB"
    assert len(nodelabels.label_value("x" * 100)) == 63


def test_a_nodes_annotation_cannot_make_gpuops_remove_labels_it_does_not_set() -> None:
    labels, unknown = nodelabels.desired_labels(health(gpus.host_state(H800)), rack="r02")
    current = {
        **labels,
        "kubernetes.io/hostname": "n",
        "node-restriction.kubernetes.io/pool": "gpu",
        "team": "ml",
        "nvidia.com/gpu.memory": "1",  # gpuops' own: corrected, never removed for the annotation
    }
    annotations = {
        nodelabels.OWNED: "kubernetes.io/hostname,node-restriction.kubernetes.io/pool,team,"
        "nvidia.com/gpu.memory"
    }
    change = nodelabels.plan_node("n", current, annotations, [], labels, unknown, [])
    assert change.remove_labels == []
    assert change.set_labels == {"nvidia.com/gpu.memory": "81559"}
    assert change.owned == sorted(labels)  # the foreign keys are dropped from the annotation
    assert change.owned_changed
    # a label gpuops sets that no longer applies is still removed when gpuops recorded it
    two_part = nodelabels.plan_node(
        "n",
        {**labels, "nvidia.com/cuda.driver.rev": "07"},
        {nodelabels.OWNED: ",".join(sorted(labels))},
        [],
        {k: v for k, v in labels.items() if k != "nvidia.com/cuda.driver.rev"},
        unknown,
        [],
    )
    assert two_part.remove_labels == ["nvidia.com/cuda.driver.rev"]


def test_gpuops_labels_are_declared_once() -> None:
    labels, _ = nodelabels.desired_labels(
        health(gpus.host_state(H800)), rack="r02", accelerator_name="nvidia-h800"
    )
    assert set(labels) <= nodelabels.MANAGED_LABELS
    assert set(nodelabels.FACT_LABELS) | {nodelabels.RACK} == nodelabels.MANAGED_LABELS
    assert "kubernetes.io/hostname" not in nodelabels.MANAGED_LABELS


@pytest.mark.parametrize(
    "value",
    [
        "",
        "gpu-driver,,rack",
        " gpu-driver",
        "gpu-driver,",
        "bad key!",
        "a/b/c",
        "x" * 64,
        "rack\n",
    ],
)
def test_a_malformed_ownership_annotation_is_an_operation_failure_naming_the_node(
    value: str,
) -> None:
    with pytest.raises(OperationFailed) as err:
        nodelabels.owned_labels({nodelabels.OWNED: value}, "gpu-h800-01")
    assert err.value.exit_code == 1
    assert "node gpu-h800-01" in err.value.message and nodelabels.OWNED in err.value.message
    assert shown(value) in err.value.message


def test_ownership_annotation_reads_what_gpuops_writes() -> None:
    assert nodelabels.owned_labels({}, "n") == set()
    assert nodelabels.owned_labels({nodelabels.OWNED: "gpu-driver,rack"}, "n") == {
        "gpu-driver",
        "rack",
    }
    assert nodelabels.owned_labels({nodelabels.OWNED: "example.com/x"}, "n") == {"example.com/x"}


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("rack", "r 01"),
        ("rack", "r01/a"),
        ("rack", "-r01"),
        ("rack", "r" * 64),
        ("rack", 1),  # YAML `rack: 01` is the number 1: refused, not made "1"
        ("rack", ["r01"]),
        ("gpu_nodes_accelerator", "nvidia h800"),
        ("gpu_nodes_accelerator", "nvidia-h800\u00a0"),
    ],
)
def test_inventory_label_values_are_checked_up_front_naming_host_and_variable(
    var: str, value: object
) -> None:
    good = Host("gpu-01", ("gpu_h800",), {"rack": "r01", "gpu_nodes_accelerator": "nvidia-h800"})
    bad = Host("gpu-02", ("gpu_h800",), {var: value})
    inv = Inventory("inv/hosts.yml", (good, bad))
    with pytest.raises(InvalidInput) as err:
        nodelabels.check_inventory_labels(inv)
    assert err.value.exit_code == 2
    assert err.value.field == "inventory"
    assert "host gpu-02" in err.value.message and var in err.value.message
    assert shown(value) in err.value.message
    nodelabels.check_inventory_labels(Inventory("inv/hosts.yml", (good, Host("gpu-03"))))


@given(
    st.text(
        alphabet=st.sampled_from("ab-_./,: \n\x00\x85\u00a0\u2028\x9bgpu.example.com"), max_size=80
    )
)
def test_any_ownership_annotation_is_label_keys_or_a_bounded_failure(text: str) -> None:
    try:
        keys = nodelabels.owned_labels({nodelabels.OWNED: text}, "n")
    except OperationFailed as exc:
        assert len(exc.message) < 200
        assert not any(c in exc.message for c in "\x00\n\x85\u2028\x9b")
    else:
        assert keys and all(k and "," not in k and k == k.strip() for k in keys)
