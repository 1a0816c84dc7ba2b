"""The lab component ``kube``: up, down and status, and the API server restart that fault
injection uses.

``up`` claims the lab's pod network (:mod:`.podnet`), starts the control plane
(:mod:`.controlplane`; kwok hands out pod IPs from that network) and creates one kwok GPU node
per fleet host plus ``LabConfig.extra_nodes`` synthetic ones (:mod:`.objects`, :mod:`.api`).
``down`` stops the processes (SIGTERM, then SIGKILL), removes the pod network's interface
(only when its alias names this lab), ``<lab dir>/kube`` and the admin kubeconfig.
"""

from __future__ import annotations

import json
import logging
import shutil
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from gpuops.errors import InvalidInput
from gpuops_lab import proc
from gpuops_lab.kube import podnet
from gpuops_lab.kube.api import api_client, create_gpu_nodes
from gpuops_lab.kube.controlplane import (
    PROCESSES,
    START_TIMEOUT_S,
    apiserver_ready,
    https_ok,
    kube_dir,
    kubeconfig_path,
    launch_apiserver,
    launch_controllers,
    launch_etcd,
    prepare,
)
from gpuops_lab.kube.objects import fleet_nodes, synthetic_nodes

if TYPE_CHECKING:
    from gpuops_lab import Lab

log = logging.getLogger(__name__)


def up(lab: Lab) -> dict[str, Any]:
    """Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok; create
    the fleet's kwok GPU nodes. Returns the facts that ``status``, ``down`` and tests use."""
    t0 = time.monotonic()
    timings: dict[str, float] = {}

    def mark(what: str) -> None:
        timings[what] = round(time.monotonic() - t0, 2)

    p = prepare(lab)
    lab_id = lab.lab_id()
    if lab_id is None:  # up claims the directory before any component starts
        raise InvalidInput(f"{lab.dir} is not a gpuops lab (no mark)")
    net = podnet.claim(lab.dir, lab_id)
    p.pod_cidr = net.cidr
    mark("prepared")
    launch_etcd(p)
    mark("etcd")
    launch_apiserver(p)
    mark("apiserver")
    launch_controllers(p)
    mark("controllers")
    api = api_client(p.kubeconfig("admin"), pool=16)
    try:
        # a usable cluster: pods are admitted (default ServiceAccount) and nodes are Ready
        core = k8s.CoreV1Api(api)
        pid = proc.pid_of("kube-controller-manager", lab.dir) or 0
        p.wait(
            lambda: _exists(lambda: core.read_namespaced_service_account("default", "default")),
            "kube-controller-manager",
            pid,
            "default ServiceAccount (kube-controller-manager)",
        )
        mark("serviceaccount")
        nodes = fleet_nodes(lab.fleet())
        extra = int(getattr(lab.config, "extra_nodes", 0) or 0)
        if extra:
            nodes += synthetic_nodes(extra)
        create_gpu_nodes(api, nodes, timeout=120.0 + extra * 0.25)
        mark("nodes")
    finally:
        api.close()
    log.info("lab kube up in %.1fs: %s", time.monotonic() - t0, timings)
    return {
        "version": p.bins.parent.name,
        "bin_dir": str(p.bins),
        "dir": str(p.dir),
        "kubeconfig": str(p.kubeconfig("admin")),
        "server": p.server,
        "ca_file": str(p.ca_file),
        "ports": p.ports,
        "pids": {n: proc.pid_of(n, lab.dir) for n in PROCESSES},
        "nodes": len(nodes),
        "pod_network": net.to_dict(),
        "node_lease_seconds": p.lease_s,
        "startup_s": timings,
    }


def _exists(read: Callable[[], Any]) -> bool:
    try:
        read()
    except ApiException:
        return False
    return True


def down(lab: Lab) -> None:
    """Stop the processes (SIGTERM, then SIGKILL) and remove ``<lab dir>/kube`` and the
    kubeconfig. Safe to repeat and safe when nothing was started."""
    for name in reversed(PROCESSES):
        proc.stop(name, lab.dir)
    try:
        lab_id = lab.lab_id()
    except InvalidInput:
        lab_id = None
    podnet.release(lab.dir, lab_id)
    shutil.rmtree(kube_dir(lab), ignore_errors=True)
    kubeconfig_path(lab).unlink(missing_ok=True)


def status(lab: Lab) -> dict[str, Any]:
    """Which processes are alive and whether the apiserver answers ``/readyz``."""
    alive = {}
    for name in PROCESSES:
        pid = proc.pid_of(name, lab.dir)
        alive[name] = pid is not None and proc.alive(pid)
    ready = False
    facts = lab.facts("kube")
    ca = Path(str(facts.get("ca_file", "")))
    kc = kubeconfig_path(lab)
    if facts.get("server") and ca.is_file() and kc.is_file():
        try:
            token = yaml.safe_load(kc.read_text())["users"][0]["user"]["token"]
            ctx = ssl.create_default_context(cafile=str(ca))
            ready = https_ok(f"{facts['server']}/readyz", ctx, str(token))
        except (OSError, KeyError, IndexError, TypeError, yaml.YAMLError, ssl.SSLError):
            ready = False
    try:
        lab_id = lab.lab_id()
    except InvalidInput:
        lab_id = None
    net = podnet.owned(lab.dir, lab_id) is not None if lab_id else False
    return {
        "healthy": ready and net and all(alive.values()),
        "apiserver_ready": ready,
        "pod_network": net,
        "processes": alive,
    }


# -- fault injection ----------------------------------------------------------------------
def stop_apiserver(lab: Lab) -> None:
    """Stop kube-apiserver only; etcd, controllers and kwok keep running (and retrying)."""
    proc.stop("kube-apiserver", lab.dir)


def start_apiserver(lab: Lab) -> None:
    """Start the stopped kube-apiserver again with the same port, certificates and data."""
    kdir = kube_dir(lab)
    argv = json.loads((kdir / "apiserver.argv.json").read_text())
    token = (kdir / "tokens.csv").read_text().split(",", 1)[0]
    facts = lab.facts("kube")
    pid = proc.spawn("kube-apiserver", argv, lab.dir, cwd=kdir)
    proc.wait_for(
        lambda: apiserver_ready(facts["server"], Path(facts["ca_file"]), token),
        "kube-apiserver /readyz after restart",
        timeout=START_TIMEOUT_S,
        pid=pid,
        log_file=lab.dir / "logs" / "kube-apiserver.log",
    )


def restart_apiserver(lab: Lab) -> None:
    stop_apiserver(lab)
    start_apiserver(lab)
