"""``gpuops release`` and bad input: every refusal is exit 2 naming the field, before anything
reaches a cluster or a registry (the addresses used here answer nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuops.cli.main import run

CONFIG = """\
environments:
  staging:
    namespace: ai-staging
    deployment: infer
    image: 127.0.0.1:9/ai/infer
    cluster: {kubeconfig: /nonexistent/kubeconfig}
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "gpuops-release.yaml"
    path.write_text(CONFIG)
    return path


def error_of(
    tmp_path: Path, *argv: str, params: dict[str, object] | None = None
) -> tuple[int, dict[str, object]]:
    err = tmp_path / "error.json"
    err.unlink(missing_ok=True)
    head = ["--error-file", str(err)]
    if params is not None:
        pfile = tmp_path / "params.json"
        pfile.write_text(json.dumps(params))
        head += ["--params-file", str(pfile)]
    code = run([*head, *argv])
    return code, json.loads(err.read_text())["error"] if err.exists() else {}


@pytest.mark.parametrize(
    ("argv", "field", "says"),
    [
        (["promote", "-e", "staging", "--tag", "-1.0"], "tag", "is not a valid tag"),
        (["promote", "-e", "Staging", "--tag", "1.0"], "environment", "is not a valid name"),
        (
            ["promote", "-e", "prod", "--tag", "1.0"],
            "environment",
            "no environment 'prod' (environments: staging)",
        ),
        (["promote", "-e", "staging"], "tag", "promote needs --tag, --model or both"),
        (["promote", "-e", "staging", "--model", "v2"], "model", "declares no model mount"),
        (
            ["promote", "-e", "staging", "--tag", "1.0", "--git-revision", "HEAD"],
            "git_revision",
            "is not a commit id",
        ),
        (
            ["promote", "-e", "staging", "--tag", "1.0", "--link", "ftp://x"],
            "link",
            "is not an http(s) URL",
        ),
        (["rollback", "-e", "staging"], "to", "give exactly one of --previous and --to TAG"),
        (["rollback", "-e", "staging", "--previous", "--to", "1.0"], "to", "give exactly one of"),
        (["rollback", "-e", "staging", "--to", "1.0\n"], "to", "control character"),
    ],
)
def test_bad_input_is_exit_2_naming_the_field(
    tmp_path: Path, config: Path, argv: list[str], field: str, says: str
) -> None:
    code, error = error_of(tmp_path, "release", *argv[:1], "--config", str(config), *argv[1:])
    assert code == 2, error
    assert error["field"] == field, error
    assert says in str(error["message"]), error


def test_a_broken_environments_file_names_file_environment_and_key(tmp_path: Path) -> None:
    path = tmp_path / "gpuops-release.yaml"
    path.write_text(CONFIG.replace("namespace: ai-staging", "namespace: AI_Staging"))
    code, error = error_of(
        tmp_path, "release", "promote", "--config", str(path), "-e", "staging", "--tag", "1"
    )
    assert code == 2
    assert str(error["message"]).startswith(
        f"{path}: environments.staging.namespace: namespace 'AI_Staging'"
    )
    code, error = error_of(
        tmp_path, "release", "history", "--config", str(tmp_path / "none.yaml"), "-e", "x"
    )
    assert code == 2 and "does not exist" in str(error["message"]) and error["field"] == "config"


def test_parameters_as_jenkins_sends_them(tmp_path: Path, config: Path) -> None:
    """The step's parameters file: a JSON boolean for a flag, strings for the rest."""
    code, error = error_of(
        tmp_path,
        "release",
        "rollback",
        params={"config": str(config), "environment": "staging", "previous": "yes"},
    )
    assert code == 2 and error["field"] == "previous"
    code, error = error_of(
        tmp_path,
        "release",
        "promote",
        params={"config": str(config), "environment": "staging", "tag": "1.0", "approved_by": 7},
    )
    assert code == 2 and error["field"] == "approved_by"


@pytest.mark.parametrize(
    ("field", "value"),
    [("approved_by", "Alice Smith"), ("requested_by", ["bob;rm"]), ("approved_by", "-alice")],
)
def test_requester_and_approver_are_jenkins_user_ids(
    tmp_path: Path, config: Path, field: str, value: object
) -> None:
    code, error = error_of(
        tmp_path,
        "release",
        "promote",
        params={"config": str(config), "environment": "staging", "tag": "1.0", field: value},
    )
    assert code == 2 and error["field"] == field, error
    assert "is not a Jenkins user id" in str(error["message"]), error


KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: ci, user: {token: not-a-real-token}}]
contexts: [{name: lab, context: {cluster: lab, user: ci}}]
current-context: lab
"""


@pytest.mark.parametrize("approver", ["alice", "ALICE"])
@pytest.mark.parametrize("command", ["promote", "rollback"])
def test_the_requester_cannot_approve_exit_3_naming_both_before_the_cluster_is_read(
    tmp_path: Path, command: str, approver: str
) -> None:
    """S-27 four eyes. The cluster address answers nothing: a refusal that came after any read
    of the cluster would be exit 4 (unreachable), not 3. Jenkins ids ignore case by default."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    path = tmp_path / "gpuops-release.yaml"
    path.write_text(CONFIG.replace("/nonexistent/kubeconfig", str(kubeconfig)))
    what = {"tag": "1.0"} if command == "promote" else {"previous": True}
    params = {"config": str(path), "environment": "staging", **what}
    code, error = error_of(
        tmp_path,
        "release",
        command,
        params={**params, "requested_by": ["alice"], "approved_by": approver},
    )
    assert code == 3, error
    assert error["category"] == "gate-refused" and error["field"] == "approved_by", error
    assert str(error["message"]) == (
        f"staging: {approver} cannot approve a release that alice requested "
        "(four eyes: the requester never approves)"
    ), error
    # someone else's approval passes the check and goes on to the cluster (unreachable here)
    code, error = error_of(
        tmp_path,
        "release",
        command,
        params={**params, "requested_by": ["alice"], "approved_by": "bob"},
    )
    assert code == 4, error


@pytest.mark.parametrize("command", ["promote", "rollback"])
@pytest.mark.parametrize(
    ("approver", "requesters"),
    [("carol", ["alice", "carol"]), ("Bob", ["alice", "carol", "bob"])],
)
def test_an_approver_among_several_requesters_is_refused(
    tmp_path: Path, command: str, approver: str, requesters: list[str]
) -> None:
    """Queued requests merge into one build with several user causes (and upstream builds add
    theirs): the approver may be none of them. Exit 3 before the cluster is read."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    path = tmp_path / "gpuops-release.yaml"
    path.write_text(CONFIG.replace("/nonexistent/kubeconfig", str(kubeconfig)))
    what = {"tag": "1.0"} if command == "promote" else {"previous": True}
    params = {"config": str(path), "environment": "staging", **what}
    code, error = error_of(
        tmp_path,
        "release",
        command,
        params={**params, "requested_by": requesters, "approved_by": approver},
    )
    assert code == 3, error
    assert str(error["message"]) == (
        f"staging: {approver} cannot approve a release that {approver.lower()} requested "
        "(four eyes: the requester never approves)"
    ), error


@pytest.mark.parametrize("command", ["promote", "rollback"])
def test_an_approval_without_a_requester_is_refused_exit_2(
    tmp_path: Path, config: Path, command: str
) -> None:
    """Fail closed: with no requester four eyes cannot be checked (exit 2, invalid input)."""
    what = {"tag": "1.0"} if command == "promote" else {"previous": True}
    params = {"config": str(config), "environment": "staging", **what, "approved_by": "bob"}
    code, error = error_of(tmp_path, "release", command, params=params)
    assert code == 2 and error["field"] == "requested_by", error
    assert str(error["message"]).startswith(
        "--approved-by needs --requested-by: four eyes needs to know who asked"
    ), error


@pytest.mark.parametrize("field", ["approved_by", "requested_by"])
@pytest.mark.parametrize("value", ["anonymous", "SYSTEM", "system", "Anonymous"])
def test_technical_ids_are_not_people(tmp_path: Path, config: Path, field: str, value: str) -> None:
    given: object = [value] if field == "requested_by" else value
    params = {"config": str(config), "environment": "staging", "tag": "1.0", field: given}
    if field == "approved_by":
        params["requested_by"] = ["alice"]
    code, error = error_of(tmp_path, "release", "promote", params=params)
    assert code == 2 and error["field"] == field, error
    assert "is a technical Jenkins id, not a person" in str(error["message"]), error
