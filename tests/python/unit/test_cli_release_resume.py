"""``gpuops release resume`` and bad input: refused before any cluster is read (the addresses
used here answer nothing), as ``promote`` is; an environment with several Deployments cannot
take a strategy."""

from __future__ import annotations

from pathlib import Path

import pytest
from unit.test_cli_release import KUBECONFIG, error_of

CONFIG = """\
environments:
  staging:
    namespace: ai-staging
    deployment: infer
    image: 127.0.0.1:9/ai/infer
    cluster: {kubeconfig: KUBECONFIG}
    strategy:
      steps: [{replicas: 1}, {approval: {approvers: [release-managers]}}]
  plain:
    namespace: ai-staging
    deployment: infer
    image: 127.0.0.1:9/ai/infer
    cluster: {kubeconfig: KUBECONFIG}
  two:
    namespace: ai-staging
    deployments: [infer, infer-b]
    image: 127.0.0.1:9/ai/infer
    cluster: {kubeconfig: KUBECONFIG}
    strategy: {steps: [{replicas: 1}]}
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    path = tmp_path / "gpuops-release.yaml"
    path.write_text(CONFIG.replace("KUBECONFIG", str(kubeconfig)))
    return path


def test_resume_needs_who_answered_and_who_asked(tmp_path: Path, config: Path) -> None:
    base = {"config": str(config), "environment": "staging"}
    code, error = error_of(tmp_path, "release", "resume", params=base)
    assert code == 2 and error["field"] == "approved_by", error
    code, error = error_of(tmp_path, "release", "resume", params={**base, "approved_by": "bob"})
    assert code == 2 and error["field"] == "requested_by", error


@pytest.mark.parametrize("approver", ["alice", "ALICE"])
def test_the_requester_cannot_answer_the_approval_step_exit_3(
    tmp_path: Path, config: Path, approver: str
) -> None:
    params = {
        "config": str(config),
        "environment": "staging",
        "approved_by": approver,
        "requested_by": ["carol", "alice"],
    }
    code, error = error_of(tmp_path, "release", "resume", params=params)
    assert code == 3, error
    assert str(error["message"]).startswith(f"staging: {approver} cannot approve"), error


def test_resume_of_an_environment_without_a_strategy_is_exit_2(
    tmp_path: Path, config: Path
) -> None:
    params = {
        "config": str(config),
        "environment": "plain",
        "approved_by": "bob",
        "requested_by": ["alice"],
    }
    code, error = error_of(tmp_path, "release", "resume", params=params)
    assert code == 2 and error["field"] == "environment", error
    assert "has no strategy" in str(error["message"]), error


@pytest.mark.parametrize("command", ["promote", "rollback"])
def test_a_strategy_takes_one_deployment_exit_2(tmp_path: Path, config: Path, command: str) -> None:
    what = {"tag": "1.0"} if command == "promote" else {"previous": True}
    params = {"config": str(config), "environment": "two", **what}
    code, error = error_of(tmp_path, "release", command, params=params)
    assert code == 2 and error["field"] == "config", error
    assert "a progressive release takes one Deployment" in str(error["message"]), error


@pytest.mark.parametrize(
    "who",
    [
        {},  # nobody answered: the approval timed out, or no requester could be named
        {"approved_by": "bob"},  # who pressed Abort, in a build no user started
        {"approved_by": "alice", "requested_by": ["alice"]},  # the requester said no
    ],
)
def test_a_rejection_needs_no_approver_and_four_eyes_never_refuses_it(
    tmp_path: Path, config: Path, who: dict[str, object]
) -> None:
    """--reject only restores what ran before: it passes the input checks and four eyes and
    goes to the cluster (which answers nothing here: unreachable, exit 4), whoever answered.
    Was exit 2 (approved_by, requested_by) or exit 3 (four eyes) before: a Jenkins approval
    that timed out could not be rejected and left the canary running."""
    params = {"config": str(config), "environment": "staging", "reject": True, **who}
    code, error = error_of(tmp_path, "release", "resume", params=params)
    assert code == 4 and error["category"] == "unreachable", error
