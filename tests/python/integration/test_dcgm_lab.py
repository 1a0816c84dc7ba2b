"""The lab's dcgmi on real lab hosts (sshd in namespaces), read by gpuops' parser.

The lab's ``dcgmi`` is a stand-in for NVIDIA DCGM's (docs/VALIDATION.md): it prints what DCGM
3.3 and 4.x print, from the host's own state. This test drives it over ssh, as the role does:
both layouts, a failing GPU set through ``hoststate.set_dcgm``, and a host without DCGM.
"""

from __future__ import annotations

import pytest
from integration.conftest_nodes import NodesLab

from gpuops.core import dcgmdiag
from gpuops_lab import hoststate

pytestmark = pytest.mark.timeout(300)
A2, H2 = "gpu-a100-02", "gpu-h800-02"


def test_lab_dcgmi_layouts_faults_and_absence(nodes_lab: NodesLab) -> None:
    nl = nodes_lab
    try:
        a100 = nl.fleet.ssh(A2, "dcgmi diag -r 1 -j")
        r3 = dcgmdiag.parse(a100.stdout, rc=a100.returncode, level=1)
        assert r3.passed, r3.message
        assert (r3.layout, r3.dcgm_version) == (dcgmdiag.LAYOUT_3, "3.3.9")

        hoststate.set_dcgm(nl.lab, H2, failing={3: ["memory"]})
        h800 = nl.fleet.ssh(H2, "dcgmi diag -r 2 -j")
        r4 = dcgmdiag.parse(h800.stdout, rc=h800.returncode, level=2)
        assert h800.returncode == 205
        assert r4.layout == dcgmdiag.LAYOUT_4
        assert r4.message == (
            "dcgmi diag -r 2 (DCGM 4.1.1): memory on GPU 3: Found 4 faulty memory elements on GPU 3"
        )

        hoststate.set_dcgm(nl.lab, H2, installed=False)
        gone = nl.fleet.ssh(H2, "command -v dcgmi; dcgmi --version")
        assert gone.returncode == 127, gone
        assert nl.fleet.ssh(A2, "command -v dcgmi").stdout.strip() == "/usr/bin/dcgmi"
    finally:
        hoststate.set_dcgm(nl.lab, H2, version=None, failing={}, installed=True)
    back = nl.fleet.ssh(H2, "dcgmi diag -r 1 -j")
    assert dcgmdiag.parse(back.stdout, rc=back.returncode, level=1).passed
