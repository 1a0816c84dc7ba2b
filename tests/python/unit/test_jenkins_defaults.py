"""The jobs' parameter defaults, read from the generated config.xml as Jenkins would: Jenkins
offers a choice parameter's first choice as its default, so no default may deploy to
production (issue 18)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from gpuops.adapters import jobxml
from gpuops.core import jenkinsjobs
from gpuops.core.releaseconfig import parse as parse_releases
from gpuops.errors import InvalidInput

SECTION = {"name": "infer", "repository": "https://git.example.com/ai/infer.git"}
ENV = {"deployment": "infer", "image": "harbor.example.com/ai/infer"}


def generated(envs: dict[str, dict[str, object]]) -> dict[str, ET.Element]:
    """Every job's config.xml as gpuops renders it, parsed; by job name."""
    doc = {"jenkins": SECTION, "environments": envs}
    config, releases = jenkinsjobs.parse(doc, "r.yaml"), parse_releases(doc, "r.yaml")
    history = {name: ["1.4.0", "1.3.0"] for name in envs}
    return {
        job.path: ET.fromstring(jobxml.render(job, config).split("\n", 1)[1])  # noqa: S314
        for job in jenkinsjobs.jobs(config, releases, history)
    }


def defaults(job: ET.Element) -> dict[str, str]:
    """What a person gets by pressing Build: a choice's first choice, a string's default."""
    out = {}
    for p in job.iter("hudson.model.ChoiceParameterDefinition"):
        out[p.findtext("name") or ""] = next(s.text for s in p.iter("string")) or ""
    for p in job.iter("hudson.model.StringParameterDefinition"):
        out[p.findtext("name") or ""] = p.findtext("defaultValue") or ""
    return out


def choices(job: ET.Element, name: str) -> list[str]:
    [p] = [
        p for p in job.iter("hudson.model.ChoiceParameterDefinition") if p.findtext("name") == name
    ]
    return [s.text or "" for s in p.iter("string")]


def test_the_release_job_defaults_to_no_production() -> None:
    jobs = generated(
        {
            "production": {**ENV, "namespace": "ai"},
            "staging": {**ENV, "namespace": "ai-staging"},
            "test": {**ENV, "namespace": "ai-test"},
        }
    )
    release = jobs["infer-release"]
    assert choices(release, "APP_ENV") == ["(choose)", "staging", "test", "production"]
    assert defaults(release) == {
        "APP_JOB": "release",
        "APP_ENV": "(choose)",  # the Jenkinsfile's stage Job refuses it
        "APP_NODE_CHANGE": "none",  # no node change unless asked for
        "APP_IMAGE_TAG": "",  # the CLI refuses an empty tag
        "APP_MODEL_VERSION": "",  # unchanged
        "APP_NODE_LIMIT": "",  # with APP_NODE_CHANGE none: nothing
    }
    # a rollback job's environment is the job's own; production's asks which release
    assert choices(jobs["infer-rollback-production"], "ROLLBACK_TO") == [
        "(choose)",
        "previous",
        "1.4.0",
        "1.3.0",
    ]
    assert defaults(jobs["infer-rollback-staging"])["ROLLBACK_TO"] == "previous"
    for name, job in jobs.items():
        if name.startswith("infer-rollback-"):
            assert choices(job, "APP_ENV") == [name.removeprefix("infer-rollback-")]
            assert defaults(job)["ROLLBACK_REASON"] == ""


def test_production_like_environments_come_last() -> None:
    jobs = generated(
        {
            "prod-eu": {**ENV, "namespace": "ai-eu"},
            "canary": {**ENV, "namespace": "ai-canary", "approval": {"required": True}},
            "dev": {**ENV, "namespace": "ai-dev"},
        }
    )
    assert choices(jobs["infer-release"], "APP_ENV") == ["(choose)", "dev", "canary", "prod-eu"]
    assert choices(jobs["infer-rollback-canary"], "ROLLBACK_TO")[0] == "(choose)"


def test_only_production_means_no_default_environment() -> None:
    jobs = generated({"production": {**ENV, "namespace": "ai"}})
    assert choices(jobs["infer-release"], "APP_ENV") == ["(choose)", "production"]


@pytest.mark.parametrize(
    "names",
    [
        ["live", "staging"],  # production by another name: the name guess misses it
        ["prd"],
        ["aa-production", "zz-test"],
        ["dev", "test"],
    ],
)
def test_the_first_environment_choice_is_always_choose(names: list[str]) -> None:
    """Whatever the environments are called, a default run names none (issue 18)."""
    jobs = generated({n: {**ENV, "namespace": f"ai-{n}"} for n in names})
    assert choices(jobs["infer-release"], "APP_ENV")[0] == "(choose)"
    assert sorted(choices(jobs["infer-release"], "APP_ENV")[1:]) == sorted(names)
    assert defaults(jobs["infer-release"])["APP_ENV"] == "(choose)"


def test_the_placeholder_is_refused_by_the_cli() -> None:
    """``(choose)`` is neither an environment (names are DNS labels) nor a tag."""
    from gpuops.cli.release import _to

    doc = {"environments": {"production": {**ENV, "namespace": "ai"}}}
    with pytest.raises(InvalidInput, match="no environment"):
        parse_releases(doc, "r.yaml").environment(jenkinsjobs.CHOOSE)
    with pytest.raises(InvalidInput):
        _to(jenkinsjobs.CHOOSE)
