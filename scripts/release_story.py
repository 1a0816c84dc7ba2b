#!/usr/bin/env python3
"""The release story's world on a lab: what ``make demo`` and the Jenkinsfile.example test
(tests/python/integration/test_jenkinsfile_example_lab.py) run Jenkinsfile.example against.

  release_story.py prepare --kubeconfig K --kubectl PATH --registry HOST:PORT --base-image REF
                           --builder URL --out DIR
      namespaces ai-staging and ai-production, each running Deployment infer (2 replicas,
      1 GPU and 16 GiB each, on the H800 class) from before gpuops; the application's
      repository (gpuops-release.yaml, Dockerfile, a unit test) that `checkout scm` copies;
      DIR/story.json for the pipeline test (JenkinsfileExampleTest)
  release_story.py fill-memory --kubeconfig K --out DIR     a data-prep job takes the H800
      nodes' memory (the GPUs stay free): the next surge pod cannot be scheduled
  release_story.py free-memory --kubeconfig K --out DIR     the data-prep job is done

Run it with the project's virtualenv (it uses the kubernetes client).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

ROOT = Path(__file__).resolve().parent.parent
NAMESPACES = {"staging": "ai-staging", "production": "ai-production"}
NODE_CLASS = "nvidia-h800"
POD_MEMORY_GI = 16
DATAPREP = "dataprep"


def _api(kubeconfig: str) -> client.ApiClient:
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    return client.ApiClient(cfg)


def _wait(check: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"release_story: {what}: not after {timeout:.0f}s")
        time.sleep(0.3)


def release_config(registry: str) -> dict[str, Any]:
    """The application's gpuops-release.yaml."""
    rollout = {"unschedulable_seconds": 8, "ready_seconds": 60}
    common = {
        "deployment": "infer",
        "container": "infer",
        "node_class": NODE_CLASS,
        "registry": {"plain_http": True},  # the lab registry speaks HTTP; Harbor would not
        "rollout": rollout,
        "lock": {"lease_seconds": 30},
    }
    return {
        "image": f"{registry}/ai/infer",
        "jenkins": {
            "folder": "ai",
            "name": "infer",
            "repository": "https://git.example.invalid/ai/infer.git",
            "credentials": "git-ci",
            "jenkinsfile": "Jenkinsfile.example",
        },
        "environments": {
            "staging": {**common, "namespace": NAMESPACES["staging"], "registry_tag": "staging"},
            "production": {
                **common,
                "namespace": NAMESPACES["production"],
                "registry_tag": "prod",
                "approval": {"approvers": ["release-managers"], "timeout_minutes": 60},
            },
        },
    }


def write_app(app: Path, registry: str, base_image: str) -> None:
    """The application's repository, as `checkout scm` gives it to each agent."""
    (app / "tests").mkdir(parents=True, exist_ok=True)
    (app / "gpuops-release.yaml").write_text(
        yaml.safe_dump(release_config(registry), sort_keys=False)
    )
    (app / "Dockerfile").write_text(
        f"FROM {base_image}\n"
        "# the CUDA version the inference server is built against (NVIDIA's base images say so)\n"
        'LABEL com.nvidia.cuda.version="12.2.2"\n'
        "COPY app.py /srv/app.py\n"
    )
    (app / "app.py").write_text("def answer(prompt: str) -> str:\n    return prompt.upper()\n")
    (app / "tests" / "test_app.py").write_text(
        "import sys, pathlib\n"
        "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))\n"
        "from app import answer\n\n\n"
        "def test_answer() -> None:\n    assert answer('gpu') == 'GPU'\n"
    )
    (app / "Jenkinsfile.example").write_text((ROOT / "Jenkinsfile.example").read_text())


def deployment(image: str) -> dict[str, Any]:
    container = {
        "name": "infer",
        "image": image,
        "resources": {
            "requests": {"cpu": "500m", "memory": f"{POD_MEMORY_GI}Gi", "nvidia.com/gpu": "1"},
            "limits": {"nvidia.com/gpu": "1"},
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "infer", "labels": {"app": "infer"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "infer"}},
            "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": "infer"}},
                "spec": {
                    "nodeSelector": {"accelerator": NODE_CLASS},
                    "containers": [container],
                    "terminationGracePeriodSeconds": 0,
                },
            },
        },
    }


def prepare(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    api = _api(args.kubeconfig)
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    for ns in NAMESPACES.values():
        core.create_namespace({"metadata": {"name": ns}})
        _wait(
            lambda ns=ns: any(
                s.metadata.name == "default" for s in core.list_namespaced_service_account(ns).items
            ),
            f"default ServiceAccount in {ns}",
        )
        apps.create_namespaced_deployment(ns, deployment(args.base_image))
    for ns in NAMESPACES.values():
        _wait(
            lambda ns=ns: (
                (apps.read_namespaced_deployment("infer", ns).status.available_replicas or 0) == 2
            ),
            f"infer in {ns}",
        )
    write_app(out / "app", args.registry, args.base_image)
    story = {
        "repo_root": str(ROOT),
        "app": str(out / "app"),
        "kubeconfig": args.kubeconfig,
        "kubectl": args.kubectl,
        "builder": args.builder,
        "registry": args.registry,
        "cli": str(Path(sys.executable).parent / "gpuops"),
        "python_bin": str(Path(sys.executable).parent),
        "namespaces": NAMESPACES,
        "fill": str(out / "fill-memory.json"),
        "story_dir": str(out),
    }
    (out / "story.json").write_text(json.dumps(story, indent=2))
    print(out / "story.json")


def fill_memory(args: argparse.Namespace) -> None:
    """Bind one data-prep pod per H800 node, taking all but 8 GiB of the memory left."""
    core = client.CoreV1Api(_api(args.kubeconfig))
    nodes = core.list_node(label_selector=f"accelerator={NODE_CLASS}").items
    bound = core.list_pod_for_all_namespaces(field_selector="status.phase=Running").items
    for node in nodes:
        total = _gib(node.status.allocatable["memory"])
        used = sum(
            _gib((c.resources.requests or {}).get("memory", "0"))
            for p in bound
            if p.spec.node_name == node.metadata.name
            for c in p.spec.containers
        )
        take = max(int(total - used) - 8, 1)
        core.create_namespaced_pod(
            NAMESPACES["production"],
            {
                "metadata": {
                    "name": f"{DATAPREP}-{node.metadata.name}",
                    "labels": {"app": DATAPREP},
                },
                "spec": {
                    "nodeName": node.metadata.name,
                    "containers": [
                        {
                            "name": "prep",
                            "image": "registry.local/dataprep:1",
                            "resources": {"requests": {"memory": f"{take}Gi", "cpu": "1"}},
                        }
                    ],
                    "terminationGracePeriodSeconds": 0,
                },
            },
        )
    _wait(
        lambda: all(
            p.status.phase == "Running"
            for p in core.list_namespaced_pod(
                NAMESPACES["production"], label_selector=f"app={DATAPREP}"
            ).items
        ),
        "data-prep pods running",
    )
    print(
        f"data-prep job took the memory of {len(nodes)} {NODE_CLASS} node(s); their GPUs are free"
    )


def free_memory(args: argparse.Namespace) -> None:
    core = client.CoreV1Api(_api(args.kubeconfig))
    core.delete_collection_namespaced_pod(
        NAMESPACES["production"], label_selector=f"app={DATAPREP}", grace_period_seconds=0
    )
    _wait(
        lambda: (
            not core.list_namespaced_pod(
                NAMESPACES["production"], label_selector=f"app={DATAPREP}"
            ).items
        ),
        "data-prep pods gone",
    )
    print("data-prep job done: the memory is free again")


def _gib(quantity: str) -> float:
    units = {"Ki": 2**-20, "Mi": 2**-10, "Gi": 1, "Ti": 2**10}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return float(quantity[: -len(suffix)]) * factor
    return float(quantity) / 2**30


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    for opt in ("--kubeconfig", "--kubectl", "--registry", "--base-image", "--builder", "--out"):
        p.add_argument(opt, required=True)
    for name in ("fill-memory", "free-memory"):
        q = sub.add_parser(name)
        q.add_argument("--kubeconfig", required=True)
    args = parser.parse_args()
    {"prepare": prepare, "fill-memory": fill_memory, "free-memory": free_memory}[args.command](args)


if __name__ == "__main__":
    main()
