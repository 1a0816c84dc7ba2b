"""The release history page (issue 12's report for releases), from real releases on the lab
(kube-apiserver, scheduler, kwok; images in the lab registry), opened in headless Chromium
under Jenkins' default CSP: no console errors, no CSP violations, nothing fetched from outside
its folder, and what the page says equal to the JSON result of ``gpuops release history``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from integration.browser import open_page
from integration.conftest_kube import KubeLab
from integration.conftest_registry import RegistryLab
from integration.releaselab import Images, LabRegistry, Target, environment, make_target, pair

from gpuops.adapters.kube import KubeClient
from gpuops.cli.main import run
from gpuops.render.html import releases as page
from gpuops.usecases import releases
from gpuops.usecases.releases import model as m

pytestmark = pytest.mark.timeout(600)


def _gpuops(tmp: Path, *argv: str) -> tuple[int, dict[str, Any]]:
    doc_file = tmp / "doc.json"
    doc_file.unlink(missing_ok=True)
    code = run(["--result-file", str(doc_file), "--error-file", str(doc_file), *argv])
    return code, json.loads(doc_file.read_text())


@pytest.fixture
def released(
    kube_lab: KubeLab, registry_lab: RegistryLab, release_images: Images, tmp_path: Path
) -> Target:
    """staging: 1.1.0 (succeeded), 1.2.0 (succeeded), a crash-looping build (failed, 1.2.0
    restored), a rollback to 1.1.0, then 1.2.0 again."""

    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        return {"staging": environment(ns, name, repo, registry_tag="staging")}

    t = make_target(kube_lab, release_images, tmp_path, "relrep", envs=envs)
    deps = releases.Deps(
        registry_for=lambda env: LabRegistry(registry_lab),
        say=t.say,
        connect=lambda cluster: KubeClient.connect(str(kube_lab.kubeconfig)),
    )
    where = m.Target(str(t.config), "staging")
    for tag, reason in (("1.1.0", "first"), ("1.2.0", "new tokenizer")):
        who = m.Who(reason=reason, requested_by="ci", link=f"https://ci.example/job/{tag}")
        out, error = pair(releases.promote(m.PromoteRequest(where, tag=tag, who=who), deps))
        assert error is None, error
    out, error = pair(
        releases.promote(m.PromoteRequest(where, tag="2.0.0-labfault-crashloop"), deps)
    )
    assert error is not None and out.state == "failed", out.to_dict()
    who = m.Who(reason="back to the known good", approved_by="alice")
    out, error = pair(releases.rollback(m.RollbackRequest(where, "1.1.0", who=who), deps))
    assert error is None, error
    who = m.Who(reason="fixed", requested_by="ci", link="https://ci.example/job/1.2.0-again")
    out, error = pair(releases.promote(m.PromoteRequest(where, tag="1.2.0", who=who), deps))
    assert error is None, error
    return t


def test_the_history_page_says_what_the_history_says(
    released: Target, kube_lab: KubeLab, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    code, doc = _gpuops(
        tmp_path, "release", "history", "-e", "staging", "--config", str(released.config),
        "--kubeconfig", str(kube_lab.kubeconfig), "--report-dir", str(out),
    )  # fmt: skip
    assert code == 0, doc
    result = doc["result"]
    assert result["report"]["status"] == "written"
    assert {Path(f).name for f in result["report"]["files"]} == {"releases.html", "report.css"}
    seen = open_page(out, "releases.html", "releases-lab")
    seen.assert_clean()

    records = result["releases"]  # newest first
    assert [r["status"] for r in records] == ["succeeded"] * 2 + ["failed"] + ["succeeded"] * 2
    assert seen.data["number"] == [str(r["number"]) for r in records]
    assert seen.data["status"] == [r["status"] for r in records]
    assert seen.data["tag"] == [r["tag"] for r in records]
    assert seen.data["action"] == [r["action"] for r in records]
    assert seen.one("current") == "now"
    assert result["rollback_choices"], result  # 1.1.0 at least
    assert seen.data["choice"] == result["rollback_choices"]
    assert seen.one("environment") == "staging"
    assert seen.one("namespace") == released.namespace
    assert seen.one("verdict") == "running"
    assert seen.one("message") == "staging runs #5 1.2.0"
    [failure] = seen.data["failure"]
    assert failure == f"crash-loop: {records[2]['failure']['message']}"
    assert seen.data["count-succeeded"] == ["4 succeeded"]
    assert seen.data["count-failed"] == ["1 failed"]
    assert seen.data["who"][1] == "approved by alice"  # the rollback
    assert seen.data["link"] == ["build"] * 3  # the three CI promotions

    # the same page from the JSON document, through `gpuops report releases`
    again = tmp_path / "again"
    (tmp_path / "history.json").write_text(json.dumps(doc))
    code, doc2 = _gpuops(
        tmp_path, "report", "releases", "--input", str(tmp_path / "history.json"),
        "--out", str(again),
    )  # fmt: skip
    assert code == 0, doc2
    assert open_page(again, "releases.html", "releases-lab-again").data["tag"] == seen.data["tag"]


def test_a_failed_last_release_is_the_headline(tmp_path: Path) -> None:
    result = {
        "environment": "production",
        "namespace": "ai",
        "deployments": ["infer"],
        "server": "https://k8s.example:6443",
        "current": 1,
        "rollback_choices": [],
        "open": {},
        "releases": [
            {"number": 2, "action": "promote", "status": "failed", "tag": "43",
             "started": "2026-11-30T10:00:00Z", "rolled_back_to": 1,
             "failure": {"kind": "unschedulable", "message": "0/4 nodes are available"}},
            {"number": 1, "action": "promote", "status": "succeeded", "tag": "42",
             "started": "2026-11-29T10:00:00Z", "approved_by": "alice"},
        ],
    }  # fmt: skip
    page.write(result, tmp_path)
    seen = open_page(tmp_path, "releases.html", "releases-failed-last")
    seen.assert_clean()
    assert seen.one("verdict") == "last release failed"
    assert seen.one("message") == "production runs #1 42; the last release #2 43 failed"
    assert seen.one("after") == "restored #1"


def test_no_release_yet_says_so(tmp_path: Path) -> None:
    result = {"environment": "staging", "namespace": "ai", "current": None,
              "rollback_choices": [], "releases": []}  # fmt: skip
    page.write(result, tmp_path)
    seen = open_page(tmp_path, "releases.html", "releases-empty")
    seen.assert_clean()
    assert seen.one("empty") == "No release of staging yet."
    assert seen.one("verdict") == "no gpuops release runs"


HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(2)>',
    "{{ 7*7 }} ${7*7}",
    "x\u202eevil",
]


def test_hostile_strings_are_shown_never_executed(tmp_path: Path) -> None:
    rows = [
        {"number": i + 1, "action": "promote", "status": "succeeded", "tag": h,
         "started": "2026-11-30T10:00:00Z", "reason": h, "approved_by": h,
         "link": "javascript:alert(3)" if i == 0 else "https://ci.example/" + h}
        for i, h in enumerate(HOSTILE)
    ]  # fmt: skip
    result = {"environment": HOSTILE[0], "namespace": HOSTILE[1], "current": 1,
              "rollback_choices": HOSTILE, "releases": rows}  # fmt: skip
    page.write(result, tmp_path)
    seen = open_page(tmp_path, "releases.html", "releases-hostile")
    seen.assert_clean()
    assert seen.one("environment") == HOSTILE[0]
    assert seen.data["reason"] == HOSTILE
    assert seen.data["choice"] == HOSTILE
    assert len(seen.data["link"]) == len(HOSTILE) - 1  # no javascript: link
    html = (tmp_path / "releases.html").read_text()
    assert "<script>" not in html and "<img src=x" not in html and "javascript:" not in html


def test_a_document_of_another_command_is_refused(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text(json.dumps({"verdict": "fits", "classes": []}))
    code, doc = _gpuops(
        tmp_path, "report", "releases", "--input", str(tmp_path / "other.json"), "--out",
        str(tmp_path / "page"),
    )  # fmt: skip
    assert code == 2
    assert "not a 'gpuops release history' result" in doc["error"]["message"]


def test_a_progressive_release_shows_its_steps_and_measurements(tmp_path: Path) -> None:
    """Issue 20: each step of a release's strategy, its state, why it stopped and an
    analysis' measured values, in the page as in the record (hostile text stays text)."""
    steps = [
        {"index": 0, "kind": "replicas", "state": "passed", "replicas": 1, "mode": "surge",
         "started": "t0", "finished": "t1", "detail": "the canary runs 1 pod(s) beside the stable"},
        {"index": 1, "kind": "analysis", "state": "failed", "name": "error-rate",
         "provider": "prometheus", "started": "t1", "finished": "t2",
         "detail": "error-rate: failed: 2 failed measurement(s) " + HOSTILE[1],
         "measurements": [
             {"at": "t1", "verdict": "failed", "value": 0.3, "detail": HOSTILE[0]},
             {"at": "t2", "verdict": "failed", "value": 0.31, "detail": "{code!=200}"},
         ]},
    ]  # fmt: skip
    result = {
        "environment": "production",
        "namespace": "ai",
        "current": 1,
        "rollback_choices": ["42"],
        "releases": [
            {"number": 2, "action": "promote", "status": "failed", "tag": "43",
             "started": "t0", "rolled_back_to": 1, "steps": steps,
             "failure": {"kind": "analysis", "message": "analysis error-rate failed", "step": 1}},
            {"number": 1, "action": "promote", "status": "succeeded", "tag": "42",
             "started": "t0"},
        ],
    }  # fmt: skip
    page.write(result, tmp_path)
    seen = open_page(tmp_path, "releases.html", "releases-steps")
    seen.assert_clean()
    assert seen.data["step-state"] == ["passed", "failed"]
    assert seen.data["step-detail"][1].endswith(HOSTILE[1])
    assert seen.data["measurement"] == ["0.3 failed", "0.31 failed"]
    html = (tmp_path / "releases.html").read_text()
    assert "<script>" not in html and "<img src=x" not in html
