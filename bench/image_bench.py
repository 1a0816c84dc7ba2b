"""Benchmark: moving a tag costs O(manifest), and an unchanged rebuild comes from the cache.

Brings up its own lab registry and Podman builder (or uses a running lab with ``--reuse DIR``),
builds with ``gpuops image build`` a small image (~1 MB of data) and a big one (``--big-mb``
of random data in ``--big-layers`` layers, 1 GiB by default), two of each with different data,
and then times, round-robin in the same run (one untimed warm-up round, then ``--repeat``
rounds; every round copies to a tag that does not exist yet, so every copy writes):

  gpuops small / big     ``gpuops image tag --source <img>:1 --target moved-<n>``, a process
  in-process small / big ``usecases.images.registryops.copy_tag`` in this process (what the
                         release side calls; no interpreter start)
  skopeo small / big     ``skopeo copy docker://<img>:1 docker://<img>:skopeo-<n>`` (Debian's)
  python -c pass         the interpreter alone, and ``gpuops --version``: start-up cost

once against the loopback registry and once per ``--rtt-ms`` value through ``latency_proxy.py``
adding that round-trip time (a registry across a network, as Harbor is; 0 skips it),

It prints medians, the ratios the targets are about (big / small <= 1.5; gpuops <= skopeo),
the requests each tool sent (from the registry's own log, by User-Agent), and fails (exit 1)
if gpuops touched a blob during a move. Then the cache: the big image's first build against
``--rebuilds`` rebuilds of the unchanged context (build phase and whole command).

    .venv/bin/python bench/image_bench.py                  # 1 GiB big image, 15 rounds
    .venv/bin/python bench/image_bench.py --big-mb 256 --repeat 7   # quicker
    .venv/bin/python bench/image_bench.py --registry-auth  # htpasswd + TLS registry
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuops.core.imageref import parse_reference
from gpuops.usecases.images.registryops import RegistryAccess, copy_tag
from gpuops_lab import Lab, LabConfig
from gpuops_lab import registry as labregistry

VENV_BIN = Path(sys.executable).parent
GPUOPS = str(VENV_BIN / "gpuops")
MIB = 1 << 20
_FIELD = re.compile(r'([\w.]+)=("(?:[^"\\]|\\.)*"|\S+)')


def sh(
    argv: list[str], env: dict[str, str], *, quiet: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, env=env, capture_output=quiet, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv[:4])} ... failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return done


class Bench:
    def __init__(self, lab: Lab, work: Path) -> None:
        self.lab = lab
        self.work = work
        self.reg = lab.facts("registry")
        self.builder = lab.facts("builder")
        self.auth = bool(self.reg.get("auth"))
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("GPUOPS_", "DOCKER_"))},
            "DOCKER_HOST": str(self.builder["base_url"]),
            "DOCKER_API_VERSION": "1.41",
            "HOME": str(work / "home"),
        }
        (work / "home").mkdir(parents=True, exist_ok=True)
        self.flags = ["--plain-http"]
        self.skopeo_flags = ["--src-tls-verify=false", "--dest-tls-verify=false"]
        if self.auth:
            self.env["GPUOPS_REGISTRY_USERNAME"] = str(self.reg["username"])
            self.env["GPUOPS_REGISTRY_PASSWORD"] = labregistry.password(lab)
            self.flags = ["--registry-ca", str(self.reg["ca"])]
            certs = work / "certs"  # skopeo reads *.crt in a directory as CAs
            certs.mkdir(exist_ok=True)
            shutil.copyfile(self.reg["ca"], certs / "ca.crt")
            self.skopeo_flags = [
                f"--src-cert-dir={certs}",
                f"--dest-cert-dir={certs}",
                f"--authfile={self.reg['auth_file']}",
            ]
        self.access = RegistryAccess(plain_http=not self.auth, ca_file=self.reg.get("ca"))
        self.log = lab.dir / "logs" / "registry.log"

    # -- building ---------------------------------------------------------------------------
    def build(
        self, repo: str, tag: str, dockerfile: str, files: dict[str, bytes]
    ) -> dict[str, Any]:
        ctx = self.work / f"ctx-{repo.rsplit('/', 1)[1]}-{tag}"
        ctx.mkdir(parents=True, exist_ok=True)
        (ctx / "Dockerfile").write_text(dockerfile)
        for name, data in files.items():
            (ctx / name).write_bytes(data)
        return self.gpuops_build(repo, tag, ctx)

    def gpuops_build(self, repo: str, tag: str, ctx: Path) -> dict[str, Any]:
        done = sh(
            [
                GPUOPS,
                "--output",
                "json",
                "image",
                "build",
                "--image",
                repo,
                "--context",
                str(ctx),
                "--build-number",
                tag,
                "--timeout",
                "3600",
                *self.flags,
            ],
            self.env,
        )
        result: dict[str, Any] = json.loads(done.stdout)["result"]
        return result

    # -- moving ---------------------------------------------------------------------------------
    def gpuops_tag(self, src: str, target: str) -> None:
        sh([GPUOPS, "image", "tag", "--source", src, "--target", target, *self.flags], self.env)

    def inproc_tag(self, src: str, target: str) -> None:
        ref = parse_reference(src)
        old = {
            k: os.environ.get(k) for k in ("GPUOPS_REGISTRY_USERNAME", "GPUOPS_REGISTRY_PASSWORD")
        }
        os.environ.update({k: self.env[k] for k in old if k in self.env})
        try:
            copy_tag(ref, ref.with_tag(target), self.access)
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def skopeo_tag(self, src: str, target: str) -> None:
        dst = src.rsplit(":", 1)[0] + f":{target}"
        sh(
            ["skopeo", "copy", "-q", *self.skopeo_flags, f"docker://{src}", f"docker://{dst}"],
            self.env,
        )

    def run_only(self, argv: list[str]) -> None:
        sh(argv, self.env)

    def log_offset(self) -> int:
        return self.log.stat().st_size

    def requests_since(self, offset: int) -> dict[str, Counter[str]]:
        """Per User-Agent family: request kinds ("HEAD blob", "PUT manifest") since ``offset``."""
        with self.log.open("rb") as fh:
            fh.seek(offset)
            text = fh.read().decode(errors="replace")
        out: dict[str, Counter[str]] = {}
        seen: set[str] = set()
        for line in text.splitlines():
            if "response completed" not in line:
                continue
            f = {k: v.strip('"') for k, v in _FIELD.findall(line)}
            if f.get("http.request.id") in seen:
                continue
            seen.add(f.get("http.request.id", ""))
            agent = f.get("http.request.useragent", "?").split("/", 1)[0].split(" ", 1)[0]
            uri = f.get("http.request.uri", "")
            kind = "blob" if "/blobs/" in uri else "manifest" if "/manifests/" in uri else "other"
            out.setdefault(agent, Counter())[f"{f.get('http.request.method')} {kind}"] += 1
        return out


def timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def big_dockerfile(base: str, mb: int, layers: int) -> str:
    per = mb * MIB // layers
    steps = "".join(f"RUN head -c {per} /dev/urandom > /data-{i}.bin\n" for i in range(layers))
    return f"FROM {base}\nCOPY seed.txt /seed.txt\n{steps}"


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--big-mb", type=int, default=1024)
    ap.add_argument("--big-layers", type=int, default=4)
    ap.add_argument("--rebuilds", type=int, default=3)
    ap.add_argument("--registry-auth", action="store_true", help="htpasswd + TLS lab registry")
    ap.add_argument(
        "--rtt-ms",
        default="20,50",
        help="also measure through a proxy adding these round-trip times, comma-separated "
        "(empty or 0: loopback only)",
    )
    ap.add_argument("--lab-dir", default="/tmp/gpuops-image-bench")
    ap.add_argument("--reuse", metavar="DIR", help="a running lab (registry + builder)")
    ap.add_argument("--keep", action="store_true", help="leave the lab running")
    ap.add_argument("--json-out")
    args = ap.parse_args()

    if args.reuse:
        lab, started = Lab(LabConfig(dir=Path(args.reuse))), False
    else:
        lab_dir = Path(args.lab_dir)
        if (lab_dir / "state.json").exists():
            sys.exit(f"{lab_dir} holds a lab already: take it down or pass --reuse {lab_dir}")
        lab = Lab(LabConfig(dir=lab_dir, registry_auth=args.registry_auth))
        lab.up(["registry", "builder"])
        started = True
    work = Path(tempfile.mkdtemp(prefix="gpuops-image-bench-"))
    try:
        return run(Bench(lab, work), args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if started and not args.keep:
            lab.down()


def proxy(b: Bench, rtt_ms: float) -> tuple[subprocess.Popen[str], str]:
    """Start the latency proxy in front of the registry; returns it and its host:port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    reg_host, reg_port = str(b.reg["url"]).rsplit(":", 1)
    proc = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).parent / "latency_proxy.py"),
            str(port),
            reg_host,
            reg_port,
            str(rtt_ms / 2),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        sys.exit("the latency proxy did not start")
    host = f"127.0.0.1:{port}"
    if b.auth:  # skopeo looks credentials up by registry host:port
        auth = json.loads(Path(b.reg["auth_file"]).read_text())
        auth["auths"][host] = auth["auths"][str(b.reg["url"])]
        path = b.work / "proxy-auth.json"
        path.write_text(json.dumps(auth))
        path.chmod(0o600)
        b.skopeo_flags = [f for f in b.skopeo_flags if not f.startswith("--authfile=")]
        b.skopeo_flags.append(f"--authfile={path}")
    return proc, host


def measure(b: Bench, host: str, small: str, big: str, repeat: int, tag: str) -> dict[str, Any]:
    """Round-robin timings of every row against the registry at ``host``."""
    s_ref, b_ref = f"{host}/{small}:1", f"{host}/{big}:1"
    rows: dict[str, Callable[[int], None]] = {
        "gpuops small": lambda n: b.gpuops_tag(s_ref, f"{tag}-cli-{n}"),
        "gpuops big": lambda n: b.gpuops_tag(b_ref, f"{tag}-cli-{n}"),
        "in-process small": lambda n: b.inproc_tag(s_ref, f"{tag}-inproc-{n}"),
        "in-process big": lambda n: b.inproc_tag(b_ref, f"{tag}-inproc-{n}"),
        "skopeo small": lambda n: b.skopeo_tag(s_ref, f"{tag}-skopeo-{n}"),
        "skopeo big": lambda n: b.skopeo_tag(b_ref, f"{tag}-skopeo-{n}"),
        "python -c pass": lambda n: b.run_only([sys.executable, "-c", "pass"]),
        "gpuops --version": lambda n: b.run_only([GPUOPS, "--version"]),
    }
    times: dict[str, list[float]] = {k: [] for k in rows}
    offset = b.log_offset()
    for rnd in range(repeat + 1):
        for name, fn in rows.items():
            took = timed(lambda fn=fn, rnd=rnd: fn(rnd))
            if rnd:  # round 0 warms caches up
                times[name].append(took)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratios = {
        "gpuops big/small": med["gpuops big"] / med["gpuops small"],
        "in-process big/small": med["in-process big"] / med["in-process small"],
        "skopeo big/small": med["skopeo big"] / med["skopeo small"],
        "gpuops/skopeo (small)": med["gpuops small"] / med["skopeo small"],
        "gpuops/skopeo (big)": med["gpuops big"] / med["skopeo big"],
        "in-process/skopeo (small)": med["in-process small"] / med["skopeo small"],
        "in-process/skopeo (big)": med["in-process big"] / med["skopeo big"],
    }
    moves = {"gpuops": 4 * (repeat + 1), "skopeo": 2 * (repeat + 1)}  # moves per User-Agent
    requests = {
        agent: {k: round(v / moves.get(agent, 1), 1) for k, v in sorted(c.items())}
        for agent, c in b.requests_since(offset).items()
    }
    return {
        "medians_s": med,
        "min_s": {k: min(v) for k, v in times.items()},
        "ratios": ratios,
        "requests_per_move": requests,
    }


def report(name: str, m: dict[str, Any], repeat: int) -> None:
    print(f"\n== {name}: tag moves, {repeat} rounds, round-robin (load {os.getloadavg()[0]:.1f})")
    print(f"{'row':<18} {'median ms':>10} {'min ms':>8}")
    for k, v in m["medians_s"].items():
        print(f"{k:<18} {1000 * v:>10.1f} {1000 * m['min_s'][k]:>8.1f}")
    print("ratios of medians:")
    for k, v in m["ratios"].items():
        print(f"  {k:<26} {v:5.2f}")
    print("registry requests per move (its log, by User-Agent):")
    for agent, per in m["requests_per_move"].items():
        print(f"  {agent:<8} {per}")


def run(b: Bench, args: argparse.Namespace) -> int:
    base = str(b.builder["base_image"])
    run_id = uuid.uuid4().hex[:6]
    small_name, big_name = f"bench/small-{run_id}", f"bench/big-{run_id}"
    host = str(b.reg["url"])
    print(
        f"building: small (1 MiB), big ({args.big_mb} MiB in {args.big_layers} layers) ...",
        flush=True,
    )
    small = b.build(
        f"{host}/{small_name}",
        "1",
        f"FROM {base}\nCOPY data.bin /data.bin\n",
        {"data.bin": os.urandom(MIB)},
    )
    big_df = big_dockerfile(base, args.big_mb, args.big_layers)
    big = b.build(f"{host}/{big_name}", "1", big_df, {"seed.txt": run_id.encode()})
    big_ctx = b.work / f"ctx-{big_name.rsplit('/', 1)[1]}-1"
    rebuilds = [
        b.gpuops_build(f"{host}/{big_name}", f"r{i}", big_ctx) for i in range(args.rebuilds)
    ]
    sizes = {"small": small["size_bytes"], "big": big["size_bytes"]}
    print(
        f"registry sizes: small {sizes['small'] / MIB:.1f} MiB, big {sizes['big'] / MIB:.1f} MiB "
        f"({big['steps']} build steps)"
    )

    results = {"loopback": measure(b, host, small_name, big_name, args.repeat, "lo")}
    report("loopback", results["loopback"], args.repeat)
    for rtt in [float(x) for x in str(args.rtt_ms).split(",") if x.strip() and float(x) > 0]:
        proc, via = proxy(b, rtt)
        try:
            name = f"{rtt:g} ms round trip"
            results[name] = measure(b, via, small_name, big_name, args.repeat, f"rtt{rtt:g}")
            report(name, results[name], args.repeat)
        finally:
            proc.terminate()
            proc.wait(10)

    lo = results["loopback"]
    gpuops_blobs = sum(
        v for k, v in lo["requests_per_move"].get("gpuops", {}).items() if "blob" in k
    )
    targets = {"no blob request by gpuops": gpuops_blobs == 0}
    for name, m in results.items():
        r = m["ratios"]
        targets[f"{name}: big/small within 1.5x (gpuops CLI)"] = r["gpuops big/small"] <= 1.5
        targets[f"{name}: big/small within 1.5x (in-process)"] = r["in-process big/small"] <= 1.5
        targets[f"{name}: gpuops CLI <= skopeo (big)"] = r["gpuops/skopeo (big)"] <= 1.0
        targets[f"{name}: in-process <= skopeo (big)"] = r["in-process/skopeo (big)"] <= 1.0
    print("\ntargets:")
    for k, ok in targets.items():
        print(f"  {'met' if ok else 'NOT MET':<8} {k}")

    first = big["timings_s"]
    again = [r["timings_s"] for r in rebuilds]
    cache = {
        "first_build_s": first["build"],
        "first_total_s": first["total"],
        "rebuild_build_s": statistics.median(t["build"] for t in again),
        "rebuild_total_s": statistics.median(t["total"] for t in again),
        "rebuild_cached_steps": [r["cached_steps"] for r in rebuilds],
        "steps": big["steps"],
    }
    cache["build_ratio"] = cache["rebuild_build_s"] / cache["first_build_s"]
    cache["total_ratio"] = cache["rebuild_total_s"] / cache["first_total_s"]
    print(
        f"\nrebuild of the unchanged big context ({args.rebuilds}x): build phase "
        f"{cache['rebuild_build_s']:.2f} s vs first {cache['first_build_s']:.2f} s "
        f"({cache['build_ratio']:.3f}x); whole command {cache['rebuild_total_s']:.2f} s vs "
        f"{cache['first_total_s']:.2f} s ({cache['total_ratio']:.3f}x); cached steps "
        f"{cache['rebuild_cached_steps']} of {cache['steps']}"
    )
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps(
                {
                    "repeat": args.repeat,
                    "sizes": sizes,
                    "results": results,
                    "targets": targets,
                    "cache": cache,
                    "load": os.getloadavg(),
                },
                indent=2,
            )
        )
    return 0 if gpuops_blobs == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
