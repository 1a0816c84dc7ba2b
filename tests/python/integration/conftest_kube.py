"""Session fixture: the lab's Kubernetes component (real etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok) brought up once per test session.

Wire it from tests/python/conftest.py with ``pytest_plugins = ["integration.conftest_kube"]``
(or import ``kube_lab`` there). Set GPUOPS_KUBE_BIN to use prebuilt binaries elsewhere.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gpuops_lab import Lab, LabConfig, proc
from gpuops_lab import kube as labkube


def wait_until(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll ``check`` until it returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not after {timeout:.0f}s")
        time.sleep(0.2)


def down_kube_only(lab: Lab) -> None:
    """What ``Lab.down`` does for a lab that runs only the kube component (the other
    components' modules are not needed for it)."""
    labkube.down(lab)
    proc.stop_all(lab.dir)
    shutil.rmtree(lab.dir, ignore_errors=True)


@dataclass
class KubeLab:
    lab: Lab
    kubeconfig: Path
    api: Any  # kubernetes.client.ApiClient
    facts: dict[str, Any]
    startup_s: float

    @property
    def core(self) -> Any:
        return client.CoreV1Api(self.api)

    @property
    def apps(self) -> Any:
        return client.AppsV1Api(self.api)

    @property
    def batch(self) -> Any:
        return client.BatchV1Api(self.api)


@pytest.fixture(scope="session")
def kube_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeLab]:
    lab = Lab(LabConfig(dir=tmp_path_factory.mktemp("kube") / "lab"))
    started = time.monotonic()
    try:
        lab.up(["kube"])
    except BaseException:
        down_kube_only(lab)
        raise
    startup = time.monotonic() - started
    facts = lab.facts("kube")
    api = labkube.api_client(Path(facts["kubeconfig"]), pool=16)
    try:
        yield KubeLab(lab, Path(facts["kubeconfig"]), api, facts, startup)
    finally:
        api.close()
        down_kube_only(lab)
