"""``pods_placeable`` agrees with the API server's admission (ResourceQuota) on the lab.

Two fresh 8-GPU kwok nodes of a class of their own (16 free). In a namespace with a
ResourceQuota, ``headroom check`` says how many pods of the shape could be placed; then exactly
the asked pods are created: the API server must admit exactly that many (the rest are refused
with "exceeded quota") and the real scheduler must bind every admitted one.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_kube import KubeLab, wait_until
from kubernetes.client.exceptions import ApiException

from gpuops.cli.main import run
from gpuops_lab import kube as labkube

pytestmark = pytest.mark.timeout(600)

GPU = "nvidia.com/gpu"
RUN = uuid.uuid4().hex[:6]
CLS = f"q{RUN}-h800"


@pytest.fixture(scope="module")
def nodes(kube_lab: KubeLab) -> Iterator[list[str]]:
    specs = [
        labkube.gpu_node(f"quota-{RUN}-{i}", "h800", "550.90.07", labels={"accelerator": CLS})
        for i in range(2)
    ]
    labkube.create_gpu_nodes(kube_lab.api, specs)
    try:
        yield [s.name for s in specs]
    finally:
        for spec in specs:
            kube_lab.core.delete_node(spec.name)


def _namespace(lab: KubeLab, hard: dict[str, str]) -> str:
    ns = f"quota-{uuid.uuid4().hex[:8]}"
    lab.core.create_namespace({"metadata": {"name": ns}})
    wait_until(
        lambda: any(
            sa.metadata.name == "default"
            for sa in lab.core.list_namespaced_service_account(ns).items
        ),
        f"default ServiceAccount in {ns}",
    )
    lab.core.create_namespaced_resource_quota(
        ns, {"metadata": {"name": "q"}, "spec": {"hard": hard}}
    )
    wait_until(
        lambda: lab.core.read_namespaced_resource_quota("q", ns).status.hard or {},
        "quota status",
    )
    return ns


def _check(lab: KubeLab, tmp: Path, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    pfile, rfile, efile = tmp / "params.json", tmp / "result.json", tmp / "error.json"
    pfile.write_text(json.dumps({"kubeconfig": str(lab.kubeconfig), **params}))
    code = run(["--params-file", str(pfile), "--result-file", str(rfile),
                "--error-file", str(efile), "headroom", "check"])  # fmt: skip
    return code, json.loads((rfile if code == 0 else efile).read_text())["result"]


@pytest.mark.parametrize(
    ("hard", "gpus", "pods", "expect"),
    [
        ({f"requests.{GPU}": "4"}, 4, 2, 1),  # issue 8: 4 left, 16 free, 2 x 4 asked
        ({f"requests.{GPU}": "10"}, 4, 3, 2),
        ({"pods": "1"}, 2, 3, 1),
        ({f"requests.{GPU}": "16", "pods": "5"}, 4, 4, 4),  # the quota is not the limit
    ],
)
def test_pods_placeable_is_what_the_api_server_admits_and_binds(
    kube_lab: KubeLab,
    nodes: list[str],
    tmp_path: Path,
    hard: dict[str, str],
    gpus: int,
    pods: int,
    expect: int,
) -> None:
    ns = _namespace(kube_lab, hard)
    try:
        code, result = _check(
            kube_lab,
            tmp_path,
            {"gpus_per_pod": gpus, "pods": pods, "namespace": ns,
             "node_selector": {"accelerator": CLS}},
        )  # fmt: skip
        assert result["pods_placeable"] == expect, result["message"]
        assert code == (0 if expect >= pods else 3)
        # the oracle: create the asked pods; the API server admits, the scheduler binds
        admitted, refused = [], []
        for i in range(pods):
            body = labkube.pod_body(f"ask-{i}", namespace=ns, gpus=gpus, labels={"app": "ask"})
            body["spec"]["nodeSelector"] = {"accelerator": CLS}
            try:
                kube_lab.core.create_namespaced_pod(ns, body)
                admitted.append(body["metadata"]["name"])
            except ApiException as exc:
                assert exc.status == 403 and "exceeded quota" in str(exc.body), exc.body
                refused.append(body["metadata"]["name"])
        assert len(admitted) == expect, (admitted, refused, result["message"])

        def bound() -> list[str] | None:
            items = kube_lab.core.list_namespaced_pod(ns, label_selector="app=ask").items
            names = sorted(p.metadata.name for p in items if p.spec.node_name)
            return names if len(names) == len(admitted) else None

        assert wait_until(bound, "admitted pods bound") == sorted(admitted)
    finally:  # the next case starts from 16 free GPUs again
        kube_lab.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        wait_until(lambda: not kube_lab.core.list_namespaced_pod(ns).items, f"pods of {ns} gone")
        kube_lab.core.delete_namespace(ns)
