"""The scheduled inspection jobs ``<name>-inspect-<environment>`` (jenkins.inspect_schedule):
made only when asked, each with its timer trigger, which gpuops owns (a changed schedule is
drift and an update sets it back) while the release and rollback jobs stay without triggers."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from gpuops.adapters import jobxml
from gpuops.core import jenkinsjobs
from gpuops.core.releaseconfig import parse as parse_releases
from gpuops.errors import InvalidInput

DOC: dict[str, Any] = {
    "jenkins": {
        "folder": "ai",
        "name": "infer",
        "repository": "https://git.example.com/ai/infer.git",
        "inspect_schedule": "H/30 * * * *",
    },
    "environments": {
        "staging": {"namespace": "ai-staging", "deployment": "infer", "image": "h.example/ai/i"},
        "production": {"namespace": "ai", "deployment": "infer", "image": "h.example/ai/i"},
    },
}
TIMER = f"properties/{jobxml.TRIGGERS}/triggers/hudson.triggers.TimerTrigger/spec"


def _jobs(doc: dict[str, Any]) -> dict[str, tuple[jenkinsjobs.Job, str]]:
    config, releases = jenkinsjobs.parse(doc, "r.yaml"), parse_releases(doc, "r.yaml")
    return {j.path: (j, jobxml.render(j, config)) for j in jenkinsjobs.jobs(config, releases, {})}


def _xml(text: str) -> ET.Element:
    return ET.fromstring(text.split("\n", 1)[1])  # noqa: S314 - our own template's output


def test_one_inspect_job_per_environment_with_its_timer() -> None:
    jobs = _jobs(DOC)
    inspect = {p: j for p, (j, _) in jobs.items() if j.kind == "inspect"}
    assert sorted(inspect) == ["ai/infer-inspect-production", "ai/infer-inspect-staging"]
    job, xml = jobs["ai/infer-inspect-production"]
    assert job.schedule == "H/30 * * * *" and job.environment == "production"
    assert [(p.name, p.choices) for p in job.parameters] == [
        ("APP_JOB", ("inspect",)),
        ("APP_ENV", ("production",)),
    ]
    root = _xml(xml)
    assert root.findtext(TIMER) == "H/30 * * * *"
    assert root.find(f"properties/{jobxml.NO_CONCURRENT}") is not None
    for path, (j, x) in jobs.items():  # no job but the scheduled ones (clean, inspect) has one
        if j.kind not in jobxml.SCHEDULED:
            assert _xml(x).find(f"properties/{jobxml.TRIGGERS}") is None, path


def test_no_schedule_no_inspect_jobs() -> None:
    doc = copy.deepcopy(DOC)
    del doc["jenkins"]["inspect_schedule"]
    assert all(j.kind != "inspect" for j, _ in _jobs(doc).values())


@pytest.mark.parametrize("spec", ["H/30 * * *", "* * * * * *", "every hour", "H/30 * * * *\n1"])
def test_a_schedule_that_is_no_cron_spec_is_refused(spec: str) -> None:
    doc = copy.deepcopy(DOC)
    doc["jenkins"]["inspect_schedule"] = spec
    with pytest.raises(InvalidInput, match="inspect_schedule"):
        jenkinsjobs.parse(doc, "r.yaml")


@pytest.mark.parametrize("spec", ["@hourly", "H H(0-6) * * 1-5", "0,30 * * * *", "*/15 * * * *"])
def test_cron_specs_jenkins_knows_are_accepted(spec: str) -> None:
    assert jenkinsjobs.valid_cron(spec)


def test_the_timer_is_owned_a_changed_schedule_is_drift_and_the_update_sets_it_back() -> None:
    job, wanted = _jobs(DOC)["ai/infer-inspect-staging"]
    assert jobxml.drift(wanted, wanted, job.kind, job.path) == ""
    stored = _xml(wanted)
    spec = stored.find(TIMER)
    assert spec is not None
    spec.text = "@yearly"  # someone slowed it down by hand
    current = ET.tostring(stored, encoding="unicode")
    diff = jobxml.drift(current, wanted, job.kind, job.path)
    lines = [ln.replace(" ", "") for ln in diff.splitlines()]
    assert "-<spec>@yearly</spec>" in lines and "+<spec>H/30****</spec>" in lines, diff
    merged = _xml(jobxml.merged(current, wanted, job.kind, job.path))
    assert merged.findtext(TIMER) == "H/30 * * * *"
    # no timer at all is drift too
    props = stored.find("properties")
    assert props is not None
    props.remove(props.find(jobxml.TRIGGERS))  # type: ignore[arg-type]
    bare = ET.tostring(stored, encoding="unicode")
    assert jobxml.drift(bare, wanted, job.kind, job.path)
    assert _xml(jobxml.merged(bare, wanted, job.kind, job.path)).findtext(TIMER) == "H/30 * * * *"
