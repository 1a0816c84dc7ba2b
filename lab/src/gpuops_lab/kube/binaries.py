"""The lab's Kubernetes binaries: which version, where they are, building missing ones.

Built from Go modules by ``scripts/build-kube.sh`` into ``<cache>/kube/<k8s version>/bin``
(``GPUOPS_KUBE_BIN`` overrides the folder).
"""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from gpuops.errors import OperationFailed
from gpuops_lab import proc, repo_root

if TYPE_CHECKING:
    from gpuops_lab import Lab

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
