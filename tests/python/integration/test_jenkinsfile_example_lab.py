"""Jenkinsfile.example end to end on the lab (JenkinsfileExampleTest, run by ``gradle labTest``).

This test prepares the world (scripts/release_story.py: namespaces, Deployments running from
before gpuops, the application's repository), runs the pipeline test, and then checks from
the outside, with the Kubernetes API and the registry, that what the pipeline said happened
is what the cluster, the history and the registry hold.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_kube import KubeLab
from integration.conftest_registry import RegistryLab
from integration.releaselab import LabRegistry

from gpuops.core.releasehistory import HISTORY_KEY

pytestmark = pytest.mark.timeout(1500)
ROOT = Path(__file__).resolve().parents[3]


def history(kube: KubeLab, ns: str, env: str) -> list[dict[str, Any]]:
    cm = kube.core.read_namespaced_config_map(f"gpuops-releases-{env}", ns)
    return list(json.loads(cm.data[HISTORY_KEY]))


def test_the_release_story_through_jenkinsfile_example(
    kube_lab: KubeLab, registry_lab: RegistryLab, tmp_path: Path
) -> None:
    out = tmp_path / "story"
    prepare = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "release_story.py"),
            "prepare",
            "--kubeconfig",
            str(kube_lab.kubeconfig),
            "--kubectl",
            str(Path(kube_lab.facts["bin_dir"]) / "kubectl"),
            "--registry",
            registry_lab.url,
            "--base-image",
            registry_lab.base_image,
            "--builder",
            str(registry_lab.builder["base_url"]),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert prepare.returncode == 0, prepare.stderr
    story = Path(prepare.stdout.strip())

    gradle = subprocess.run(
        [
            shutil.which("gradle") or "gradle",
            "--console=plain",
            "labTest",
            f"-Dgpuops.story={story}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=1400,
        env={**os.environ, "GPUOPS_CLI": str(Path(sys.executable).parent / "gpuops")},
    )
    console = (out / "console.log").read_text() if (out / "console.log").exists() else ""
    reports = list((ROOT / "build" / "test-results" / "labTest").glob("*.xml"))
    failures = [
        f.get("message", "")
        for r in reports
        for f in ET.parse(r).getroot().iter("failure")  # noqa: S314 - gradle's own report
    ]
    assert gradle.returncode == 0, f"{failures}\n{gradle.stdout[-4000:]}\n{gradle.stderr[-2000:]}"
    assert reports and not failures

    # what the cluster, the history and the registry say afterwards
    prod = history(kube_lab, "ai-production", "production")
    assert [(r["number"], r["action"], r["tag"], r["status"]) for r in prod] == [
        (1, "promote", "41", "succeeded"),
        (2, "promote", "42", "succeeded"),
        (3, "promote", "43", "failed"),
        (4, "rollback", "41", "succeeded"),
    ]
    assert {r["approved_by"] for r in prod} == {"alice"}
    assert prod[2]["failure"]["kind"] == "unschedulable" and prod[2]["rolled_back_to"] == 2
    assert "Insufficient memory" in prod[2]["failure"]["scheduler_message"]
    assert prod[1]["rolled_back_by"] == 4
    assert all(
        r["link"].startswith("https://jenkins.example.invalid/job/ai/job/infer-") for r in prod
    )
    staging = history(kube_lab, "ai-staging", "staging")
    assert [(r["tag"], r["status"]) for r in staging] == [("41", "succeeded")]
    deployment = kube_lab.apps.read_namespaced_deployment("infer", "ai-production")
    image = deployment.spec.template.spec.containers[0].image
    assert image == f"{registry_lab.url}/ai/infer:41@{prod[0]['digest']}"
    assert deployment.metadata.annotations["gpuops.io/release"] == "4"
    registry = LabRegistry(registry_lab)
    assert registry.resolve(f"{registry_lab.url}/ai/infer", "prod") == prod[0]["digest"]
    assert registry.resolve(f"{registry_lab.url}/ai/infer", "staging") == staging[0]["digest"]
    assert "took over" not in console
