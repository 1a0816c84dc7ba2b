"""``gpuops jenkins apply --check`` after Jenkins ran the jobs: what Jenkins writes into a job's
config.xml on its own is no drift; a real change is.

The Jenkins side comes from REAL config.xml documents of public repositories
(data/jenkins-config/, cited in its README): each test takes our template's output and merges
into it the elements such a file shows Jenkins added, the way the file shows them. No Jenkins
runs here; that merge stands in for "Jenkins ran the job and saved it".
"""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuops.adapters import jobxml
from gpuops.core import jenkinsjobs
from gpuops.core.releaseconfig import parse as parse_releases

DATA = Path(__file__).resolve().parent / "data" / "jenkins-config"
REAL = {p.name: p.read_text() for p in sorted(DATA.glob("*.config.xml"))}
DOC = {
    "jenkins": {
        "folder": "ai",
        "name": "infer",
        "repository": "https://git.example.com/ai/infer.git",
        "credentials": "git-ci",
        "jenkinsfile": "Jenkinsfile.example",
    },
    "environments": {
        "staging": {"namespace": "ai-staging", "deployment": "infer", "image": "h.example/ai/i"},
        "production": {"namespace": "ai", "deployment": "infer", "image": "h.example/ai/i"},
    },
}
HISTORY = {"production": ["1.4.0", "1.3.0"], "staging": ["1.5.0"]}


def ours(history: dict[str, list[str]] = HISTORY) -> dict[str, tuple[str, str]]:
    """Each job's kind and the config.xml gpuops wants for it."""
    config, releases = jenkinsjobs.parse(DOC, "r.yaml"), parse_releases(DOC, "r.yaml")
    return {
        job.path: (job.kind, jobxml.render(job, config))
        for job in jenkinsjobs.jobs(config, releases, history)
    }


def parse(text: str) -> ET.Element:
    return ET.fromstring(text.encode())  # noqa: S314 - our own test data


def app_job(root: ET.Element) -> str:
    """The job's kind, from its APP_JOB parameter's one choice."""
    [p] = [p for p in root.iter(jobxml.CHOICE) if p.findtext("name") == "APP_JOB"]
    return next(s.text or "" for s in p.iter("string"))


def jenkins_ran_it(wanted: str, real: str) -> str:
    """Our job as Jenkins stores it after running it, with what ``real`` shows Jenkins adds:
    its actions, the properties the Jenkinsfile set (before ours, as there), its form of
    DisableConcurrentBuilds, extra core fields (displayName), plugin attributes with versions,
    the git plugin's submoduleCfg form, its declaration and indentation. On release and
    rollback jobs no PipelineTriggersJobProperty: Jenkinsfile.example sets no triggers {}, so
    Jenkins writes none there (one there is drift: test_a_trigger_on_a_release_job_is_drift)."""
    job, seen = parse(wanted), parse(real)
    kind = app_job(job)
    job.set("plugin", seen.get("plugin", ""))
    actions = seen.find("actions")
    job.remove(job.find("actions"))  # type: ignore[arg-type]
    job.insert(0, copy.deepcopy(actions) if actions is not None else ET.Element("actions"))
    for extra in [e for e in seen if job.find(e.tag) is None]:  # e.g. displayName
        job.insert([e.tag for e in seen].index(extra.tag), copy.deepcopy(extra))
    props, seen_props = job.find("properties"), seen.find("properties")
    assert props is not None and seen_props is not None
    skip = (jobxml.NO_CONCURRENT,) if kind == "build" else (jobxml.NO_CONCURRENT, jobxml.TRIGGERS)
    for i, p in enumerate(e for e in seen_props if e.tag not in skip):
        props.insert(i, copy.deepcopy(p))
    theirs = seen_props.find(jobxml.NO_CONCURRENT)
    mine = props.find(jobxml.NO_CONCURRENT)
    if theirs is not None and mine is not None:  # Jenkins writes its default field into it
        props.insert(list(props).index(mine), copy.deepcopy(theirs))
        props.remove(mine)
    for tag in ("definition", "definition/scm"):
        found, own = seen.find(tag), job.find(tag)
        if found is not None and own is not None and "plugin" in found.attrib:
            own.set("plugin", found.get("plugin", ""))
    cfg, seen_cfg = job.find("definition/scm/submoduleCfg"), seen.find(".//submoduleCfg")
    if cfg is not None and seen_cfg is not None:
        cfg.set("class", seen_cfg.get("class", ""))
    ET.indent(job, space="  ")
    return real.split("\n", 1)[0] + "\n" + ET.tostring(job, encoding="unicode")


def flat(text: str) -> str:
    root = parse(text)
    for e in root.iter():
        e.tail = None
        e.text = e.text.strip() or None if e.text else None
    return ET.tostring(root, encoding="unicode")


@pytest.mark.parametrize("real", sorted(REAL))
def test_what_jenkins_wrote_after_a_run_is_no_drift(real: str) -> None:
    for path, (kind, wanted) in ours().items():
        stored = jenkins_ran_it(wanted, REAL[real])
        assert flat(stored) != flat(wanted), "the stand-in added Jenkins' elements"
        assert jobxml.drift(stored, wanted, kind, path) == "", (real, path)


def test_the_stand_in_carries_the_declarative_tracker() -> None:
    _, wanted = ours()["ai/infer-release"]
    stored = parse(jenkins_ran_it(wanted, REAL["pasqueque-diploma-stage.config.xml"]))
    tracker = stored.find(
        "actions/org.jenkinsci.plugins.pipeline.modeldefinition.actions."
        "DeclarativeJobPropertyTrackerAction"
    )
    assert tracker is not None
    assert [s.text for s in tracker.iter("string")] == [
        "jenkins.model.BuildDiscarderProperty",
        "hudson.triggers.SCMTrigger",
    ]
    assert stored.find("properties/jenkins.model.BuildDiscarderProperty") is not None
    assert stored.findtext(f"properties/{jobxml.NO_CONCURRENT}/abortPrevious") == "false"
    assert stored.get("plugin") == "workflow-job@1239.v71b_b_a_124a_725"


def test_the_stand_in_carries_a_modern_jenkins_declarative_job() -> None:
    """The licensed modern file (a Jenkins of 2025): tracker, new-style plugin versions."""
    _, wanted = ours()["ai/infer-release"]
    stored = parse(jenkins_ran_it(wanted, REAL["jenkinsci-pmd-nonecompat.config.xml"]))
    assert [a.tag.rsplit(".", 1)[-1] for a in stored.find("actions")] == [  # type: ignore[union-attr]
        "DeclarativeJobAction",
        "DeclarativeJobPropertyTrackerAction",
    ]
    assert stored.get("plugin") == "workflow-job@1505.vea_4b_20a_4a_495"
    assert stored.find("definition").get("plugin") == "workflow-cps@4018.vf02e01888da_f"  # type: ignore[union-attr]


def test_the_stand_in_carries_what_options_set_and_plugin_attributes_on_actions() -> None:
    _, wanted = ours()["ai/infer-release"]
    stored = parse(jenkins_ran_it(wanted, REAL["jenkinsci-pmd-tracker-upgrade.config.xml"]))
    rotator = "properties/jenkins.model.BuildDiscarderProperty/strategy"
    assert stored.findtext(f"{rotator}/numToKeep") == "1"  # options { buildDiscarder(...) }
    stored = parse(jenkins_ran_it(wanted, REAL["jenkinsci-pmd-parallel-upgrade.config.xml"]))
    [action] = stored.find("actions")  # type: ignore[misc]
    assert action.get("plugin") == "pipeline-model-definition@1.2.5"


def _param(root: ET.Element, name: str) -> ET.Element:
    [p] = [p for p in root.iter() if p.findtext("name") == name and "Parameter" in p.tag]
    return p


def _set(tag: str, value: str) -> Callable[[ET.Element], None]:
    def change(root: ET.Element) -> None:
        found = root.find(tag)
        assert found is not None
        found.text = value

    return change


def _description(root: ET.Element) -> None:
    _param(root, "APP_IMAGE_TAG").find("description").text = "Any tag."  # type: ignore[union-attr]


def _default(root: ET.Element) -> None:
    _param(root, "APP_MODEL_VERSION").find("defaultValue").text = "7"  # type: ignore[union-attr]


def _choice_gone(root: ET.Element) -> None:
    array = _param(root, "APP_ENV").find("choices/a")
    assert array is not None
    [staging] = [s for s in array if s.text == "staging"]
    array.remove(staging)


def _choice_order(root: ET.Element) -> None:
    strings = list(_param(root, "APP_ENV").iter("string"))
    strings[0].text, strings[1].text = strings[1].text, strings[0].text  # staging first


def _removed(root: ET.Element) -> None:
    defs = root.find("properties/hudson.model.ParametersDefinitionProperty/parameterDefinitions")
    assert defs is not None
    defs.remove(_param(root, "APP_NODE_LIMIT"))


def _no_parameters(root: ET.Element) -> None:
    props = root.find("properties")
    assert props is not None
    props.remove(props.find(jobxml.PARAMETERS))  # type: ignore[arg-type]


def _concurrent(root: ET.Element) -> None:
    props = root.find("properties")
    assert props is not None
    props.remove(props.find(jobxml.NO_CONCURRENT))  # type: ignore[arg-type]


def _abort(root: ET.Element) -> None:
    prop = root.find(f"properties/{jobxml.NO_CONCURRENT}")
    assert prop is not None
    abort = prop.find("abortPrevious")
    (abort if abort is not None else ET.SubElement(prop, "abortPrevious")).text = "true"


def _credentials(root: ET.Element) -> None:
    remote = root.find("definition/scm/userRemoteConfigs/hudson.plugins.git.UserRemoteConfig")
    assert remote is not None
    remote.remove(remote.find("credentialsId"))  # type: ignore[arg-type]


def _inline(root: ET.Element) -> None:
    """The definition replaced by an inline script, as the real noneCompat job has it."""
    real = parse(REAL["jenkinsci-pmd-nonecompat.config.xml"]).find("definition")
    old = root.find("definition")
    assert real is not None and old is not None
    root.insert(list(root).index(old), copy.deepcopy(real))
    root.remove(old)


TOKEN = "s3cret-remote-token"


def _auth_token(root: ET.Element) -> None:
    """A remote trigger token: a build with no user cause, around four eyes."""
    ET.SubElement(root, "authToken").text = TOKEN


def _disabled(root: ET.Element) -> None:
    _set("disabled", "true")(root)


def _timer(root: ET.Element) -> None:
    """A timer trigger, the way Jenkins stores a triggers { cron(...) } (the real file's form)."""
    props = root.find("properties")
    assert props is not None
    prop = ET.SubElement(props, jobxml.TRIGGERS)
    timer = ET.SubElement(ET.SubElement(prop, "triggers"), "hudson.triggers.TimerTrigger")
    ET.SubElement(timer, "spec").text = "H 3 * * *"


def _scm_poll(root: ET.Element) -> None:
    """The real file's PipelineTriggersJobProperty (an SCMTrigger polling every minute)."""
    real = parse(REAL["pasqueque-diploma-stage.config.xml"]).find(f"properties/{jobxml.TRIGGERS}")
    props = root.find("properties")
    assert real is not None and props is not None
    props.insert(0, copy.deepcopy(real))


def _legacy_trigger(root: ET.Element) -> None:
    """Jenkins core's own <triggers> of the job (the freestyle form) with a timer in it."""
    legacy = root.find("triggers")
    assert legacy is not None
    timer = ET.SubElement(legacy, "hudson.triggers.TimerTrigger")
    ET.SubElement(timer, "spec").text = "H 3 * * *"


#: What would weaken the release gate: drift on every job (authToken, disabled) or on the
#: release and rollback jobs (triggers), with the diff line that shows it.
GATE = {
    "auth token": (_auth_token, "-", f"<authToken>{jobxml.HIDDEN}</authToken>"),
    "disabled": (_disabled, "-", "<disabled>true</disabled>"),
    "timer trigger": (_timer, "-", "<spec>H 3 * * *</spec>"),
    "scm trigger": (_scm_poll, "-", "<spec>* * * * *</spec>"),
    "legacy trigger": (_legacy_trigger, "-", "<hudson.triggers.TimerTrigger>"),
}

DRIFT = {
    **GATE,
    "parameter description": (_description, "+", "Image tag made by the build job."),
    "string default": (_default, "-", "<defaultValue>7</defaultValue>"),
    "choice removed": (_choice_gone, "+", "<string>staging</string>"),
    "choice order": (_choice_order, "+", "<string>"),
    "removed parameter": (_removed, "+", "<name>APP_NODE_LIMIT</name>"),
    "no parameters at all": (_no_parameters, "+", "<name>APP_IMAGE_TAG</name>"),
    "script path": (_set("definition/scriptPath", "Jenkinsfile"), "-", "Jenkinsfile</"),
    "scm url": (
        _set(
            "definition/scm/userRemoteConfigs/hudson.plugins.git.UserRemoteConfig/url",
            "https://git.example.com/other.git",
        ),
        "-",
        "other.git",
    ),
    "branch": (
        _set("definition/scm/branches/hudson.plugins.git.BranchSpec/name", "*/dev"),
        "-",
        "*/dev",
    ),
    "credentials": (_credentials, "+", "<credentialsId>git-ci</credentialsId>"),
    "lightweight": (_set("definition/lightweight", "false"), "-", "<lightweight>false"),
    "concurrent builds allowed": (_concurrent, "+", jobxml.NO_CONCURRENT),
    "abort previous": (_abort, "-", "<abortPrevious>true"),
    "inline script": (_inline, "+", "CpsScmFlowDefinition"),
    "description": (_set("description", "Mine."), "-", "Mine."),
}


@pytest.mark.parametrize("real", sorted(REAL))
@pytest.mark.parametrize("case", sorted(DRIFT))
def test_a_real_change_after_a_run_is_drift(case: str, real: str) -> None:
    change, sign, text = DRIFT[case]
    kind, wanted = ours()["ai/infer-release"]
    stored = parse(jenkins_ran_it(wanted, REAL[real]))
    change(stored)
    diff = jobxml.drift(ET.tostring(stored, encoding="unicode"), wanted, kind, "ai/infer-release")
    assert diff, case
    assert [line for line in diff.splitlines() if line.startswith(sign) and text in line], diff


@pytest.mark.parametrize("name", sorted(REAL))
def test_new_rollback_choices_are_drift_and_the_update_keeps_what_jenkins_wrote(
    name: str,
) -> None:
    real = REAL[name]
    kind, before = ours()["ai/infer-rollback-production"]
    stored = jenkins_ran_it(before, real)
    _, after = ours({**HISTORY, "production": ["1.5.0", "1.4.0", "1.3.0"]})[
        "ai/infer-rollback-production"
    ]

    diff = jobxml.drift(stored, after, kind, "ai/infer-rollback-production")
    assert "+              <string>1.5.0</string>" in diff.splitlines()

    sent = jobxml.merged(stored, after, kind, "ai/infer-rollback-production")
    assert sent.startswith("<?xml version='1.1' encoding='UTF-8'?>\n")
    assert jobxml.drift(sent, after, kind, "ai/infer-rollback-production") == ""
    root, kept = parse(sent), parse(stored)
    assert [e.tag for e in root] == [e.tag for e in kept]  # in Jenkins' order
    for e in kept:  # every element Jenkins wrote is still there, unchanged
        if e.tag not in ("description", "properties", "definition"):
            assert ET.tostring(root.find(e.tag)) == ET.tostring(e), e.tag  # type: ignore[arg-type]
    assert root.get("plugin") == kept.get("plugin")
    for tag in ("definition", "definition/scm", "definition/scm/submoduleCfg"):
        assert root.find(tag).attrib == kept.find(tag).attrib, tag  # type: ignore[union-attr]
    assert [p.tag for p in root.find("properties")] == [p.tag for p in kept.find("properties")]  # type: ignore[union-attr]


def test_a_build_job_may_get_disable_concurrent_builds_from_its_jenkinsfile() -> None:
    """The build job's template has no DisableConcurrentBuilds: the Jenkinsfile's
    options { disableConcurrentBuilds() } may set it (the real file shows it so)."""
    kind, wanted = ours()["ai/infer-build"]
    stored = parse(jenkins_ran_it(wanted, REAL["pasqueque-diploma-stage.config.xml"]))
    props = stored.find("properties")
    assert props is not None
    real = parse(REAL["pasqueque-diploma-stage.config.xml"]).find(
        f"properties/{jobxml.NO_CONCURRENT}"
    )
    props.append(copy.deepcopy(real))  # type: ignore[arg-type]
    assert jobxml.drift(ET.tostring(stored, encoding="unicode"), wanted, kind, "b") == ""


def test_a_real_file_as_found_is_not_our_job() -> None:
    """Sanity: the public jobs themselves differ from ours where gpuops owns the elements."""
    kind, wanted = ours()["ai/infer-release"]
    for name, real in REAL.items():
        diff = jobxml.drift(real, wanted, kind, "ai/infer-release")
        assert "+    <scriptPath>Jenkinsfile.example</scriptPath>" in diff.splitlines(), name
        assert "+          <name>APP_ENV</name>" in diff.splitlines(), name


@pytest.mark.parametrize("real", sorted(REAL))
@pytest.mark.parametrize("case", sorted(GATE))
@pytest.mark.parametrize("job", ["ai/infer-release", "ai/infer-rollback-production"])
def test_what_weakens_the_gate_is_drift_and_the_update_sets_it_back(
    job: str, case: str, real: str
) -> None:
    change, sign, text = GATE[case]
    kind, wanted = ours()[job]
    stored = parse(jenkins_ran_it(wanted, REAL[real]))
    change(stored)
    current = ET.tostring(stored, encoding="unicode")
    diff = jobxml.drift(current, wanted, kind, job)
    assert [line for line in diff.splitlines() if line.startswith(sign) and text in line], diff
    assert TOKEN not in diff  # a secret: never shown
    sent = jobxml.merged(current, wanted, kind, job)
    assert jobxml.drift(sent, wanted, kind, job) == ""
    root = parse(sent)
    assert root.find("authToken") is None
    assert root.findtext("disabled") == "false"
    assert root.find(f"properties/{jobxml.TRIGGERS}") is None
    assert len(root.find("triggers")) == 0  # type: ignore[arg-type]


def test_the_real_files_triggers_on_a_release_job_are_drift() -> None:
    """Changed expectation (issue 18 review): the stand-in used to copy the real file's
    PipelineTriggersJobProperty (an SCMTrigger) onto the release job too, and asserted no
    drift; a triggered release is drift now."""
    kind, wanted = ours()["ai/infer-release"]
    stored = parse(jenkins_ran_it(wanted, REAL["pasqueque-diploma-stage.config.xml"]))
    _scm_poll(stored)
    diff = jobxml.drift(ET.tostring(stored, encoding="unicode"), wanted, kind, "ai/infer-release")
    assert f"-  <{jobxml.TRIGGERS}>" in diff.splitlines(), diff


@pytest.mark.parametrize("real", sorted(REAL))
def test_the_build_job_keeps_its_triggers_but_not_a_token_or_disabled(real: str) -> None:
    """The build job's triggers are its Jenkinsfile's (triggers {}): no drift, kept on update;
    an authToken or disabled is drift there too."""
    kind, wanted = ours()["ai/infer-build"]
    stored = parse(jenkins_ran_it(wanted, REAL[real]))
    _scm_poll(stored)
    _legacy_trigger(stored)
    current = ET.tostring(stored, encoding="unicode")
    assert jobxml.drift(current, wanted, kind, "ai/infer-build") == ""
    kept = parse(jobxml.merged(current, wanted, kind, "ai/infer-build"))
    assert (
        kept.find(f"properties/{jobxml.TRIGGERS}/triggers/hudson.triggers.SCMTrigger") is not None
    )
    assert kept.find("triggers/hudson.triggers.TimerTrigger") is not None
    for change in (_auth_token, _disabled):
        other = copy.deepcopy(stored)
        change(other)
        diff = jobxml.drift(ET.tostring(other, encoding="unicode"), wanted, kind, "b")
        assert diff and TOKEN not in diff, change


def test_the_clean_jobs_timer_is_owned_a_missing_or_changed_one_is_drift_and_put_back() -> None:
    from gpuops.adapters import jobxml
    from gpuops.core.jenkinsjobs import CLEAN_SCHEDULE, Job, JobsConfig, Parameter

    config = JobsConfig(name="infer", repository="https://git.example.com/ai/infer.git")
    job = Job(
        "infer-clean-agents",
        "clean",
        "Scheduled agent clean.",
        (Parameter("choice", "APP_JOB", "which part", ("clean",)),),
        schedule=CLEAN_SCHEDULE,
    )
    wanted = jobxml.render(job, config)
    assert jobxml.drift(wanted, wanted, "clean", job.path) == ""
    without = wanted.replace(f"<spec>{CLEAN_SCHEDULE}</spec>", "<spec>H H * * 0</spec>")
    assert without != wanted
    diff = jobxml.drift(without, wanted, "clean", job.path)
    assert "H H * * 0" in diff and CLEAN_SCHEDULE in diff
    assert f"<spec>{CLEAN_SCHEDULE}</spec>" in jobxml.merged(without, wanted, "clean", job.path)
    assert jobxml.merged(without, wanted, "clean", job.path).count("TimerTrigger>") == 2
