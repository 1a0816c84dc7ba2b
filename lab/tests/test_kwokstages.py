"""The lab's kwok stages (gpuops_lab.kwokstages) derived from kwok's own: pure units.

kwok picks at random among the stages that match a pod, so each marked pod must match one
stage at most; kwok evaluates the selectors (gojq), which only a running kwok can do:
tests/python/integration/test_lab_metrics.py and test_release_failures_lab.py run them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from gpuops_lab import kwokstages

KWOK = [
    {"metadata": {"name": name}, "spec": {"selector": {"matchExpressions": [{"key": "x"}]}}}
    for name in ("node-initialize", "pod-ready", "pod-complete", "pod-delete")
]


def _by_name(stages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["metadata"]["name"]: s for s in stages}


def _keys(stage: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (e["key"], e.get("operator", "")) for e in stage["spec"]["selector"]["matchExpressions"]
    ]


def test_kwok_stages_are_kept_and_only_narrowed() -> None:
    before = copy.deepcopy(KWOK)
    stages = _by_name(kwokstages.stages(KWOK))
    assert before == KWOK  # kwok's documents are copied, never changed
    for name in ("node-initialize", "pod-delete"):
        assert _keys(stages[name]) == [("x", "")]
    ready = _keys(stages["pod-ready"])
    assert ready[0] == ("x", "") and len(ready) == 2
    # pod-ready leaves only the container faults alone: the app variants become Ready
    key, op = ready[1]
    assert op == "NotIn"
    for fault in kwokstages.FAULTS:
        assert fault in key
    for variant in (*kwokstages.APP_FAULTS, kwokstages.SMOKE_FAIL):
        assert variant not in key
    complete = _keys(stages["pod-complete"])
    assert complete[0] == ("x", "")
    assert [op for _, op in complete[1:]] == ["NotIn", "NotIn"]
    assert all(kwokstages.SMOKE_FAIL in k for k, _ in complete[1:])


def test_a_smoke_failing_job_pod_has_one_stage_per_restart_policy() -> None:
    stages = _by_name(kwokstages.stages(KWOK))
    failed = stages["lab-job-pod-failed"]["spec"]
    restarting = stages["lab-job-pod-restarting"]["spec"]
    key_failed = failed["selector"]["matchExpressions"][0]["key"]
    key_restarting = restarting["selector"]["matchExpressions"][0]["key"]
    assert '"Never"' in key_failed and '"OnFailure"' in key_restarting
    for key in (key_failed, key_restarting):
        assert '.kind == "Job"' in key and f"{kwokstages.MARKER}{kwokstages.SMOKE_FAIL}" in key
    # pod-complete excludes exactly these two selections
    complete = [e["key"] for e in stages["pod-complete"]["spec"]["selector"]["matchExpressions"]]
    assert complete[1:] == [key_failed, key_restarting]
    status = yaml.safe_load(
        failed["next"]["statusTemplate"]
        .replace("{{ $now := Now }}", "")
        .replace("{{ $now | Quote }}", "t")
        .replace("{{ range .spec.containers }}", "")
        .replace("{{ end }}", "")
        .replace("{{ .image | Quote }}", "i")
        .replace("{{ .name | Quote }}", "n")
    )
    assert status["phase"] == "Failed"
    term = status["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (1, "Error")
    assert {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]} == {
        "Ready": ("False", "PodFailed"),
        "ContainersReady": ("False", "PodFailed"),
    }


def test_write_derives_the_stages_file_from_kwoks(tmp_path: Path) -> None:
    src = tmp_path / "kwok-stages.yaml"
    src.write_text(yaml.safe_dump_all(KWOK))
    out = kwokstages.write(src, tmp_path / "stages.yaml")
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(out.read_text())]
    assert names == [
        "node-initialize",
        "pod-ready",
        "pod-complete",
        "pod-delete",
        "lab-pod-ready-again",
        "lab-pod-image-pull-error",
        "lab-pod-image-pull-backoff",
        "lab-pod-crash-loop",
        "lab-pod-never-ready",
        "lab-job-pod-failed",
        "lab-job-pod-restarting",
    ]
    assert yaml.safe_load_all(src.read_text())  # kwok's own file is left as it was
