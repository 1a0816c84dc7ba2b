#!/usr/bin/env python3
"""The plan of ``gpuops nodes update`` against the update (issue 19, Performance): its seconds
and its share of a rolling update, A/B between trees in the same run.

A benchmark, not a test: it prints numbers and whether the targets were met in this run.

A lab fleet of ``--hosts`` SSH GPU nodes (default 50) with every group's driver changed (as
``nodes_bench.py --update``). Rows, round-robin in the same run, ``--repeat`` rounds (no
warm-up round: each plan starts on warm ssh masters after the pre-flight):

  plan@NAME   ``gpuops nodes update --check --no-kube --change driver --parallel N`` with the
              gpuops (and the Ansible content it ships) of ``--tree NAME=DIR``: DIR holds
              ``python/src`` and ``ansible`` (e.g. this checkout, and the commit before a
              change, ``git archive COMMIT python/src ansible``: the plan by check mode);
              without ``--tree``, the checkout itself as ``plan@this``
  plan+init@NAME  with ``--default-change``: the same with the default ``--change``
              (node_init too, which the plan runs in check mode) for the first tree

Per plan: its seconds (the result's ``timings_s.plan``), the controller CPU of the whole
command (user+system of gpuops, ansible-playbook, its workers and the ssh clients; in the lab
the nodes' Python runs on the same cores and is not in it), the task results per host that
were not skipped (each a module run or a local action; 0 when no playbook ran in the plan),
the hosts planned, the load average before and after.

With ``--update``: then one rolling update with the first tree (the lab's Kubernetes too;
``--canary N --batch-size N`` in 5 batches), its breakdown (pre-flight, plan, per batch
Kubernetes before / Ansible / Kubernetes after, slowest tasks) and the plan's share of it;
for every other tree the share its plan median would have had in that update (its plan in
place of the update's own: "computed"). Targets: plan <= 10 % of the update, <= 60 s.

  .venv/bin/python bench/nodes_plan_bench.py --tree new=. --tree old=/tmp/t/old \
      --repeat 2 --default-change --update --json-out bench/results/X.json | tee bench/results/X.log
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
WANTED = {
    "gpu_a100": ("550.90.07", "12.4"),
    "gpu_h800": ("570.133.20", "12.8"),
    "gpu_l40s": ("570.133.20", "12.8"),
}


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def load() -> float:
    return os.getloadavg()[0]


def inventory(lab: Any, folder: Path, validation: str | None) -> Path:
    """The lab's inventory with every group's driver changed (and the validation, if given)."""
    facts = lab.facts("fleet")
    inv_dir = folder / "inventory"
    shutil.copytree(Path(facts["inventory"]).parent, inv_dir)
    for group, (version, cuda) in WANTED.items():
        path = inv_dir / "group_vars" / f"{group}.yml"
        lines = path.read_text().splitlines()
        out = [
            f'gpu_nodes_driver_version: "{version}"'
            if line.startswith("gpu_nodes_driver_v")
            else f'gpu_nodes_cuda_version: "{cuda}"'
            if line.startswith("gpu_nodes_cuda_v")
            else line
            for line in lines
        ]
        path.write_text("\n".join(out) + "\n")
    if validation:
        with (inv_dir / "group_vars" / "gpu_nodes.yml").open("a") as f:
            f.write(f"gpu_nodes_validation: {validation}\n")
    return inv_dir / "hosts.yml"


def gpuops(tree: Path | None, argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    if tree is not None:
        env = {**env, "PYTHONPATH": str(tree / "python" / "src")}
    return subprocess.Popen(
        [str(BIN / "gpuops"), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def plan_events(artifacts: str | None) -> dict[str, Any]:
    """Task results per host that were not skipped, from the plan's ansible-runner events
    (none when the plan ran no playbook)."""
    done: Counter[str] = Counter()
    for name in (Path(artifacts) / "job_events").glob("*.json") if artifacts else ():
        event = json.loads(name.read_text())
        kind = event.get("event", "")
        if kind in ("runner_on_ok", "runner_on_failed", "runner_item_on_ok"):
            done[str(event.get("event_data", {}).get("host"))] += 1
    return {"results_per_host": statistics.mean(done.values()) if done else 0.0}


def plan_row(
    tree: Path | None,
    inv: Path,
    size: int,
    folder: Path,
    env: dict[str, str],
    change: tuple[str, ...] = ("--change", "driver"),
) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix="plan-", dir=folder))
    argv = ["--output", "json", "nodes", "update", "-i", str(inv), *change]
    argv += ["--canary", str(size), "--batch-size", str(size), "--parallel", str(size)]
    argv += ["--no-kube", "--check", "--artifacts-dir", str(out)]
    l0, c0, t0 = load(), cpu(), time.perf_counter()
    proc = gpuops(tree, argv, env)
    stdout, stderr = proc.communicate(timeout=3600)
    wall, used = time.perf_counter() - t0, cpu() - c0
    if proc.returncode != 0:
        raise SystemExit(f"plan failed ({proc.returncode}):\n{stderr[-3000:]}")
    result = json.loads(stdout)["result"]
    planned = sum(1 for h in result["hosts"] if h["status"] == "planned")
    row = {
        "plan_s": result["timings_s"]["plan"],
        "wall_s": round(wall, 2),
        "cpu_s": round(used, 1),
        "planned_hosts": planned,
        "load": [round(l0, 1), round(load(), 1)],
        **plan_events(result["artifacts"].get("plan")),
    }
    shutil.rmtree(out, ignore_errors=True)
    return row


def task_walls(artifacts: str) -> dict[str, float]:
    """Wall seconds of each task of one playbook run (from its start to the next task's, the
    last to the run's end), from ansible-runner's events; handlers and includes count too."""
    starts: list[tuple[str, str]] = []
    end = ""
    for name in (Path(artifacts) / "job_events").glob("*.json"):
        event = json.loads(name.read_text())
        kind, when = event.get("event", ""), str(event.get("created", ""))
        if kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
            data = event.get("event_data") or {}
            role = data.get("role")
            task = str(data.get("task", ""))
            starts.append((when, f"{role} : {task}" if role else task))
        elif kind == "playbook_on_stats":
            end = when
    starts.sort()
    out: dict[str, float] = {}
    for (t0, task), (t1, _) in zip(starts, [*starts[1:], (end, "")], strict=True):
        if t1:
            sec = (datetime.fromisoformat(t1) - datetime.fromisoformat(t0)).total_seconds()
            out[task] = round(out.get(task, 0.0) + sec, 2)
    return out


def update_run(
    tree: Path | None, lab: Any, inv: Path, size: int, folder: Path, env: dict[str, str]
) -> dict[str, Any]:
    env = {**env, "KUBECONFIG": lab.facts("kube")["kubeconfig"]}
    argv = ["--output", "json", "--error-file", str(folder / "update-error.json"), "nodes"]
    argv += ["update", "-i", str(inv), "--change", "driver", "--canary", str(size)]
    argv += ["--batch-size", str(size), "--parallel", str(size)]
    argv += ["--artifacts-dir", str(folder / "update")]
    l0, t0 = load(), time.perf_counter()
    proc = gpuops(tree, argv, env)
    stdout, _ = proc.communicate(timeout=7200)
    wall = time.perf_counter() - t0
    if proc.returncode == 0:
        doc = json.loads(stdout)
    else:  # the error document (with what the rollout did) is in the error file
        doc = json.loads((folder / "update-error.json").read_text())
        print(f"\nupdate failed: {doc['error']['message']}")
    result = doc["result"]
    t = result["timings_s"]
    walls: Counter[str] = Counter()
    for b in result["batches"]:
        if (b.get("ansible") or {}).get("artifacts"):
            walls.update(task_walls(b["ansible"]["artifacts"]))
    per_task: dict[str, list[float]] = {}
    for h in result["hosts"]:
        for task, sec in h["slowest_tasks_s"].items():
            per_task.setdefault(task, []).append(sec)
    return {
        "rc": proc.returncode,
        "wall_s": round(wall, 1),
        "load": [round(l0, 1), round(load(), 1)],
        "timings": t,
        "changed": len(result["changed"]),
        "failed": len(result["failed"]),
        "batches": [
            {"kind": b["kind"], "index": b["index"], "elapsed_s": b["elapsed_s"], **b["phases_s"]}
            for b in result["batches"]
        ],
        "tasks": {k: round(statistics.mean(v), 2) for k, v in per_task.items()},
        "task_walls": {k: round(v, 1) for k, v in walls.most_common()},
    }


def report_update(
    up: dict[str, Any],
    trees: list[tuple[str, Path | None]],
    med: dict[str, float],
    hosts: int,
    size: int,
) -> dict[str, float]:
    """Print the update's breakdown and the plan's share of it (computed for the other trees)."""
    t = up["timings"]
    print(
        f"\nupdate@{trees[0][0]}: {hosts} hosts in {len(up['batches'])} batches of "
        f"{size}: exit {up['rc']}, {up['wall_s']} s wall (load {up['load'][0]}.."
        f"{up['load'][1]}); changed {up['changed']}, failed {up['failed']}"
    )
    print(f"  pre-flight {t['preflight']:.1f} s, plan {t['plan']:.1f} s")
    for b in up["batches"]:
        print(
            f"  {b['kind']} {b['index']}: {b['elapsed_s']:.1f} s (kubernetes before "
            f"{b.get('kubernetes_before', 0):.1f}, ansible {b.get('ansible', 0):.1f}, "
            f"kubernetes after {b.get('kubernetes_after', 0):.1f})"
        )
    print("  slowest tasks (mean seconds per host):")
    for task, sec in sorted(up["tasks"].items(), key=lambda kv: -kv[1])[:6]:
        print(f"    {sec:6.1f}  {task}")
    ansible_s = sum(b.get("ansible", 0) for b in up["batches"])
    walls = up["task_walls"]
    print(
        f"  where the batches' Ansible time goes ({ansible_s:.1f} s over all batches; wall "
        "seconds per task, summed over the batches):"
    )
    for task, sec in list(walls.items())[:12]:
        print(f"    {sec:6.1f}  {sec / ansible_s:5.1%}  {task}")
    rest = t["total"] - t["plan"]
    share = t["plan"] / t["total"]
    print(
        f"\nplan share of the update@{trees[0][0]}: {t['plan']:.1f} s of "
        f"{t['total']:.1f} s = {share:.1%} (target <= 10 %: {met(share <= 0.10)}; "
        f"<= 60 s: {met(t['plan'] <= 60)})"
    )
    shares = {trees[0][0]: share}
    for name in (k for k in med if k != trees[0][0]):
        other = med[name] / (rest + med[name])
        shares[name] = other
        print(
            f"  computed for plan@{name}: its median {med[name]:.1f} s in place of the "
            f"update's plan: {other:.1%}"
        )
    return shares


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--update", action="store_true", help="then one rolling update (first tree)")
    ap.add_argument(
        "--default-change",
        action="store_true",
        help="also plan with the default --change (node_init too) with the first tree",
    )
    ap.add_argument("--validation", help="gpu_nodes_validation for every group (e.g. none)")
    ap.add_argument(
        "--plan-median",
        action="append",
        default=[],
        metavar="NAME=SECONDS",
        help="a tree's plan median from an earlier run (for the computed share; --repeat 0)",
    )
    ap.add_argument("--lab-dir", default=f"/tmp/gnpb-{os.getpid()}")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    trees: list[tuple[str, Path | None]] = [
        (t.split("=", 1)[0], Path(t.split("=", 1)[1]).resolve()) for t in args.tree
    ] or [("this", None)]
    out: dict[str, Any] = {
        "hosts": args.hosts,
        "repeat": args.repeat,
        "trees": {n: str(t) for n, t in trees},
    }
    from gpuops_lab import Lab, LabConfig

    lab = Lab(LabConfig(dir=Path(args.lab_dir), hosts=args.hosts))
    folder = Path(tempfile.mkdtemp(prefix="gpuops-plan-bench-"))
    try:
        lab.up(["fleet", "kube"] if args.update else ["fleet"])
        env = {**os.environ, "GPUOPS_KNOWN_HOSTS": lab.facts("fleet")["known_hosts"]}
        inv = inventory(lab, folder, args.validation)
        size = max(1, args.hosts // 5)
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in trees}
        runs = [(name, tree, ("--change", "driver")) for name, tree in trees]
        if args.default_change:  # the default --change: node_init (check mode) and the driver
            rows["+init@" + trees[0][0]] = []
            runs.append(("+init@" + trees[0][0], trees[0][1], ()))
        for round_ in range(args.repeat):
            for name, tree, change in runs:
                row = plan_row(tree, inv, size, folder, env, change)
                rows[name].append(row)
                print(f"  round {round_} plan@{name:8s} {json.dumps(row)}", flush=True)
        med = {k: statistics.median(r["plan_s"] for r in v) for k, v in rows.items() if v}
        med.update({k: float(v) for k, v in (m.split("=", 1) for m in args.plan_median)})
        print(
            f"\nplan: {args.hosts} hosts, --parallel {size}, {args.repeat} rounds "
            "(medians), controller CPU and task results per host (not skipped) as medians"
        )
        base = trees[-1][0]
        for k, v in ((k, v) for k, v in rows.items() if v):
            print(
                f"  plan@{k:8s} {med[k]:7.1f} s  x {med[k] / med[base]:.3f} of "
                f"plan@{base}  cpu {statistics.median(r['cpu_s'] for r in v):6.1f} s  "
                f"results/host {statistics.median(r['results_per_host'] for r in v):5.1f}  "
                f"planned {v[0]['planned_hosts']}  load {v[0]['load'][0]}..{v[-1]['load'][1]}"
            )
        out["plans"], out["plan_medians_s"] = rows, med
        if args.update:
            out["update"] = up = update_run(trees[0][1], lab, inv, size, folder, env)
            out["share"] = report_update(up, trees, med, args.hosts, size)
    finally:
        try:
            lab.down()
        except Exception as exc:  # said; the first error is the one to see
            print(f"[bench] lab down in {args.lab_dir}: {exc}", file=sys.stderr)
        shutil.rmtree(folder, ignore_errors=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
