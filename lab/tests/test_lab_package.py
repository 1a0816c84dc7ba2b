"""The lab is its own distribution (gpuops-lab) and finds its binaries without a checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpuops_lab
from gpuops.errors import InvalidInput
from gpuops_lab import kube

ROOT = Path(__file__).resolve().parents[2]  # lab/tests -> the checkout


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


def test_the_test_inventory_names_the_sha256_of_every_lab_driver() -> None:
    """The lab's driver repository serves its own installers; the shipped test inventory
    holds their real sha256 (gpuops refuses a driver without one): kept equal here."""
    import hashlib

    import yaml

    from gpuops_lab import gpus, installer

    all_vars = ROOT / "ansible" / "inventory" / "test" / "group_vars" / "all.yml"
    table = yaml.safe_load(all_vars.read_text())["gpu_nodes_driver_sha256"]
    assert table == {
        v: hashlib.sha256(installer.driver_run(v).encode()).hexdigest() for v in gpus.REPO_DRIVERS
    }
