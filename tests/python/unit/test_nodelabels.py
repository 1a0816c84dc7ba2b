"""GPU facts as node labels and taints (core.nodelabels): GFD names, ownership, idempotence."""

from __future__ import annotations

from test_gpuhealth import output

from gpuops.core import gpuhealth, gpuparse, nodelabels
from gpuops.core.gpuhealth import Thresholds
from gpuops.core.kubemodel import Taint
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
    labels, unknown = nodelabels.desired_labels(health(gpus.host_state(H800)), rack="r02")
    current = {
        "team": "ml",  # someone else's
        "nvidia.com/gpu.family": "hopper",  # GFD's, not ours
        "old-gpuops-label": "x",  # ours, no longer set
        "gpu-driver": "535.161.08",  # ours, stale value
    }
    annotations = {nodelabels.OWNED: "gpu-driver,old-gpuops-label"}
    foreign = [Taint("dedicated", "training", "NoSchedule")]
    ours = [Taint(nodelabels.TAINT_REBOOT, "true", "NoSchedule")]
    change = nodelabels.plan_node("n", current, annotations, foreign + ours, labels, unknown, [])
    assert change.remove_labels == ["old-gpuops-label"]
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
