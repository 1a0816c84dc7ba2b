"""Benchmark: ``gpuops release promote`` against ``kubectl set image`` + ``kubectl rollout status``.

Brings up its own lab (registry, Podman builder, kube: real kube-apiserver, controller-manager,
scheduler and kwok) in ``--lab-dir`` (or uses a running one with ``--reuse DIR``), builds and
pushes two versions of a small image, and creates pairs of identical Deployments (2 replicas,
1 GPU and 16 GiB each, maxSurge 1, maxUnavailable 0), one released with kubectl, one with
gpuops, on kwok nodes of two classes of their own. Then, in the same run:

  healthy        round-robin, ``--repeat`` rounds after one warm-up, each switching version:
                 kubectl  ``kubectl set image`` then ``kubectl rollout status`` (by digest)
                 gpuops   ``gpuops release promote -e bench --tag T``, a process end to end
                          (config, gates, lock, history, watch, registry tag), as Jenkins runs it
                 overhead = median(gpuops) - median(kubectl); target <= 2 s
  unschedulable  the second class has free GPUs, but a data-prep job took its memory, so the
                 surge pod of any new version cannot be scheduled:
                 kubectl  ``kubectl set image`` then ``kubectl rollout status`` until it gives
                          up at the Deployment's progress deadline (600 s, Kubernetes' default,
                          or ``--deadline``); it waits in the background (no CPU) meanwhile
                 gpuops   ``gpuops release promote`` until it has detected the failure and
                          restored the previous version (exit 1), ``--repeat`` times
                 ratio = kubectl's give-up time / median(gpuops); target >= 20 and <= 30 s

Run with the project's venv:

    .venv/bin/python bench/release_bench.py                 # the real 600 s deadline (~12 min)
    .venv/bin/python bench/release_bench.py --deadline 60   # quick (~3 min)
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from gpuops_lab import Lab, LabConfig
from gpuops_lab import builder as labbuilder
from gpuops_lab import kube as labkube

VENV_BIN = Path(sys.executable).parent
REPO = "bench/infer"
NODE_CLASS, FULL_CLASS = "bench-ok", "bench-full"


@dataclass
class World:
    lab: Lab
    kubeconfig: Path
    kubectl: Path
    registry: str
    digests: dict[str, str]
    config: Path
    api: Any
    namespace: str
    full_class: str
    rows: dict[str, list[float]] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


def sh(argv: list[str]) -> tuple[int, float, str]:
    t0 = time.monotonic()
    res = subprocess.run(argv, capture_output=True, text=True, check=False)
    return res.returncode, time.monotonic() - t0, res.stdout + res.stderr


def build(lab: Lab, registry: str, base: str, tag: str) -> str:
    """A small real image per version, built with the lab's Podman API and pushed; its digest."""
    docker = labbuilder.client(lab)
    ref = f"{registry}/{REPO}:{tag}"
    dockerfile = f'FROM {base}\nLABEL com.nvidia.cuda.version="12.2.2" bench.version="{tag}"\n'
    docker.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=ref, rm=True, forcerm=True)
    for event in docker.api.push(f"{registry}/{REPO}", tag=tag, stream=True, decode=True):
        if "error" in event:
            sys.exit(f"push failed: {event['error']}")
        found = re.search(r"digest: (sha256:[0-9a-f]{64})", str(event.get("status", "")))
        if found:
            return found.group(1)
    sys.exit(f"no digest in the push of {ref}")


def deployment(name: str, image: str, node_class: str, deadline: int | None) -> dict[str, Any]:
    container = {
        "name": "infer",
        "image": image,
        "resources": {
            "requests": {"memory": "16Gi", "cpu": "500m", "nvidia.com/gpu": "1"},
            "limits": {"nvidia.com/gpu": "1"},
        },
    }
    spec: dict[str, Any] = {
        "replicas": 2,
        "selector": {"matchLabels": {"app": name}},
        "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {
                "nodeSelector": {"accelerator": node_class},
                "terminationGracePeriodSeconds": 0,
                "containers": [container],
            },
        },
    }
    if deadline is not None:
        spec["progressDeadlineSeconds"] = deadline
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": spec}


def setup(args: argparse.Namespace) -> World:
    lab = Lab(LabConfig(dir=Path(args.reuse or args.lab_dir)))
    if not args.reuse:
        lab.up(["registry", "builder", "kube"])
    kube_facts, reg_facts = lab.facts("kube"), lab.facts("registry")
    kubeconfig = Path(kube_facts["kubeconfig"])
    kubectl = Path(kube_facts["bin_dir"]) / "kubectl"
    api = labkube.api_client(kubeconfig)
    run = f"{int(time.time())}"
    classes = {NODE_CLASS: f"{NODE_CLASS}-{run}", FULL_CLASS: f"{FULL_CLASS}-{run}"}
    nodes = [
        # H800s with a driver label (550: CUDA 12.4): the compat gate checks the image for real
        replace(
            labkube.gpu_node(f"{cls}-{i}", "h800", "550.90.07", labels={"accelerator": cls}),
            memory="64Gi",
        )
        for cls in classes.values()
        for i in range(2)
    ]
    labkube.create_gpu_nodes(api, nodes)
    registry = str(reg_facts["url"])
    base = str(lab.facts("builder")["base_image"])
    digests = {tag: build(lab, registry, base, tag) for tag in ("a", "b")}
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    ns = f"bench-{run}"
    core.create_namespace({"metadata": {"name": ns}})
    while not [
        s for s in core.list_namespaced_service_account(ns).items if s.metadata.name == "default"
    ]:
        time.sleep(0.2)
    first = f"{registry}/{REPO}:a@{digests['a']}"
    ok, full = classes[NODE_CLASS], classes[FULL_CLASS]
    pairs = (
        ("k-ok", ok, None),
        ("g-ok", ok, None),
        ("k-full", full, args.deadline),
        ("g-full", full, None),
    )
    for name, cls, deadline in pairs:
        apps.create_namespaced_deployment(ns, deployment(name, first, cls, deadline))
    for name, _, _ in pairs:
        code, _, out = sh(
            [
                str(kubectl),
                "--kubeconfig",
                str(kubeconfig),
                "-n",
                ns,
                "rollout",
                "status",
                f"deployment/{name}",
                "--timeout=120s",
            ]
        )
        if code:
            sys.exit(f"deployment {ns}/{name} did not roll out: {out}")
    env = {
        "namespace": ns,
        "container": "infer",
        "image": f"{registry}/{REPO}",
        "node_class": ok,
        "registry": {"plain_http": True},
    }
    full_env = {
        **env,
        "deployment": "g-full",
        "node_class": full,
        "rollout": {"unschedulable_seconds": args.unschedulable},
    }
    config = Path(args.reuse or args.lab_dir) / "bench-release.yaml"
    doc = {"environments": {"bench": {**env, "deployment": "g-ok"}, "full": full_env}}
    config.write_text(yaml.safe_dump(doc))
    return World(lab, kubeconfig, kubectl, registry, digests, config, api, ns, full)


def fill_memory(w: World) -> None:
    """A data-prep pod per node of the full class: 40 of its 64 GiB; 2 x 16 GiB run there."""
    core = client.CoreV1Api(w.api)
    for i in range(2):
        body = labkube.pod_body(
            f"dataprep-{i}", namespace=w.namespace, node=f"{w.full_class}-{i}", memory="40Gi"
        )
        core.create_namespaced_pod(w.namespace, body)


def kubectl(w: World, *args: str) -> list[str]:
    return [str(w.kubectl), "--kubeconfig", str(w.kubeconfig), "-n", w.namespace, *args]


def gpuops(w: World, env: str, tag: str) -> list[str]:
    return [
        str(VENV_BIN / "gpuops"),
        "--output",
        "json",
        "release",
        "promote",
        "-e",
        env,
        "--tag",
        tag,
        "--config",
        str(w.config),
        "--kubeconfig",
        str(w.kubeconfig),
    ]


def healthy(w: World, rounds: int) -> None:
    w.rows["kubectl (healthy)"], w.rows["gpuops (healthy)"] = [], []
    for i in range(rounds + 1):  # round 0 warms caches and is not counted
        tag = "b" if i % 2 == 0 else "a"
        image = f"{w.registry}/{REPO}:{tag}@{w.digests[tag]}"
        t0 = time.monotonic()
        c1, _, o1 = sh(kubectl(w, "set", "image", "deployment/k-ok", f"infer={image}"))
        c2, _, o2 = sh(kubectl(w, "rollout", "status", "deployment/k-ok", "--timeout=600s"))
        k = time.monotonic() - t0
        c3, g, o3 = sh(gpuops(w, "bench", tag))
        if c1 or c2 or c3:
            sys.exit(f"a healthy round failed:\n{o1}\n{o2}\n{o3}")
        if i:
            w.rows["kubectl (healthy)"].append(k)
            w.rows["gpuops (healthy)"].append(g)
            result = json.loads(o3[o3.index("{") :]).get("result") or {}
            w.details.setdefault("gpuops_healthy", []).append(
                {
                    "in_process_s": result.get("timings_s"),
                    "rollout_s": (result.get("rollout") or {}).get("seconds"),
                }
            )


def kubectl_gives_up(w: World, result: dict[str, Any]) -> None:
    """kubectl set image + rollout status on the full class: waits until the progress deadline."""
    image = f"{w.registry}/{REPO}:b@{w.digests['b']}"
    t0 = time.monotonic()
    sh(kubectl(w, "set", "image", "deployment/k-full", f"infer={image}"))
    code, _, out = sh(kubectl(w, "rollout", "status", "deployment/k-full", "--timeout=3600s"))
    result.update(seconds=time.monotonic() - t0, code=code, said=out.strip().splitlines()[-1:])


def unschedulable(w: World, rounds: int) -> None:
    w.rows["gpuops (unschedulable)"] = []
    w.details["gpuops_unschedulable"] = []
    for _ in range(rounds):
        code, seconds, out = sh(gpuops(w, "full", "b"))
        doc = json.loads(out[out.index("{") :]) if "{" in out else {}
        result = doc.get("result") or {}
        problem = ((result.get("rollout") or {}).get("problem") or {}).get("kind")
        if code != 1 or problem != "unschedulable":
            sys.exit(f"expected a detected, rolled-back unschedulable release (exit 1): {code}")
        w.rows["gpuops (unschedulable)"].append(seconds)
        w.details["gpuops_unschedulable"].append(
            {
                "detected_after_s": result["rollout"]["seconds"],
                "restored_in_s": result["restore"]["seconds"],
            }
        )


def report(w: World, args: argparse.Namespace) -> dict[str, Any]:
    med = {k: statistics.median(v) for k, v in w.rows.items()}
    print(f"\nload average: {os.getloadavg()}  (2 cores; compare rows of one run)")
    print(f"{'row':<36} {'median s':>9} {'min s':>8} {'n':>3}")
    for k, v in w.rows.items():
        print(f"{k:<36} {statistics.median(v):>9.2f} {min(v):>8.2f} {len(v):>3}")
    overhead = med["gpuops (healthy)"] - med["kubectl (healthy)"]
    print(
        f"\nhealthy promotion overhead over kubectl set image + rollout status: {overhead:+.2f} s "
        f"(target <= 2 s: {'met' if overhead <= 2 else 'NOT met'})"
    )
    gave_up, ours = med["kubectl rollout status (gives up)"], med["gpuops (unschedulable)"]
    ratio = gave_up / ours
    met = "met" if ratio >= 20 and ours <= 30 else "NOT met"
    print(
        f"unschedulable: kubectl rollout status gave up after {gave_up:.1f} s (progress deadline "
        f"{args.deadline} s); gpuops detected it and rolled back in {ours:.1f} s: "
        f"{ratio:.1f}x sooner (target >= 20x and within 30 s: {met})"
    )
    if args.deadline != 600:
        print(
            f"  with Kubernetes' default deadline of 600 s the same gpuops time is "
            f"{600 / ours:.1f}x sooner (kubectl measured at {args.deadline} s here)"
        )
    return {
        "rows": w.rows,
        "medians": med,
        "overhead_s": overhead,
        "ratio": ratio,
        "details": w.details,
        "deadline_s": args.deadline,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lab-dir", default=tempfile.mkdtemp(prefix="gob-rel-", dir="/tmp"))
    parser.add_argument("--reuse", help="a running lab directory (registry, builder, kube)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--deadline", type=int, default=600, help="kubectl's progressDeadlineSeconds"
    )
    parser.add_argument(
        "--unschedulable", type=int, default=10, help="gpuops' unschedulable_seconds"
    )
    parser.add_argument("--json-out")
    parser.add_argument("--keep", action="store_true", help="leave the lab it started running")
    args = parser.parse_args()
    w = setup(args)
    try:
        fill_memory(w)
        gave_up: dict[str, Any] = {}
        # kubectl's give-up takes the progress deadline; it waits in the background (no CPU)
        # while the timed rows run one at a time
        baseline = threading.Thread(target=kubectl_gives_up, args=(w, gave_up))
        baseline.start()
        healthy(w, args.repeat)
        unschedulable(w, args.repeat)
        print(f"waiting for kubectl rollout status to give up (deadline {args.deadline} s) ...")
        baseline.join()
        w.rows["kubectl rollout status (gives up)"] = [gave_up["seconds"]]
        w.details["kubectl_gave_up"] = {"exit": gave_up["code"], "said": gave_up["said"]}
        doc = report(w, args)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(doc, indent=2))
    finally:
        if not args.reuse and not args.keep:
            w.lab.down()


if __name__ == "__main__":
    main()
