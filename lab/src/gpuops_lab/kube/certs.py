"""The lab cluster's secrets and the files that carry them: the service-account signing key,
kubeconfigs with bearer tokens, and files only their owner may read.

The API server makes its own self-signed serving certificate (``--cert-dir``); its file is
the certificate authority of every kubeconfig written here.
"""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import yaml

from gpuops.errors import OperationFailed


def write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def kubeconfig_text(server: str, ca_pem: bytes, user: str, token: str) -> str:
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


def genkey(key: Path, pub: Path) -> None:
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
