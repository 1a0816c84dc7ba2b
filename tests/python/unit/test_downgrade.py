"""The downgrade gate's judgement (core.downgrade): which hosts go down, the class each
downgraded node's workloads come from, and each workload's CUDA against the target driver."""

from __future__ import annotations

from gpuops.core import downgrade
from gpuops.core.downgrade import Workload
from gpuops.core.nodestate import DriverChange

H800 = {"accelerator": "nvidia-h800"}
NODES = {
    "gpu-h800-01": H800,
    "gpu-h800-02": H800,
    "gpu-a100-01": {"accelerator": "nvidia-a100-80g"},
    "bare": {},
}


def change(host: str, before: str | None, after: str, node: str | None = "") -> DriverChange:
    return DriverChange(host, host if node == "" else node, "gpu_h800", before, after)


def pod(name: str, node: str, cuda: str | None, problem: str = "") -> Workload:
    return Workload("ml", name, node, "main", f"reg:5000/ml/{name}:1", cuda, "env", problem)


def test_only_numerically_older_drivers_are_downgrades() -> None:
    down, problems = downgrade.downgrades(
        [
            change("a", "550.90.07", "535.161.08"),  # down
            change("b", "535.161.08", "535.54.03"),  # down: 54 < 161, not a text compare
            change("c", "535.54.03", "535.161.08"),  # up (as text it would look down)
            change("d", None, "535.161.08"),  # no driver before: nothing runs on it
            change("e", "550.90.07", "550.90.07"),  # the same
        ]
    )
    assert [c.host for c in down] == ["a", "b"] and problems == []
    _, bad = downgrade.downgrades([change("f", "garbage", "535.161.08")])
    assert len(bad) == 1 and "f:" in bad[0]


def test_a_cuda_12_8_workload_refuses_a_downgrade_to_535_naming_it() -> None:
    verdict = downgrade.judge(
        [change("gpu-h800-01", "550.90.07", "535.161.08")],
        NODES,
        [pod("trainer", "gpu-h800-01", "12.8.1"), pod("old", "gpu-h800-01", "12.2.2")],
    )
    assert not verdict.ok
    (bad,) = verdict.refused
    assert bad.workload.key == "ml/trainer" and bad.verdict == "too-old"
    assert str(bad.needed) == "570.26" and str(bad.target.driver) == "535.161.08"
    assert "ml/trainer (reg:5000/ml/trainer:1, CUDA 12.8.1) needs driver >= 570.26" in (
        verdict.message
    )
    assert "target 535.161.08 (gpu-h800-01)" in verdict.message
    assert "ml/old" not in verdict.message  # 12.2.2 needs 535.54.03: runs
    doc = verdict.to_dict()
    assert doc["refused"] == ["ml/trainer"] and doc["ok"] is False


def test_minor_version_compatibility_is_allowed_only_when_not_strict() -> None:
    changes = [change("gpu-h800-01", "570.133.20", "535.161.08")]
    work = [pod("trainer", "gpu-h800-01", "12.8")]
    assert not downgrade.judge(changes, NODES, work).ok  # strict by default
    loose = downgrade.judge(changes, NODES, work, strict=False)
    assert loose.ok and str(loose.judged[0].needed) == "525.60.13"


def test_the_class_is_the_accelerator_label_at_its_lowest_target() -> None:
    changes = [
        change("gpu-h800-01", "570.133.20", "550.90.07"),
        change("gpu-h800-02", "570.133.20", "535.161.08"),
    ]
    targets = downgrade.class_targets(downgrade.downgrades(changes)[0], NODES)
    assert {n: (t.host, str(t.driver)) for n, t in targets.items()} == {
        "gpu-h800-01": ("gpu-h800-02", "535.161.08"),
        "gpu-h800-02": ("gpu-h800-02", "535.161.08"),
    }
    # a workload on the class's other node counts; one on another class does not
    verdict = downgrade.judge(
        [change("gpu-h800-01", "570.133.20", "535.161.08")],
        NODES,
        [pod("peer", "gpu-h800-02", "12.8"), pod("other", "gpu-a100-01", "12.8")],
    )
    assert [j.workload.pod for j in verdict.refused] == ["peer"]
    # a node without the class label is a class of its own
    alone = downgrade.class_targets(
        downgrade.downgrades([change("bare", "550.1.1", "535.1.1")])[0], NODES
    )
    assert set(alone) == {"bare"}


def test_unreadable_images_fail_closed_and_undeclared_cuda_passes() -> None:
    changes = [change("gpu-h800-01", "550.90.07", "535.161.08")]
    verdict = downgrade.judge(
        changes,
        NODES,
        [
            pod("sealed", "gpu-h800-01", None, "the image config cannot be read: unreachable"),
            pod("plain", "gpu-h800-01", None),
            pod("odd", "gpu-h800-01", "12.x"),
            pod("future", "gpu-h800-01", "14.0"),
        ],
    )
    verdicts = {j.workload.pod: j.verdict for j in verdict.judged}
    assert verdicts == {
        "sealed": "unreadable",
        "plain": "no-cuda",
        "odd": "unreadable",
        "future": "unknown",
    }
    assert not verdict.ok and "ml/sealed" in verdict.message and "unreachable" in verdict.message


def test_upgrades_and_first_installs_pass_without_workloads_judged() -> None:
    verdict = downgrade.judge(
        [change("gpu-h800-01", "535.161.08", "570.133.20"), change("x", None, "535.1.1")],
        NODES,
        [pod("trainer", "gpu-h800-01", "12.8")],
    )
    assert verdict.ok and verdict.judged == [] and "does not apply" in verdict.message
    # a host without a node: nothing of the cluster runs on it
    none = downgrade.judge([change("h", "550.90.07", "535.161.08", node=None)], NODES, [])
    assert none.ok


def test_a_driver_that_cannot_be_read_refuses_unlike_no_driver() -> None:
    """``before`` None is no downgrade only when the host is known to have no driver."""
    none = DriverChange("d", "d", "gpu_h800", None, "535.161.08", before_known=True)
    unread = DriverChange("u", "u", "gpu_h800", None, "535.161.08", before_known=False)
    down, problems = downgrade.downgrades([none, unread])
    assert down == [] and len(problems) == 1 and problems[0].startswith("u: ")
    assert "cannot be read" in problems[0]
    verdict = downgrade.judge([unread], NODES, [])
    assert not verdict.ok and "u: " in verdict.message


def test_changes_of_tells_an_unreadable_driver_from_none() -> None:
    from gpuops.usecases.nodes.downgrade import changes_of
    from gpuops.usecases.nodes.records import HostRecord

    records = [
        HostRecord("a", "gpu_h800", "a", driver_wanted="535.161.08", driver_before="550.90.07"),
        HostRecord("n", "gpu_h800", "n", driver_wanted="535.161.08"),  # module state: none
        HostRecord("m", "gpu_h800", "m", driver_wanted="535.161.08"),  # mismatch
        HostRecord("u", "gpu_h800", "u", driver_wanted="535.161.08"),  # state not given
        HostRecord("x", "gpu_h800", "x"),  # no driver wanted: no change
    ]
    got = {c.host: c.before_known for c in changes_of(records, {"n": "none", "m": "mismatch"})}
    assert got == {"a": True, "n": True, "m": False, "u": False}
    assert all(not c.before_known for c in changes_of(records[1:4]))


def test_a_re_run_that_finishes_a_pending_reboot_is_no_downgrade() -> None:
    """Module mismatch (a driver installed, the old module loaded: no reboot yet): the role's
    installed version is what the host goes to; the wanted one there is no change at all."""
    from gpuops.usecases.nodes.downgrade import changes_of
    from gpuops.usecases.nodes.records import HostRecord

    records = [
        HostRecord("p", "gpu_h800", "p", driver_wanted="570.133.20"),  # installed = wanted
        HostRecord("d", "gpu_h800", "d", driver_wanted="535.161.08"),  # installed newer
        HostRecord("m", "gpu_h800", "m", driver_wanted="570.133.20"),  # installed unreadable
    ]
    states = {"p": "mismatch", "d": "mismatch", "m": "mismatch"}
    installed = {"p": "570.133.20", "d": "550.90.07", "m": None}
    got = changes_of(records, states, installed)
    assert [(c.host, c.before, c.before_known) for c in got] == [
        ("d", "550.90.07", True),
        ("m", None, False),
    ]
    down, problems = downgrade.downgrades(got)
    assert [c.host for c in down] == ["d"] and [p.split(":")[0] for p in problems] == ["m"]
