"""Session fixture for the ``gpuops nodes`` tests: one lab with the SSH fleet and Kubernetes
together, so every fleet host is also a kwok node of the same name (as on a real cluster).

Its own lab dir (short: the fleet's ssh ControlPath lives under it); tests that change a host
put it back (driver, cordon, labels, pods) so the next test starts from the default fleet.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_kube import KubeLab
from integration.fleetlab import FleetLab, need_root_tools, short_lab_dir
from result_documents import load_document

from gpuops_lab import Lab, LabConfig, hoststate, proc
from gpuops_lab import fleet as labfleet
from gpuops_lab import kube as labkube

GPUOPS = str(Path(sys.executable).parent / "gpuops")
DEFAULT_DRIVERS = {"gpu_a100": "535.161.08", "gpu_h800": "550.90.07", "gpu_l40s": "550.90.07"}


@dataclass
class Run:
    rc: int
    doc: dict[str, Any] | None  # the result document, or the error document on failure
    stderr: str

    @property
    def result(self) -> dict[str, Any]:
        assert self.doc is not None, self.stderr
        return dict(self.doc["result"])


@dataclass
class NodesLab:
    fleet: FleetLab
    kube: KubeLab

    @property
    def lab(self) -> Lab:
        return self.fleet.lab

    def inventory(self, tmp: Path, sha256: dict[str, str] | None = None, **drivers: str) -> Path:
        """A copy of the lab's test inventory whose model groups want other drivers:
        ``gpu_h800="570.133.20"`` (the CUDA version follows the branch); ``sha256`` replaces
        those groups' map of driver version to sha256 (the shipped one names the lab's)."""
        folder = tmp / "inventory"
        shutil.copytree(Path(self.fleet.facts["inventory"]).parent, folder)
        cuda = {"535": "12.2", "550": "12.4", "570": "12.8"}
        for group, version in drivers.items():
            path = folder / "group_vars" / f"{group}.yml"
            lines = [
                f'gpu_nodes_driver_version: "{version}"'
                if line.startswith("gpu_nodes_driver_version:")
                else f'gpu_nodes_cuda_version: "{cuda.get(version.split(".")[0], "")}"'
                if line.startswith("gpu_nodes_cuda_version:")
                else line
                for line in path.read_text().splitlines()
            ]
            if sha256 is not None:
                lines.append(f"gpu_nodes_driver_sha256: {json.dumps(sha256)}")
            path.write_text("\n".join(lines) + "\n")
        return folder / "hosts.yml"

    def gpuops(
        self,
        *args: str,
        tmp: Path,
        env: dict[str, str] | None = None,
        timeout: float = 1200,
        known_hosts: bool = True,
    ) -> Run:
        """The installed CLI as Jenkins runs it (result/error files), in ``tmp``; the host keys
        checked against the lab's known_hosts (``GPUOPS_KNOWN_HOSTS``, as the Jenkins steps
        bind it) unless ``known_hosts`` is False."""
        tmp.mkdir(parents=True, exist_ok=True)
        result, error = tmp / "result.json", tmp / "error.json"
        for f in (result, error):
            f.unlink(missing_ok=True)
        full = {
            **{k: v for k, v in os.environ.items() if not k.startswith("GPUOPS_")},
            "KUBECONFIG": str(self.kube.kubeconfig),
            "GPUOPS_RESULT_FILE": str(result),
            "GPUOPS_ERROR_FILE": str(error),
            **({"GPUOPS_KNOWN_HOSTS": self.fleet.facts["known_hosts"]} if known_hosts else {}),
            **(env or {}),
        }
        done = subprocess.run(
            [GPUOPS, *args],
            capture_output=True,
            text=True,
            env=full,
            timeout=timeout,
            check=False,
            cwd=tmp,
        )
        path = result if done.returncode == 0 else error
        doc = load_document(path) if path.exists() else None
        return Run(done.returncode, doc, done.stderr)

    def node(self, name: str) -> Any:
        return self.kube.core.read_node(name)

    def restore(self, *hosts: str) -> None:
        """Default driver loaded, no installer fault, no recorded version, node uncordoned."""
        for h in self.fleet.hosts:
            if h["name"] not in hosts:
                continue
            labfleet.start_sshd(self.lab, h["name"])
            hoststate.set_gpu_state(
                self.lab,
                h["name"],
                driver=DEFAULT_DRIVERS[h["group"]],
                install_error=None,
                install_delay_s=0,
            )
            # Fabric Manager and the container toolkit back with the driver (A2's hook)
            hoststate.restore_stack(self.lab, h["name"], DEFAULT_DRIVERS[h["group"]])
            # DCGM as the lab models it by default: installed, its default version, all pass
            hoststate.set_dcgm(self.lab, h["name"], version=None, failing={}, installed=True)
            self.fleet.ssh(h["name"], "rm -f /etc/ansible/facts.d/gpuops_nvidia_driver.fact")
            self.kube.core.patch_node(
                h["name"],
                {
                    "spec": {"unschedulable": None},
                    "metadata": {"annotations": {"gpuops.io/cordoned-by": None}},
                },
            )


def _down(lab: Lab) -> None:
    labkube.down(lab)
    labfleet.down(lab)
    proc.stop_all(lab.dir)
    shutil.rmtree(lab.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def nodes_lab() -> Iterator[NodesLab]:
    need_root_tools()
    lab = Lab(LabConfig(dir=short_lab_dir(), hosts=6))
    started = time.monotonic()
    try:
        lab.up(["fleet", "kube"])
        fleet = FleetLab(lab=lab, facts=lab.facts("fleet"), startup_s=time.monotonic() - started)
        facts = lab.facts("kube")
        api = labkube.api_client(Path(facts["kubeconfig"]), pool=8)
        try:
            yield NodesLab(fleet, KubeLab(lab, Path(facts["kubeconfig"]), api, facts, 0.0))
        finally:
            api.close()
    finally:
        _down(lab)
        shutil.rmtree(lab.dir.parent, ignore_errors=True)
