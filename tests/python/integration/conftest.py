"""Session fixtures for integration tests against the real lab.

``fleet_lab``: the SSH fleet of GPU nodes only (6 hosts in network namespaces), brought up once
per session in its own temp lab dir, so it never touches a lab started with ``gpuops lab up``.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import pytest
from fleetlab import FleetLab, fleet_down, need_root_tools, short_lab_dir

from gpuops_lab import Lab, LabConfig


@pytest.fixture(scope="session")
def fleet_lab() -> Iterator[FleetLab]:
    need_root_tools()
    lab = Lab(LabConfig(dir=short_lab_dir(), hosts=6))
    started = time.monotonic()
    try:
        lab.up(["fleet"])
        yield FleetLab(lab=lab, facts=lab.facts("fleet"), startup_s=time.monotonic() - started)
    finally:
        fleet_down(lab)
        shutil.rmtree(lab.dir.parent, ignore_errors=True)
