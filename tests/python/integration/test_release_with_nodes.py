"""S-24 on the lab: a release records the node change of its build, and ``release rollback
--with-nodes`` puts the nodes back to that node record (the host's driver, seen in the lab's
``nvidia-smi`` stand-in, which prints what the real one prints) and then the image.

One lab hosts both: the ``nodes_lab`` (SSH hosts that are also kwok nodes of its real
kube-apiserver) runs the release's Deployment too, with the release images of the session's
registry lab. The Deployment keeps off the host the test changes (a node affinity): a node
change waits for GPU pods to finish, and a serving pod never does.

Lab stand-ins, to keep the test to one real node change (a rolling update of one host takes
minutes on this machine while other labs run): the two node records the release builds made
(A: gpu-h800-01 on 550.90.07, B: on 570.133.20) are written by the test through the node
history's own store, as two ``nodes update`` runs leave them, and the host is put on 570 with
the lab's host state (what B's install would have left). The rollback itself is real: the
nodes rollback reinstalls 550 over SSH through the rolling update, then the image goes back.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_nodes import NodesLab
from integration.releaselab import Images, Target, environment, make_target

from gpuops.core import nodehistory as nh
from gpuops.core.releasehistory import now_iso
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.nodes.historystore import Store
from gpuops_lab import hoststate

pytestmark = pytest.mark.timeout(900)
H1 = "gpu-h800-01"


def smi(nl: NodesLab) -> str:
    res = nl.fleet.ssh(H1, "nvidia-smi")
    assert res.returncode == 0, res.stdout
    return str(res.stdout.splitlines()[2])


def plant(nl: NodesLab, before: str, after: str, cuda: str) -> str:
    """A node record of the test fleet saying gpu-h800-01 went from ``before`` to ``after``
    (written with the node history's store, as a ``nodes update`` run writes it); its id."""
    host = nh.HostOutcome("changed", "gpu_h800", H1, before, None, after, cuda)
    kube = Cluster(str(nl.kube.kubeconfig)).connect()
    try:
        made = Store(kube, "test", "default").add(
            lambda n: nh.NodeRecord(
                n, "test", "update", nh.SUCCEEDED, now_iso(), now_iso(), who="lab-test",
                limit=H1, change=["nvidia_driver"], hosts={H1: host},
                groups=nh.group_drivers({H1: host}),
            )
        )  # fmt: skip
    finally:
        kube.close()
    return made.id


@pytest.fixture
def target(nodes_lab: NodesLab, release_images: Images, tmp_path: Path) -> Target:
    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        return {"staging": environment(ns, name, repo, registry={"plain_http": True})}

    t = make_target(nodes_lab.kube, release_images, tmp_path, "relnodes", envs=envs, replicas=1)
    away = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "NotIn", "values": [H1]}]}]}  # fmt: skip
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": away}}
    patch = {"spec": {"template": {"spec": {"affinity": affinity}}}}
    nodes_lab.kube.apps.patch_namespaced_deployment(t.name, t.namespace, patch)
    t.wait_rolled_out()
    return t


def test_rollback_with_nodes_restores_the_driver_then_the_image(
    nodes_lab: NodesLab, target: Target, release_images: Images, tmp_path: Path
) -> None:
    started = time.monotonic()
    inv570 = nodes_lab.inventory(tmp_path / "570", gpu_h800="570.133.20")
    env = ["--config", str(target.config), "-e", "staging"]

    def gpuops(*args: str, name: str, timeout: float = 120, **extra: str) -> Any:
        try:
            return nodes_lab.gpuops(*args, tmp=tmp_path / name, env=extra or None, timeout=timeout)
        except subprocess.TimeoutExpired as exc:  # what it said so far, to see where it stood
            pytest.fail(f"{' '.join(args[:2])} {name} ran over {timeout} s:\n{exc.stderr}")

    try:
        # release #1 without a node change; release #2 with record A, #3 with B (from the env)
        assert gpuops("release", "promote", *env, "--tag", "1.3.0", name="p1").rc == 0
        record_a = plant(nodes_lab, "550.90.07", "550.90.07", "12.4")
        p2 = gpuops("release", "promote", *env, "--tag", "1.1.0", "--node-change", record_a,
                    name="p2")  # fmt: skip
        assert p2.rc == 0, p2.stderr
        assert p2.result["release"]["node_change"] == record_a
        hoststate.set_gpu_state(nodes_lab.lab, H1, driver="570.133.20")
        record_b = plant(nodes_lab, "550.90.07", "570.133.20", "12.8")
        assert "Driver Version: 570.133.20" in smi(nodes_lab)
        p3 = gpuops("release", "promote", *env, "--tag", "1.2.0", name="p3",
                    GPUOPS_NODE_CHANGE=record_b)  # fmt: skip
        assert p3.rc == 0, p3.stderr
        assert p3.result["release"]["node_change"] == record_b
        assert [r.get("node_change") for r in target.history("staging")] == [
            None,
            record_a,
            record_b,
        ]

        # release #1 has no node record: refused before anything changes
        no = gpuops("release", "rollback", *env, "--to", "1.3.0", "--with-nodes",
                    "-i", str(inv570), "-l", H1, name="no")  # fmt: skip
        assert no.rc == 3, no.stderr
        assert no.doc is not None
        assert "release #1 (1.3.0) has no node change record" in no.doc["error"]["message"]
        assert target.image() == release_images.ref("1.2.0")
        assert "Driver Version: 570.133.20" in smi(nodes_lab)
        assert len(target.history("staging")) == 3

        # back to release #2: gpu-h800-01 goes back to record A's driver first, then the image
        back = gpuops("release", "rollback", *env, "--to", "1.1.0", "--with-nodes",
                      "-i", str(inv570), "-l", H1, "--on-timeout", "evict",
                      "--gpu-pods-timeout", "5", name="back", timeout=600)  # fmt: skip
        assert back.rc == 0, back.stderr
        result = back.result
        assert "Driver Version: 550.90.07      CUDA Version: 12.4" in smi(nodes_lab)
        assert target.image() == release_images.ref("1.1.0")
        nodes = result["nodes"]
        assert (nodes["state"], nodes["record"]) == ("succeeded", record_a)
        assert nodes["drivers"] == {H1: "550.90.07"}
        assert nodes["new_record"] and nodes["new_record"] not in (record_a, record_b)
        compat = next(g for g in result["gates"] if g["gate"] == "compat")
        assert compat["ok"] and compat["planned_drivers"] == {H1: "550.90.07"}
        assert result["release"]["node_change"] == nodes["new_record"]
        assert result["release"]["action"] == "rollback" and result["state"] == "succeeded"
        assert not nodes_lab.node(H1).spec.unschedulable
    finally:
        nodes_lab.restore(H1)
    print(f"rollback --with-nodes lab test: {time.monotonic() - started:.1f}s")
