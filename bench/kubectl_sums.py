"""The common alternative to ``gpuops headroom check``: ``kubectl get nodes,pods -A -o json``
piped into a small script that does the same sums.

Reads one ``v1/List`` from stdin and prints, per node class (label ``accelerator``, else
``nvidia.com/gpu.product``), allocatable, requested and free units of the resource over the
nodes the scheduler could use (Ready, not cordoned, no NoSchedule/NoExecute taint), counting
the requests of every non-terminal pod bound to a node, plus the pods of ``--gpus-per-pod``
that fit (per node, all GPUs on one node). Output: JSON on stdout.

    kubectl get nodes,pods -A -o json | python bench/kubectl_sums.py --gpus-per-pod 4
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from typing import Any

TERMINAL = ("Succeeded", "Failed")


def amount(qty: str) -> int:
    """Integer quantity of an extended resource (they admit no fractions)."""
    s = str(qty)
    for suffix, mult in (("k", 10**3), ("M", 10**6), ("G", 10**9), ("Ki", 2**10), ("Mi", 2**20)):
        if s.endswith(suffix):
            return int(s[: -len(suffix)]) * mult
    return int(s)


def pod_request(pod: dict[str, Any], resource: str) -> int:
    spec = pod.get("spec") or {}

    def req(c: dict[str, Any]) -> int:
        return amount(((c.get("resources") or {}).get("requests") or {}).get(resource, "0"))

    main = sum(req(c) for c in spec.get("containers") or ())
    init = max((req(c) for c in spec.get("initContainers") or ()), default=0)
    return max(main, init) + amount((spec.get("overhead") or {}).get(resource, "0"))


def node_usable(node: dict[str, Any]) -> bool:
    spec, status = node.get("spec") or {}, node.get("status") or {}
    if spec.get("unschedulable"):
        return False
    if any(t.get("effect") in ("NoSchedule", "NoExecute") for t in spec.get("taints") or ()):
        return False
    conds = status.get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def sums(doc: dict[str, Any], resource: str, gpus_per_pod: int) -> dict[str, Any]:
    requested: dict[str, int] = defaultdict(int)
    nodes = []
    bound = 0
    for item in doc.get("items") or ():
        kind = item.get("kind")
        if kind == "Node":
            nodes.append(item)
        elif kind == "Pod":
            node = (item.get("spec") or {}).get("nodeName")
            phase = (item.get("status") or {}).get("phase")
            if node and phase not in TERMINAL:
                requested[node] += pod_request(item, resource)
                bound += 1
    classes: dict[str, dict[str, int]] = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        alloc = amount(((node.get("status") or {}).get("allocatable") or {}).get(resource, "0"))
        cls = labels.get("accelerator") or labels.get("nvidia.com/gpu.product")
        if not cls or not alloc or not node_usable(node):
            continue
        c = classes.setdefault(
            cls, {"nodes": 0, "allocatable": 0, "requested": 0, "free": 0, "pods_placeable": 0}
        )
        used = requested.get(meta.get("name", ""), 0)
        free = alloc - used
        c["nodes"] += 1
        c["allocatable"] += alloc
        c["requested"] += used
        c["free"] += free
        c["pods_placeable"] += max(0, free) // gpus_per_pod
    return {
        "resource": resource,
        "nodes": len(nodes),
        "pods_bound": bound,
        "classes": dict(sorted(classes.items())),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resource", default="nvidia.com/gpu")
    ap.add_argument("--gpus-per-pod", type=int, default=1)
    args = ap.parse_args()
    doc = json.load(sys.stdin)
    json.dump(sums(doc, args.resource, args.gpus_per_pod), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
