"""``gpuops jenkins apply`` (jobs as code) against recorded Jenkins REST answers.

No Jenkins server can run on these machines (no Jenkins core or plugin is obtainable here).
So these tests start a small HTTP server on 127.0.0.1 that replays, in order, the answers a
Jenkins controller gives to the requests python-jenkins makes (tests/python/data/jenkins/
answers.yaml, written by hand from Jenkins' REST documentation, said so there too). The real
python-jenkins client talks real HTTP to it; the server checks each request's method, path,
basic-auth credentials and CSRF crumb, and keeps the config.xml bodies it was sent.
"""

from __future__ import annotations

import base64
import json
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuops.cli.main import run
from gpuops.errors import OperationFailed, Unreachable
from gpuops.usecases import jenkinsjobs
from gpuops.usecases.jenkinsjobs import ApplyRequest

ANSWERS = yaml.safe_load(
    (Path(__file__).resolve().parents[1] / "data" / "jenkins" / "answers.yaml").read_text()
)
USER, TOKEN = "release-bot", "11aa22bb33cc44dd55ee66ff77889900aa"
CHOICES = {"production": ["1.4.0", "1.3.0"], "staging": ["1.5.0"]}
JOBS = [
    "infer-build",
    "infer-release",
    "infer-clean-agents",
    "infer-rollback-production",
    "infer-rollback-staging",
]
CONFIG = """\
jenkins:
  folder: ai
  name: infer
  repository: https://git.example.com/ai/infer.git
  credentials: git-ci
  jenkinsfile: Jenkinsfile.example
environments:
  staging: {namespace: ai-staging, deployment: infer, image: harbor.example.com/ai/infer}
  production: {namespace: ai, deployment: infer, image: harbor.example.com/ai/infer}
"""


class Replay:
    """Answers requests in the recorded order; records what it was sent."""

    def __init__(self) -> None:
        self.expected: list[tuple[str, str, dict[str, Any]]] = []
        self.seen: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.stored: dict[str, str] = {}  # job path -> config.xml as Jenkins keeps it
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                replay.seen.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": dict(self.headers),
                        "body": body,
                    }
                )
                want = f"Basic {base64.b64encode(f'{USER}:{TOKEN}'.encode()).decode()}"
                if not replay.expected:
                    replay.problems.append(f"unexpected {self.command} {self.path}")
                    return self._answer(ANSWERS["not_found"], {})
                method, path, answer = replay.expected.pop(0)
                if (method, path) != (self.command, self.path):
                    replay.problems.append(
                        f"expected {method} {path}, got {self.command} {self.path}"
                    )
                if (
                    self.headers.get("Authorization") != want
                    and answer is not ANSWERS["unauthorized"]
                ):
                    replay.problems.append(f"{self.command} {self.path} without the user's token")
                if (
                    self.command == "POST"
                    and self.headers.get("Jenkins-Crumb") != ANSWERS["crumb"]["json"]["crumb"]
                ):
                    replay.problems.append(f"POST {self.path} without the CSRF crumb")
                return self._answer(answer, {"body": body, "path": path})

            def _answer(self, answer: dict[str, Any], ctx: dict[str, Any]) -> None:
                body = answer.get("body", "")
                if "json" in answer:
                    body = json.dumps(answer["json"]).replace("{short_name}", ctx.get("short", ""))
                if "stored" in ctx:
                    body = ctx["stored"]
                data = (answer.get("fill") or body).encode()
                self.send_response(answer["status"])
                for key, value in answer.get("headers", {}).items():
                    if key != "Content-Length":
                        self.send_header(key, str(value))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = _serve
            do_POST = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    # -- the recorded sequence python-jenkins produces ---------------------------------------
    def expect(self, method: str, path: str, answer: dict[str, Any]) -> None:
        self.expected.append((method, path, answer))

    def start_of_apply(self) -> None:
        self.expect("GET", "/crumbIssuer/api/json", ANSWERS["crumb"])
        self.expect("GET", "/me/api/json?depth=0", ANSWERS["whoami"])

    def job_is(self, job: str, present: bool) -> None:
        answer = dict(ANSWERS["job_name"])
        answer["fill"] = json.dumps({**answer["json"], "name": job})
        self.expect(
            "GET",
            f"/job/ai/job/{job}/api/json?tree=name",
            answer if present else ANSWERS["not_found"],
        )

    def reads_config(self, job: str) -> None:
        self.job_is(job, True)
        self.expect(
            "GET",
            f"/job/ai/job/{job}/config.xml",
            {**ANSWERS["config_xml"], "fill": self.stored[f"ai/{job}"]},
        )

    def creates(self, job: str) -> None:
        self.job_is(job, False)
        self.job_is(job, False)
        self.expect("POST", f"/job/ai/createItem?name={job}", ANSWERS["created"])
        self.job_is(job, True)

    def updates(self, job: str) -> None:
        self.expect("POST", f"/job/ai/job/{job}/config.xml", ANSWERS["configured"])

    def keep_posted(self) -> None:
        """Store what was posted, the way Jenkins writes it back."""
        for req in self.seen:
            if req["method"] == "POST" and req["body"]:
                if "createItem?name=" in req["path"]:
                    job = req["path"].rsplit("=", 1)[1]
                else:
                    job = req["path"].split("/job/")[-1].removesuffix("/config.xml")
                self.stored[f"ai/{job}"] = as_jenkins_stores(req["body"])


def as_jenkins_stores(config_xml: str) -> str:
    root = ET.fromstring(config_xml)  # noqa: S314 - our own test data
    for element in root.iter():
        plugin = ANSWERS["stored_plugins"].get(element.tag)
        if plugin:
            element.set("plugin", plugin)
    ET.indent(root, space="  ")
    return "<?xml version='1.1' encoding='UTF-8'?>\n" + ET.tostring(root, encoding="unicode")


@pytest.fixture
def jenkins(monkeypatch: pytest.MonkeyPatch) -> Iterator[Replay]:
    replay = Replay()
    thread = threading.Thread(target=replay.server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("GPUOPS_JENKINS_TOKEN", TOKEN)
    try:
        yield replay
    finally:
        replay.server.shutdown()
        replay.server.server_close()


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "gpuops-release.yaml"
    path.write_text(CONFIG)
    return path


def apply(
    replay: Replay, config: Path, *, check: bool = False, choices: dict[str, list[str]] = CHOICES
) -> Any:
    request = ApplyRequest(str(config), replay.url, USER, check=check)
    return jenkinsjobs.apply(request, choices_for=lambda req, rel: choices).result


def test_creates_the_jobs_then_changes_nothing_then_only_what_the_history_changed(
    jenkins: Replay, config: Path
) -> None:
    jenkins.start_of_apply()
    for job in JOBS:
        jenkins.creates(job)

    out = apply(jenkins, config)

    assert jenkins.problems == [] and jenkins.expected == []
    assert [(j.path, j.action) for j in out.jobs] == [(f"ai/{j}", "created") for j in JOBS]
    assert out.user == "release-bot"
    jenkins.keep_posted()
    rollback = ET.fromstring(jenkins.stored["ai/infer-rollback-production"].split("\n", 1)[1])  # noqa: S314
    choices = {
        p.findtext("name"): [s.text for s in p.iter("string")]
        for p in rollback.iter("hudson.model.ChoiceParameterDefinition")
    }
    assert choices == {
        "APP_JOB": ["rollback"],
        "APP_ENV": ["production"],
        "ROLLBACK_TO": ["(choose)", "previous", "1.4.0", "1.3.0"],  # production: no default
    }
    assert {
        p.findtext("name"): p.findtext("defaultValue")
        for p in rollback.iter("hudson.model.BooleanParameterDefinition")
    } == {"WITH_NODES": "false"}, "S-24: the nodes go back only when asked"
    release = ET.fromstring(jenkins.stored["ai/infer-release"].split("\n", 1)[1])  # noqa: S314
    assert {
        p.findtext("name"): [s.text for s in p.iter("string")]
        for p in release.iter("hudson.model.ChoiceParameterDefinition")
    } == {
        "APP_JOB": ["release"],
        "APP_ENV": ["(choose)", "staging", "production"],  # the first is the default: none
        "APP_NODE_CHANGE": ["none", "driver", "node-init", "all"],  # S-24, first: none
    }
    assert [p.findtext("name") for p in release.iter("hudson.model.StringParameterDefinition")] == [
        "APP_IMAGE_TAG",
        "APP_MODEL_VERSION",
        "APP_NODE_LIMIT",
    ]
    assert rollback.findtext("definition/scriptPath") == "Jenkinsfile.example"
    # issue 22: the agent clean job runs on a timer, the same Jenkinsfile with APP_JOB clean
    clean = ET.fromstring(jenkins.stored["ai/infer-clean-agents"].split("\n", 1)[1])  # noqa: S314
    timer = "properties/*/triggers/hudson.triggers.TimerTrigger/spec"
    assert clean.findtext(timer) == "H 3 * * *"
    assert [s.text for s in clean.iter("string")] == ["clean"]
    assert rollback.find(timer) is None  # no timer on what releases
    assert (
        rollback.findtext(
            "definition/scm/userRemoteConfigs/hudson.plugins.git.UserRemoteConfig/credentialsId"
        )
        == "git-ci"
    )

    jenkins.seen.clear()
    jenkins.start_of_apply()
    for job in JOBS:
        jenkins.reads_config(job)
    again = apply(jenkins, config)
    assert jenkins.problems == [] and jenkins.expected == []
    assert {j.action for j in again.jobs} == {"unchanged"}, "idempotent despite Jenkins' formatting"
    assert not [r for r in jenkins.seen if r["method"] == "POST"]

    jenkins.seen.clear()
    jenkins.start_of_apply()
    for job in JOBS:
        jenkins.reads_config(job)
        if job == "infer-rollback-production":
            jenkins.updates(job)
    newer = apply(jenkins, config, choices={**CHOICES, "production": ["1.5.0", "1.4.0", "1.3.0"]})
    assert jenkins.problems == [] and jenkins.expected == []
    assert [j.action for j in newer.jobs] == [
        "unchanged",
        "unchanged",
        "unchanged",
        "updated",
        "unchanged",
    ]
    [posted] = [r for r in jenkins.seen if r["method"] == "POST"]
    assert "<string>1.5.0</string>" in posted["body"]


def test_check_prints_the_diff_and_writes_nothing(jenkins: Replay, config: Path) -> None:
    jenkins.start_of_apply()
    for job in JOBS:
        jenkins.creates(job)
    apply(jenkins, config)
    jenkins.keep_posted()
    jenkins.seen.clear()
    jenkins.start_of_apply()
    for job in JOBS:
        jenkins.reads_config(job)

    out = apply(jenkins, config, check=True, choices={**CHOICES, "staging": []})

    assert jenkins.problems == [] and jenkins.expected == []
    assert not [r for r in jenkins.seen if r["method"] == "POST"]
    [changed] = [j for j in out.jobs if j.action != "unchanged"]
    assert (changed.path, changed.action) == ("ai/infer-rollback-staging", "would-update")
    assert "-              <string>1.5.0</string>" in changed.diff


def test_a_rollback_job_without_with_nodes_is_drift_that_check_names(
    jenkins: Replay, config: Path
) -> None:
    """A rollback job made before S-24 lacks WITH_NODES: --check says so, an update adds it."""
    jenkins.start_of_apply()
    for job in JOBS:
        jenkins.creates(job)
    apply(jenkins, config)
    jenkins.keep_posted()
    old = ET.fromstring(jenkins.stored["ai/infer-rollback-staging"].split("\n", 1)[1])  # noqa: S314
    definitions = old.find(
        "properties/hudson.model.ParametersDefinitionProperty/parameterDefinitions"
    )
    assert definitions is not None
    [flag] = definitions.findall("hudson.model.BooleanParameterDefinition")
    definitions.remove(flag)
    jenkins.stored["ai/infer-rollback-staging"] = as_jenkins_stores(ET.tostring(old, "unicode"))
    jenkins.seen.clear()
    jenkins.start_of_apply()
    for job in JOBS:
        jenkins.reads_config(job)

    out = apply(jenkins, config, check=True)

    assert jenkins.problems == [] and jenkins.expected == []
    [changed] = [j for j in out.jobs if j.action != "unchanged"]
    assert (changed.path, changed.action) == ("ai/infer-rollback-staging", "would-update")
    assert "+          <name>WITH_NODES</name>" in changed.diff, changed.diff


def test_after_declarative_runs_check_is_quiet_and_an_update_keeps_jenkins_elements(
    jenkins: Replay, config: Path
) -> None:
    """Jenkins ran the jobs and wrote its own elements into their config.xml, the way a real
    one shows them (test_jenkins_drift, data/jenkins-config/): no drift; a new rollback choice
    is, and the update sends Jenkins' document with only our elements replaced."""
    from test_jenkins_drift import REAL, jenkins_ran_it

    jenkins.start_of_apply()
    for job in JOBS:
        jenkins.creates(job)
    apply(jenkins, config)
    jenkins.keep_posted()
    real = REAL["pasqueque-diploma-stage.config.xml"]
    jenkins.stored = {path: jenkins_ran_it(xml, real) for path, xml in jenkins.stored.items()}
    jenkins.seen.clear()
    jenkins.start_of_apply()
    for job in JOBS:
        jenkins.reads_config(job)
    quiet = apply(jenkins, config, check=True)
    assert jenkins.problems == [] and jenkins.expected == []
    assert {j.action for j in quiet.jobs} == {"unchanged"}

    jenkins.seen.clear()
    jenkins.start_of_apply()
    for job in JOBS:
        jenkins.reads_config(job)
        if job == "infer-rollback-production":
            jenkins.updates(job)
    newer = apply(jenkins, config, choices={**CHOICES, "production": ["1.5.0", "1.4.0", "1.3.0"]})
    assert jenkins.problems == [] and jenkins.expected == []
    assert [j.action for j in newer.jobs] == [
        "unchanged",
        "unchanged",
        "unchanged",
        "updated",
        "unchanged",
    ]
    [posted] = [r for r in jenkins.seen if r["method"] == "POST"]
    sent = ET.fromstring(posted["body"].split("\n", 1)[1])  # noqa: S314
    assert "1.5.0" in [s.text for s in sent.iter("string")]
    tracker = (
        "org.jenkinsci.plugins.pipeline.modeldefinition.actions.DeclarativeJobPropertyTrackerAction"
    )
    assert sent.find(f"actions/{tracker}") is not None
    assert sent.find("properties/jenkins.model.BuildDiscarderProperty") is not None


def test_values_are_escaped_in_the_xml(jenkins: Replay, tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(CONFIG.replace("infer.git", "infer.git?a=1&b=</url><x>"))
    jenkins.start_of_apply()
    for job in JOBS:
        jenkins.creates(job)

    apply(jenkins, path)

    posted = [r["body"] for r in jenkins.seen if r["method"] == "POST"]
    url = ET.fromstring(posted[0].split("\n", 1)[1]).findtext(".//url")  # noqa: S314
    assert url == "https://git.example.com/ai/infer.git?a=1&b=</url><x>"


def test_a_wrong_token_and_a_jenkins_that_is_down(jenkins: Replay, config: Path) -> None:
    jenkins.expect("GET", "/crumbIssuer/api/json", ANSWERS["unauthorized"])
    with pytest.raises(OperationFailed, match=r"refused who am I \(HTTP 401\)") as info:
        apply(jenkins, config)
    assert TOKEN not in info.value.message and TOKEN not in str(info.value.hint)

    dead = ApplyRequest(str(config), "http://127.0.0.1:9", USER)
    with pytest.raises(Unreachable, match=r"cannot reach Jenkins at http://127\.0\.0\.1:9"):
        jenkinsjobs.apply(dead, choices_for=lambda req, rel: CHOICES)


def test_the_cli_takes_the_token_from_the_environment_only(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUOPS_JENKINS_TOKEN", raising=False)
    err = tmp_path / "err.json"
    code = run(
        [
            "--error-file",
            str(err),
            "jenkins",
            "apply",
            "--config",
            str(config),
            "--url",
            "http://127.0.0.1:9",
            "--user",
            USER,
        ]
    )
    assert code == 2
    error = json.loads(err.read_text())["error"]
    assert (
        "GPUOPS_JENKINS_TOKEN holds no API token" in error["message"] and error["field"] == "user"
    )
    assert (
        run(["jenkins", "apply", "--config", str(config), "--url", "http://x", "--token", "t"]) == 2
    )


def test_the_jenkins_section_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(CONFIG.replace("  name: infer\n", "  name: 'in fer'\n"))
    err = tmp_path / "err.json"
    code = run(
        ["--error-file", str(err), "jenkins", "apply", "--config", str(path), "--url", "http://x"]
    )
    assert code == 2
    assert (
        "r.yaml: jenkins.name: 'in fer' is not a job name"
        in json.loads(err.read_text())["error"]["message"]
    )
