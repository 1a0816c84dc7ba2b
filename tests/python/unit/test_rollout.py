"""Rollout planning (canary, batches, failure budget) and the batch headroom gate (core)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuops.core import rollout
from gpuops.core.kubemodel import Node, Pod
from gpuops.core.rollout import BatchSize, Policy, parse_batch_size
from gpuops.errors import InvalidInput

HOSTS = [f"h{i:02d}" for i in range(10)]


def test_canary_then_batches_by_count_and_percentage() -> None:
    p = Policy(canary=1, batch_size=BatchSize(4), failure_budget=0)
    assert [(b.kind, list(b.hosts)) for b in rollout.plan(HOSTS, p)] == [
        ("canary", ["h00"]),
        ("batch", ["h01", "h02", "h03", "h04"]),
        ("batch", ["h05", "h06", "h07", "h08"]),
        ("batch", ["h09"]),
    ]
    p = Policy(canary=2, batch_size=parse_batch_size("20%"))
    assert [len(b.hosts) for b in rollout.plan(HOSTS, p)] == [2, 2, 2, 2, 2]
    assert [b.index for b in rollout.plan(HOSTS, p)] == [0, 1, 2, 3, 4]
    assert [b.kind for b in rollout.plan(HOSTS, Policy(canary=0, batch_size=BatchSize(5)))] == [
        "batch",
        "batch",
    ]
    assert rollout.plan([], p) == []


@given(
    st.lists(st.text("abc", min_size=1, max_size=4), unique=True, max_size=40),
    st.integers(0, 5),
    st.integers(1, 100),
    st.booleans(),
)
def test_every_host_is_planned_once_in_order(
    hosts: list[str], canary: int, size: int, percent: bool
) -> None:
    plan = rollout.plan(hosts, Policy(canary, BatchSize(size, percent)))
    assert [h for b in plan for h in b.hosts] == hosts
    assert all(b.hosts for b in plan)


@pytest.mark.parametrize("text", ["0", "0%", "101%", "-1", "five", "5.5", "", "1e3"])
def test_bad_batch_sizes(text: str) -> None:
    with pytest.raises(InvalidInput, match="batch size"):
        parse_batch_size(text)


def test_budget() -> None:
    p = Policy(failure_budget=1)
    assert not rollout.over_budget(1, p) and rollout.over_budget(2, p)
    assert rollout.over_budget(1, Policy())


def _node(name: str, gpus: int = 8, cls: str = "h800") -> Node:
    return Node(name, labels={"accelerator": cls}, allocatable={"nvidia.com/gpu": gpus})


def _pod(name: str, node: str, gpus: int) -> Pod:
    return Pod("ml", name, node_name=node, phase="Running", requests={"nvidia.com/gpu": gpus})


def test_batch_headroom_honours_the_reserve_and_pods_to_move() -> None:
    nodes = [_node(f"n{i}") for i in range(4)]
    pods = [_pod("a", "n0", 8), _pod("b", "n1", 4)]
    # without n2: free = n1 4 + n3 8 = 12 (n0 full)
    ok = rollout.batch_headroom(nodes, pods, ["n2"], reserve=12)
    assert ok.fits and ok.gpus_removed == 8 and ok.gpus_to_move == 0 and ok.free_after == 12
    refused = rollout.batch_headroom(nodes, pods, ["n2"], reserve=13)
    assert not refused.fits and "reserve of 13" in refused.message
    # without n1 (4 GPUs of pods to move): free = n2 8 + n3 8 = 16; 16 - 4 >= 12
    assert rollout.batch_headroom(nodes, pods, ["n1"], reserve=12).fits
    assert not rollout.batch_headroom(nodes, pods, ["n1"], reserve=13).fits
    # nothing left to move to
    assert not rollout.batch_headroom(nodes[:2], pods, ["n1"]).fits


def test_the_canary_is_the_first_host_in_inventory_order() -> None:
    """The core's stated order: the inventory's, never regrouped (a host of another model
    listed between two keeps its place: operators order their inventories by rack or site)."""
    listed = ["gpu-h800-01", "gpu-h800-02", "gpu-a100-01"]
    assert rollout.rollout_order(listed) == listed
    plan = rollout.plan(rollout.rollout_order(listed), Policy(canary=1, batch_size=BatchSize(5)))
    assert (plan[0].kind, plan[0].hosts) == (rollout.CANARY, ("gpu-h800-01",))
    mixed = ["a1", "h1", "a2", "h1"]
    assert rollout.rollout_order(mixed) == ["a1", "h1", "a2"]
    assert rollout.rollout_order([]) == []


def test_statuses_are_the_words_of_the_result() -> None:
    assert [str(s) for s in rollout.HostStatus] == [
        "changed",
        "unchanged",
        "failed",
        "not-started",
        "planned",
        "rolled-back",
        "rollback-failed",
    ]
    assert [str(s) for s in rollout.BatchStatus] == [
        "not-started",
        "planned",
        "done",
        "failed",
        "refused",
        "held",
    ]
    assert rollout.NOT_STARTED == rollout.BatchStatus.NOT_STARTED == "not-started"


def test_the_run_stops_when_the_failures_spend_the_budget() -> None:
    run = rollout.Run(Policy(failure_budget=1))
    assert run.finish([rollout.FAILED, rollout.CHANGED]) == rollout.BatchStatus.FAILED
    assert run.stopped == "" and run.failed == 1  # within the budget: the next batch starts
    assert run.finish([rollout.CHANGED, rollout.UNCHANGED]) == rollout.BatchStatus.DONE
    assert run.finish([rollout.FAILED]) == rollout.BatchStatus.FAILED
    assert run.stopped == "2 host(s) failed, over the failure budget of 1" and not run.refused


def test_a_rolled_back_host_counts_against_the_failure_budget() -> None:
    """A rollback undoes the change, not the failure: the canary rolled back stops the run."""
    run = rollout.Run(Policy())
    assert run.finish([rollout.ROLLED_BACK]) == rollout.BatchStatus.FAILED
    assert run.stopped == "1 host(s) failed, over the failure budget of 0"
    budget = rollout.Run(Policy(failure_budget=2))
    assert budget.finish([rollout.ROLLBACK_FAILED, rollout.CHANGED]) == rollout.BatchStatus.FAILED
    assert budget.finish([rollout.ROLLED_BACK]) == rollout.BatchStatus.FAILED
    assert budget.stopped == "" and budget.failed == 2
    assert budget.finish([rollout.FAILED]) == rollout.BatchStatus.FAILED
    assert budget.stopped == "3 host(s) failed, over the failure budget of 2"


def test_which_failed_host_is_rolled_back() -> None:
    on, off = rollout.RollbackPolicy(), rollout.RollbackPolicy(enabled=False)
    assert on.after == rollout.AfterRollback.KEEP_CORDONED  # the documented default
    assert on.to_dict() == {"enabled": True, "after": "keep-cordoned"}
    want = rollout.wants_rollback
    assert want(on, failed_in_change=True, before="550.90.07", wanted="570.133.20")
    assert not want(off, failed_in_change=True, before="550.90.07", wanted="570.133.20")
    # its change never began (drain failed, host unreachable): nothing to undo
    assert not want(on, failed_in_change=False, before="550.90.07", wanted="570.133.20")
    # no driver before (fresh host, module mismatch): nothing known to go back to
    assert not want(on, failed_in_change=True, before=None, wanted="570.133.20")
    assert not want(on, failed_in_change=True, before="", wanted="570.133.20")
    # the driver did not change (node-init failed): reinstalling it undoes nothing
    assert not want(on, failed_in_change=True, before="570.133.20", wanted="570.133.20")


def test_the_validation_task_is_known_by_its_name() -> None:
    assert rollout.is_validation("nvidia_driver : Validate the GPUs")
    assert rollout.is_validation("Validate the GPUs")
    assert not rollout.is_validation("nvidia_driver : Install the driver")
    assert not rollout.is_validation("nvidia_driver : Validate the GPUs again")
    assert not rollout.is_validation("")


def test_a_failed_canary_stops_the_run_with_the_default_budget() -> None:
    """No rule of its own: the canary's failure counts against the budget like any host's."""
    run = rollout.Run(Policy())
    assert run.finish([rollout.FAILED]) == rollout.BatchStatus.FAILED
    assert run.stopped == "1 host(s) failed, over the failure budget of 0"
    assert rollout.not_started(run.stopped) == (
        "not started: 1 host(s) failed, over the failure budget of 0"
    )


def test_the_headroom_gate_and_a_failed_plan_stop_the_run() -> None:
    run = rollout.Run(Policy(failure_budget=5))
    assert run.refuse(2, "only 3 stay free") == rollout.BatchStatus.REFUSED
    assert run.refused and run.stopped == "headroom gate refused batch 2: only 3 stay free"
    planned = rollout.Run(Policy())
    planned.plan_failed([])
    assert planned.stopped == ""
    planned.plan_failed(["h1", "h2"])
    assert planned.stopped == "the plan failed on h1, h2" and not planned.refused


def test_a_held_batch_stops_the_run_and_names_the_gate() -> None:
    run = rollout.Run(rollout.Policy())
    assert run.hold(2, "window", "closes at 06:00, batch needs 40 min") == rollout.BatchStatus.HELD
    assert run.held == "window"
    assert run.stopped == "window held batch 2: closes at 06:00, batch needs 40 min"
    assert not run.refused
