"""Node writes against a small in-memory API server (merge patches, resourceVersion
preconditions, 409 on a stale one): the unhealthy taint's retries (usecases.nodes.taints),
``nodes label``'s retry on a conflict (usecases.nodes.label), the conditional label patches and
kept ``timeAdded`` of adapters.kube.nodes, and which containers the downgrade gate reads
(usecases.nodes.downgrade). The fake is test data in the API's shapes, not the lab."""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import unquote

import pytest
from test_nodelabels import H800, health

from gpuops.adapters.kube import nodes as kubenodes
from gpuops.adapters.kube.client import Conflict, NotFound
from gpuops.core.cuda import Version
from gpuops.core.inventory import Host
from gpuops.errors import OperationFailed
from gpuops.usecases.nodes import downgrade, label, taints
from gpuops_lab import gpus

TAINT = "gpuops.io/gpu-unhealthy"
HAND = {
    "key": "team/drain",
    "value": "x",
    "effect": "NoExecute",
    "timeAdded": "2026-11-30T10:00:00Z",
}


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """RFC 7386 JSON merge patch (what the API server applies for merge-patch+json)."""
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict) and isinstance(target.get(k), dict):
            _merge(target[k], v)
        else:
            target[k] = copy.deepcopy(v)


class FakeApi:
    """Nodes and pods; ``conflicts`` PATCHes answered 409 (as if another writer had just
    changed the node: its resourceVersion moves on); ``between`` runs before each of them."""

    server = "https://fake"

    def __init__(self, nodes: dict[str, dict[str, Any]], pods: list[dict[str, Any]] | None = None):
        self.nodes = nodes
        self.pods = pods or []
        self.conflicts = 0
        self.patches: list[dict[str, Any]] = []
        self.rv = 100

    def bump(self, name: str) -> None:
        self.rv += 1
        self.nodes[name]["metadata"]["resourceVersion"] = str(self.rv)

    def request(self, method: str, path: str, *, what: str, **kw: Any) -> Any:
        if path == "/api/v1/pods":
            field = kw["query"]["fieldSelector"].split(",")[0].split("=", 1)[1]
            return {"items": [p for p in self.pods if p["spec"].get("nodeName", "") == field]}
        name = unquote(path.rsplit("/", 1)[1])
        if name not in self.nodes:
            raise NotFound(f"{what}: not found")
        node = self.nodes[name]
        if method == "GET":
            return copy.deepcopy(node)
        assert method == "PATCH"
        body = kw["body"]
        self.patches.append(copy.deepcopy(body))
        if self.conflicts:
            self.conflicts -= 1
            node["metadata"].setdefault("labels", {})["other/writer"] = str(self.conflicts)
            self.bump(name)
            raise Conflict(f"{what}: the object has been modified")
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if rv is not None and rv != node["metadata"]["resourceVersion"]:
            raise Conflict(f"{what}: the object has been modified")
        _merge(node, body)
        node["metadata"].pop("resourceVersion", None)
        self.bump(name)
        return copy.deepcopy(node)

    def close(self) -> None:
        pass


def _node(name: str, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": "7", "labels": {}, "annotations": {}},
        "spec": {"taints": taints or []},
        "status": {},
    }


def test_a_taint_write_retries_conflicts_and_fails_after_five() -> None:
    api = FakeApi({"n": _node("n")})
    api.conflicts = taints.ATTEMPTS - 1
    taints.mark_unhealthy(api, "n", "nodes-update", "validation failed")  # type: ignore[arg-type]
    assert [t["key"] for t in api.nodes["n"]["spec"]["taints"]] == [TAINT]
    assert len(api.patches) == taints.ATTEMPTS
    # every attempt is conditional on the resourceVersion it just read
    assert all(p["metadata"]["resourceVersion"] for p in api.patches)
    api.conflicts = taints.ATTEMPTS
    with pytest.raises(OperationFailed, match="changed 5 times"):
        taints.release_unhealthy(api, "n", "nodes-update")  # type: ignore[arg-type]
    assert [t["key"] for t in api.nodes["n"]["spec"]["taints"]] == [TAINT]  # nothing lost


def test_rewriting_the_taint_list_keeps_other_taints_time_added() -> None:
    api = FakeApi({"n": _node("n", [dict(HAND)])})
    taints.mark_unhealthy(api, "n", "nodes-update", "validation failed")  # type: ignore[arg-type]
    assert api.nodes["n"]["spec"]["taints"][0] == HAND
    assert taints.release_unhealthy(api, "n", "nodes-update") is True  # type: ignore[arg-type]
    assert api.nodes["n"]["spec"]["taints"] == [HAND]


def test_label_patches_are_conditional_and_a_conflict_is_read_again_and_retried() -> None:
    """The node was read before the (slow) inspection; another writer changed it since: the
    first write is answered 409, the node is read and planned again, and the write goes."""
    api = FakeApi({"gpu-h800-01": _node("gpu-h800-01", [dict(HAND)])})
    stale = kubenodes.get_node(api, "gpu-h800-01")  # type: ignore[arg-type]
    api.bump("gpu-h800-01")
    api.conflicts = 1
    host = Host("gpu-h800-01", ("gpu_h800",), {"gpu_nodes_accelerator": "nvidia-h800"})
    request = label.LabelRequest(inventory="inv")
    out = label._one(api, host, stale, health(gpus.host_state(H800)), request)  # type: ignore[arg-type]
    assert out.status == "updated"
    node = api.nodes["gpu-h800-01"]
    assert node["metadata"]["labels"]["accelerator"] == "nvidia-h800"
    assert node["metadata"]["labels"]["other/writer"] == "0"  # the other writer's change kept
    assert node["spec"]["taints"] == [HAND]
    assert len(api.patches) == 2
    assert all(p["metadata"]["resourceVersion"] for p in api.patches)  # labels too: conditional


def _container(
    name: str, image: str, gpus: dict[str, str] | None = None, **kw: Any
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": image, **kw}
    if gpus:
        c["resources"] = {"limits": gpus, "requests": gpus}
    return c


def test_the_gate_reads_init_containers_mig_devices_and_the_running_digest() -> None:
    digest = "reg:5000/ml/train@sha256:" + "a" * 64
    pods = [
        {  # a MIG slice, a restartable sidecar, a GPU init container, a finished plain one
            "metadata": {"namespace": "ml", "name": "mig"},
            "spec": {
                "nodeName": "n",
                "containers": [
                    _container("main", "reg:5000/ml/train:1", {"nvidia.com/mig-1g.10gb": "1"})
                ],
                "initContainers": [
                    _container("side", "reg:5000/ml/side:1", restartPolicy="Always"),
                    _container("warm", "reg:5000/ml/warm:1", {"nvidia.com/gpu": "1"}),
                    _container("setup", "reg:5000/ml/setup:1"),
                ],
            },
            "status": {
                "phase": "Running",
                "containerStatuses": [{"name": "main", "imageID": f"docker-pullable://{digest}"}],
            },
        },
        {  # its GPU in an init container only
            "metadata": {"namespace": "ml", "name": "initgpu"},
            "spec": {
                "nodeName": "n",
                "containers": [_container("main", "reg:5000/ml/app:1")],
                "initContainers": [
                    _container("prep", "reg:5000/ml/prep:1", {"nvidia.com/gpu": "1"})
                ],
            },
            "status": {"phase": "Running"},
        },
        {  # no GPU at all: not judged
            "metadata": {"namespace": "ml", "name": "web"},
            "spec": {"nodeName": "n", "containers": [_container("main", "reg:5000/ml/web:1")]},
            "status": {"phase": "Running"},
        },
    ]
    api = FakeApi({"n": _node("n")}, pods)
    found = downgrade._gpu_containers(api, "n", "nvidia.com/gpu")  # type: ignore[arg-type]
    assert sorted((pod, c, image) for _, pod, _, c, image in found) == [
        ("initgpu", "main", "reg:5000/ml/app:1"),
        ("initgpu", "prep", "reg:5000/ml/prep:1"),
        ("mig", "main", digest),
        ("mig", "side", "reg:5000/ml/side:1"),
        ("mig", "warm", "reg:5000/ml/warm:1"),
    ]


def _pending(name: str, **spec: Any) -> dict[str, Any]:
    gpu = {"nvidia.com/gpu": "1"}
    return {
        "metadata": {"namespace": "ml", "name": name},
        "spec": {"containers": [_container("main", f"reg:5000/ml/{name}:1", gpu)], **spec},
        "status": {"phase": "Pending"},
    }


def test_the_gate_judges_pending_pods_that_ask_for_the_class() -> None:
    h800 = {"accelerator": "nvidia-h800"}
    nodes = {"gpu-h800-01": h800, "gpu-h800-02": h800, "gpu-a100-01": {"accelerator": "a100"}}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "accelerator", "operator": "In", "values": ["x", "nvidia-h800"]}
                        ]
                    }
                ]
            }
        }
    }
    pods = [
        _pending("by-selector", nodeSelector={"accelerator": "nvidia-h800"}),
        _pending("by-affinity", affinity=affinity),
        _pending("other-class", nodeSelector={"accelerator": "a100"}),
        _pending("anywhere"),
    ]
    api = FakeApi({}, pods)
    target = downgrade.downgrade.Target("gpu-h800-02", Version.parse("535.161.08"))
    targets = {"gpu-h800-01": target, "gpu-h800-02": target}
    found = downgrade._pending_for_classes(api, nodes, targets, "nvidia.com/gpu")  # type: ignore[arg-type]
    assert sorted((pod, node) for _, pod, node, _, _ in found) == [
        ("by-affinity", "gpu-h800-01"),
        ("by-selector", "gpu-h800-01"),
    ]
