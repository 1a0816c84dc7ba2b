"""The lab's Kubernetes: a real control plane on loopback, with kwok for fake kubelets.

Processes (binaries built from Go modules by ``scripts/build-kube.sh`` into
``<cache>/kube/<k8s version>/bin``): etcd, kube-apiserver (token auth, self-signed serving
certificate, RBAC), kube-controller-manager and kube-scheduler (each with its own identity and
kubeconfig), and the kwok controller, which plays the kubelet for nodes annotated
``kwok.x-k8s.io/node=fake`` using kwok's default "fast" stages (nodes become Ready, pods
Running, Job pods Succeeded).

Everything lives under ``<lab dir>/kube``; the admin kubeconfig is ``<lab dir>/kubeconfig``.
One kwok GPU node is created per fleet host (same name, ``nvidia.com/gpu`` capacity 8, labels as
NVIDIA's GPU feature discovery sets them), plus ``LabConfig.extra_nodes`` synthetic GPU nodes.
:func:`create_gpu_nodes`, :func:`bulk_create_nodes` and :func:`bulk_create_pods` make more.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from gpuops.errors import InvalidInput, OperationFailed, Unreachable
from gpuops_lab import kwokstages, proc, repo_root
from gpuops_lab.gpus import MODELS as GPU_MODELS
from gpuops_lab.nvsmi import cuda_version

if TYPE_CHECKING:
    from gpuops_lab import Lab
    from gpuops_lab.spec import GpuHost

log = logging.getLogger(__name__)

#: Binaries scripts/build-kube.sh puts in the bin dir, besides ``kwok-stages.yaml``.
BINARIES: tuple[str, ...] = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
)
#: Process names (``<lab dir>/pids/<name>.pid``, ``logs/<name>.log``) in start order.
PROCESSES: tuple[str, ...] = (
    "kube-etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-kwok",
)
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
GPU_RESOURCE = "nvidia.com/gpu"
SERVICE_CIDR = "10.96.0.0/16"
#: Fake pod IPs that kwok writes into pod status (nothing is ever sent to them).
POD_CIDR = "10.244.0.0/16"
START_TIMEOUT_S = 60.0


# --------------------------------------------------------------------------------------------
# GPU nodes
# --------------------------------------------------------------------------------------------
#: nvidia.com/gpu.family by compute capability, as GPU feature discovery names it.
_FAMILY = {"8.0": "ampere", "8.6": "ampere", "8.9": "ada-lovelace", "9.0": "hopper"}


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def to_dict(self) -> dict[str, str]:
        doc = {"key": self.key, "effect": self.effect}
        if self.value:
            doc["value"] = self.value
        return doc


@dataclass(frozen=True)
class NodeSpec:
    """A kwok node as the lab creates it (kwok plays its kubelet)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    gpus: int = 8  # capacity of ``gpu_resource``
    allocatable_gpus: int | None = None  # defaults to ``gpus``; lower for a faulty card
    gpu_resource: str = GPU_RESOURCE
    extra_resources: Mapping[str, str] = field(default_factory=dict)  # e.g. MIG profiles
    cpu: str = "128"
    memory: str = "2064Gi"
    pods: int = 110
    taints: Sequence[Taint] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    kwok_managed: bool = True  # False: nobody heartbeats it, so it stays NotReady

    def to_body(self) -> dict[str, Any]:
        gpus = str(self.gpus)
        alloc_gpus = str(self.gpus if self.allocatable_gpus is None else self.allocatable_gpus)
        capacity = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": str(self.pods),
            "ephemeral-storage": "7Ti",
            self.gpu_resource: gpus,
            **self.extra_resources,
        }
        allocatable = {**capacity, self.gpu_resource: alloc_gpus}
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            **self.labels,
        }
        annotations = {"node.alpha.kubernetes.io/ttl": "0", **self.annotations}
        if self.kwok_managed:
            annotations[KWOK_ANNOTATION] = "fake"
        spec: dict[str, Any] = {}
        if self.taints:
            spec["taints"] = [t.to_dict() for t in self.taints]
        if self.unschedulable:
            spec["unschedulable"] = True
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels, "annotations": annotations},
            "spec": spec,
            "status": {"capacity": capacity, "allocatable": allocatable},
        }


#: Who labels a node with its driver version: ``gpu-driver`` is the operators' own label
#: (S-30), ``gfd`` GPU feature discovery's current ``nvidia.com/cuda.driver-version.*``,
#: ``gfd-legacy`` its older ``nvidia.com/cuda.driver.*`` (which real GFD still sets).
DRIVER_LABELS: tuple[str, ...] = ("gpu-driver", "gfd", "gfd-legacy")
DEFAULT_DRIVER_LABELS: tuple[str, ...] = ("gpu-driver", "gfd-legacy")


def gpu_labels(
    model: str,
    driver: str,
    gpus: int = 8,
    *,
    driver_labels: Sequence[str] = DEFAULT_DRIVER_LABELS,
) -> dict[str, str]:
    """Node labels as GPU feature discovery (and our ``accelerator`` class label) set them;
    ``driver_labels`` picks which of :data:`DRIVER_LABELS` carry the driver version."""
    if model not in GPU_MODELS:
        raise InvalidInput(
            f"unknown GPU model {model!r}", hint=f"choose from {', '.join(sorted(GPU_MODELS))}"
        )
    parts = driver.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise InvalidInput(f"driver version {driver!r} is not like 535.161.08")
    gm = GPU_MODELS[model]
    family = _FAMILY[gm.compute_cap]
    compute_major, compute_minor = gm.compute_cap.split(".")
    unknown = sorted(set(driver_labels) - set(DRIVER_LABELS))
    if unknown:
        raise InvalidInput(f"unknown driver label kind(s) {unknown}; choose from {DRIVER_LABELS}")
    cuda_major, cuda_minor = cuda_version(driver).split(".")
    labels = {
        "accelerator": f"nvidia-{gm.key}",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": gm.name.replace(" ", "-"),
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.memory": str(gm.memory_mib),
        "nvidia.com/gpu.family": family,
        "nvidia.com/gpu.compute.major": compute_major,
        "nvidia.com/gpu.compute.minor": compute_minor,
        "nvidia.com/gpu.machine": "SYS-821GE-TNHR" if family == "hopper" else "DGXA100",
        "nvidia.com/mig.capable": "true" if gm.mig else "false",
        "nvidia.com/cuda.runtime.major": cuda_major,
        "nvidia.com/cuda.runtime.minor": cuda_minor,
    }
    if "gpu-driver" in driver_labels:
        labels["gpu-driver"] = driver
    if "gfd" in driver_labels:
        labels.update(
            {
                "nvidia.com/cuda.driver-version.full": driver,
                "nvidia.com/cuda.driver-version.major": parts[0],
                "nvidia.com/cuda.driver-version.minor": parts[1],
                "nvidia.com/cuda.driver-version.revision": parts[2],
            }
        )
    if "gfd-legacy" in driver_labels:
        labels.update(
            {
                "nvidia.com/cuda.driver.major": parts[0],
                "nvidia.com/cuda.driver.minor": parts[1],
                "nvidia.com/cuda.driver.rev": parts[2],
            }
        )
    return labels


def gpu_node(
    name: str,
    model: str,
    driver: str,
    *,
    gpus: int = 8,
    faulty: bool = False,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    driver_labels: Sequence[str] = DEFAULT_DRIVER_LABELS,
) -> NodeSpec:
    """A GPU node; a ``faulty`` one (a card with uncorrected ECC errors) offers one GPU less,
    as the NVIDIA device plugin does when it marks a device unhealthy."""
    return NodeSpec(
        name=name,
        labels={**gpu_labels(model, driver, gpus, driver_labels=driver_labels), **(labels or {})},
        gpus=gpus,
        allocatable_gpus=gpus - 1 if faulty else gpus,
        taints=taints,
    )


def fleet_nodes(hosts: Iterable[GpuHost]) -> list[NodeSpec]:
    """One kwok node per SSH fleet host, with the host's name, model and driver."""
    return [
        gpu_node(
            h.name,
            h.model,
            h.driver,
            gpus=h.gpus,
            faulty=h.faulty,
            labels={"gpuops.io/fleet-group": h.group},
        )
        for h in hosts
    ]


def synthetic_nodes(count: int, *, prefix: str = "syn", start: int = 0) -> list[NodeSpec]:
    """``count`` synthetic GPU nodes for scale tests, cycling A100 / H800 / L40S."""
    models = (("a100-80g", "535.161.08"), ("h800", "550.90.07"), ("l40s", "550.90.07"))
    out = []
    for i in range(start, start + count):
        model, driver = models[i % len(models)]
        out.append(gpu_node(f"{prefix}-{model}-{i:05d}", model, driver))
    return out


def pod_body(
    name: str,
    *,
    namespace: str = "default",
    node: str | None = None,
    gpus: int = 0,
    gpu_resource: str = GPU_RESOURCE,
    labels: Mapping[str, str] | None = None,
    cpu: str = "100m",
    memory: str = "128Mi",
    image: str = "127.0.0.1:5000/gpuops/pause:lab",
) -> dict[str, Any]:
    """A minimal pod; with ``node`` it is bound directly (``spec.nodeName``), bypassing the
    scheduler, as the scale benchmark needs."""
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}, "limits": {}}
    if gpus:
        resources["requests"][gpu_resource] = str(gpus)
        resources["limits"][gpu_resource] = str(gpus)
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": image, "resources": resources}],
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 0,
        "tolerations": [{"key": KWOK_ANNOTATION, "operator": "Exists"}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": spec,
    }


# --------------------------------------------------------------------------------------------
# Kubernetes API helpers (official client; bulk paths post pre-built JSON concurrently)
# --------------------------------------------------------------------------------------------
def api_client(kubeconfig: Path, *, pool: int = 8) -> Any:
    """An official-client ``ApiClient`` for ``kubeconfig`` with ``pool`` HTTP connections."""
    cfg = k8s.Configuration()
    k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig), client_configuration=cfg
    )
    cfg.connection_pool_maxsize = pool
    return k8s.ApiClient(cfg)


def _as_api_client(api: Any) -> Any:
    return api.api_client if hasattr(api, "api_client") else api


class _Poster:
    """POSTs pre-encoded JSON through the official client's own connection pool and
    credentials. For bulk creation the client's per-call model handling costs more CPU than
    the apiserver spends on the request; this keeps the lab's 2 cores for the cluster."""

    def __init__(self, api: Any) -> None:
        client = _as_api_client(api)
        cfg = client.configuration
        self._pool = client.rest_client.pool_manager
        self._host = str(cfg.host).rstrip("/")
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        for auth in cfg.auth_settings().values():
            if auth.get("in") == "header" and auth.get("value"):
                self._headers[str(auth["key"])] = str(auth["value"])

    def create(self, path: str, body: Mapping[str, Any]) -> bool:
        """True if created, False if it already existed."""
        try:
            resp = self._pool.request(
                "POST",
                self._host + path,
                body=json.dumps(body, separators=(",", ":")).encode(),
                headers=self._headers,
                preload_content=True,
                timeout=60,
            )
        except urllib3.exceptions.HTTPError as exc:
            raise Unreachable(f"Kubernetes API {self._host} did not answer: {exc}") from exc
        if resp.status == 409:
            return False
        if not 200 <= resp.status < 300:
            raise OperationFailed(
                f"creating {body.get('kind', 'object')} {body['metadata']['name']} failed: "
                f"HTTP {resp.status}: {resp.data[:300].decode(errors='replace')}"
            )
        return True


def _fan_out(fn: Callable[[Any], bool], items: Sequence[Any], concurrency: int) -> int:
    if not items:
        return 0
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(items)))) as pool:
        return sum(1 for created in pool.map(fn, items) if created)


def bulk_create_nodes(api: Any, nodes: Sequence[NodeSpec], *, concurrency: int = 16) -> int:
    """Create ``nodes`` concurrently (existing ones are kept); returns how many were new."""
    poster = _Poster(api)
    return _fan_out(lambda n: poster.create("/api/v1/nodes", n.to_body()), nodes, concurrency)


def bulk_create_pods(api: Any, pods: Sequence[Mapping[str, Any]], *, concurrency: int = 16) -> int:
    """Create pod bodies (see :func:`pod_body`) concurrently; returns how many were new.
    Give ``api`` a connection pool of at least ``concurrency`` (:func:`api_client`)."""
    poster = _Poster(api)

    def one(body: Mapping[str, Any]) -> bool:
        ns = body["metadata"].get("namespace", "default")
        return poster.create(f"/api/v1/namespaces/{ns}/pods", body)

    return _fan_out(one, pods, concurrency)


def wait_nodes_ready(api: Any, names: Iterable[str], *, timeout: float = 120.0) -> None:
    """Wait until every named node is Ready and has no ``not-ready`` taint left.

    Lists are read from the apiserver's watch cache and decoded as plain JSON: with thousands
    of nodes, the official client's model objects would cost more CPU than kwok itself."""
    core = k8s.CoreV1Api(_as_api_client(api))
    pending = set(names)
    interval = 0.2 if len(pending) <= 50 else 1.0
    deadline = time.monotonic() + timeout
    while pending:
        cont = None
        while True:
            resp: Any = core.list_node(
                limit=1000, _continue=cont, resource_version="0", _preload_content=False
            )
            page = json.loads(resp.data)
            for node in page.get("items") or []:
                name = node["metadata"]["name"]
                if name in pending and _node_ready(node):
                    pending.discard(name)
            cont = (page.get("metadata") or {}).get("continue")
            if not cont:
                break
        if not pending:
            return
        if time.monotonic() > deadline:
            some = ", ".join(sorted(pending)[:5])
            raise OperationFailed(
                f"{len(pending)} kwok node(s) not Ready after {timeout:.0f}s (e.g. {some})",
                hint="see <lab dir>/logs/kube-kwok.log",
            )
        time.sleep(interval)


def _node_ready(node: Mapping[str, Any]) -> bool:
    conds = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)
    taints = (node.get("spec") or {}).get("taints") or []
    return ready and not any(t.get("key") == "node.kubernetes.io/not-ready" for t in taints)


def create_gpu_nodes(
    api: Any,
    nodes: Sequence[NodeSpec],
    *,
    wait: bool = True,
    timeout: float = 120.0,
    concurrency: int = 16,
) -> int:
    """Create kwok GPU nodes (idempotent) and, by default, wait until they are Ready."""
    created = bulk_create_nodes(api, nodes, concurrency=concurrency)
    if wait:
        wait_nodes_ready(api, [n.name for n in nodes if n.kwok_managed], timeout=timeout)
    return created


# --------------------------------------------------------------------------------------------
# The component: up / down / status
# --------------------------------------------------------------------------------------------
#: The Kubernetes version the lab's binaries are built at: lab/kube/go.mod requires it (a unit
#: test holds the two together), so a lab installed from a wheel finds prebuilt binaries in
#: the cache without a checkout.
K8S_VERSION = "v1.36.3"


def k8s_version(repo: Path) -> str:
    """The k8s.io/kubernetes version that ``repo``'s lab/kube/go.mod requires."""
    for line in (repo / "lab" / "kube" / "go.mod").read_text().splitlines():
        words = line.split("//")[0].replace("require", " ").split()
        if len(words) == 2 and words[0] == "k8s.io/kubernetes":
            return words[1]
    raise OperationFailed(f"no k8s.io/kubernetes version in {repo}/lab/kube/go.mod")


def bin_dir(lab: Lab) -> Path:
    """Where the control-plane binaries are (``GPUOPS_KUBE_BIN`` overrides)."""
    env = os.environ.get("GPUOPS_KUBE_BIN")
    if env:
        return Path(env)
    return lab.config.cache / "kube" / K8S_VERSION / "bin"


def ensure_binaries(lab: Lab) -> Path:
    """The bin dir, building missing binaries with scripts/build-kube.sh (slow when cold)."""
    bins = bin_dir(lab)
    missing = [b for b in (*BINARIES, "kwok-stages.yaml") if not (bins / b).exists()]
    if not missing:
        return bins
    if os.environ.get("GPUOPS_KUBE_BIN"):
        raise OperationFailed(f"GPUOPS_KUBE_BIN={bins} lacks {', '.join(missing)}")
    script = repo_root() / "scripts" / "build-kube.sh"
    log.warning("building Kubernetes binaries (%s missing); a cold build takes long", missing)
    build_log = lab.dir / "logs" / "kube-build.log"
    out = proc.open_log(lab.dir, "kube-build")  # never through a symlink
    try:
        rc = subprocess.call(
            ["bash", str(script)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "GPUOPS_CACHE": str(lab.config.cache)},
        )
    finally:
        os.close(out)
    if rc != 0:
        raise OperationFailed(f"scripts/build-kube.sh failed (exit {rc})", hint=f"see {build_log}")
    return bins


def kube_dir(lab: Lab) -> Path:
    return lab.dir / "kube"


def kubeconfig_path(lab: Lab) -> Path:
    return lab.dir / "kubeconfig"


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _kubeconfig(server: str, ca_pem: bytes, user: str, token: str) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "gpuops-lab",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "gpuops-lab", "context": {"cluster": "gpuops-lab", "user": user}}],
        "current-context": "gpuops-lab",
    }
    return yaml.safe_dump(doc, sort_keys=False)


def _https_ok(url: str, ctx: ssl.SSLContext, token: str | None = None) -> bool:
    req = urllib.request.Request(url)  # noqa: S310 (https on loopback)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:  # noqa: S310
            return int(resp.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _insecure_ctx() -> ssl.SSLContext:
    # kube-controller-manager and kube-scheduler serve /healthz with an in-memory
    # self-signed certificate; only liveness on loopback is checked with it.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _genkey(key: Path, pub: Path) -> None:
    """A P-256 service-account signing key and its public half (``openssl``)."""
    for argv in (
        ["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-out", str(key)],
        ["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(pub)],
    ):  # fmt: skip
        res = subprocess.run(argv, check=False, capture_output=True, text=True)
        if res.returncode != 0:
            raise OperationFailed(f"{argv[0]} {argv[1]} failed: {res.stderr.strip()}")
    key.chmod(0o600)


@dataclass
class _Plan:
    """What one ``up`` decided: paths, ports, identities."""

    lab: Lab
    bins: Path
    dir: Path
    ports: dict[str, int]
    tokens: dict[str, str]
    lease_s: int
    grace_s: int

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


def _plan(lab: Lab) -> _Plan:
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
    plan = _Plan(lab, bins, kdir, ports, tokens, lease_s, grace_s)
    _write_private(
        kdir / "tokens.csv",
        f'{tokens["admin"]},gpuops-admin,uid-admin,"system:masters"\n'
        f"{tokens['kcm']},system:kube-controller-manager,uid-kcm\n"
        f"{tokens['scheduler']},system:kube-scheduler,uid-scheduler\n"
        f'{tokens["kwok"]},kwok-controller,uid-kwok,"system:masters"\n',
    )
    _genkey(plan.sa_key, plan.sa_pub)
    return plan


def _start_etcd(p: _Plan) -> None:
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


def _start_apiserver(p: _Plan) -> None:
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
        lambda: _apiserver_ready(p.server, p.ca_file, p.tokens["admin"]),
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
        _write_private(p.kubeconfig(who), _kubeconfig(p.server, ca_pem, user, p.tokens[who]))


def _apiserver_ready(server: str, ca_file: Path, token: str) -> bool:
    # the self-signed apiserver.crt (leaf + CA) appears while the apiserver starts and may be
    # half written when first seen: load it afresh on every try
    try:
        ctx = ssl.create_default_context(cafile=str(ca_file))
    except (OSError, ssl.SSLError):
        return False
    return _https_ok(f"{server}/readyz", ctx, token)


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
        lambda: _apiserver_ready(facts["server"], Path(facts["ca_file"]), token),
        "kube-apiserver /readyz after restart",
        timeout=START_TIMEOUT_S,
        pid=pid,
        log_file=lab.dir / "logs" / "kube-apiserver.log",
    )


def restart_apiserver(lab: Lab) -> None:
    stop_apiserver(lab)
    start_apiserver(lab)


def _start_controllers(p: _Plan) -> None:
    """kube-controller-manager, kube-scheduler and kwok, started together."""
    kcm_kc, sched_kc = p.kubeconfig("kcm"), p.kubeconfig("scheduler")
    sched_conf = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(sched_kc), "qps": 200, "burst": 400},
        "leaderElection": {"leaderElect": False},
    }
    _write_private(p.dir / "scheduler.yaml", yaml.safe_dump(sched_conf))
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
    _write_private(p.dir / "kwok.yaml", yaml.safe_dump(kwok_conf))
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
                f"--cidr={POD_CIDR}",
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
    insecure = _insecure_ctx()
    kcm_url = f"https://127.0.0.1:{p.ports['controller_manager']}/healthz"
    sched_url = f"https://127.0.0.1:{p.ports['scheduler']}/healthz"
    kwok_url = f"http://127.0.0.1:{p.ports['kwok']}/healthz"
    p.wait(
        lambda: _https_ok(kcm_url, insecure),
        "kube-controller-manager",
        pids["kube-controller-manager"],
    )
    p.wait(lambda: _https_ok(sched_url, insecure), "kube-scheduler", pids["kube-scheduler"])
    p.wait(lambda: proc.http_ok(kwok_url), "kube-kwok", pids["kube-kwok"])


def up(lab: Lab) -> dict[str, Any]:
    """Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok; create
    the fleet's kwok GPU nodes. Returns the facts that ``status``, ``down`` and tests use."""
    t0 = time.monotonic()
    timings: dict[str, float] = {}

    def mark(what: str) -> None:
        timings[what] = round(time.monotonic() - t0, 2)

    p = _plan(lab)
    mark("prepared")
    _start_etcd(p)
    mark("etcd")
    _start_apiserver(p)
    mark("apiserver")
    _start_controllers(p)
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
            ready = _https_ok(f"{facts['server']}/readyz", ctx, str(token))
        except (OSError, KeyError, IndexError, TypeError, yaml.YAMLError, ssl.SSLError):
            ready = False
    return {"healthy": ready and all(alive.values()), "apiserver_ready": ready, "processes": alive}
