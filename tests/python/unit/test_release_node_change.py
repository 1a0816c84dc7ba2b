"""S-24 in the release: the record names the node change of its build, ``release promote
--node-change`` and ``rollback --with-nodes`` check their input before anything is reached, and
the compat gate of a rollback with its nodes judges the drivers the nodes will run, not their
labels today. (The rollback itself, nodes then image, runs on the lab:
tests/python/integration/test_release_with_nodes.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli_release import config, error_of  # noqa: F401 - config is a fixture
from test_headroom import node
from test_outcomes import FakeKube

from gpuops.core import releasehistory as hist
from gpuops.core.cuda import Version
from gpuops.core.releasehistory import Release
from gpuops.errors import (
    GateRefused,
    GpuOpsError,
    HostBroken,
    InvalidInput,
    OperationFailed,
    Unreachable,
)
from gpuops.render.html import releases as page
from gpuops.render.release import history_table
from gpuops.usecases.images import compat
from gpuops.usecases.outcome import Outcome, Verdict
from gpuops.usecases.releases import withnodes
from gpuops.usecases.releases.model import NodesRollbackDocument, ReleaseOutcome


def _release(n: int, **kw: object) -> Release:
    return Release(n, "prod", "promote", hist.SUCCEEDED, "2026-12-01T10:00:00Z", tag=f"1.{n}.0",
                   digest=f"sha256:{n}", **kw)  # type: ignore[arg-type]  # fmt: skip


def test_a_release_record_keeps_its_node_change_and_a_damaged_one_is_reported() -> None:
    records = [_release(1), _release(2, node_change="gpu-prod-7")]
    text = hist.encode(records)
    assert json.loads(text)[1]["node_change"] == "gpu-prod-7"
    assert "node_change" not in json.loads(text)[0]  # none: not written
    assert hist.decode(text, "cm") == records
    bad = json.loads(text)
    bad[1]["node_change"] = 7
    with pytest.raises(OperationFailed, match="field 'node_change' must be a string, not 7"):
        hist.decode(json.dumps(bad), "ConfigMap ai/gpuops-releases-prod")


@pytest.mark.parametrize("good", ["7", "gpu-prod-7", "test-12", "eu.gpu-3", "1234567890"])
def test_node_change_ids_the_node_history_writes_are_taken(good: str) -> None:
    assert hist.check_node_change(good) == good


@pytest.mark.parametrize(
    "bad",
    ["", "-7", "Gpu-7", "gpu-prod", "gpu-prod-", "gpu_prod-7", "7 ", "7\n", "$(id)-7",
     "gpu-prod-7;rm", "12345678901", "a" * 95 + "-7", "gpu-prod--7"],
)  # fmt: skip
def test_anything_else_is_no_node_change_id(bad: str) -> None:
    with pytest.raises(InvalidInput, match="is not a node change record id") as caught:
        hist.check_node_change(bad)
    assert caught.value.field == "node_change"


@pytest.mark.parametrize(
    ("argv", "env", "field", "says"),
    [
        (["promote", "-e", "staging", "--tag", "1.0", "--node-change", "7; id"], {},
         "node_change", "is not a node change record id"),
        (["promote", "-e", "staging", "--tag", "1.0"], {hist.NODE_CHANGE_ENV: "Prod-7"},
         "node_change", "is not a node change record id"),
        (["rollback", "-e", "staging", "--previous", "--with-nodes"], {},
         "inventory", "--with-nodes needs --inventory"),
        (["rollback", "-e", "staging", "--previous", "-i", "inv"], {},
         "inventory", "--inventory is for --with-nodes only"),
        (["rollback", "-e", "staging", "--previous", "-l", "gpu_h800"], {},
         "limit", "--limit is for --with-nodes only"),
        (["rollback", "-e", "staging", "--previous", "--with-nodes", "-i", "inv", "-l", "$(id)"],
         {}, "limit", "is not an Ansible host pattern"),
        (["rollback", "-e", "staging", "--previous", "--with-nodes", "-i", "inv", "-l", "@hosts"],
         {}, "limit", "would make Ansible read host names from a file"),
    ],
)  # fmt: skip
def test_node_change_input_is_exit_2_naming_the_field_before_any_cluster(
    tmp_path: Path,
    config: Path,  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    env: dict[str, str],
    field: str,
    says: str,
) -> None:
    monkeypatch.delenv(hist.NODE_CHANGE_ENV, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code, error = error_of(tmp_path, "release", argv[0], "--config", str(config), *argv[1:])
    assert code == 2, error
    assert error["field"] == field, error
    assert says in str(error["message"]), error


def _gate(labels: dict[str, str], planned: dict[str, str]) -> compat.CompatCheck:
    """The compat gate for CUDA 12.8 (needs driver >= 570.26 in full) on two H800 nodes."""
    kube = FakeKube(
        [node("h1", "nvidia-h800", labels=labels), node("h2", "nvidia-h800", labels=labels)], []
    )
    request = compat.CompatRequest(
        {"accelerator": "nvidia-h800"},
        cuda_version=Version.parse("12.8"),
        strict=True,
        planned_drivers=planned,
    )
    outcome = compat.compat(request, lambda cluster: kube)  # type: ignore[arg-type,return-value]
    assert (outcome.verdict is Verdict.OK) == outcome.result.ok
    return outcome.result


def test_the_compat_gate_judges_the_drivers_the_nodes_will_run_not_their_labels() -> None:
    new = {"gpu-driver": "570.133.20", "nvidia.com/cuda.driver.major": "570",
           "nvidia.com/cuda.driver.minor": "133", "nvidia.com/cuda.driver.rev": "20"}  # fmt: skip
    assert _gate(new, {}).ok  # today's labels: fine
    # the rollback brings h1 back to 550: refused, naming h1 only (h2 keeps its 570)
    back = _gate(new, {"h1": "550.90.07"})
    assert not back.ok
    assert back.to_dict()["offending"] == ["h1"]
    assert {n["node"]: n["driver"] for n in back.to_dict()["nodes"]} == {
        "h1": "550.90.07",
        "h2": "570.133.20",
    }
    # and the other way round: labels too old today, the drivers to come suit it
    old = {"gpu-driver": "550.90.07"}
    assert not _gate(old, {}).ok
    assert _gate(old, {"h1": "570.133.20", "h2": "570.133.20"}).ok
    assert _gate(old, {"h3": "570.133.20"}).to_dict()["offending"] == ["h1", "h2"]  # not in class


class _Shown:
    """What history_table reads (render's protocol)."""

    def __init__(self, records: list[Release]) -> None:
        from gpuops.core.releaseconfig import parse

        doc = {"environments": {"prod": {"namespace": "ai", "deployment": "infer",
                                         "image": "r.example/ai/infer"}}}  # fmt: skip
        self.env = parse(doc, "gpuops-release.yaml").environment("prod")
        self.server = "https://kube:6443"
        self.records = records
        self.current = records[0]
        self.previous = None
        self.choices: list[Release] = []
        self.open: dict[int, str] = {}


def test_the_history_text_and_page_show_each_release_with_its_node_change() -> None:
    records = [_release(2, node_change="gpu-prod-7", requested_by="alice"), _release(1)]
    text = history_table(_Shown(records))  # type: ignore[arg-type]
    header, row2, row1 = text.splitlines()[1:4]
    assert "NODE CHANGE" in header
    assert row2.split()[7:9] == ["alice", "-"] and row2.split()[9] == "gpu-prod-7", row2
    assert row1.split()[9] == "-", row1
    ctx = page.context(
        {
            "environment": "prod",
            "namespace": "ai",
            "current": 2,
            "rollback_choices": [],
            "releases": [r.to_dict() for r in records],
        }
    )
    assert [r["node_change"] for r in ctx["rows"]] == ["gpu-prod-7", ""]


class _Ran:
    """A nodes rollback's result as the release keeps it (records.Rollout's to_dict)."""

    record = "test-9"

    def to_dict(self) -> dict[str, object]:
        return {"summary": {"failed": 1}, "failed": ["h1"], "rolled_back": [], "stopped": "x"}


@pytest.mark.parametrize(
    ("problem", "code", "state"),
    [
        (OperationFailed("1 host(s) failed: h1"), 1, "failed"),
        (GateRefused("the downgrade would break infer-7"), 3, "refused"),
        (Unreachable("h1 is unreachable"), 4, "failed"),
        (HostBroken("h1: its rollback failed too"), 6, "failed"),
    ],
)
def test_when_the_nodes_do_not_go_back_the_image_is_not_touched_and_the_exit_says_so(
    problem: GpuOpsError, code: int, state: str
) -> None:
    env = _Shown([_release(1)]).env
    out = ReleaseOutcome(env, "rollback", "planned", "https://kube:6443")
    doc: NodesRollbackDocument = {"record": "test-3", "inventory": "inv", "limit": None,
                                  "state": "planned", "drivers": {}, "new_record": None,
                                  "message": ""}  # fmt: skip
    ended = withnodes._nodes_failed(out, doc, Outcome(_Ran(), problem), _release(2))  # type: ignore[arg-type]
    assert ended.exit_code == code and type(ended.problem) is type(problem)
    assert ended.problem is not None
    assert ended.problem.message == (
        f"the nodes rollback to record test-3 {'was refused' if code == 3 else 'failed'}: "
        f"{problem.message}; the image was not touched (release #2 was not restored)"
    )
    assert (out.state, doc["state"]) == (state, state)
    assert out.notes == [
        "the image was not touched: prod still runs what it ran before (the rollback to "
        "release #2 stopped at its nodes)"
    ]
