"""Lab component ``apps``: the app stand-in (:mod:`gpuops_lab.appstandin`), a lab stand-in
for the containers of the lab's pods labelled ``gpuops.io/lab-app``.

kwok runs no container; this one process answers on each such pod's IP, port 8080 (through
the API server's pod proxy as through the lab's pod network) and exports their synthetic
request counters and latencies on ``127.0.0.1:<port>/metrics`` for the lab's Prometheus. It
needs the ``kube`` component (its API server, kubeconfig and pod network). Process name
``apps`` (``<lab dir>/pids/apps.pid``, ``logs/apps.log``); config in ``<lab dir>/apps``.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuops.errors import OperationFailed
from gpuops_lab import labapp, proc, safefiles

if TYPE_CHECKING:
    from gpuops_lab import Lab

log = logging.getLogger(__name__)

PROC = "apps"
START_TIMEOUT_S = 30.0


def _dir(lab: Lab) -> Path:
    return lab.dir / "apps"


def _ready(url: str) -> bool:
    return proc.http_ok(f"{url}/healthz")


def up(lab: Lab) -> dict[str, Any]:
    kube = lab.facts("kube")
    net = kube.get("pod_network") or {}
    if not kube or not net.get("cidr"):
        raise OperationFailed(
            "the app stand-in needs the lab's Kubernetes (with its pod network)",
            hint="start it first: gpuops lab up --components kube,apps",
        )
    base = _dir(lab)
    shutil.rmtree(base, ignore_errors=True)
    safefiles.ensure_dir(base)
    port = proc.free_port()
    config = {"kubeconfig": kube["kubeconfig"], "pod_cidr": net["cidr"], "port": port}
    config_file = base / "config.json"
    safefiles.write_atomic(config_file, json.dumps(config, indent=2) + "\n")
    url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    argv = [sys.executable, "-m", "gpuops_lab.appstandin", str(config_file)]
    pid = proc.spawn(PROC, argv, lab.dir)
    proc.wait_for(
        lambda: _ready(url),
        "lab app stand-in",
        timeout=START_TIMEOUT_S,
        pid=pid,
        log_file=lab.dir / "logs" / f"{PROC}.log",
    )
    ready_s = round(time.monotonic() - started, 3)
    log.info("app stand-in ready on %s in %.2fs", url, ready_s)
    return {
        "url": url,
        "port": port,
        "metrics": f"{url}/metrics",
        "pods": f"{url}/pods",
        "pod_cidr": net["cidr"],
        "pod_port": labapp.PORT,
        "label": labapp.LABEL,
        "config": str(config_file),
        "ready_s": ready_s,
        "summary": f"lab stand-in for pods labelled {labapp.LABEL} (their IPs, port "
        f"{labapp.PORT}); exporter {url}/metrics",
    }


def down(lab: Lab) -> None:
    proc.stop(PROC, lab.dir)
    shutil.rmtree(_dir(lab), ignore_errors=True)


def status(lab: Lab) -> dict[str, Any]:
    facts = lab.facts("apps")
    pid = proc.pid_of(PROC, lab.dir)
    running = pid is not None and proc.alive(pid)
    answering = bool(facts) and running and _ready(str(facts["url"]))
    return {"healthy": answering, "pid": pid if running else None}


def playing(lab: Lab) -> list[dict[str, Any]]:
    """The pods the stand-in plays now (its ``/pods``)."""
    url = str(lab.facts("apps")["pods"])
    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 (the lab's loopback)
        return list(json.loads(resp.read()))
