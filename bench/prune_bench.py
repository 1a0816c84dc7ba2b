#!/usr/bin/env python3
"""``gpuops image prune`` of a repository of 1,000 tags against ``skopeo delete`` of the same
manifests, in the same run (issue 22, "Performance").

Per repeat, two repositories get the same ``--tags`` images (tiny: one shared layer, an own
config, so the digests are the same in both), pushed by manifest to a docker-registry of the
bench's own (the lab's Debian package, access log on). Then:

  gpuops   the prune use case in-process, whole: the environment's release Lease, its
           history, its Deployment and ReplicaSets, listing every tag, reading every
           manifest and config, deciding, the delete probe and the deletes (keep-last 10)
  skopeo   Debian's ``skopeo delete docker://<repo>@<digest>``, one process per manifest,
           for exactly the digests gpuops deleted (the plan is given to it: no listing)

Requests are counted in the registry's own access log by User-Agent (gpuops/<version>,
skopeo/<version>), so neither tool counts its own. The cluster side is the lab's real
control plane (started here, or ``--reuse`` a lab dir).

    .venv/bin/python bench/prune_bench.py --repeat 3 --json-out /tmp/prune-bench.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from gpuops.adapters.kube import KubeClient
from gpuops.core.retention import Policy
from gpuops.usecases.retention import prune as prune_usecase
from gpuops_lab import Lab, LabConfig
from gpuops_lab import kube as labkube
from gpuops_lab.ownregistry import OwnRegistry


def push(reg: OwnRegistry, repos: list[str], count: int) -> list[str]:
    """The same ``count`` images into each repository; their digests, oldest first."""
    t0 = datetime.now(UTC) - timedelta(days=count)
    digests = []
    for repo in repos:
        shared = reg.blob(repo, b"shared-layer" * 16)
        digests = [
            reg.image(repo, f"t{i:04d}", t0 + timedelta(hours=i), b"%d" % i, shared)[0]
            for i in range(count)
        ]
    return digests


def count_requests(log: Path, start: int, agent: str) -> int:
    """Requests in the registry's access log (combined format) since byte ``start`` whose
    User-Agent starts with ``agent``."""
    with log.open("rb") as f:
        f.seek(start)
        return sum(1 for line in f if b' HTTP/1.1" ' in line and f'"{agent}'.encode() in line)


def one_round(
    r: int,
    args: argparse.Namespace,
    reg: OwnRegistry,
    apps: Any,
    ns: str,
    kubeconfig: str,
    work: Path,
) -> dict[str, Any]:
    """Push the images twice, prune one repository, skopeo-delete the same in the other."""
    log = reg.base / "registry.log"
    ours, theirs = f"bench/gpuops-{r}", f"bench/skopeo-{r}"
    t = time.monotonic()
    digests = push(reg, [ours, theirs], args.tags)
    push_s = time.monotonic() - t
    name = f"app-{r}"
    image = f"{reg.url}/{ours}:t{args.tags - 1:04d}@{digests[-1]}"
    apps.create_namespaced_deployment(ns, _deployment(name, image))
    config = work / f"environments-{r}.yaml"
    env = {
        "namespace": ns,
        "deployment": name,
        "container": name,
        "image": f"{reg.url}/{ours}",
        "registry": {"plain_http": True},
    }
    config.write_text(yaml.safe_dump({"environments": {"bench": env}}))
    request = prune_usecase.PruneRequest(
        str(config), Policy(keep_last=args.keep_last), (), False, kubeconfig
    )
    start = log.stat().st_size
    t = time.monotonic()
    outcome = prune_usecase.prune(request, lambda _c: KubeClient.connect(kubeconfig))
    gpuops_s = time.monotonic() - t
    if outcome.problem is not None:
        raise SystemExit(f"prune failed: {outcome.problem.message}")
    deleted = outcome.result.repositories[0].deleted
    time.sleep(0.2)  # the access log is written after the response
    gpuops_requests = count_requests(log, start, "gpuops/")
    start = log.stat().st_size
    t = time.monotonic()
    for digest in deleted:
        subprocess.run(
            [
                "skopeo",
                "delete",
                "--tls-verify=false",
                f"docker://{reg.url}/{theirs}@{digest}",
            ],
            check=True,
            capture_output=True,
        )
    skopeo_s = time.monotonic() - t
    time.sleep(0.2)
    skopeo_requests = count_requests(log, start, "skopeo/")
    return {
        "repeat": r,
        "tags": args.tags,
        "deleted": len(deleted),
        "push_s": round(push_s, 2),
        "gpuops_s": round(gpuops_s, 3),
        "skopeo_s": round(skopeo_s, 3),
        "gpuops_requests": gpuops_requests,
        "skopeo_requests": skopeo_requests,
        "gpuops_requests_per_delete": round(gpuops_requests / max(1, len(deleted)), 2),
        "skopeo_requests_per_delete": round(skopeo_requests / max(1, len(deleted)), 2),
        "gpuops_timings_s": outcome.result.timings_s,
        "gpuops_by_kind": outcome.result.repositories[0].requests,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tags", type=int, default=1000)
    ap.add_argument("--keep-last", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--lab-dir", default=None, help="where to start the kube lab (default: a temp dir)"
    )
    ap.add_argument("--reuse", default=None, help="a lab dir whose kube lab is already up")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="prune-bench-"))
    lab = Lab(LabConfig(dir=Path(args.reuse or args.lab_dir or work / "lab")))
    if not args.reuse:
        lab.up(["kube"])
    kubeconfig = str(lab.facts("kube")["kubeconfig"])
    api = labkube.api_client(Path(kubeconfig))
    reg = OwnRegistry(work / "registry")
    reg.start(accesslog=True)
    rows: list[dict[str, Any]] = []
    try:
        ns = f"prune-bench-{uuid.uuid4().hex[:6]}"
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        core.create_namespace({"metadata": {"name": ns}})
        for r in range(args.repeat):
            row = one_round(r, args, reg, apps, ns, kubeconfig, work)
            rows.append(row)
            print(json.dumps(row), flush=True)
        core.delete_namespace(ns)
    finally:
        reg.stop()
        if not args.reuse:
            lab.down()
    summary = {
        key: statistics.median(row[key] for row in rows)
        for key in (
            "gpuops_s",
            "skopeo_s",
            "gpuops_requests_per_delete",
            "skopeo_requests_per_delete",
        )
    }
    summary["ratio_gpuops_to_skopeo_s"] = round(summary["gpuops_s"] / summary["skopeo_s"], 3)
    print("median of", len(rows), "repeats:", json.dumps(summary))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    return 0


def _deployment(name: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": name, "image": image}]},
            },
        },
    }


if __name__ == "__main__":
    raise SystemExit(main())
