"""A gpu analysis (issue 20) on the lab's fleet: the inspection core over real ssh on the
nodes of the canary pods (every fleet host is a kwok node of the same name), judging only what
happened since the step began.

Stand-ins here: the fleet's hosts are network namespaces with the lab's ``nvidia-smi`` and
``dmesg`` (they print what the real tools print for the cards and kernel log the lab keeps,
labelled in the lab's docs); a real node's driver writes the Xid lines and ECC counters.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from integration.conftest_nodes import NodesLab

from gpuops.adapters.kube import KubeClient
from gpuops.core.analysis import FAILED, INCONCLUSIVE, PASSED
from gpuops.core.releasestrategy import AnalysisStep, GpuCheck
from gpuops.usecases.releases import analysis
from gpuops.usecases.releases.analysis import PodRef, Target
from gpuops_lab import fleet as labfleet
from gpuops_lab import hoststate

pytestmark = pytest.mark.timeout(600)


def _target(nl: NodesLab, kube: KubeClient, nodes: list[str], since: float) -> Target:
    return Target(
        kube=kube,
        namespace="ai",
        deployment="web",
        canary="web-canary",
        release=3,
        image="127.0.0.1:5000/ai/web:1.1.0@sha256:" + "ab" * 32,
        since=since,
        pods=lambda: [PodRef(f"web-canary-{i}", n) for i, n in enumerate(nodes)],
        environ={"GPUOPS_KNOWN_HOSTS": nl.fleet.facts["known_hosts"]},
    )


def test_xid_and_ecc_since_the_step_began_fail_it_and_what_came_before_does_not(
    nodes_lab: NodesLab, tmp_path: Path
) -> None:
    lab = nodes_lab.lab
    inv = nodes_lab.fleet.facts["inventory"]
    step = AnalysisStep("gpus", GpuCheck(inv), interval_s=1, count=3)
    kube = KubeClient.connect(str(nodes_lab.kube.kubeconfig))
    card = hoststate.gpu_state(lab, "gpu-h800-01")["gpus"][1]
    try:
        # an Xid logged before the step: the node's history, not the canary's doing
        hoststate.inject_xid(lab, "gpu-h800-01", 0, 13, "Graphics Exception before the step")
        time.sleep(1.2)
        since = time.time()
        t = _target(nodes_lab, kube, ["gpu-h800-01", "gpu-l40s-01"], since)
        first = analysis.measure(step, t)
        assert first.verdict == PASSED, first
        assert first.detail == (
            "no Xid event or ECC error since the step began on gpu-h800-01, gpu-l40s-01"
        )

        hoststate.inject_xid(lab, "gpu-h800-01", 0, 31, "MMU Fault during the step")
        m = analysis.measure(step, t)
        assert m.verdict == FAILED and m.value == 1.0, m
        assert m.detail.startswith("gpu-h800-01: Xid 31 (GPU memory page fault) on PCI "), m
        assert m.detail.endswith(" since the step began"), m

        # the first measurement already sees an Xid logged after the step began (by the
        # kernel log's uptime stamps, not by comparing with an earlier reading)
        fresh = _target(nodes_lab, kube, ["gpu-h800-01"], time.time())
        hoststate.inject_xid(lab, "gpu-h800-01", 1, 43, "reset channel during the step")
        m = analysis.measure(AnalysisStep("fresh", GpuCheck(inv), count=2), fresh)
        assert m.verdict == FAILED and m.detail.startswith("gpu-h800-01: Xid 43 "), m

        # ECC: beyond the step's first reading of the card
        later = _target(nodes_lab, kube, ["gpu-h800-01"], time.time())
        step2 = AnalysisStep("ecc", GpuCheck(inv), interval_s=1, count=3)
        assert analysis.measure(step2, later).verdict == PASSED
        hoststate.set_card(lab, "gpu-h800-01", 1, ecc={**card["ecc"], "uncorrected_volatile": 2})
        m = analysis.measure(step2, later)
        assert m.verdict == FAILED, m
        assert m.detail.startswith("gpu-h800-01: GPU 1 (GPU-"), m
        assert m.detail.endswith("): 2 uncorrected ECC error(s) since the step began"), m
    finally:
        hoststate.set_card(lab, "gpu-h800-01", 1, ecc=card["ecc"])

    # the faulty host (gpu-a100-03: ECC counts and a hot card from the start) passes: nothing new
    t = _target(nodes_lab, kube, ["gpu-a100-03"], time.time())
    m = analysis.measure(AnalysisStep("faulty", GpuCheck(inv), count=2), t)
    assert m.verdict == PASSED, m

    # a node that cannot be inspected: no answer, not a verdict
    labfleet.stop_sshd(lab, "gpu-l40s-01")
    try:
        t = _target(nodes_lab, kube, ["gpu-l40s-01"], time.time())
        m = analysis.measure(AnalysisStep("down", GpuCheck(inv)), t)
        assert m.verdict == INCONCLUSIVE and m.detail.startswith("could not inspect gpu-l40s-01: ")
    finally:
        labfleet.start_sshd(lab, "gpu-l40s-01")
    # a node the inventory does not name can never be inspected: failed (it was inconclusive,
    # which inconclusive: pass turned into a pass of GPUs nobody looked at)
    t = _target(nodes_lab, kube, ["not-a-host"], time.time())
    m = analysis.measure(AnalysisStep("x", GpuCheck(inv), inconclusive="pass"), t)
    assert (m.verdict, m.detail) == (
        FAILED,
        f"node not-a-host of a canary pod is not a host of {inv}: nothing of it can be inspected",
    )
    m = analysis.measure(AnalysisStep("y", GpuCheck(inv)), _target(nodes_lab, kube, [], 0.0))
    assert (m.verdict, m.detail) == (FAILED, "no canary pod to inspect")
    kube.close()


def test_a_gpu_lost_or_a_driver_gone_since_the_step_began_fails_it(nodes_lab: NodesLab) -> None:
    """A card falling off the bus, or the driver going away, since the step began, with no Xid
    line (the lab's nvidia-smi reports the lost card / the missing driver as the real one
    does; a real driver also logs an Xid 79, which the lab leaves out here on purpose): the
    analysis read only Xid lines and ECC counters, and passed."""
    lab = nodes_lab.lab
    inv = nodes_lab.fleet.facts["inventory"]
    kube = KubeClient.connect(str(nodes_lab.kube.kubeconfig))
    driver = hoststate.gpu_state(lab, "gpu-l40s-01")["driver"]
    try:
        t = _target(nodes_lab, kube, ["gpu-h800-01"], time.time())
        step = AnalysisStep("lost", GpuCheck(inv), interval_s=1, count=3)
        assert analysis.measure(step, t).verdict == PASSED
        hoststate.set_card(lab, "gpu-h800-01", 2, lost=True)
        m = analysis.measure(step, t)
        assert m.verdict == FAILED, m
        assert m.detail.startswith("gpu-h800-01: GPU ") and "(since the step began)" in m.detail, m

        t = _target(nodes_lab, kube, ["gpu-l40s-01"], time.time())
        step = AnalysisStep("driver", GpuCheck(inv), interval_s=1, count=3)
        assert analysis.measure(step, t).verdict == PASSED
        hoststate.set_gpu_state(lab, "gpu-l40s-01", driver=None)
        m = analysis.measure(step, t)
        assert m.verdict == FAILED, m
        assert m.detail.startswith("gpu-l40s-01: ") and "(since the step began)" in m.detail, m
    finally:
        hoststate.set_card(lab, "gpu-h800-01", 2, lost=False)
        hoststate.set_gpu_state(lab, "gpu-l40s-01", driver=driver)
        kube.close()
