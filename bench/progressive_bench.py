"""Benchmark: progressive releases (issue 20, "Performance"), each row against a baseline
measured in the same run.

Brings up its own lab (registry, Podman builder, kube: real kube-apiserver, controller-manager,
scheduler and kwok; the app stand-in and Debian's Prometheus scraping every second) in
``--lab-dir`` (or uses a running one with ``--reuse DIR``), builds and pushes three versions of
a small image (``a``, ``b`` and ``c-labfault-errors``, whose pods the app stand-in answers with
30 % errors: a lab stand-in for a container), and releases, as processes end to end
(``gpuops release promote``, as Jenkins runs it):

  failing    a canary answering 30 % errors, analysed by Prometheus every ``--interval`` s with
             failure limit ``--failure-limit``: from the analysis step's start (its progress
             line) to the end of the run (rolled back, exit 1);
             bound = interval x failure limit + 15 s; ratio = measured / bound (<= 1: met)
  healthy    round-robin, the same Deployment shape, one environment without a strategy
             (plain) and one with [replicas 1, pause 3 s, Prometheus analysis of 3
             measurements 1 s apart, replicas 50 %] (canary):
             overhead = median(canary) - median(plain) - (pauses + intervals configured);
             target <= 3 s
  in place   4 replicas of 1 GPU on a class of 4 GPUs (0 free), strategy [replicas 1] with
             in_place max_unavailable 1; an independent watcher on the API's watch events (not
             polling) records the most replicas not Ready at any moment; target <= 1. Its
             time against the named baseline of a person doing it by hand on an identical
             Deployment: ``kubectl patch`` (maxSurge 0, maxUnavailable 1) + ``set image`` +
             ``rollout status``.

Run with the project's venv:

    .venv/bin/python bench/progressive_bench.py --repeat 3 --json-out bench/results/X.json
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
from kubernetes import client, watch

from gpuops_lab import Lab, LabConfig
from gpuops_lab import builder as labbuilder
from gpuops_lab import kube as labkube

VENV_BIN = Path(sys.executable).parent
REPO = "bench/canary"
TAGS = ("a", "b", "c-labfault-errors")
ERROR_RATE = (
    '1 - sum(rate(lab_app_requests_total{namespace="$namespace",track="canary",code="200"}[5s]))'
    ' / sum(rate(lab_app_requests_total{namespace="$namespace",track="canary"}[5s]))'
)
APP = {"gpuops.io/lab-app": "true"}  # the app stand-in plays these pods' containers
PAUSE_S, HEALTHY_COUNT, HEALTHY_INTERVAL = 3, 3, 1
#: what the canary's strategy waits by configuration: its pause and the intervals between
#: its measurements (the first at once)
CONFIGURED_S = PAUSE_S + (HEALTHY_COUNT - 1) * HEALTHY_INTERVAL
_OFFSET = re.compile(r"\[\s*([0-9.]+)s\] (.*)")


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
    rows: dict[str, list[float]] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def image(self, tag: str) -> str:
        return f"{self.registry}/{REPO}:{tag}@{self.digests[tag]}"


def sh(argv: list[str]) -> tuple[int, float, str, str]:
    t0 = time.monotonic()
    res = subprocess.run(argv, capture_output=True, text=True, check=False)
    return res.returncode, time.monotonic() - t0, res.stdout, res.stderr


def build(lab: Lab, registry: str, base: str, tag: str) -> str:
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


def deployment(name: str, image: str, node_class: str, replicas: int) -> dict[str, Any]:
    container = {
        "name": "app",
        "image": image,
        "resources": {
            "requests": {"memory": "1Gi", "cpu": "100m", "nvidia.com/gpu": "1"},
            "limits": {"nvidia.com/gpu": "1"},
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": name, **APP}},
                "spec": {
                    "nodeSelector": {"accelerator": node_class},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [container],
                },
            },
        },
    }


def environments(w_ns: str, registry: str, prom: str, classes: dict[str, str], args: Any) -> Any:
    base = {
        "namespace": w_ns,
        "container": "app",
        "image": f"{registry}/{REPO}",
        "registry": {"plain_http": True},
        "node_class": classes["ok"],
        "lock": {"lease_seconds": 8},
    }

    def prometheus(**kw: Any) -> dict[str, Any]:
        return {
            "analysis": {
                **kw,
                "inconclusive": "ignore",
                "prometheus": {"url": prom, "query": ERROR_RATE, "max": 0.05},
            }
        }

    healthy = [
        {"replicas": 1},
        {"pause_seconds": PAUSE_S},
        prometheus(count=HEALTHY_COUNT, interval_seconds=HEALTHY_INTERVAL),
        {"replicas": "50%"},
    ]
    failing = [
        {"replicas": 1},
        {"pause_seconds": PAUSE_S},
        prometheus(count=20, interval_seconds=args.interval, failure_limit=args.failure_limit),
    ]
    return {
        "environments": {
            "plain": {**base, "deployment": "plain"},
            "canary": {**base, "deployment": "canary", "strategy": {"steps": healthy}},
            "errors": {**base, "deployment": "errors", "strategy": {"steps": failing}},
            "inplace": {
                **base,
                "deployment": "inplace",
                "node_class": classes["full"],
                "strategy": {"steps": [{"replicas": 1}], "in_place": {"max_unavailable": 1}},
            },
        }
    }


def setup(args: argparse.Namespace) -> World:
    lab = Lab(LabConfig(dir=Path(args.reuse or args.lab_dir)))
    if not args.reuse:
        lab.up(["registry", "builder", "kube", "apps", "prometheus"])
    kube_facts, reg_facts = lab.facts("kube"), lab.facts("registry")
    kubeconfig = Path(kube_facts["kubeconfig"])
    kubectl = Path(kube_facts["bin_dir"]) / "kubectl"
    api = labkube.api_client(kubeconfig)
    run = f"{int(time.time())}"
    classes = {"ok": f"bench-ok-{run}", "full": f"bench-full-{run}"}
    nodes = [
        replace(
            labkube.gpu_node(
                f"{cls}-{i}",
                "h800",
                "550.90.07",
                gpus=8 if key == "ok" else 4,
                labels={"accelerator": cls},
            ),
            memory="64Gi",
        )
        for key, cls in classes.items()
        for i in range(2)
    ]
    labkube.create_gpu_nodes(api, nodes)
    registry = str(reg_facts["url"])
    base = str(lab.facts("builder")["base_image"])
    digests = {tag: build(lab, registry, base, tag) for tag in TAGS}
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    ns = f"bench-{run}"
    core.create_namespace({"metadata": {"name": ns}})
    while not [
        s for s in core.list_namespaced_service_account(ns).items if s.metadata.name == "default"
    ]:
        time.sleep(0.2)
    w = World(lab, kubeconfig, kubectl, registry, digests, Path(), api, ns)
    first = w.image("a")
    for name, cls, replicas in (
        ("plain", classes["ok"], 2),
        ("canary", classes["ok"], 2),
        ("errors", classes["ok"], 2),
        ("inplace", classes["full"], 4),
        ("byhand", classes["full"], 4),  # the in-place baseline: kubectl, by hand
    ):
        apps.create_namespaced_deployment(ns, deployment(name, first, cls, replicas))
    for name in ("plain", "canary", "errors", "inplace", "byhand"):
        code, _, out, err = sh(
            kubectl_argv(w, "rollout", "status", f"deployment/{name}", "--timeout=180s")
        )
        if code:
            sys.exit(f"deployment {ns}/{name} did not roll out: {out}{err}")
    prom = str(lab.facts("prometheus")["url"])
    w.config = Path(args.reuse or args.lab_dir) / "bench-progressive.yaml"
    w.config.write_text(yaml.safe_dump(environments(ns, registry, prom, classes, args)))
    return w


def kubectl_argv(w: World, *args: str) -> list[str]:
    return [str(w.kubectl), "--kubeconfig", str(w.kubeconfig), "-n", w.namespace, *args]


def gpuops(w: World, env: str, tag: str) -> list[str]:
    return [
        str(VENV_BIN / "gpuops"),
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


def said(stderr: str) -> list[tuple[float, str]]:
    """The progress lines as (seconds since the run's start, text)."""
    out = []
    for line in stderr.splitlines():
        m = _OFFSET.search(line)
        if m:
            out.append((float(m.group(1)), m.group(2)))
    return out


def healthy(w: World, rounds: int) -> None:
    w.rows["plain release (no strategy)"], w.rows["canary release (healthy)"] = [], []
    for i in range(rounds + 1):  # round 0 warms caches and is not counted
        tag = "b" if i % 2 == 0 else "a"
        c1, plain, _, e1 = sh(gpuops(w, "plain", tag))
        c2, canary, _, e2 = sh(gpuops(w, "canary", tag))
        if c1 or c2:
            sys.exit(f"a healthy round failed:\n{e1}\n{e2}")
        if i:
            w.rows["plain release (no strategy)"].append(plain)
            w.rows["canary release (healthy)"].append(canary)
            lines = said(e2)
            w.details.setdefault("canary_measurements", []).append(
                sum(1 for _, t in lines if re.search(r"\(prometheus\) measurement \d+:", t))
            )


def failing(w: World, rounds: int) -> None:
    w.rows["failing analysis: its start to rolled back"] = []
    w.rows["failing analysis: its start to the process's exit"] = []
    for _ in range(rounds):
        code, seconds, _, err = sh(gpuops(w, "errors", "c-labfault-errors"))
        lines = said(err)
        start = next((at for at, text in lines if text.startswith("step 3/3 analysis:")), None)
        back = next((at for at, text in lines if text.startswith("rolled back:")), None)
        if code != 1 or start is None or back is None:
            sys.exit(f"expected a failed analysis, rolled back (exit 1): {code}\n{err}")
        # the process's own clock: from the step's line to its "rolled back" line; and to the
        # process's exit (the lock given back, the result written, the interpreter gone)
        w.rows["failing analysis: its start to rolled back"].append(back - start)
        w.rows["failing analysis: its start to the process's exit"].append(seconds - start)
        w.details.setdefault("failing", []).append(
            {
                "exit": code,
                "process_s": round(seconds, 2),
                "analysis_started_at_s": start,
                "failed": sum(
                    1 for _, t in lines if re.search(r"\(prometheus\) measurement \d+: failed", t)
                ),
            }
        )


class Watcher:
    """The pods of one Deployment on the API's watch events (not polling): the most of its
    ``replicas`` not Ready at any moment (a pod being deleted is not Ready)."""

    def __init__(self, api: Any, namespace: str, app: str, replicas: int) -> None:
        self.core = client.CoreV1Api(api)
        self.namespace, self.app, self.replicas = namespace, app, replicas
        self.ready: dict[str, bool] = {}
        self.worst = 0
        self.events = 0
        self._stop = threading.Event()
        self._listed = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watcher:
        self._thread.start()
        if not self._listed.wait(30):
            sys.exit("the watcher could not list the pods")
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _see(self, pod: Any, deleted: bool = False) -> None:
        gone = deleted or pod.metadata.deletion_timestamp is not None
        conditions = {c.type: c.status for c in (pod.status.conditions or [])}
        self.ready[pod.metadata.name] = not gone and conditions.get("Ready") == "True"

    def _run(self) -> None:
        selector = f"app={self.app}"
        listed = self.core.list_namespaced_pod(self.namespace, label_selector=selector)
        for pod in listed.items:
            self._see(pod)
        self.worst = self.replicas - sum(self.ready.values())
        self._listed.set()
        w = watch.Watch()
        try:
            for ev in w.stream(
                self.core.list_namespaced_pod,
                self.namespace,
                label_selector=selector,
                resource_version=listed.metadata.resource_version,
                timeout_seconds=600,
            ):
                self._see(ev["object"], ev["type"] == "DELETED")
                self.events += 1
                self.worst = max(self.worst, self.replicas - sum(self.ready.values()))
                if self._stop.is_set():
                    w.stop()
                    return
        except Exception:  # the lab went down after the row was measured
            if not self._stop.is_set():
                raise


def settle(w: World, name: str) -> None:
    code, _, out, err = sh(
        kubectl_argv(w, "rollout", "status", f"deployment/{name}", "--timeout=300s")
    )
    if code:
        sys.exit(f"{name} did not settle: {out}{err}")
    time.sleep(1.0)  # the last Ready events reach the watcher


def in_place(w: World, rounds: int) -> None:
    w.rows["gpuops in place (0 free GPUs)"], w.rows["kubectl by hand in place"] = [], []
    w.details["in_place"] = []
    sh(
        kubectl_argv(
            w,
            "patch",
            "deployment/byhand",
            "-p",
            json.dumps(
                {"spec": {"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}}}
            ),
        )
    )
    for i in range(rounds):
        tag = "b" if i % 2 == 0 else "a"
        with Watcher(w.api, w.namespace, "inplace", 4) as ours:
            code, seconds, _, err = sh(gpuops(w, "inplace", tag))
            settle(w, "inplace")
        if code:
            sys.exit(f"the in-place release failed:\n{err}")
        with Watcher(w.api, w.namespace, "byhand", 4) as theirs:
            t0 = time.monotonic()
            sh(kubectl_argv(w, "set", "image", "deployment/byhand", f"app={w.image(tag)}"))
            c2, _, out, e2 = sh(
                kubectl_argv(w, "rollout", "status", "deployment/byhand", "--timeout=300s")
            )
            by_hand = time.monotonic() - t0
            settle(w, "byhand")
        if c2:
            sys.exit(f"kubectl's in-place rollout failed: {out}{e2}")
        w.rows["gpuops in place (0 free GPUs)"].append(seconds)
        w.rows["kubectl by hand in place"].append(by_hand)
        w.details["in_place"].append(
            {
                "gpuops_worst_down": ours.worst,
                "gpuops_events": ours.events,
                "kubectl_worst_down": theirs.worst,
                "kubectl_events": theirs.events,
            }
        )


def report(w: World, args: argparse.Namespace) -> dict[str, Any]:
    med = {k: statistics.median(v) for k, v in w.rows.items()}
    print(f"\nload average: {os.getloadavg()}  (2 cores; compare rows of one run)")
    print(f"{'row':<46} {'median s':>9} {'min s':>8} {'max s':>8} {'n':>3}")
    for k, v in w.rows.items():
        print(f"{k:<46} {statistics.median(v):>9.2f} {min(v):>8.2f} {max(v):>8.2f} {len(v):>3}")
    bound = args.interval * args.failure_limit + 15
    worst_fail = max(w.rows["failing analysis: its start to rolled back"])
    worst_exit = max(w.rows["failing analysis: its start to the process's exit"])
    print(
        f"\nfailing analysis: rolled back {worst_fail:.1f} s after the analysis began, the "
        f"process gone after {worst_exit:.1f} s (worst of "
        f"{len(w.rows['failing analysis: its start to rolled back'])}); bound interval x failure "
        f"limit + 15 = {bound} s: ratio {worst_fail / bound:.2f} ({worst_exit / bound:.2f} to "
        f"the exit) ({'MET' if worst_exit <= bound else 'MISSED'})"
    )
    overhead = med["canary release (healthy)"] - med["plain release (no strategy)"] - CONFIGURED_S
    print(
        f"healthy canary: {med['canary release (healthy)']:.2f} s vs plain "
        f"{med['plain release (no strategy)']:.2f} s, configured waits {CONFIGURED_S} s: "
        f"overhead {overhead:+.2f} s (target <= 3 s: {'MET' if overhead <= 3 else 'MISSED'})"
    )
    worst = max(d["gpuops_worst_down"] for d in w.details["in_place"])
    ratio = med["gpuops in place (0 free GPUs)"] / med["kubectl by hand in place"]
    print(
        f"in place, 4 replicas on 0 free GPUs: at most {worst} replica(s) unavailable at any "
        f"moment as the watcher saw it (target <= 1: {'MET' if worst <= 1 else 'MISSED'}); "
        f"{ratio:.2f}x the time of kubectl by hand"
    )
    return {
        "rows": w.rows,
        "medians": med,
        "failing_bound_s": bound,
        "failing_worst_s": worst_fail,
        "failing_worst_to_exit_s": worst_exit,
        "healthy_overhead_s": overhead,
        "configured_waits_s": CONFIGURED_S,
        "in_place_worst_down": worst,
        "in_place_ratio_to_kubectl": ratio,
        "details": w.details,
        "load": os.getloadavg(),
        "interval_s": args.interval,
        "failure_limit": args.failure_limit,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(  # a folder the lab makes itself (it refuses one it did not mark)
        "--lab-dir", default=str(Path(tempfile.mkdtemp(prefix="gob-prog-", dir="/tmp")) / "lab")
    )
    parser.add_argument(
        "--reuse", help="a running lab directory (registry, builder, kube, apps, prometheus)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--interval", type=int, default=2, help="the failing analysis' interval")
    parser.add_argument("--failure-limit", type=int, default=2)
    parser.add_argument("--json-out")
    parser.add_argument("--keep", action="store_true", help="leave the lab it started running")
    args = parser.parse_args()
    w = setup(args)
    try:
        failing(w, args.repeat)
        healthy(w, args.repeat)
        in_place(w, args.repeat)
        doc = report(w, args)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(doc, indent=2))
    finally:
        if not args.reuse and not args.keep:
            w.lab.down()


if __name__ == "__main__":
    main()
