"""``gpuops release`` as Jenkins runs it (a process, JSON parameters in, result or error
document out) on the lab: exit codes, progress on stderr, the history as a table and as JSON,
``kubectl rollout history``, and two processes releasing one target at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_kube import KubeLab
from integration.releaselab import Images, Target, environment, make_target
from result_documents import load_document

pytestmark = pytest.mark.timeout(600)
GPUOPS = str(Path(sys.executable).parent / "gpuops")


@pytest.fixture
def target(kube_lab: KubeLab, release_images: Images, tmp_path: Path) -> Target:
    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        plain = {"registry": {"plain_http": True}}
        return {
            # a lock that outlives a paused holder (the two-process test pauses one)
            "staging": environment(
                ns, name, repo, registry_tag="staging", lock={"lease_seconds": 60}, **plain
            ),
            "production": environment(
                ns, name, repo, approval={"approvers": ["release-managers"]}, **plain
            ),
        }

    return make_target(kube_lab, release_images, tmp_path, "relcli", envs=envs)


def gpuops(
    t: Target, tmp: Path, command: str, params: dict[str, Any], *args: str, text: bool = False
) -> tuple[int, dict[str, Any] | None, str]:
    """Run ``gpuops release <command>`` like gpuopsExec does; (exit, document, stderr)."""
    pfile, rfile, efile = tmp / "p.json", tmp / "r.json", tmp / "e.json"
    for f in (rfile, efile):
        f.unlink(missing_ok=True)
    pfile.write_text(json.dumps({"config": str(t.config), **params}))
    env = {
        **os.environ,
        "GPUOPS_PARAMS_FILE": str(pfile),
        "GPUOPS_RESULT_FILE": str(rfile),
        "GPUOPS_ERROR_FILE": str(efile),
        "KUBECONFIG": str(t.kube.kubeconfig),
    }
    done = subprocess.run(
        [GPUOPS, "release", command, *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    doc_file = rfile if done.returncode == 0 else efile
    doc = load_document(doc_file) if doc_file.exists() else None
    return done.returncode, doc, done.stderr + (done.stdout if text else "")


def test_promote_as_jenkins_runs_it_and_the_history_kubectl_agrees_with(
    target: Target, tmp_path: Path, release_images: Images, kube_lab: KubeLab
) -> None:
    code, doc, stderr = gpuops(
        target,
        tmp_path,
        "promote",
        {"environment": "staging", "tag": "1.1.0", "reason": "first", "link": "https://ci/7"},
    )
    assert code == 0, stderr
    assert doc is not None and doc["ok"] is True
    result = doc["result"]
    assert result["state"] == "succeeded" and result["release"]["number"] == 1
    assert [g["gate"] for g in result["gates"]] == ["image", "compat", "headroom"]
    assert result["wanted"]["digest"] == release_images.digests["1.1.0"]
    assert "rollout complete" in stderr and "release #1 succeeded" in stderr, stderr

    code, doc, stderr = gpuops(
        target, tmp_path, "promote", {"environment": "staging", "tag": "1.2.0"}
    )
    assert code == 0, stderr

    code, doc, table = gpuops(target, tmp_path, "history", {"environment": "staging"}, text=True)
    assert code == 0
    assert doc is not None and [r["tag"] for r in doc["result"]["releases"]] == ["1.2.0", "1.1.0"]
    assert doc["result"]["rollback_choices"] == ["1.1.0"]
    lines = table.splitlines()
    assert lines[2].startswith("*2    promote   1.2.0") and lines[3].startswith(
        " 1    promote   1.1.0"
    )
    assert "current: #2 1.2.0; rollback --previous: #1 1.1.0" in table

    kubectl = Path(kube_lab.facts["bin_dir"]) / "kubectl"
    shown = subprocess.run(
        [
            str(kubectl),
            "--kubeconfig",
            str(kube_lab.kubeconfig),
            "-n",
            target.namespace,
            "rollout",
            "history",
            "deployment/infer",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert (
        "gpuops #1 promote staging: 1.1.0" in shown and "gpuops #2 promote staging: 1.2.0" in shown
    ), shown


@pytest.mark.parametrize(
    ("params", "code", "category", "says"),
    [
        ({"environment": "staging", "tag": "9.9.9"}, 3, "gate-refused", "tag 9.9.9 does not exist"),
        ({"environment": "production", "tag": "1.1.0"}, 3, "gate-refused", "requires an approval"),
        (
            {"environment": "staging", "tag": "1.1.0", "approved_by": True},
            2,
            "invalid-input",
            "approved_by",
        ),
        ({"environment": "qa", "tag": "1.1.0"}, 2, "invalid-input", "no environment 'qa'"),
    ],
)
def test_refusals_change_nothing(
    target: Target, tmp_path: Path, params: dict[str, Any], code: int, category: str, says: str
) -> None:
    before = target.image()

    got, doc, stderr = gpuops(target, tmp_path, "promote", params)

    assert got == code, stderr
    assert doc is not None and doc["error"]["category"] == category
    assert says in doc["error"]["message"]
    assert target.image() == before and not target.history("staging") and not target.leases()


def test_the_requester_cannot_approve_and_the_history_names_both(
    target: Target, tmp_path: Path
) -> None:
    """S-27 four eyes on the real apiserver: the requester's own approval is exit 3 naming
    both and changes nothing; someone else's is released and recorded with both names."""
    before = target.image()
    asked = {"environment": "production", "tag": "1.1.0", "requested_by": ["alice"]}

    got, doc, stderr = gpuops(target, tmp_path, "promote", {**asked, "approved_by": "Alice"})

    assert got == 3, stderr
    assert doc is not None and doc["error"]["category"] == "gate-refused"
    assert doc["error"]["message"] == (
        "production: Alice cannot approve a release that alice requested "
        "(four eyes: the requester never approves)"
    )
    assert doc["result"]["state"] == "refused"
    assert doc["result"]["approval"]["requested_by"] == "alice"
    assert target.image() == before and not target.history("production") and not target.leases()

    got, doc, stderr = gpuops(target, tmp_path, "promote", {**asked, "approved_by": "bob"})
    assert got == 0, stderr
    [record] = target.history("production")
    assert (record["requested_by"], record["approved_by"]) == ("alice", "bob")
    got, _, shown = gpuops(target, tmp_path, "history", {"environment": "production"}, text=True)
    assert got == 0 and "REQUESTED BY" in shown and "APPROVED BY" in shown, shown
    [row] = [line for line in shown.splitlines() if " promote " in line]
    assert row.split()[7:9] == ["alice", "bob"], row


def test_a_failed_rollout_is_exit_1_with_the_reason_and_the_restore(
    target: Target, tmp_path: Path
) -> None:
    gpuops(target, tmp_path, "promote", {"environment": "staging", "tag": "1.1.0"})

    code, doc, stderr = gpuops(
        target, tmp_path, "promote", {"environment": "staging", "tag": "2.0.0-labfault-crashloop"}
    )

    assert code == 1
    assert doc is not None and doc["error"]["category"] == "failed"
    assert (
        "restarted 3 times" in doc["error"]["message"]
        and "rolled back to #1 1.1.0" in doc["error"]["message"]
    )
    assert doc["result"]["state"] == "failed" and doc["result"]["restore"]["state"] == "complete"
    assert "rolling back to #1 1.1.0" in stderr


def test_two_processes_releasing_one_target_exactly_one_proceeds(
    target: Target, tmp_path: Path
) -> None:
    """The second process arrives while the first holds the lock, for certain: the first is
    paused (SIGSTOP, our own child) right after it said it recorded its release under the
    lock, the second runs to its end, then the first goes on. (Started side by side, the
    first could finish before the second reached the lock on a loaded machine: CI saw it.)"""

    def start(i: int, tag: str) -> subprocess.Popen[str]:
        d = tmp_path / str(i)
        d.mkdir()
        (d / "p.json").write_text(
            json.dumps({"config": str(target.config), "environment": "staging", "tag": tag})
        )
        env = {
            **os.environ,
            "GPUOPS_PARAMS_FILE": str(d / "p.json"),
            "GPUOPS_ERROR_FILE": str(d / "e.json"),
            "KUBECONFIG": str(target.kube.kubeconfig),
        }
        return subprocess.Popen(
            [GPUOPS, "release", "promote"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    first = start(0, "1.1.0")
    assert first.stderr is not None
    said = []
    try:
        for line in first.stderr:
            said.append(line)
            if "] release #1: promote" in line:  # "[   0.1s] release #1: ..."
                first.send_signal(signal.SIGSTOP)
                break
        assert first.poll() is None, said
        second = start(1, "1.2.0")
        _, second_err = second.communicate(timeout=300)
    finally:
        first.send_signal(signal.SIGCONT)
    _, rest = first.communicate(timeout=300)

    assert (first.returncode, second.returncode) == (0, 3), (said, rest, second_err)
    error = json.loads((tmp_path / "1" / "e.json").read_text())["error"]
    assert "is being released by" in error["message"] and "since" in error["message"]
    assert "(promote 1.1.0 to staging)" in error["message"], error
    assert [r["tag"] for r in target.history("staging")] == ["1.1.0"]


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        ({"tag": ["1.1.0", "1.2.0"]}, "field 'tag' must be a string"),
        ({"number": True}, "field 'number' must be a release number"),
        ({"previous": "1"}, "field 'previous' must be a release number"),
    ],
)
@pytest.mark.parametrize("command", ["history", "status", "promote"])
def test_a_damaged_history_record_is_exit_1_naming_the_configmap(
    target: Target,
    tmp_path: Path,
    kube_lab: KubeLab,
    damage: dict[str, Any],
    says: str,
    command: str,
) -> None:
    """What the cluster holds is decoded strictly: a list where a tag belongs, ``true`` as a
    release number. Today the list crashed the history (exit 5: unhashable) and ``true`` was
    taken for release number 1; nothing may be overwritten either."""
    record = {
        "number": 1,
        "environment": "staging",
        "action": "promote",
        "status": "succeeded",
        "started": "2026-01-01T00:00:00Z",
        "tag": "1.1.0",
        **damage,
    }
    history = json.dumps([record])
    name = "gpuops-releases-staging"
    kube_lab.core.create_namespaced_config_map(
        target.namespace, {"metadata": {"name": name}, "data": {"releases.json": history}}
    )
    before = target.image()
    params: dict[str, Any] = {"environment": "staging"}
    if command == "promote":
        params["tag"] = "1.1.0"

    code, doc, stderr = gpuops(target, tmp_path, command, params)

    assert code == 1, stderr
    assert doc is not None and doc["error"]["category"] == "failed", doc
    message = doc["error"]["message"]
    assert message.startswith(f"ConfigMap {target.namespace}/{name}: release record 0 "), message
    assert says in message, message
    cm = kube_lab.core.read_namespaced_config_map(name, target.namespace)
    assert cm.data == {"releases.json": history}, "the damaged history was overwritten"
    assert target.image() == before and not target.leases()
