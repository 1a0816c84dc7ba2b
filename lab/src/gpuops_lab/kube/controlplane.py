"""The lab's control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
the kwok controller, as local processes on loopback.

:func:`prepare` decides one start's paths, ports and identities (a fresh ``<lab dir>/kube``);
the ``launch_*`` functions start each process and wait until it answers its health check.
Process names (:data:`PROCESSES`) are those of ``<lab dir>/pids`` and ``logs``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from gpuops_lab import kwokstages, proc
from gpuops_lab.kube.binaries import ensure_binaries
from gpuops_lab.kube.certs import genkey, kubeconfig_text, write_private
from gpuops_lab.kube.objects import KWOK_ANNOTATION

if TYPE_CHECKING:
    from gpuops_lab import Lab

#: Process names (``<lab dir>/pids/<name>.pid``, ``logs/<name>.log``) in start order.
PROCESSES: tuple[str, ...] = (
    "kube-etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-kwok",
)
SERVICE_CIDR = "10.96.0.0/16"
#: kwok's default pod CIDR; the lab's kwok takes a /16 of the lab's own instead
#: (:mod:`.podnet`: real local addresses, so that the API server's pod proxy reaches them).
POD_CIDR = "10.244.0.0/16"
START_TIMEOUT_S = 60.0


def kube_dir(lab: Lab) -> Path:
    return lab.dir / "kube"


def kubeconfig_path(lab: Lab) -> Path:
    return lab.dir / "kubeconfig"


def https_ok(url: str, ctx: ssl.SSLContext, token: str | None = None) -> bool:
    req = urllib.request.Request(url)  # noqa: S310 (https on loopback)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:  # noqa: S310
            return int(resp.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def insecure_ctx() -> ssl.SSLContext:
    # kube-controller-manager and kube-scheduler serve /healthz with an in-memory
    # self-signed certificate; only liveness on loopback is checked with it.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


@dataclass
class Plan:
    """What one ``up`` decided: paths, ports, identities."""

    lab: Lab
    bins: Path
    dir: Path
    ports: dict[str, int]
    tokens: dict[str, str]
    lease_s: int
    grace_s: int
    pod_cidr: str = POD_CIDR

    @property
    def logs(self) -> Path:
        return self.lab.dir / "logs"

    @property
    def sa_key(self) -> Path:
        return self.dir / "pki" / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "pki" / "sa.pub"

    @property
    def ca_file(self) -> Path:
        return self.dir / "pki" / "apiserver.crt"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['etcd']}"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    def kubeconfig(self, who: str) -> Path:
        return kubeconfig_path(self.lab) if who == "admin" else self.dir / f"{who}.kubeconfig"

    def wait(self, check: Callable[[], bool], name: str, pid: int, what: str = "") -> None:
        proc.wait_for(
            check,
            what or name,
            timeout=START_TIMEOUT_S,
            pid=pid,
            log_file=self.logs / f"{name}.log",
        )


def prepare(lab: Lab) -> Plan:
    bins = ensure_binaries(lab)
    kdir = kube_dir(lab)
    if kdir.exists():
        shutil.rmtree(kdir)
    for sub in ("pki", "etcd", "kcm-certs", "sched-certs", "home"):
        (kdir / sub).mkdir(parents=True, exist_ok=True)
    kdir.chmod(0o700)
    extra = int(getattr(lab.config, "extra_nodes", 0) or 0)
    # kubelet's defaults (lease 40 s, grace 50 s) for a small lab; scale labs renew less
    # often so that thousands of node leases do not saturate 2 cores.
    lease_s, grace_s = (40, 50) if extra < 200 else (600, 900)
    if os.environ.get("GPUOPS_KUBE_NODE_LEASE_S", "").isdigit():
        lease_s = max(10, int(os.environ["GPUOPS_KUBE_NODE_LEASE_S"]))
        grace_s = max(50, lease_s * 3 // 2)
    ports = {
        n: proc.free_port()
        for n in ("etcd", "etcd_peer", "apiserver", "controller_manager", "scheduler", "kwok")
    }
    tokens = {u: secrets.token_hex(24) for u in ("admin", "kcm", "scheduler", "kwok")}
    plan = Plan(lab, bins, kdir, ports, tokens, lease_s, grace_s)
    write_private(
        kdir / "tokens.csv",
        f'{tokens["admin"]},gpuops-admin,uid-admin,"system:masters"\n'
        f"{tokens['kcm']},system:kube-controller-manager,uid-kcm\n"
        f"{tokens['scheduler']},system:kube-scheduler,uid-scheduler\n"
        f'{tokens["kwok"]},kwok-controller,uid-kwok,"system:masters"\n',
    )
    genkey(plan.sa_key, plan.sa_pub)
    return plan


def launch_etcd(p: Plan) -> None:
    peer = f"http://127.0.0.1:{p.ports['etcd_peer']}"
    argv = [
        str(p.bins / "etcd"),
        "--name=lab",
        f"--data-dir={p.dir / 'etcd'}",
        f"--listen-client-urls={p.etcd_url}",
        f"--advertise-client-urls={p.etcd_url}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=lab={peer}",
        "--initial-cluster-state=new",
        "--unsafe-no-fsync=true",  # throw-away test data: no fsync makes writes much cheaper
        "--quota-backend-bytes=8589934592",
        "--snapshot-count=100000",
        "--log-level=warn",
    ]
    pid = proc.spawn("kube-etcd", argv, p.lab.dir)
    p.wait(lambda: proc.http_ok(f"{p.etcd_url}/health"), "kube-etcd", pid)


def launch_apiserver(p: Plan) -> None:
    argv = [
        str(p.bins / "kube-apiserver"),
        f"--etcd-servers={p.etcd_url}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={p.ports['apiserver']}",
        "--endpoint-reconciler-type=none",
        f"--cert-dir={p.dir / 'pki'}",
        f"--token-auth-file={p.dir / 'tokens.csv'}",
        "--authorization-mode=RBAC",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={p.sa_pub}",
        f"--service-account-signing-key-file={p.sa_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        "--profiling=false",
    ]
    # kept so that fault injection can restart the same apiserver (same port, certs, data)
    (p.dir / "apiserver.argv.json").write_text(json.dumps(argv))
    pid = proc.spawn("kube-apiserver", argv, p.lab.dir, cwd=p.dir)
    p.wait(
        lambda: apiserver_ready(p.server, p.ca_file, p.tokens["admin"]),
        "kube-apiserver",
        pid,
        "kube-apiserver /readyz",
    )
    ca_pem = p.ca_file.read_bytes()
    users = {
        "admin": "gpuops-admin",
        "kcm": "system:kube-controller-manager",
        "scheduler": "system:kube-scheduler",
        "kwok": "kwok-controller",
    }
    for who, user in users.items():
        write_private(p.kubeconfig(who), kubeconfig_text(p.server, ca_pem, user, p.tokens[who]))


def apiserver_ready(server: str, ca_file: Path, token: str) -> bool:
    # the self-signed apiserver.crt (leaf + CA) appears while the apiserver starts and may be
    # half written when first seen: load it afresh on every try
    try:
        ctx = ssl.create_default_context(cafile=str(ca_file))
    except (OSError, ssl.SSLError):
        return False
    return https_ok(f"{server}/readyz", ctx, token)


def launch_controllers(p: Plan) -> None:
    """kube-controller-manager, kube-scheduler and kwok, started together."""
    kcm_kc, sched_kc = p.kubeconfig("kcm"), p.kubeconfig("scheduler")
    sched_conf = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(sched_kc), "qps": 200, "burst": 400},
        "leaderElection": {"leaderElect": False},
    }
    write_private(p.dir / "scheduler.yaml", yaml.safe_dump(sched_conf))
    # more kwok workers than its default 4: thousands of nodes and pods come Ready sooner
    kwok_conf = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        "options": {
            "nodePlayStageParallelism": 8,
            "podPlayStageParallelism": 8,
            "nodeLeaseParallelism": 8,
        },
    }
    write_private(p.dir / "kwok.yaml", yaml.safe_dump(kwok_conf))
    argvs: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "kube-controller-manager": (
            [
                str(p.bins / "kube-controller-manager"),
                f"--kubeconfig={kcm_kc}",
                f"--authentication-kubeconfig={kcm_kc}",
                f"--authorization-kubeconfig={kcm_kc}",
                "--bind-address=127.0.0.1",
                f"--secure-port={p.ports['controller_manager']}",
                f"--cert-dir={p.dir / 'kcm-certs'}",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={p.sa_key}",
                f"--root-ca-file={p.ca_file}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--cluster-name=gpuops-lab",
                f"--node-monitor-grace-period={p.grace_s}s",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--profiling=false",
            ],
            None,
        ),
        "kube-scheduler": (
            [
                str(p.bins / "kube-scheduler"),
                f"--config={p.dir / 'scheduler.yaml'}",
                f"--authentication-kubeconfig={sched_kc}",
                f"--authorization-kubeconfig={sched_kc}",
                "--bind-address=127.0.0.1",
                f"--secure-port={p.ports['scheduler']}",
                f"--cert-dir={p.dir / 'sched-certs'}",
                "--profiling=false",
            ],
            None,
        ),
        "kube-kwok": (
            [
                str(p.bins / "kwok"),
                f"--kubeconfig={p.kubeconfig('kwok')}",
                f"--config={p.dir / 'kwok.yaml'}",
                # kwok's own stages, plus the staged container faults (kwokstages.py)
                f"--config={kwokstages.write(p.bins / 'kwok-stages.yaml', p.dir / 'stages.yaml')}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
                "--node-ip=127.0.0.1",
                f"--node-port={p.ports['kwok']}",
                f"--server-address=127.0.0.1:{p.ports['kwok']}",
                f"--cidr={p.pod_cidr}",
                f"--node-lease-duration-seconds={p.lease_s}",
                "--v=WARN",  # INFO logs every patch: costly with thousands of objects
            ],
            {"HOME": str(p.dir / "home")},  # kwok also reads ~/.kwok/kwok.yaml
        ),
    }
    pids = {
        name: proc.spawn(name, argv, p.lab.dir, cwd=p.dir, env=env)
        for name, (argv, env) in argvs.items()
    }
    insecure = insecure_ctx()
    kcm_url = f"https://127.0.0.1:{p.ports['controller_manager']}/healthz"
    sched_url = f"https://127.0.0.1:{p.ports['scheduler']}/healthz"
    kwok_url = f"http://127.0.0.1:{p.ports['kwok']}/healthz"
    p.wait(
        lambda: https_ok(kcm_url, insecure),
        "kube-controller-manager",
        pids["kube-controller-manager"],
    )
    p.wait(lambda: https_ok(sched_url, insecure), "kube-scheduler", pids["kube-scheduler"])
    p.wait(lambda: proc.http_ok(kwok_url), "kube-kwok", pids["kube-kwok"])
