#!/usr/bin/env python3
"""Benchmark ``gpuops nodes inspect`` and time a rolling driver update (issue 9, Performance).

A benchmark, not a test: it prints numbers and whether the targets were met in this run.

Part 1, inspect: a lab fleet of ``--hosts`` SSH GPU nodes (default 50) whose ``nvidia-smi``
takes ``--latency-ms`` (default 300) per call, cold connections every round, rows timed
round-robin in the same run (medians of ``--repeat`` rounds after one warm-up round):

  stock    the same inspection as a playbook (playbooks/gpu_inspect.yml) with Ansible's stock
           settings: forks 5, no pipelining, ControlPersist 60s (ansible's default ssh_args)
  tuned    the same playbook with forks = hosts and pipelining (the shipped ansible.cfg's way)
  gpuops   gpuops nodes inspect (one ssh session per host, the script on stdin, no Python on
           the node), parallel = hosts
  floor    parallel raw ssh: one `ssh host sh -s < gpu-inspect.sh` per host, all at once, with
           the lab's cheap key exchange (curve25519-sha256): the same work with nothing around

Controller CPU per host is the user+system time of the row's processes on this machine (the
ssh clients included) over the host count; the nodes' own CPU is not in it (on real hosts it
is not the controller's). Targets: stock / gpuops wall >= 4, gpuops CPU per host <= 1/5 of
stock's, gpuops / floor wall <= 2.

Part 2, update (``--update``): the same size of fleet plus the lab's Kubernetes (hosts are
kwok nodes), every group's driver changed, ``gpuops nodes update --canary N --batch-size N``
so that it runs in 5 batches; the result's timings say where the time goes (pre-flight, plan,
per batch Kubernetes / Ansible, per task across hosts: download, install, reboot, verify).

  .venv/bin/python bench/nodes_bench.py                 # inspect, 50 hosts
  .venv/bin/python bench/nodes_bench.py --update        # and the rolling update
  .venv/bin/python bench/nodes_bench.py --hosts 20 --repeat 3

The lab is started in ``--lab-dir`` (default a fresh /tmp/gnb-<pid>: a lab folder is never
reused unless it is one) and taken down at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SCRIPT = ROOT / "ansible" / "roles" / "gpu_inspect" / "files" / "gpu-inspect.sh"
PLAYBOOK = ROOT / "ansible" / "playbooks" / "gpu_inspect.yml"


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(fn: Callable[[], None]) -> tuple[float, float]:
    c0, t0 = cpu(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, cpu() - c0


def ansible_cfg(folder: Path, forks: int, pipelining: bool) -> Path:
    """A config with Ansible's stock connection settings except forks/pipelining (the lab's
    inventory pins ControlPath into the lab; its masters are closed after every row)."""
    cfg = folder / f"ansible-{forks}-{pipelining}.cfg"
    cfg.write_text(
        "[defaults]\n"
        f"roles_path = {ROOT / 'ansible' / 'roles'}\n"
        f"forks = {forks}\n"
        "host_key_checking = False\n"
        "retry_files_enabled = False\n"
        f"local_tmp = {folder / 'tmp'}\n"
        "[ssh_connection]\n"
        f"pipelining = {pipelining}\n"
    )
    return cfg


def close_masters(control_dir: Path, ssh_config: str) -> None:
    """End the ControlPersist masters this round started (their sockets are in our folder)."""
    for sock in control_dir.glob("*"):
        subprocess.run(
            ["ssh", "-F", ssh_config, "-o", f"ControlPath={sock}", "-O", "exit", "x"],
            capture_output=True,
            timeout=10,
            check=False,
        )


def playbook_row(inventory: str, folder: Path, forks: int, pipelining: bool) -> Callable[[], None]:
    cfg = ansible_cfg(folder, forks, pipelining)

    def run() -> None:
        env = {**os.environ, "ANSIBLE_CONFIG": str(cfg), "ANSIBLE_NOCOLOR": "1"}
        done = subprocess.run(
            [
                str(BIN / "ansible-playbook"),
                str(PLAYBOOK),
                "-i",
                inventory,
                "-e",
                f"gpu_inspect_report={folder / 'report.json'}",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"playbook failed:\n{done.stdout[-3000:]}")

    return run


def gpuops_row(inventory: str, hosts: int, folder: Path) -> Callable[[], None]:
    def run() -> None:
        done = subprocess.run(
            [
                str(BIN / "gpuops"),
                "--output",
                "json",
                "nodes",
                "inspect",
                "-i",
                inventory,
                "--parallel",
                str(hosts),
            ],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
            cwd=folder,
        )
        if done.returncode not in (0, 3):  # 3: the lab's faulty card is critical
            raise SystemExit(f"gpuops failed ({done.returncode}):\n{done.stderr[-3000:]}")

    return run


def floor_row(names: list[str], ssh_config: str) -> Callable[[], None]:
    script = SCRIPT.read_bytes()

    def run() -> None:
        procs = []
        for name in names:
            p = subprocess.Popen(
                ["ssh", "-F", ssh_config, name, "sh -s -- 60 / /var"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            procs.append(p)
        for p in procs:
            assert p.stdin is not None
            p.stdin.write(script)
            p.stdin.close()
        codes = [p.wait(timeout=300) for p in procs]
        if any(codes):
            raise SystemExit(f"raw ssh failed: {codes}")

    return run


def inspect_bench(lab: Any, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    from gpuops_lab import hoststate

    facts = lab.facts("fleet")
    names = [h["name"] for h in facts["hosts"]]
    for name in names:
        hoststate.set_gpu_state(lab, name, latency_ms=args.latency_ms)
    inv, ssh_config = facts["inventory"], facts["ssh_config"]
    control = Path(facts["dir"]) / "cp"
    rows: dict[str, Callable[[], None]] = {
        "stock": playbook_row(inv, folder, 5, False),
        "tuned": playbook_row(inv, folder, len(names), True),
        "gpuops": gpuops_row(inv, len(names), folder),
        "floor": floor_row(names, ssh_config),
    }
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in rows}
    for round_ in range(args.repeat + 1):
        for key, fn in rows.items():
            close_masters(control, ssh_config)  # every row starts with cold connections
            wall, used = timed(fn)
            close_masters(control, ssh_config)
            if round_:
                times[key].append((wall, used))
            print(f"  round {round_} {key:7s} {wall:6.2f} s wall {used:6.2f} s cpu", flush=True)
    n = len(names)
    med = {
        k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v) / n)
        for k, v in times.items()
    }
    print(
        f"\ninspect: {n} hosts, nvidia-smi {args.latency_ms} ms per call, cold connections, "
        f"{args.repeat} rounds (medians), load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'row':8s} {'wall s':>8s} {'x gpuops':>9s} {'x floor':>8s} {'cpu ms/host':>12s}")
    for k, (wall, cpu_host) in med.items():
        print(
            f"{k:8s} {wall:8.2f} {wall / med['gpuops'][0]:9.2f} {wall / med['floor'][0]:8.2f} "
            f"{cpu_host * 1000:12.1f}"
        )
    speedup = med["stock"][0] / med["gpuops"][0]
    cpu_ratio = med["gpuops"][1] / med["stock"][1]
    floor_ratio = med["gpuops"][0] / med["floor"][0]
    print(
        f"\nstock / gpuops wall = {speedup:.2f} (target >= 4: "
        f"{'met' if speedup >= 4 else 'NOT met'})"
    )
    print(
        f"gpuops / stock CPU per host = {cpu_ratio:.3f} (target <= 0.2: "
        f"{'met' if cpu_ratio <= 0.2 else 'NOT met'})"
    )
    print(
        f"gpuops / floor wall = {floor_ratio:.2f} (target <= 2: "
        f"{'met' if floor_ratio <= 2 else 'NOT met'})"
    )
    return {
        "hosts": n,
        "latency_ms": args.latency_ms,
        "medians": med,
        "speedup": speedup,
        "cpu_ratio": cpu_ratio,
        "floor_ratio": floor_ratio,
    }


#: Part 2's two passes, each a real driver change on every host: gpuops moves each group up,
#: the floor moves it back to the lab's own versions (gpuops_lab.spec).
UP = {"gpu_a100": ("550.90.07", "12.4"), "gpu_h800": ("570.133.20", "12.8"),
      "gpu_l40s": ("570.133.20", "12.8")}  # fmt: skip
BACK = {"gpu_a100": ("535.161.08", "12.2"), "gpu_h800": ("550.90.07", "12.4"),
        "gpu_l40s": ("550.90.07", "12.4")}  # fmt: skip


def set_drivers(inv_dir: Path, wanted: dict[str, tuple[str, str]]) -> None:
    for group, (version, cuda) in wanted.items():
        path = inv_dir / "group_vars" / f"{group}.yml"
        text = "".join(
            f'gpu_nodes_driver_version: "{version}"\n'
            if line.startswith("gpu_nodes_driver_v")
            else f'gpu_nodes_cuda_version: "{cuda}"\n'
            if line.startswith("gpu_nodes_cuda_v")
            else line + "\n"
            for line in path.read_text().splitlines()
        )
        path.write_text(text)


def window_now(hours: int = 6) -> str:
    """A daily window (UTC) open now and for ``hours`` more: the gate checks every batch."""
    now = time.gmtime()
    start = f"{(now.tm_hour - 1) % 24:02d}:00"
    end = f"{(now.tm_hour + hours) % 24:02d}:00"
    return f"daily {start}-{end} UTC"


def update_bench(lab: Any, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """gpuops nodes update with a window and the disruption budget, then the floor: the same
    batches as bare ansible-playbook runs of the same playbook (no plan, no Kubernetes, no
    gates, no records), the same forks."""
    facts = lab.facts("fleet")
    n = len(facts["hosts"])
    inv_dir = folder / "inventory"
    shutil.copytree(Path(facts["inventory"]).parent, inv_dir)
    size = max(1, n // 5)
    floor_out: dict[str, Any] | None = None
    if args.floor_first:  # the floor moves every group up, then gpuops moves it back
        from gpuops.adapters.ansible.inventory import load_inventory
        from gpuops.core.rollout import rollout_order

        # gpuops's batches: its rollout order of the inventory's hosts, in batches of size
        names = rollout_order(load_inventory(str(inv_dir / "hosts.yml")).names())
        planned = [names[i : i + size] for i in range(0, n, size)]
        floor_out = update_floor(inv_dir, planned, UP)
        set_drivers(inv_dir, BACK)
    else:  # gpuops moves every group up, then the floor moves it back
        set_drivers(inv_dir, UP)
    window = window_now()
    env = {**os.environ, "KUBECONFIG": lab.facts("kube")["kubeconfig"]}
    argv = [
        str(BIN / "gpuops"), "--output", "json", "--error-file", str(folder / "update-error.json"),
        "nodes", "update", "-i", str(inv_dir / "hosts.yml"), "--change", "driver",
        "--canary", str(size), "--batch-size", str(size), "--parallel", str(size),
        "--artifacts-dir", str(folder / "update"),
    ]  # fmt: skip
    if args.gates:
        argv += ["--window", window, "--batch-estimate", "5m",
                 "--budget-max-unavailable", str(size)]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=7200, check=False)
    wall = time.perf_counter() - started
    if done.returncode == 0:
        doc = json.loads(done.stdout)
    else:  # the error document (with what the rollout did) is in the error file
        doc = json.loads((folder / "update-error.json").read_text())
        print(f"\nupdate failed: {doc['error']['message']}")
    result = doc["result"]
    gates = f"window {window!r}, budget {size} per class" if args.gates else "no gates"
    print(
        f"\nupdate: {n} hosts in {len(result['batches'])} batches of {size} ({gates}): "
        f"exit {done.returncode}, {wall:.1f} s wall; changed {len(result['changed'])}, "
        f"failed {len(result['failed'])}"
    )
    per_task = print_where(result)
    t = result["timings_s"]
    out: dict[str, Any] = {
        "hosts": n,
        "wall_s": wall,
        "rc": done.returncode,
        "gates": gates,
        "timings": t,
        "batches": [b["phases_s"] | {"elapsed_s": b["elapsed_s"]} for b in result["batches"]],
        "tasks": {k: statistics.mean(v) for k, v in per_task.items()},
    }
    ran = [b["hosts"] for b in result["batches"]]
    if floor_out is not None and floor_out["batches"] != ran:
        raise SystemExit(f"gpuops's batches {ran} are not the floor's: no ratio")
    if done.returncode != 0:
        return out  # no ratio for a failed update
    if floor_out is None and not args.no_floor:
        floor_out = update_floor(inv_dir, ran, BACK)
    if floor_out is not None:
        out["floor"] = floor_out
        floor = out["floor"]["wall_s"]
        batches = sum(b["elapsed_s"] for b in result["batches"])
        print(
            f"\nupdate floor (ansible-playbook per batch, same batches, forks {size}): "
            f"{floor:.1f} s wall"
        )
        print(
            f"gpuops / floor wall = {wall / floor:.2f} (gpuops {wall:.1f} s, floor {floor:.1f} s)"
        )
        print(
            f"gpuops batches / floor = {batches / floor:.2f} (the batches alone: "
            f"{batches:.1f} s; the rest is pre-flight, plan and records)"
        )
        out["x_floor"] = wall / floor
    return out


def print_where(result: dict[str, Any]) -> dict[str, list[float]]:
    """Where the update's time went, from its result: pre-flight, plan, each batch's phases,
    the slowest tasks (mean seconds per host); the tasks' seconds per host."""
    t = result["timings_s"]
    print(f"  pre-flight {t['preflight']:.1f} s, plan {t['plan']:.1f} s")
    for b in result["batches"]:
        p = b["phases_s"]
        budget = b.get("budget") or {}
        print(
            f"  {b['kind']} {b['index']}: {b['elapsed_s']:.1f} s (gates admit "
            f"{p.get('gates_admit', 0):.2f} [budget waited {budget.get('waited_s', 0):.1f}], "
            f"kubernetes before {p.get('kubernetes_before', 0):.1f}, ansible "
            f"{p.get('ansible', 0):.1f}, kubernetes after {p.get('kubernetes_after', 0):.1f}, "
            f"gates done {p.get('gates_done', 0):.2f})"
        )
    per_task: dict[str, list[float]] = {}
    for h in result["hosts"]:
        for task, sec in h["slowest_tasks_s"].items():
            per_task.setdefault(task, []).append(sec)
    print("  slowest tasks (mean seconds per host):")
    for task, secs in sorted(per_task.items(), key=lambda kv: -statistics.mean(kv[1]))[:6]:
        print(f"    {statistics.mean(secs):6.1f}  {task}")
    return per_task


def update_floor(
    inv_dir: Path, batches: list[list[str]], wanted: dict[str, tuple[str, str]]
) -> dict[str, Any]:
    """The same change's work with nothing around it: each batch's hosts given to
    ansible-playbook (the shipped ansible.cfg, forks = batch size), one batch after another,
    moving every group to ``wanted``."""
    set_drivers(inv_dir, wanted)
    walls = []
    started = time.perf_counter()
    for hosts in batches:
        env = {
            **os.environ,
            "ANSIBLE_CONFIG": str(ROOT / "ansible" / "ansible.cfg"),
            "ANSIBLE_FORKS": str(len(hosts)),
            "ANSIBLE_HOST_KEY_CHECKING": "False",
            "ANSIBLE_NOCOLOR": "1",
        }
        t0 = time.perf_counter()
        done = subprocess.run(
            [
                str(BIN / "ansible-playbook"),
                str(ROOT / "ansible" / "playbooks" / "update_gpu_nodes.yml"),
                "-i",
                str(inv_dir / "hosts.yml"),
                "--limit",
                ",".join(hosts),
                "-e",
                json.dumps({"update_gpu_nodes_roles": ["nvidia_driver"]}),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT / "ansible",
            timeout=3600,
            check=False,
        )
        walls.append(time.perf_counter() - t0)
        if done.returncode != 0:
            raise SystemExit(f"floor playbook failed:\n{done.stdout[-3000:]}")
        # the same work as gpuops did: every host of the batch changed (its PLAY RECAP line)
        recap = dict(re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", done.stdout, re.M))
        if sorted(h for h, c in recap.items() if int(c)) != sorted(hosts):
            raise SystemExit(f"floor batch {hosts}: changed per host {recap}")
        print(f"  floor batch of {len(hosts)}: {walls[-1]:.1f} s", flush=True)
    return {
        "wall_s": time.perf_counter() - started,
        "batches_s": walls,
        "batches": batches,
        "to": wanted,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--latency-ms", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--update", action="store_true", help="also time a rolling driver update")
    ap.add_argument(
        "--no-gates", dest="gates", action="store_false",
        help="the update without --window and the disruption budget (issue 9's row)",
    )  # fmt: skip
    ap.add_argument("--no-floor", action="store_true", help="skip the update's floor pass")
    ap.add_argument("--no-inspect", action="store_true", help="skip part 1 (with --update)")
    ap.add_argument(
        "--floor-first", action="store_true",
        help="the floor first (every group up), then gpuops (back): the other direction",
    )  # fmt: skip
    ap.add_argument("--lab-dir", default=f"/tmp/gnb-{os.getpid()}")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    if args.floor_first and args.no_floor:
        ap.error("--floor-first runs the floor first: not with --no-floor")
    from gpuops_lab import Lab, LabConfig

    lab = Lab(LabConfig(dir=Path(args.lab_dir), hosts=args.hosts))
    folder = Path(tempfile.mkdtemp(prefix="gpuops-nodes-bench-"))
    out: dict[str, Any] = {}
    try:
        lab.up(["fleet", "kube"] if args.update else ["fleet"])
        # gpuops checks host keys: the lab's, as a Jenkins step binds them
        os.environ["GPUOPS_KNOWN_HOSTS"] = lab.facts("fleet")["known_hosts"]
        if not args.no_inspect:
            out["inspect"] = inspect_bench(lab, args, folder)
        if args.update:
            out["update"] = update_bench(lab, args, folder)
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
