"""``gpuops headroom`` against the lab's real kube-scheduler, which is the oracle.

A module of its own kwok nodes (two classes, partly used by directly bound inference pods,
one cordoned, one tainted, one NotReady, one whose device plugin reports 0 GPUs, one with
MIG slices beside whole GPUs) is created under unique class labels. For each workload shape,
``headroom check`` (called as Jenkins calls it: JSON parameters in, result or error document
out) says how many pods fit; then exactly those pods are created and the scheduler must bind
exactly that many. ``headroom explain`` must agree with the scheduler's own message.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_kube import KubeLab, wait_until
from kubernetes.client.exceptions import ApiException

from gpuops.cli.main import run
from gpuops_lab import kube as labkube

pytestmark = pytest.mark.timeout(600)

GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"
RUN = uuid.uuid4().hex[:6]
A, H, M = f"t{RUN}-a100", f"t{RUN}-h800", f"t{RUN}-mig"
TEST_LABEL = "gpuops.io/headroom-test"


@dataclass
class Cluster:
    lab: KubeLab
    infer: str  # namespace of the bound inference pods
    train: str  # namespace where the asked-for pods are created
    tmp: Path

    def gpuops(
        self, command: str, params: dict[str, Any], *args: str, env: dict[str, str] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Run ``gpuops headroom <command>`` with JSON parameters, as the Jenkins step does."""
        tag = uuid.uuid4().hex[:6]
        pfile, rfile, efile = (self.tmp / f"{tag}.{x}.json" for x in ("params", "result", "err"))
        pfile.write_text(json.dumps({"kubeconfig": str(self.lab.kubeconfig), **params}))
        code = run(
            [
                "--params-file",
                str(pfile),
                "--result-file",
                str(rfile),
                "--error-file",
                str(efile),
                "headroom",
                command,
                *args,
            ]
        )
        doc = json.loads((rfile if code == 0 else efile).read_text())
        return code, doc


def _ns(lab: KubeLab, name: str) -> str:
    lab.core.create_namespace({"metadata": {"name": name}})
    wait_until(
        lambda: any(
            sa.metadata.name == "default"
            for sa in lab.core.list_namespaced_service_account(name).items
        ),
        f"default ServiceAccount in {name}",
    )
    return name


def _node_specs() -> list[labkube.NodeSpec]:
    def gpu(name: str, cls: str, model: str = "h800") -> labkube.NodeSpec:
        driver = "550.90.07" if model != "a100-80g" else "535.161.08"
        return labkube.gpu_node(
            f"hr-{RUN}-{name}", model, driver, labels={"accelerator": cls, TEST_LABEL: RUN}
        )

    return [
        gpu("a1", A, "a100-80g"),
        gpu("a2", A, "a100-80g"),
        gpu("h1", H),
        gpu("h2", H),
        replace(gpu("hc", H), unschedulable=True),
        replace(gpu("ht", H), taints=(labkube.Taint("dedicated", "training"),)),
        replace(gpu("hn", H), kwok_managed=False),  # nobody heartbeats it: NotReady
        replace(gpu("hz", H), gpus=0, allocatable_gpus=0),  # device plugin reports 0
        replace(gpu("m1", M, "a100-80g"), gpus=1, allocatable_gpus=1, extra_resources={MIG: "7"}),
    ]


#: Inference pods bound directly to nodes: node suffix -> GPUs per pod (resource)
_USED: list[tuple[str, int, str]] = [
    ("h1", 4, GPU),
    ("h1", 3, GPU),
    ("h2", 6, GPU),
    ("a1", 4, GPU),
    ("m1", 3, MIG),
    ("m1", 1, GPU),
]


@pytest.fixture(scope="module")
def cluster(kube_lab: KubeLab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    specs = _node_specs()
    labkube.create_gpu_nodes(kube_lab.api, [n for n in specs if n.kwok_managed])
    for spec in specs:
        if not spec.kwok_managed:  # a kubelet that reported NotReady and then went quiet
            body = spec.to_body()
            body["status"]["conditions"] = [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "KubeletNotReady",
                    "message": "container runtime is down",
                    "lastHeartbeatTime": "2024-01-01T00:00:00Z",
                    "lastTransitionTime": "2024-01-01T00:00:00Z",
                }
            ]
            kube_lab.core.create_node(body)
            # the node lifecycle controller (real kube-controller-manager) taints it; until it
            # does, kube-scheduler itself would still bind pods to the NotReady node
            wait_until(
                lambda name=spec.name: any(
                    t.key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
                    and t.effect == "NoSchedule"
                    for t in kube_lab.core.read_node(name).spec.taints or []
                ),
                f"NoSchedule taint on NotReady node {spec.name}",
                timeout=120,
            )
    infer, train = _ns(kube_lab, f"infer-{RUN}"), _ns(kube_lab, f"train-{RUN}")
    try:
        pods = [
            labkube.pod_body(
                f"infer-{i}",
                namespace=infer,
                node=f"hr-{RUN}-{node}",
                gpus=n,
                gpu_resource=res,
                labels={"app": "infer"},
            )
            for i, (node, n, res) in enumerate(_USED)
        ]
        labkube.bulk_create_pods(kube_lab.api, pods)
        wait_until(
            lambda: (
                sum(
                    p.status.phase == "Running"
                    for p in kube_lab.core.list_namespaced_pod(infer).items
                )
                == len(pods)
            ),
            "inference pods Running",
        )
        yield Cluster(kube_lab, infer, train, tmp_path_factory.mktemp("headroom"))
    finally:
        for ns in (infer, train):
            kube_lab.core.delete_namespace(ns)
        for spec in specs:
            kube_lab.core.delete_node(spec.name)


def _pod(
    name: str,
    ns: str,
    gpus: int,
    selector: dict[str, str],
    res: str = GPU,
    tolerations: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    body = labkube.pod_body(
        name, namespace=ns, gpus=gpus, gpu_resource=res, labels={"app": "asked"}
    )
    body["spec"]["nodeSelector"] = selector
    body["spec"]["tolerations"] += tolerations or []
    return body


def _outcome(c: Cluster, names: list[str]) -> dict[str, str]:
    """name -> node, or "" for a pod the scheduler declared Unschedulable."""

    def settled() -> dict[str, str] | None:
        out = {}
        for p in c.lab.core.list_namespaced_pod(c.train, label_selector="app=asked").items:
            conds = {x.type: x for x in p.status.conditions or []}
            sched = conds.get("PodScheduled")
            if p.spec.node_name:
                out[p.metadata.name] = p.spec.node_name
            elif sched is not None and sched.reason == "Unschedulable":
                out[p.metadata.name] = ""
        return out if set(out) == set(names) else None

    result: dict[str, str] = wait_until(settled, f"scheduling outcome of {names}")
    return result


def _cleanup(c: Cluster) -> None:
    c.lab.core.delete_collection_namespaced_pod(
        c.train, label_selector="app=asked", grace_period_seconds=0
    )
    wait_until(
        lambda: not c.lab.core.list_namespaced_pod(c.train, label_selector="app=asked").items,
        "asked pods gone",
    )


SHAPES = [
    # (class, gpus per pod, pods, resource, tolerations)
    ("H", 2, 1, GPU, None),  # h2 has 2 free: fits
    ("H", 2, 2, GPU, None),  # h1 1 free, h2 2 free: one pod only (fragmentation)
    ("H", 4, 1, GPU, None),  # cordoned, tainted, NotReady and 0-GPU nodes do not count
    (
        "H",
        8,
        1,
        GPU,
        [{"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"}],
    ),  # tolerating the taint opens ht
    ("A", 4, 2, GPU, None),
    ("A", 4, 4, GPU, None),  # a1 4 free + a2 8 free = 3 pods of 4
    ("M", 2, 3, MIG, None),  # 7 MIG slices, 3 used: 2 pods of 2; whole GPUs are separate
]


@pytest.mark.parametrize(("cls", "gpus", "pods", "res", "tolerations"), SHAPES)
def test_check_agrees_with_the_scheduler(
    cluster: Cluster,
    cls: str,
    gpus: int,
    pods: int,
    res: str,
    tolerations: list[dict[str, str]] | None,
) -> None:
    selector = {"accelerator": {"A": A, "H": H, "M": M}[cls]}
    params: dict[str, Any] = {
        "gpus_per_pod": gpus,
        "pods": pods,
        "node_selector": selector,
        "namespace": cluster.train,
        "resource": res,
    }
    if tolerations:
        params["tolerations"] = tolerations
    code, doc = cluster.gpuops("check", params)
    data = doc["result"]
    assert code == (0 if data["fits"] else 3)
    assert data["fits"] == (data["pods_placeable"] >= pods)
    names = [f"ask-{i}" for i in range(pods)]
    try:
        for name in names:
            cluster.lab.core.create_namespaced_pod(
                cluster.train, _pod(name, cluster.train, gpus, selector, res, tolerations)
            )
        outcome = _outcome(cluster, names)
        bound = sorted(n for n in outcome.values() if n)
        # the oracle: exactly as many pods bind as check said would fit
        assert len(bound) == min(pods, data["pods_placeable"]), (outcome, data["message"])
        if data["fits"]:
            assert sum(data["plan"].values()) == pods
        pending = [name for name, node in outcome.items() if not node]
        for name in pending:
            ecode, edoc = cluster.gpuops("explain", {"namespace": cluster.train}, f"pod/{name}")
            assert ecode == 0
            why = edoc["result"]
            assert why["event_message"], why
            assert why["agrees_with_event"] is True, (
                why["scheduler_message"],
                why["event_message"],
            )
    finally:
        _cleanup(cluster)


def test_explain_names_each_kind_of_excluded_node(cluster: Cluster) -> None:
    try:
        cluster.lab.core.create_namespaced_pod(
            cluster.train, _pod("big", cluster.train, 4, {"accelerator": H})
        )
        assert _outcome(cluster, ["big"]) == {"big": ""}
        code, doc = cluster.gpuops("explain", {"namespace": cluster.train}, "big")
        assert code == 0
        why = doc["result"]
        assert why["agrees_with_event"] is True
        nodes = {n["name"].removeprefix(f"hr-{RUN}-"): n for n in why["nodes"]}
        assert nodes["hc"]["scheduler_reasons"] == ["node(s) were unschedulable"]
        assert nodes["ht"]["failures"] == {"taint": "dedicated=training:NoSchedule"}
        assert "not-ready" in nodes["hn"]["failures"]
        assert nodes["hz"]["scheduler_reasons"] == [f"Insufficient {GPU}"]
        assert nodes["hz"]["dead"] == [GPU]
        assert nodes["h1"]["free"][GPU] == 1 and nodes["h2"]["free"][GPU] == 2
        assert nodes["a2"]["failures"]["affinity"].startswith(f"wants accelerator={H}")
        assert f"Insufficient {GPU} (most free: 2, need 4)" in why["summary"]
        fixes = "\n".join(why["fixes"])
        assert f"class {A} would fit it now on hr-{RUN}-a1, hr-{RUN}-a2" in fixes
        assert f"tolerate dedicated=training:NoSchedule: would fit on hr-{RUN}-ht" in fixes
        assert f"uncordon hr-{RUN}-hc" in fixes
        i = cluster.infer
        assert (
            f"{GPU} on the matching nodes is held by {i}/infer-2 (6 in 1 pod(s)), "
            f"{i}/infer-0 (4 in 1 pod(s)), {i}/infer-1 (3 in 1 pod(s))"
        ) in fixes
    finally:
        _cleanup(cluster)


def test_explain_a_deployment(cluster: Cluster) -> None:
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "trainer"}},
            "template": {
                "metadata": {"labels": {"app": "trainer"}},
                "spec": _pod("x", cluster.train, 4, {"accelerator": H})["spec"],
            },
        },
    }
    cluster.lab.apps.create_namespaced_deployment(cluster.train, dep)
    try:

        def pending() -> bool:
            pods = cluster.lab.core.list_namespaced_pod(
                cluster.train, label_selector="app=trainer"
            ).items
            return len(pods) == 2 and all(
                any(
                    c.type == "PodScheduled" and c.reason == "Unschedulable"
                    for c in p.status.conditions or []
                )
                for p in pods
            )

        wait_until(pending, "2 unschedulable trainer pods")
        code, doc = cluster.gpuops("explain", {"namespace": cluster.train}, "deployment/trainer")
        assert code == 0
        assert doc["result"]["pending_pods"] == 2
        assert doc["result"]["agrees_with_event"] is True
        assert doc["result"]["owner"].startswith("ReplicaSet/trainer-")
    finally:
        cluster.lab.apps.delete_namespaced_deployment("trainer", cluster.train)


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []  # noqa: RUF012 - test collector

    def do_POST(self) -> None:
        _Hook.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_shortage_is_exit_3_with_numbers_and_a_webhook(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("GPUOPS_WEBHOOK_URL", f"http://127.0.0.1:{server.server_address[1]}/k")
    try:
        code, doc = cluster.gpuops(
            "check",
            {
                "gpus_per_pod": 4,
                "pods": 2,
                "node_selector": f"accelerator={A}",
                "namespace": cluster.train,
                "reserve_per_class": {A: 8},
            },
        )
    finally:
        server.shutdown()
        server.server_close()
    assert code == 3
    assert doc["error"]["category"] == "gate-refused"
    details = doc["result"]
    (a,) = [c for c in details["classes"] if c["node_class"] == A]
    # a1: 8 - 4 used, a2: 8 free -> 12 free; keeping 8 leaves room for one 4-GPU pod
    assert (a["free"], a["reserve"], a["pods_placeable"]) == (12, 8, 1)
    assert f"class {A}: 1 pod(s) fit" in doc["error"]["message"]
    assert details["notification"] == {"status": "sent", "detail": "HTTP 204"}
    (note,) = _Hook.received
    assert note["event"] == "gpu-headroom-shortage" and note["gpus_needed"] == 8
    assert A in note["text"]


def test_resource_quota_is_respected(cluster: Cluster) -> None:
    ns = _ns(cluster.lab, f"quota-{RUN}")
    try:
        cluster.lab.core.create_namespaced_resource_quota(
            ns, {"metadata": {"name": "gpus"}, "spec": {"hard": {f"requests.{GPU}": "2"}}}
        )
        wait_until(
            lambda: cluster.lab.core.read_namespaced_resource_quota("gpus", ns).status.hard or {},
            "quota status",
        )
        code, doc = cluster.gpuops(
            "check", {"gpus_per_pod": 4, "node_selector": {"accelerator": A}, "namespace": ns}
        )
        assert code == 3
        assert (
            f"ResourceQuota gpus in namespace {ns}: 2 of 2 requests.{GPU} left"
            in (doc["error"]["message"])
        )
        # the oracle: the API server refuses the pod for the same reason
        with pytest.raises(ApiException) as exc:
            cluster.lab.core.create_namespaced_pod(ns, _pod("q", ns, 4, {"accelerator": A}))
        assert exc.value.status == 403 and "exceeded quota" in str(exc.value.body)
        assert (
            cluster.gpuops(
                "check", {"gpus_per_pod": 2, "node_selector": {"accelerator": A}, "namespace": ns}
            )[0]
            == 0
        )
    finally:
        cluster.lab.core.delete_namespace(ns)


def test_unknown_namespace_and_workload_are_input_errors(cluster: Cluster) -> None:
    code, doc = cluster.gpuops("check", {"gpus_per_pod": 1, "namespace": f"nope-{RUN}"})
    assert code == 2 and f"namespace 'nope-{RUN}' does not exist" in doc["error"]["message"]
    code, doc = cluster.gpuops("explain", {"namespace": cluster.train}, "pod/ghost")
    assert code == 2 and "pod 'ghost' not found" in doc["error"]["message"]
    code, doc = cluster.gpuops("explain", {"namespace": cluster.train}, "job/ghost")
    assert code == 2 and "job 'ghost' not found" in doc["error"]["message"]
    code, doc = cluster.gpuops("explain", {"namespace": f"nope-{RUN}"}, "deployment/x")
    assert code == 2 and f"namespace 'nope-{RUN}' does not exist" in doc["error"]["message"]


def test_explain_a_pod_that_is_not_pending(cluster: Cluster) -> None:
    code, doc = cluster.gpuops("explain", {"namespace": cluster.infer}, "infer-0")
    assert code == 0
    assert doc["result"]["pending_pods"] == 0
    assert doc["result"]["bound"] == {f"{cluster.infer}/infer-0": f"hr-{RUN}-h1"}
