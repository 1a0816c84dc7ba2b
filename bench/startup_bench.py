"""Benchmark: what a gpuops call costs before it does anything (issue 7, "Cheap start").

The Groovy runner asks ``gpuops --output json --version`` before every step, and operators
type ``gpuops --help``; neither should pay for the Kubernetes, Docker or Ansible libraries.
Times, interleaved round-robin in one run (one untimed warm-up round, then ``--repeat``):

  gpuops --version            the runner's version check (text form)
  gpuops --output json --version
  gpuops --help
  gpuops headroom check --help   a command's own imports (issue 17: headroom check's start)
  ansible --version           the baseline: ansible-core's own CLI start, same interpreter
  python -c pass              the floor: the interpreter alone

and prints the medians and ``gpuops --version`` / ``ansible --version`` against the target
(<= 0.25). Run with the project's venv:

    .venv/bin/python bench/startup_bench.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
TARGET = 0.25


def commands() -> dict[str, list[str]]:
    gpuops, ansible = str(VENV_BIN / "gpuops"), str(VENV_BIN / "ansible")
    return {
        "gpuops --version": [gpuops, "--version"],
        "gpuops --output json --version": [gpuops, "--output", "json", "--version"],
        "gpuops --help": [gpuops, "--help"],
        "gpuops headroom check --help": [gpuops, "headroom", "check", "--help"],
        "ansible --version": [ansible, "--version"],
        "python -c pass": [sys.executable, "-c", "pass"],
    }


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    runs = commands()
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for round_no in range(args.repeat + 1):
        for name, argv in runs.items():
            seconds = timed(argv)
            if round_no:  # round 0 warms the page cache
                samples[name].append(seconds)
    base = statistics.median(samples["ansible --version"])
    print(f"startup, {args.repeat} rounds, load average {os.getloadavg()[0]:.2f}")
    print(f"{'command':<32} {'median ms':>10} {'min ms':>8} {'x ansible':>10}")
    for name, values in samples.items():
        med = statistics.median(values)
        print(f"{name:<32} {med * 1000:>10.1f} {min(values) * 1000:>8.1f} {med / base:>10.2f}")
    ratio = statistics.median(samples["gpuops --version"]) / base
    verdict = "met" if ratio <= TARGET else "MISSED"
    print(f"target: gpuops --version <= {TARGET} x ansible --version: {ratio:.2f} ({verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
