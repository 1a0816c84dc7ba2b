"""The rollback side of ``gpuops nodes update`` in small units: what a host runs when the run
ends, which failed hosts are tainted, what the rollback run pins, a node not Ready after its
rollback, and a run that raises mid-rollout still leaving its records.

The playbook runs here are test data (``ansible.run_playbook`` answers with the per-host
results ansible-runner's events fold into); the Kubernetes side is a recording stand-in for
:class:`~gpuops.usecases.nodes.drain.Guard` where a test says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuops.adapters import ansible
from gpuops.adapters.ansible.events import HostRun, PlaybookRun
from gpuops.adapters.kube import nodes as kubenodes
from gpuops.core import nodehistory as nh
from gpuops.core import rollout
from gpuops.core.inventory import Host, Inventory
from gpuops.errors import Unreachable
from gpuops.fsio import OutDir
from gpuops.usecases.nodes import common, drain, historystore, update
from gpuops.usecases.nodes.records import BatchRecord, HostRecord, Rollout


def _inv() -> Inventory:
    host = Host(
        "h1",
        ("gpu_nodes", "gpu_h800"),
        {
            "gpu_nodes_driver_version": "570.133.20",
            "gpu_nodes_driver_sha256": {"570.133.20": "a" * 64, "550.90.07": "b" * 64},
            "gpu_nodes_container_toolkit_version": "1.17.8",
        },
    )
    return Inventory("inv/hosts.yml", (host,))


def _record(**kw: Any) -> HostRecord:
    r = HostRecord("h1", "gpu_h800", "h1", "570.133.20", 0, rollout.NOT_STARTED)
    r.driver_before, r.cuda_before, r.started_at = "550.90.07", "12.4", "t"
    for k, v in kw.items():
        setattr(r, k, v)
    return r


class _Playbooks:
    """``ansible.run_playbook`` answering each run with the next of ``answers``."""

    def __init__(self, *answers: dict[str, HostRun], rc: int = 0) -> None:
        self.answers, self.rc = list(answers), rc
        self.calls: list[dict[str, Any]] = []

    def __call__(self, playbook: str, inv: str, hosts: list[str], **kw: Any) -> PlaybookRun:
        self.calls.append({"hosts": hosts, **kw})
        got = self.answers.pop(0)
        rc = 2 if any(h.failed for h in got.values()) else self.rc
        return PlaybookRun(kw["ident"], rc, "done", got, "art", 1.0)


class _Guard:
    """Records what the use case asks of the Kubernetes side."""

    def __init__(self) -> None:
        self.tainted: list[str] = []
        self.released: list[str] = []

    def taint(self, r: HostRecord, reason: str) -> None:
        self.tainted.append(r.host)
        r.tainted = True

    def release(self, r: HostRecord, *, untaint: bool = False) -> None:
        self.released.append(r.host)


def _batch(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    request: update.UpdateRequest,
    r: HostRecord,
    *answers: dict[str, HostRun],
    guard: Any = None,
) -> _Playbooks:
    books = _Playbooks(*answers)
    monkeypatch.setattr(ansible, "run_playbook", books)
    b = BatchRecord(0, rollout.CANARY, ["h1"])
    update._batch(
        b,
        [r],
        _inv(),
        request,
        guard,
        OutDir(tmp_path / "out", option="artifacts_dir"),
        lambda _: None,
        "[t]",
        None,
    )  # type: ignore[arg-type]
    return books


def test_a_node_init_change_leaves_the_driver_as_it_was(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """--change node_init never installs a driver: the host runs what it ran before."""
    request = update.UpdateRequest("inv", change=("node_init",))
    r = _record()
    _batch(monkeypatch, tmp_path, request, r, {"h1": HostRun("h1", ok=3, changed=1)})
    assert r.status == rollout.CHANGED and r.driver_after == "550.90.07"
    ro = Rollout("inv", None, "test", ["node_init"], rollout.Policy(), False, None)
    ro.hosts["h1"] = _record(status=rollout.UNCHANGED)
    update._ends(ro)
    assert ro.hosts["h1"].driver_after == "550.90.07"
    # the driver changed: what was wanted
    ro.change = ["node_init", "nvidia_driver"]
    update._ends(ro)
    assert ro.hosts["h1"].driver_after == "570.133.20"


def test_a_failed_host_left_on_an_unknown_driver_is_tainted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """--no-rollback: an install that failed leaves the host on a driver nobody knows."""
    off = rollout.RollbackPolicy(enabled=False)
    request = update.UpdateRequest("inv", rollback=off)
    failed = HostRun("h1", ok=2, failed=True, failed_task="nvidia_driver : Install the driver")
    guard = _Guard()
    r = _record()
    books = _batch(monkeypatch, tmp_path, request, r, {"h1": failed}, guard=guard)
    assert r.status == rollout.FAILED and guard.tainted == ["h1"] and len(books.calls) == 1
    assert r.reason.endswith("not rolled back (--no-rollback)")


def test_the_rollback_puts_the_container_toolkit_back_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The rollback run pins the toolkit to what the host ran (the playbook's
    gpu_nodes_container_toolkit_version), or skips it ("") when that is not known."""
    request = update.UpdateRequest("inv")
    failed = HostRun("h1", ok=2, failed=True, failed_task="nvidia_driver : Verify the container")
    ok = HostRun("h1", ok=5, changed=2)
    r = _record(container_toolkit_before="1.16.2")
    books = _batch(monkeypatch, tmp_path, request, r, {"h1": failed}, {"h1": ok}, guard=_Guard())
    assert r.status == rollout.ROLLED_BACK
    back = books.calls[1]["extravars"]
    assert back["update_gpu_nodes_roles"] == ["nvidia_driver"]
    assert back["gpu_nodes_container_toolkit_version"] == "1.16.2"
    assert "gpu_nodes_container_toolkit_version" not in books.calls[0]["extravars"]
    r = _record(container_toolkit_before=None)
    books = _batch(monkeypatch, tmp_path, request, r, {"h1": failed}, {"h1": ok}, guard=_Guard())
    assert books.calls[1]["extravars"]["gpu_nodes_container_toolkit_version"] == ""
    # a group that does not manage the toolkit: the rollback leaves it alone too
    plain = Inventory("inv", (Host("h1", ("gpu_nodes",), {}),))
    assert update._toolkit_back([_record(container_toolkit_before="1.16.2")], plain) == ""


def test_a_rolled_back_node_not_ready_stays_rolled_back_and_cordoned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    not_ready = kubenodes.NodeInfo("h1", exists=True, unschedulable=True, ready=False)
    monkeypatch.setattr(kubenodes, "get_node", lambda kube, name: not_ready)
    guard = drain.Guard(None, drain.DrainPolicy(ready_timeout_s=0), lambda h, m: None)  # type: ignore[arg-type]
    r = _record(status=rollout.ROLLED_BACK, driver_after="550.90.07", cordoned=True)
    r.reason = "failed: x; rolled back to 550.90.07"
    guard.release(r, untaint=True)
    assert r.status == rollout.ROLLED_BACK and r.driver_after == "550.90.07"
    assert r.reason.endswith("rolled back to 550.90.07; not Ready; left cordoned")
    assert not r.uncordoned
    changed = _record(status=rollout.CHANGED, cordoned=True)
    guard.release(changed)
    assert changed.status == rollout.FAILED  # a change whose node does not come back fails


def _no_io(monkeypatch: pytest.MonkeyPatch, *, raise_in_run: BaseException) -> list[Rollout]:
    """update.update() with the inventory, pre-flight and plan as test data; the first batch
    raises ``raise_in_run``; the history hook records what it was given."""
    monkeypatch.setattr(common, "load", lambda *a: _inv())
    monkeypatch.setattr(update, "_preflight", lambda *a: None)

    def plan(ro: Rollout, run: rollout.Run, *a: Any) -> None:
        ro.batches = [BatchRecord(0, rollout.CANARY, ["h1"])]
        ro.hosts["h1"].status, ro.hosts["h1"].batch = rollout.NOT_STARTED, 0

    def run(ro: Rollout, *a: Any) -> None:
        ro.hosts["h1"].started_at, ro.hosts["h1"].cordoned = "t", True
        raise raise_in_run

    monkeypatch.setattr(update, "_plan", plan)
    monkeypatch.setattr(update, "_run", run)
    seen: list[Rollout] = []

    def hook(request: Any, connect: Any, ro: Rollout) -> None:
        seen.append(ro)
        ro.record = "test-1"

    monkeypatch.setattr(historystore, "after_update", hook)
    return seen


def test_a_run_that_raises_mid_rollout_leaves_its_records(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen = _no_io(monkeypatch, raise_in_run=Unreachable("get node h1: timed out"))
    out = tmp_path / "out"
    request = update.UpdateRequest(
        "inv", change=("node_init",), cluster=None, artifacts_dir=str(out)
    )
    with pytest.raises(Unreachable, match="get node h1: timed out"):
        update.update(request)
    assert len(seen) == 1 and seen[0].stopped == "error: get node h1: timed out"
    doc = json.loads((out / "update.json").read_text())
    assert doc["stopped"] == "error: get node h1: timed out" and doc["record"] == "test-1"
    assert doc["hosts"][0]["status"] == "failed" and doc["hosts"][0]["cordoned"]
    assert historystore._status(seen[0]) == nh.FAILED
    # raised before any host of the batch was touched: not started, the run still failed
    ro = Rollout("inv", None, "test", ["node_init"], rollout.Policy(), False, None)
    ro.hosts["h1"] = _record(started_at=None)
    ro.batches = [BatchRecord(0, rollout.CANARY, ["h1"])]
    update._interrupted(ro, Unreachable("list nodes: timed out"))
    assert ro.hosts["h1"].status == rollout.NOT_STARTED
    assert ro.hosts["h1"].reason == "not started: error: list nodes: timed out"
    assert historystore._status(ro) == nh.FAILED


def test_a_history_hook_that_fails_does_not_hide_the_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _no_io(monkeypatch, raise_in_run=KeyboardInterrupt())

    def broken(*a: Any) -> None:
        raise RuntimeError("the hook's own bug")

    monkeypatch.setattr(historystore, "after_update", broken)
    out = tmp_path / "out"
    request = update.UpdateRequest(
        "inv", change=("node_init",), cluster=None, artifacts_dir=str(out)
    )
    with pytest.raises(KeyboardInterrupt):
        update.update(request)
    doc = json.loads((out / "update.json").read_text())
    assert doc["stopped"] == "error: KeyboardInterrupt"
