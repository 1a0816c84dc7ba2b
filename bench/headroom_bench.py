"""Benchmark: ``gpuops headroom check`` against the raw LIST floor and the common alternatives.

Brings up its own kube lab (real kube-apiserver + kwok) with ``--nodes`` synthetic GPU nodes
and ``--pods`` pods bound to them (or uses a running lab with ``--reuse DIR``), then times,
round-robin in the same run, each ``--repeat`` times:

  floor       curl of exactly the LIST queries gpuops sends (same paths, limit, fieldSelector,
              continue tokens, Accept: protobuf first), one curl process, keep-alive, bodies
              to /dev/null
  floor-json  the same LISTs asked for as JSON (for information: what kva and kubectl ask for)
  gpuops      ``gpuops --output json headroom check --gpus-per-pod 4 --pods 2`` end to end
  kubectl+py  ``kubectl get nodes,pods -A -o json | python bench/kubectl_sums.py``
  kva         ``kubectl-view-allocations -r nvidia.com/gpu -o csv`` (if installed)
  start-*     gpuops's fixed start, no cluster: ``gpuops --version`` and
              ``gpuops headroom check --help`` (the command's imports), and ``python -c pass``

and prints median / min seconds, ratios and peak RSS, the targets and whether they were met.
With ``--curve 500,2000,5000`` it grows one lab through those node counts (10 pods each) and
measures at each size: a scale curve. Run with the project's venv:

    .venv/bin/python bench/headroom_bench.py --nodes 200 --pods 2000        # quick
    .venv/bin/python bench/headroom_bench.py --json-out /tmp/headroom-bench.json  # 2000/20000
    .venv/bin/python bench/headroom_bench.py --curve 500,2000,5000 --repeat 5  # the curve
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import yaml

import gpuops
from gpuops.adapters.kube import BOUND_PODS, LIST_ACCEPT, PAGE_SIZE
from gpuops.adapters.kube import proto as kubeproto
from gpuops_lab import kube as labkube

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV_BIN = Path(sys.executable).parent
CACHE = Path(os.environ.get("GPUOPS_CACHE", Path.home() / ".cache/gpuops"))
GPU = labkube.GPU_RESOURCE
GPUS_PER_POD, PODS = 4, 2
#: The LISTs gpuops issues for ``headroom check`` (see gpuops.adapters.kube.KubeClient).
LISTS: tuple[tuple[str, dict[str, str]], ...] = (
    ("/api/v1/nodes", {}),
    ("/api/v1/pods", {"fieldSelector": BOUND_PODS}),
)
NAMESPACES = tuple(f"bench-{t}" for t in ("train", "infer", "batch", "research", "platform"))
#: GPU pod sizes and how often each occurs (inference pods are mostly small).
SIZES, SIZE_WEIGHTS = (1, 2, 4, 8), (0.45, 0.30, 0.15, 0.10)
_CONTINUE = re.compile(rb'"continue":"([^"\\]*)"')
#: Rows ``--skip`` may leave out (``start-help`` also leaves out its ``@NAME`` rows).
SKIPPABLE = (
    "kubectl+py",
    "kva",
    "floor-json",
    "floor-paged",
    "start-version",
    "start-help",
    "python -c pass",
)


def _head_token(path: str, head: bytes) -> str:
    """The continue token in the head of a LIST page, protobuf or JSON."""
    if head.startswith(kubeproto.MAGIC):
        reader = kubeproto.node_reader() if path.endswith("/nodes") else kubeproto.pod_reader()
        reader.feed(head)
        return reader.token
    end = head.find(b'"items":')
    m = _CONTINUE.search(head, 0, end if end >= 0 else len(head))
    return m.group(1).decode() if m else ""


# ------------------------------------------------------------------------------------------
# lab
# ------------------------------------------------------------------------------------------
@dataclass
class Cluster:
    lab_dir: Path
    kubeconfig: Path
    server: str
    token: str
    ca_pem: bytes
    started: bool
    setup_s: dict[str, float] = field(default_factory=dict)
    #: GPU nodes that already carry the pods of an earlier step
    filled: list[str] = field(default_factory=list)


def run_gpuops(*args: str, env: Mapping[str, str] | None = None) -> None:
    argv = [str(VENV_BIN / "gpuops"), *args]
    res = subprocess.run(argv, check=False, env={**os.environ, **(env or {})})
    if res.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed with exit {res.returncode}")


def load_cluster(lab_dir: Path, *, started: bool) -> Cluster:
    kc = lab_dir / "kubeconfig"
    if not kc.is_file():
        sys.exit(f"no kubeconfig at {kc}: is a kube lab running in {lab_dir}?")
    doc = yaml.safe_load(kc.read_text())
    cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
    return Cluster(
        lab_dir=lab_dir,
        kubeconfig=kc,
        server=cluster["server"],
        token=user["token"],
        ca_pem=base64.b64decode(cluster["certificate-authority-data"]),
        started=started,
    )


def gpu_plan(
    nodes: Sequence[tuple[str, int]], pods: int, seed: int, prefix: str = ""
) -> list[dict[str, Any]]:
    """Pod bodies: per node, GPU pods of mixed sizes filling a random share of its GPUs (some
    nodes empty, some full), then CPU-only pods (agents, exporters, services) round-robin up
    to ``pods`` in all. Names start with ``prefix`` (one per growth step of a curve)."""
    rng = random.Random(seed)
    bodies: list[dict[str, Any]] = []
    for name, alloc in nodes:
        roll = rng.random()
        target = 0 if roll < 0.15 else alloc if roll < 0.40 else rng.randint(1, alloc - 1)
        used = 0
        while used < target:
            fitting = [
                (s, w) for s, w in zip(SIZES, SIZE_WEIGHTS, strict=True) if s <= target - used
            ]
            size = rng.choices([s for s, _ in fitting], [w for _, w in fitting])[0]
            used += size
            ns = NAMESPACES[len(bodies) % len(NAMESPACES)]
            bodies.append(
                labkube.pod_body(
                    f"{prefix}gpu-{len(bodies):06d}",
                    namespace=ns,
                    node=name,
                    gpus=size,
                    labels={"app": f"gpu-{size}"},
                )
            )
    bodies = bodies[:pods]
    i = 0
    while len(bodies) < pods:
        name = nodes[i % len(nodes)][0]
        ns = NAMESPACES[i % len(NAMESPACES)]
        bodies.append(
            labkube.pod_body(f"{prefix}cpu-{i:06d}", namespace=ns, node=name, labels={"app": "cpu"})
        )
        i += 1
    return bodies


def list_json(api: Any, kind: str, **query: Any) -> list[dict[str, Any]]:
    """Every node or pod (watch cache, one page), as plain JSON."""
    from kubernetes import client as k8s

    core = k8s.CoreV1Api(api)
    fn: Any = core.list_node if kind == "nodes" else core.list_pod_for_all_namespaces
    resp = fn(resource_version="0", _preload_content=False, **query)
    items: list[dict[str, Any]] = json.loads(resp.data).get("items") or []
    return items


def ensure_namespace(core: Any, ns: str, timeout: float = 120.0) -> None:
    """Create ``ns`` unless it exists; wait for its default ServiceAccount (pods need it)."""
    from kubernetes.client.exceptions import ApiException

    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    try:
        core.create_namespace(body, _preload_content=False).release_conn()
    except ApiException as exc:
        if exc.status != 409:
            raise
    deadline = time.monotonic() + timeout
    while True:
        try:
            core.read_namespaced_service_account("default", ns, _preload_content=False)
        except ApiException:
            if time.monotonic() > deadline:
                sys.exit(f"no default ServiceAccount in namespace {ns} after {timeout:.0f} s")
            time.sleep(0.2)
        else:
            return


def populate(c: Cluster, pods: int, seed: int, concurrency: int, *, step: int = 0) -> None:
    """Bind pods until the lab has ``pods``, on the GPU nodes that an earlier step of a curve
    has not filled yet; names carry the step."""
    from kubernetes import client as k8s

    api = labkube.api_client(c.kubeconfig, pool=concurrency)
    try:
        core = k8s.CoreV1Api(api)
        nodes = sorted(
            (n["metadata"]["name"], int(n["status"]["allocatable"].get(GPU, "0")))
            for n in list_json(api, "nodes")
        )
        nodes = [(n, a) for n, a in nodes if a > 0]
        filled = set(c.filled)
        nodes = [n for n in nodes if n[0] not in filled]
        existing = len(list_json(api, "pods"))
        if existing >= pods:
            print(f"lab already has {existing} pods; not adding any")
            return
        t0 = time.monotonic()
        for ns in NAMESPACES:
            ensure_namespace(core, ns)
        prefix, suffix = (f"s{step}-", f"_s{step}") if step else ("", "")
        bodies = gpu_plan(nodes, pods - existing, seed + step, prefix)
        gpu_pods = sum(1 for b in bodies if "gpu-" in b["metadata"]["name"])
        print(f"creating {len(bodies)} pods ({gpu_pods} with GPU requests) on {len(nodes)} nodes")
        created = labkube.bulk_create_pods(api, bodies, concurrency=concurrency)
        c.setup_s[f"create_pods{suffix}"] = dt = round(time.monotonic() - t0, 1)
        print(f"created {created} pods in {dt} s; waiting for kwok")
        t1 = time.monotonic()
        deadline = t1 + 120 + pods * 0.05
        while pending := len(list_json(api, "pods", field_selector="status.phase=Pending")):
            if time.monotonic() > deadline:
                sys.exit(f"{pending} pods still Pending; see {c.lab_dir}/logs/kube-kwok.log")
            time.sleep(2)
        c.setup_s[f"pods_running{suffix}"] = round(time.monotonic() - t1, 1)
        c.filled = [n for n, _ in nodes] + list(c.filled)
    finally:
        api.close()


def grow(c: Cluster, nodes: int, pods: int, args: argparse.Namespace, step: int) -> None:
    """Add synthetic GPU nodes until the lab has ``nodes`` of them, then pods on the new
    nodes until it has ``pods`` (one step of a curve)."""
    api = labkube.api_client(c.kubeconfig, pool=args.concurrency)
    try:
        have = sum(1 for n in list_json(api, "nodes") if n["metadata"]["name"].startswith("syn-"))
        if have < nodes:
            t0 = time.monotonic()
            print(f"adding {nodes - have} kwok GPU nodes (to {nodes}); waiting until Ready")
            labkube.create_gpu_nodes(
                api,
                labkube.synthetic_nodes(nodes - have, start=have),
                timeout=120.0 + (nodes - have) * 0.25,
                concurrency=args.concurrency,
            )
            c.setup_s[f"add_nodes_s{step}"] = round(time.monotonic() - t0, 1)
    finally:
        api.close()
    populate(c, pods, args.seed, args.concurrency, step=step)


def lab_up(lab_dir: Path, nodes: int, pods: int, seed: int, concurrency: int) -> Cluster:
    if (lab_dir / "state.json").exists() or (lab_dir / "kubeconfig").exists():
        sys.exit(
            f"{lab_dir} holds a lab already: pass --reuse {lab_dir}, or run "
            f"'gpuops lab down --dir {lab_dir}' first"
        )
    env = {"GPUOPS_LAB_DIR": str(lab_dir)}
    t0 = time.monotonic()
    try:
        run_gpuops(
            "lab",
            "up",
            "--dir",
            str(lab_dir),
            "--components",
            "kube",
            "--extra-nodes",
            str(nodes),
            env=env,
        )
        c = load_cluster(lab_dir, started=True)
        c.setup_s["lab_up"] = round(time.monotonic() - t0, 1)
        populate(c, pods, seed, concurrency)
    except BaseException:
        lab_down(lab_dir)
        raise
    return c


def lab_down(lab_dir: Path) -> None:
    print(f"taking the bench lab in {lab_dir} down")
    subprocess.run(
        [str(VENV_BIN / "gpuops"), "lab", "down", "--dir", str(lab_dir)],
        check=False,
        stdout=subprocess.DEVNULL,
    )


# ------------------------------------------------------------------------------------------
# measurements
# ------------------------------------------------------------------------------------------
@dataclass
class Sample:
    seconds: float
    rss_kib: int  # peak RSS of the process (sum over the processes of a pipeline)
    note: str = ""


TIME = Path("/usr/bin/time")


def spawn(argv: Sequence[str], rss_file: Path, **kw: Any) -> subprocess.Popen[bytes]:
    """Start ``argv`` under GNU time, which writes its peak RSS (KiB) to ``rss_file``.

    ``wait4``'s ru_maxrss of a child forked from this process would include this process's
    own RSS at fork time (Linux carries the pre-exec high-water mark over an exec), so the
    peak is taken in a small forked-from-time child instead."""
    rss_file.unlink(missing_ok=True)
    if TIME.is_file():
        argv = [str(TIME), "-f", "%M", "-o", str(rss_file), *argv]
    return subprocess.Popen(argv, **kw)


def wait_child(p: subprocess.Popen[bytes], rss_file: Path) -> tuple[int, int]:
    """Reap ``p``: (exit status, peak RSS in KiB of the command, from GNU time; else wait4's,
    which may include this process's RSS)."""
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    try:
        rss = int(rss_file.read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        rss = usage.ru_maxrss
    return p.returncode, rss


class Bench:
    def __init__(self, c: Cluster, tmp: Path, kva: Path | None, kubectl: Path) -> None:
        self.c, self.tmp, self.kva, self.kubectl = c, tmp, kva, kubectl
        ca = tmp / "ca.crt"
        ca.write_bytes(c.ca_pem)
        # the bearer token goes to curl in a private config file, never on its argv
        self.curl_cfg = tmp / "curl.cfg"
        fd = os.open(self.curl_cfg, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f'header = "Authorization: Bearer {c.token}"\n')
            # the API server pretty-prints JSON for a curl user agent; gpuops gets compact JSON
            f.write('user-agent = "gpuops-bench-floor"\n')
            f.write(f'cacert = "{ca}"\nsilent\nshow-error\nfail-with-body\n')
        self.env = {**os.environ, "KUBECONFIG": str(c.kubeconfig)}
        for var in (
            "GPUOPS_PARAMS_FILE",
            "GPUOPS_RESULT_FILE",
            "GPUOPS_ERROR_FILE",
            "GPUOPS_OUTPUT",
        ):
            self.env.pop(var, None)
        self.last_gpuops: dict[str, Any] = {}
        self.last_script: dict[str, Any] = {}
        self.pages = 0
        self.bytes = 0

    def _url(self, path: str, query: Mapping[str, str], token: str, page_size: int) -> str:
        q = {**query, "limit": str(page_size)} if page_size else dict(query)  # gpuops's order
        if token:
            q["continue"] = token
        return f"{self.c.server}{path}?{urlencode(q)}" if q else f"{self.c.server}{path}"

    def walk(
        self, page_size: int = PAGE_SIZE, accept: str = LIST_ACCEPT
    ) -> tuple[list[str], Sample]:
        """Follow the continue tokens page by page (one curl per page, body to a file whose
        head gives the next token): the URLs of every page, and that walk's own time."""
        urls: list[str] = []
        body = self.tmp / "page"
        t0 = time.perf_counter()
        for path, query in LISTS:
            token = ""
            while True:
                url = self._url(path, query, token, page_size)
                urls.append(url)
                curl = ["curl", "-K", str(self.curl_cfg), "-H", f"Accept: {accept}"]
                subprocess.run([*curl, "-o", str(body), url], check=True)
                with body.open("rb") as f:
                    token = _head_token(path, f.read(1 << 16))
                if not token:
                    break
        return urls, Sample(time.perf_counter() - t0, 0, f"{len(urls)} curl processes")

    def floor(self, page_size: int = PAGE_SIZE, accept: str = LIST_ACCEPT) -> Sample:
        """The raw LISTs alone, asked for as gpuops asks (protobuf first): the pages of a
        fresh walk, fetched by one curl process over one keep-alive connection, bodies to
        /dev/null. With another ``page_size`` or ``accept`` than gpuops's, for information
        (``floor-paged``: what paging would cost the server; ``floor-json``: the same LISTs
        as JSON, as kubectl-view-allocations and gpuops before protobuf ask for them)."""
        urls, _ = self.walk(page_size, accept)
        cfg = self.tmp / "urls.cfg"
        cfg.write_text("".join(f'url = "{u}"\noutput = "/dev/null"\n' for u in urls))
        t0 = time.perf_counter()
        p = spawn(
            [
                "curl",
                "-K",
                str(self.curl_cfg),
                "-K",
                str(cfg),
                "-H",
                f"Accept: {accept}",
                "-w",
                "%{http_code} %{size_download} %{num_connects}\n",
            ],
            self.tmp / "rss.floor",
            stdout=subprocess.PIPE,
        )
        out = p.stdout.read() if p.stdout else b""
        rc, rss = wait_child(p, self.tmp / "rss.floor")
        dt = time.perf_counter() - t0
        rows = [line.split() for line in out.decode().splitlines()]
        if rc != 0 or len(rows) != len(urls) or any(r[0] != "200" for r in rows):
            sys.exit(f"floor curl failed (exit {rc}): {out.decode()[:500]}")
        size, conns = sum(int(r[1]) for r in rows), sum(int(r[2]) for r in rows)
        if page_size == PAGE_SIZE and accept == LIST_ACCEPT:
            self.pages, self.bytes = len(urls), size
        return Sample(dt, rss, f"{len(urls)} pages, {size / 2**20:.1f} MiB, {conns} conn")

    def gpuops(self, source: str | None = None) -> Sample:
        """``gpuops headroom check``; with ``source``, the gpuops package from that folder
        instead (an earlier version's ``python/src``, for an A/B row: ``--also``)."""
        out = self.tmp / "gpuops.out"
        env = {**self.env, "PYTHONPATH": source} if source else self.env
        argv = [
            *_gpuops_exe(source),
            "--output",
            "json",
            "headroom",
            "check",
            "--gpus-per-pod",
            str(GPUS_PER_POD),
            "--pods",
            str(PODS),
        ]
        with out.open("wb") as o, (self.tmp / "gpuops.err").open("wb") as e:
            t0 = time.perf_counter()
            p = spawn(argv, self.tmp / "rss.gpuops", stdout=o, stderr=e, env=env)
            rc, rss = wait_child(p, self.tmp / "rss.gpuops")
            dt = time.perf_counter() - t0
        if rc not in (0, 3):  # 3: the gate refused, still a full answer
            err = (self.tmp / "gpuops.err").read_text()[:1000]
            sys.exit(f"gpuops headroom check exited {rc}: {err}")
        doc = json.loads(out.read_text() if rc == 0 else (self.tmp / "gpuops.err").read_text())
        result = doc.get("result") or {}
        if source is None:
            self.last_gpuops = result
        return Sample(dt, rss, str(result.get("verdict", "")))

    def start(self, args: Sequence[str], source: str | None = None) -> Sample:
        """A gpuops call that contacts no cluster (``--version``, ``headroom check --help``):
        the fixed start, apart from the LISTs; ``args`` empty: ``python -c pass``."""
        env = {**self.env, "PYTHONPATH": source} if source else self.env
        argv = [*_gpuops_exe(source), *args] if args else [sys.executable, "-c", "pass"]
        t0 = time.perf_counter()
        p = spawn(argv, self.tmp / "rss.start", stdout=subprocess.DEVNULL, env=env)
        rc, rss = wait_child(p, self.tmp / "rss.start")
        dt = time.perf_counter() - t0
        if rc != 0:
            sys.exit(f"{' '.join(argv)} exited {rc}")
        return Sample(dt, rss, " ".join(argv[1:]) if args else "the interpreter alone")

    def kubectl_script(self) -> Sample:
        out = self.tmp / "script.out"
        with out.open("wb") as o:
            t0 = time.perf_counter()
            k = spawn(
                [str(self.kubectl), "get", "nodes,pods", "-A", "-o", "json"],
                self.tmp / "rss.kubectl",
                stdout=subprocess.PIPE,
                env=self.env,
            )
            s = spawn(
                [
                    sys.executable,
                    str(HERE / "kubectl_sums.py"),
                    "--gpus-per-pod",
                    f"{GPUS_PER_POD}",
                ],
                self.tmp / "rss.script",
                stdin=k.stdout,
                stdout=o,
            )
            assert k.stdout is not None
            k.stdout.close()
            rc_k, rss_k = wait_child(k, self.tmp / "rss.kubectl")
            rc_s, rss_s = wait_child(s, self.tmp / "rss.script")
            dt = time.perf_counter() - t0
        if rc_k or rc_s:
            sys.exit(f"kubectl ({rc_k}) | kubectl_sums.py ({rc_s}) failed")
        self.last_script = json.loads(out.read_text())
        return Sample(dt, rss_k + rss_s, f"kubectl {rss_k // 1024} + py {rss_s // 1024} MiB")

    def view_allocations(self) -> Sample:
        assert self.kva is not None
        out = self.tmp / "kva.out"
        with out.open("wb") as o, (self.tmp / "kva.err").open("wb") as e:
            t0 = time.perf_counter()
            rss_file = self.tmp / "rss.kva"
            p = spawn(
                [str(self.kva), "-r", GPU, "-o", "csv"], rss_file, stdout=o, stderr=e, env=self.env
            )
            rc, rss = wait_child(p, rss_file)
            dt = time.perf_counter() - t0
        if rc != 0:
            sys.exit(
                f"kubectl-view-allocations exited {rc}: {(self.tmp / 'kva.err').read_text()[:500]}"
            )
        lines = out.read_text().count("\n")
        return Sample(dt, rss, f"{lines} csv lines")


def cross_check(gpuops: Mapping[str, Any], script: Mapping[str, Any]) -> list[str]:
    """gpuops and the kubectl script must agree on the class sums (else the race is unfair)."""
    problems = []
    ours = {c["node_class"]: c for c in gpuops.get("classes") or ()}
    theirs = script.get("classes") or {}
    for cls in sorted(set(ours) | set(theirs)):
        a, b = ours.get(cls, {}), theirs.get(cls, {})
        for key in ("allocatable", "requested", "free"):
            if a.get(key) != b.get(key):
                problems.append(f"{cls} {key}: gpuops {a.get(key)} vs kubectl+py {b.get(key)}")
    return problems


# ------------------------------------------------------------------------------------------
# report
# ------------------------------------------------------------------------------------------
def summarise(samples: Mapping[str, list[Sample]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, ss in samples.items():
        if not ss:
            continue
        secs = [s.seconds for s in ss]
        out[name] = {
            "median_s": round(statistics.median(secs), 3),
            "min_s": round(min(secs), 3),
            "runs_s": [round(x, 3) for x in secs],
            "peak_rss_mib": round(max(s.rss_kib for s in ss) / 1024, 1),
            "note": ss[-1].note,
        }
    floor = out.get("floor", {}).get("median_s")
    ours = out.get("gpuops", {}).get("median_s")
    kva = out.get("kva", {}).get("median_s")
    for row in out.values():
        row["x_floor"] = round(row["median_s"] / floor, 2) if floor else None
        row["x_gpuops"] = round(row["median_s"] / ours, 2) if ours else None
        row["x_kva"] = round(row["median_s"] / kva, 2) if kva else None
    return out


def targets(
    rows: Mapping[str, Mapping[str, Any]], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """The targets (issue 8), each against a baseline measured in the same run."""
    ours = rows["gpuops"]["median_s"]
    kva = rows.get("kva", {}).get("median_s")
    return [
        {
            "target": "gpuops <= kubectl+py",
            "met": ours <= rows["kubectl+py"]["median_s"] if "kubectl+py" in rows else None,
        },
        {
            "target": f"gpuops <= {args.max_x_kva}x kubectl-view-allocations",
            "met": ours <= args.max_x_kva * kva if kva else None,
        },
        {
            "target": f"gpuops <= {args.max_x_floor}x floor",
            "met": ours <= args.max_x_floor * rows["floor"]["median_s"],
        },
        {
            "target": f"gpuops peak RSS <= {args.max_rss_mib:g} MiB",
            "met": rows["gpuops"]["peak_rss_mib"] <= args.max_rss_mib,
        },
    ]


def render(rows: Mapping[str, Mapping[str, Any]], goals: Sequence[Mapping[str, Any]]) -> str:
    head = (
        f"{'approach':<15} {'median s':>9} {'min s':>8} {'x floor':>8} {'x gpuops':>9} "
        f"{'x kva':>6} {'peak RSS MiB':>13}  note"
    )
    lines = [head, "-" * len(head)]
    for name, r in rows.items():
        lines.append(
            f"{name:<15} {r['median_s']:>9.3f} {r['min_s']:>8.3f} {r['x_floor'] or 0:>8.2f} "
            f"{r['x_gpuops'] or 0:>9.2f} {r['x_kva'] or 0:>6.2f} {r['peak_rss_mib']:>13.1f}  "
            f"{r['note']}"
        )
    lines.append("")
    for g in goals:
        mark = "skipped" if g["met"] is None else "MET" if g["met"] else "MISSED"
        lines.append(f"target {g['target']:<44} {mark}")
    return "\n".join(lines)


def find_kva(arg: str | None) -> tuple[Path | None, str]:
    cands = (
        [arg]
        if arg
        else [
            shutil.which("kubectl-view-allocations"),
            str(CACHE / "tools/bin/kubectl-view-allocations"),
        ]
    )
    for c in cands:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return Path(c), ""
    return (
        None,
        f"kubectl-view-allocations not found (looked at {', '.join(str(c) for c in cands if c)})",
    )


def kube_bin_dir() -> Path:
    out = subprocess.run(
        ["bash", str(REPO / "scripts/build-kube.sh"), "--print-bin-dir"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=2000, help="synthetic GPU nodes (default 2000)")
    ap.add_argument("--pods", type=int, default=20000, help="pods bound to them (default 20000)")
    ap.add_argument(
        "--curve",
        type=_sizes,
        metavar="N,N,...",
        help="a scale curve instead of one size: grow one lab through these node counts "
        "(with --pods-per-node pods each) and measure at each",
    )
    ap.add_argument("--pods-per-node", type=int, default=10, help="for --curve (default 10)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per approach (default 3)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    ap.add_argument("--lab-dir", type=Path, default=Path("/tmp/gpuops-bench"))
    ap.add_argument("--reuse", type=Path, metavar="DIR", help="use the kube lab running in DIR")
    ap.add_argument("--keep", action="store_true", help="leave the lab it started running")
    ap.add_argument("--kva", help="kubectl-view-allocations binary (default: PATH, tools cache)")
    ap.add_argument(
        "--paged-floor",
        type=int,
        default=500,
        metavar="N",
        help="also time the floor's LISTs in pages of N (for information; 0: not)",
    )
    ap.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=SKIPPABLE,
        help="leave this row out of the run (repeatable; e.g. for many quick rounds of floor "
        "and gpuops); its target and the cross-check are then reported as skipped",
    )
    ap.add_argument("--max-x-floor", type=float, default=1.2)
    ap.add_argument("--max-x-kva", type=float, default=0.75)
    ap.add_argument("--max-rss-mib", type=float, default=100.0)
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=16, help="parallel pod creations")
    ap.add_argument("--json-out", type=Path, help="also write the numbers as JSON here")
    ap.add_argument(
        "--also",
        type=_variant,
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="an extra row: gpuops run with the package from DIR (e.g. an earlier commit's "
        "python/src, from git archive), to measure what a change did in the same run",
    )
    args = ap.parse_args(argv)
    if args.nodes < 1 or args.pods < 0 or args.repeat < 1 or args.pods_per_node < 0:
        ap.error("--nodes and --repeat must be >= 1, --pods and --pods-per-node >= 0")
    if args.curve and args.reuse:
        ap.error("--curve grows the lab it starts; it cannot use a lab given with --reuse")
    return args


def _gpuops_exe(source: str | None) -> list[str]:
    """The venv's ``gpuops``; for a ``--also`` tree, that tree's entry as its ``gpuops``
    executable ran it (``gpuops.cli.start:main`` in the trees of the fetch-ahead experiment
    of issue 17, ``gpuops.cli.main:main`` in every other)."""
    if source:
        entry = "start" if (Path(source) / "gpuops" / "cli" / "start.py").is_file() else "main"
        return [sys.executable, "-c", f"import sys; from gpuops.cli.{entry} import main; main()"]
    return [str(VENV_BIN / "gpuops")]


def _variant(text: str) -> tuple[str, str]:
    name, _, source = text.partition("=")
    if not name or not (Path(source) / "gpuops" / "__init__.py").is_file():
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=DIR with DIR/gpuops/")
    return name, str(Path(source).resolve())


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected node counts like 500,2000,5000"
        ) from None
    if not sizes or sizes != sorted(set(sizes)) or sizes[0] < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected increasing node counts >= 1")
    return sizes


@dataclass
class Run:
    samples: dict[str, list[Sample]]
    internal: list[dict[str, float]]
    problems: list[str]
    pages: int
    bytes: int
    nodes_total: int
    pods_bound: int


def measure(c: Cluster, args: argparse.Namespace, kva: Path | None, kva_why: str) -> Run:
    kubectl = kube_bin_dir() / "kubectl"
    with tempfile.TemporaryDirectory(prefix="gpuops-bench-") as tmpname:
        b = Bench(c, Path(tmpname), kva, kubectl)
        approaches: dict[str, Callable[[], Sample]] = {
            "floor": b.floor,
            "gpuops": b.gpuops,
            "kubectl+py": b.kubectl_script,
        }
        if kva:
            approaches["kva"] = b.view_allocations
        else:
            print(f"kubectl-view-allocations skipped: {kva_why}")
        for name, source in args.also:
            approaches[f"gpuops@{name}"] = partial(b.gpuops, source)
        approaches["floor-json"] = partial(b.floor, PAGE_SIZE, "application/json")
        approaches["start-version"] = partial(b.start, ["--version"])
        approaches["start-help"] = partial(b.start, ["headroom", "check", "--help"])
        approaches["python -c pass"] = partial(b.start, [])
        for name, source in args.also:
            approaches[f"start-help@{name}"] = partial(
                b.start, ["headroom", "check", "--help"], source
            )
        if args.paged_floor and args.paged_floor != PAGE_SIZE:
            approaches["floor-paged"] = partial(b.floor, args.paged_floor)
        for name in args.skip:  # a quick A/B run of the rows that remain, many rounds
            print(f"{name} skipped (--skip)")
            approaches = {
                k: v for k, v in approaches.items() if k != name and k.split("@")[0] != name
            }
        samples: dict[str, list[Sample]] = {n: [] for n in [*approaches, "floor-walk"]}
        internal: list[dict[str, float]] = []
        for rnd in range(args.warmup + args.repeat):
            timed = rnd >= args.warmup
            label = f"run {rnd + 1 - args.warmup}" if timed else "warm-up"
            for name, fn in approaches.items():  # round-robin: load drifts hit all alike
                s = fn()
                if timed:
                    samples[name].append(s)
                    if name == "gpuops":
                        internal.append(b.last_gpuops.get("timings_s") or {})
                print(f"{label}: {name:<15} {s.seconds:7.3f} s  {s.note}", flush=True)
            if timed:
                samples["floor-walk"].append(b.walk()[1])
        return Run(
            samples,
            internal,
            cross_check(b.last_gpuops, b.last_script) if "kubectl+py" in approaches else [],
            b.pages,
            b.bytes,
            int(b.last_gpuops.get("nodes_total") or 0),
            int(b.last_script.get("pods_bound") or 0),
        )


@dataclass
class Point:
    """The measurements at one size."""

    run: Run
    rows: dict[str, dict[str, Any]]
    goals: list[dict[str, Any]]
    load: tuple[tuple[float, ...], tuple[float, ...]]
    setup_s: dict[str, float]

    def to_dict(self, c: Cluster, args: argparse.Namespace) -> dict[str, Any]:
        return {
            "nodes_total": self.run.nodes_total,
            "pods_bound": self.run.pods_bound,
            "repeat": args.repeat,
            "page_size": PAGE_SIZE,
            "pages": self.run.pages,
            "bytes": self.run.bytes,
            "server": c.server,
            "setup_s": self.setup_s,
            "results": self.rows,
            "gpuops_internal_s": self.run.internal,
            "start": start_summary(self.run, self.rows),
            "targets": self.goals,
            "cross_check_problems": self.run.problems,
            "loadavg": {"start": self.load[0], "end": self.load[1]},
        }


def start_summary(run: Run, rows: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """gpuops's fixed start in this run: per round, its wall time less its own work (the
    ``timings_s.total`` it reports: connect, LISTs, compute), and the start-* rows."""
    walls = [s.seconds for s in run.samples["gpuops"]]
    fixed = [w - float(t.get("total", 0)) for w, t in zip(walls, run.internal, strict=True)]
    floor = rows["floor"]["median_s"]
    out: dict[str, Any] = {
        "rounds": len(walls),
        "gpuops_less_own_work_s": round(statistics.median(fixed), 3),
        "own_work_s": round(statistics.median(float(t.get("total", 0)) for t in run.internal), 3),
    }
    for row in ("python -c pass", "start-version", "start-help"):
        if row in rows:
            out[row] = rows[row]["median_s"]
    out["x_floor"] = {k: round(v / floor, 2) for k, v in out.items() if k != "rounds"}
    return out


def render_start(start: Mapping[str, Any]) -> str:
    x = start["x_floor"]
    return (
        f"start (medians of {start['rounds']} rounds; x floor): gpuops less its own work "
        f"{start['gpuops_less_own_work_s']:.3f} s ({x['gpuops_less_own_work_s']:.2f}), its own "
        f"work {start['own_work_s']:.3f} s ({x['own_work_s']:.2f}); python -c pass "
        f"{start.get('python -c pass', 0):.3f} s, gpuops --version "
        f"{start.get('start-version', 0):.3f} s, gpuops headroom check --help "
        f"{start.get('start-help', 0):.3f} s ({x.get('start-help', 0):.2f})"
    )


def measure_point(c: Cluster, args: argparse.Namespace, kva: Path | None, kva_why: str) -> Point:
    load0 = os.getloadavg()
    run = measure(c, args, kva, kva_why)
    rows = summarise(run.samples)
    point = Point(run, rows, targets(rows, args), (load0, os.getloadavg()), dict(c.setup_s))
    inner = ", ".join(
        f"{k} {statistics.median(t.get(k, 0) for t in run.internal):.3f}s"
        for k in ("list_nodes", "list_pods", "compute", "total")
    )
    print()
    bound = run.pods_bound if "kubectl+py" in rows else "(kubectl+py skipped: not counted)"
    print(
        f"cluster: {run.nodes_total} nodes, {bound} bound pods (lab {c.lab_dir}); "
        f"{run.pages} LIST pages of {PAGE_SIZE}, {run.bytes / 2**20:.1f} MiB"
    )
    print(f"gpuops's own timings (median): {inner}")
    print(
        f"load average {point.load[0][0]:.1f} at start, {point.load[1][0]:.1f} at end "
        f"({os.cpu_count()} CPUs)"
    )
    print(render(rows, point.goals))
    print(render_start(start_summary(run, rows)))
    if run.problems:
        print("CROSS-CHECK FAILED (gpuops vs kubectl+py):\n  " + "\n  ".join(run.problems))
    elif "kubectl+py" not in rows:
        print("cross-check skipped: no kubectl+py row in this run (--skip)")
    else:
        print("cross-check: gpuops and kubectl+py agree on allocatable/requested/free per class")
    print(flush=True)
    return point


def render_curve(points: Sequence[Point]) -> str:
    """How the cost grows: one line per size, ratios against the same size's baselines."""

    def med(p: Point, row: str) -> str:
        r = p.rows.get(row)
        return f"{r['median_s']:>8.3f}" if r else f"{'-':>8}"

    def ratio(p: Point, row: str) -> str:
        r, ours = p.rows.get(row), p.rows["gpuops"]["median_s"]
        return f"{ours / r['median_s']:>7.2f}" if r else f"{'-':>7}"

    head = (
        f"{'nodes':>6} {'pods':>6} {'MiB':>5} {'floor':>8} {'gpuops':>8} {'kctl+py':>8} "
        f"{'kva':>8} {'g/floor':>7} {'g/kva':>7} {'g/kctl':>7} {'RSS g':>6} {'RSS kva':>7} "
        f"{'load':>9}"
    )
    lines = ["scale curve (median seconds; g/x = gpuops / x in the same run):", head]
    for p in points:
        kva_rss = p.rows.get("kva", {}).get("peak_rss_mib", 0)
        lines.append(
            f"{p.run.nodes_total:>6} {p.run.pods_bound:>6} {p.run.bytes / 2**20:>5.0f} "
            f"{med(p, 'floor')} {med(p, 'gpuops')} {med(p, 'kubectl+py')} {med(p, 'kva')} "
            f"{ratio(p, 'floor')} {ratio(p, 'kva')} {ratio(p, 'kubectl+py')} "
            f"{p.rows['gpuops']['peak_rss_mib']:>6.0f} {kva_rss:>7.0f} "
            f"{p.load[0][0]:>4.1f}-{p.load[1][0]:<4.1f}"
        )
    return "\n".join(lines)


def compile_sources(args: argparse.Namespace) -> None:
    """Byte-compile every gpuops that a row runs (this one and ``--also``'s): with
    PYTHONDONTWRITEBYTECODE set, a missing or stale ``.pyc`` would be compiled again in every
    run and counted as start-up (as an installed wheel's never is)."""
    dirs = [str(Path(gpuops.__file__).resolve().parent), *(source for _, source in args.also)]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *dirs], check=False)
    print(f"byte-compiled {', '.join(dirs)}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    compile_sources(args)
    kva, kva_why = find_kva(args.kva)
    t_start = time.monotonic()
    sizes = [(n, n * args.pods_per_node) for n in args.curve] if args.curve else None
    first = sizes[0] if sizes else (args.nodes, args.pods)
    if args.reuse:
        c = load_cluster(args.reuse, started=False)
    else:
        c = lab_up(args.lab_dir, *first, args.seed, args.concurrency)
    points: list[Point] = []
    try:
        points.append(measure_point(c, args, kva, kva_why))
        for step, (nodes, pods) in enumerate((sizes or [])[1:], start=1):
            grow(c, nodes, pods, args, step)
            points.append(measure_point(c, args, kva, kva_why))
    finally:
        if c.started and not args.keep:
            lab_down(c.lab_dir)
    if len(points) > 1:
        print(render_curve(points))
    wall = round(time.monotonic() - t_start, 1)
    if args.json_out:
        doc = {
            **points[-1].to_dict(c, args),
            "curve": [p.to_dict(c, args) for p in points] if len(points) > 1 else None,
            "kva_skipped": kva_why or None,
            "cpus": os.cpu_count(),
            "wall_s": wall,
        }
        args.json_out.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.json_out}")
    print(f"total wall time {wall:.0f} s; setup {c.setup_s}")
    return 1 if any(p.run.problems for p in points) else 0


if __name__ == "__main__":
    sys.exit(main())
