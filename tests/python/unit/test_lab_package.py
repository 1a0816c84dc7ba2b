"""The lab is its own distribution (gpuops-lab) and finds its binaries without a checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpuops_lab
from gpuops.errors import InvalidInput
from gpuops_lab import kube

ROOT = Path(__file__).resolve().parents[3]


def test_the_lab_knows_the_kubernetes_version_its_go_module_builds() -> None:
    assert kube.k8s_version(ROOT) == kube.K8S_VERSION


def test_the_checkout_is_found_from_the_current_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("GPUOPS_REPO", raising=False)
    monkeypatch.chdir(ROOT / "lab" / "kube")
    assert gpuops_lab.repo_root() == ROOT
    monkeypatch.setenv("GPUOPS_REPO", str(tmp_path))
    with pytest.raises(InvalidInput, match="is not a gpu-ops checkout"):
        gpuops_lab.repo_root()
