"""Lab component ``registry``: Debian's ``docker-registry`` (distribution 2.8) on loopback.

It stands in for Harbor. Two modes, chosen by ``LabConfig.registry_auth``:

* plain: HTTP on ``127.0.0.1:<free port>``, no authentication;
* auth: HTTPS with a lab CA (``registry/tls/ca.crt``) and htpasswd basic auth for the user
  ``gpuops``. The password lives only in ``registry/password`` (mode 0600); the facts name
  that file, never the secret.

Storage is ``registry/data`` under the lab dir, with deletes enabled. ``stop_registry`` and
``start_registry`` inject the "registry down" fault: same port, same data after the restart.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import logging
import os
import secrets
import shutil
import ssl
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gpuops.errors import OperationFailed
from gpuops_lab import proc

if TYPE_CHECKING:
    from gpuops_lab import Lab

log = logging.getLogger(__name__)

PROC = "registry"
USER = "gpuops"


def _dir(lab: Lab) -> Path:
    return lab.dir / "registry"


def _private_file(path: Path, data: bytes) -> None:
    """Write ``data`` to a file that only its owner can read, from its creation on."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


# -- TLS and credentials -------------------------------------------------------------------
def _make_tls(tls: Path) -> None:
    """A lab CA and a server certificate for 127.0.0.1 / localhost signed by it."""
    tls.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=30)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuops lab CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    (tls / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (tls / "server.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _private_file(
        tls / "server.key",
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def _make_credentials(base: Path, url: str) -> None:
    """A random password (0600 file), its bcrypt htpasswd entry and a podman auth file."""
    password = secrets.token_urlsafe(24)
    _private_file(base / "password", password.encode())
    htpasswd = base / "htpasswd"
    # -i: the password comes on stdin, never on argv; -B: bcrypt (what distribution accepts)
    done = subprocess.run(
        ["htpasswd", "-i", "-B", "-c", str(htpasswd), USER],
        input=password.encode(),
        capture_output=True,
        check=False,
        timeout=30,
    )
    if done.returncode != 0:
        raise OperationFailed(
            f"htpasswd could not write {htpasswd}: {done.stderr.decode(errors='replace')}",
            hint="install apache2-utils (scripts/setup-system.sh)",
        )
    token = base64.b64encode(f"{USER}:{password}".encode()).decode()
    _private_file(base / "auth.json", json.dumps({"auths": {url: {"auth": token}}}).encode())


def _write_config(base: Path, port: int, auth: bool) -> Path:
    config: dict[str, Any] = {
        "version": 0.1,
        "log": {"level": "info", "accesslog": {"disabled": True}},
        "storage": {
            "filesystem": {"rootdirectory": str(base / "data")},
            "delete": {"enabled": True},
        },
        "http": {"addr": f"127.0.0.1:{port}", "headers": {"X-Content-Type-Options": ["nosniff"]}},
    }
    if auth:
        config["http"]["tls"] = {
            "certificate": str(base / "tls" / "server.crt"),
            "key": str(base / "tls" / "server.key"),
        }
        config["auth"] = {"htpasswd": {"realm": "gpuops-lab", "path": str(base / "htpasswd")}}
    path = base / "config.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


# -- helpers for other code ----------------------------------------------------------------
def password(lab: Lab) -> str:
    """The lab registry password (auth mode); read from its 0600 file, never from state."""
    try:
        return (_dir(lab) / "password").read_text().strip()
    except OSError as exc:
        raise OperationFailed(
            f"the lab registry has no password file in {_dir(lab)}",
            hint="start the lab with --registry-auth",
        ) from exc


def auth_config(lab: Lab) -> dict[str, str] | None:
    """Credentials in the docker SDK's ``auth_config`` shape, or None in plain mode."""
    facts = lab.facts("registry")
    if not facts.get("auth"):
        return None
    return {"username": str(facts["username"]), "password": password(lab)}


def ssl_context(facts: dict[str, Any]) -> ssl.SSLContext | None:
    """An SSL context that trusts the lab CA (auth mode), or None for plain HTTP."""
    if facts.get("scheme") != "https":
        return None
    return ssl.create_default_context(cafile=str(facts["ca"]))


def _ready(facts: dict[str, Any]) -> bool:
    expect = (401,) if facts.get("auth") else (200,)
    return proc.http_ok(f"{facts['endpoint']}/v2/", context=ssl_context(facts), expect=expect)


# -- component API -------------------------------------------------------------------------
def up(lab: Lab) -> dict[str, Any]:
    if shutil.which("docker-registry") is None:
        raise OperationFailed(
            "docker-registry is not installed",
            hint="run scripts/setup-system.sh (Debian package docker-registry)",
        )
    auth = lab.config.registry_auth
    base = _dir(lab)
    if base.exists():
        shutil.rmtree(base)
    (base / "data").mkdir(parents=True)
    port = proc.free_port()
    url = f"127.0.0.1:{port}"
    scheme = "https" if auth else "http"
    if auth:
        _make_tls(base / "tls")
        _make_credentials(base, url)
    facts: dict[str, Any] = {
        "url": url,
        "port": port,
        "scheme": scheme,
        "endpoint": f"{scheme}://{url}",
        "auth": auth,
        "username": USER if auth else None,
        "password_file": str(base / "password") if auth else None,
        "auth_file": str(base / "auth.json") if auth else None,
        "ca": str(base / "tls" / "ca.crt") if auth else None,
        "data": str(base / "data"),
        "config": str(_write_config(base, port, auth)),
    }
    _start(lab, facts)
    mode = f"https, basic auth as {USER}" if auth else "http, no auth"
    facts.update(healthy=True, summary=f"{url} ({mode}); data {facts['data']}")
    return facts


def _start(lab: Lab, facts: dict[str, Any]) -> None:
    pid = proc.spawn(PROC, ["docker-registry", "serve", str(facts["config"])], lab.dir)
    proc.wait_for(
        lambda: _ready(facts),
        f"registry on {facts['url']}",
        timeout=20,
        pid=pid,
        log_file=lab.dir / "logs" / f"{PROC}.log",
    )
    log.info("registry listening on %s", facts["endpoint"])


def down(lab: Lab) -> None:
    proc.stop(PROC, lab.dir)
    shutil.rmtree(_dir(lab), ignore_errors=True)


def status(lab: Lab) -> dict[str, Any]:
    facts = lab.facts("registry")
    pid = proc.pid_of(PROC, lab.dir)
    running = pid is not None and proc.alive(pid)
    answering = bool(facts) and running and _ready(facts)
    return {"healthy": answering, "pid": pid if running else None}


# -- fault injection -----------------------------------------------------------------------
def stop_registry(lab: Lab) -> None:
    """Stop the registry process; its config and data stay for :func:`start_registry`."""
    proc.stop(PROC, lab.dir)
    log.info("registry stopped (fault injection)")


def start_registry(lab: Lab) -> None:
    """Start the registry again on the same port with the same data."""
    facts = lab.facts("registry")
    if not facts:
        raise OperationFailed(
            f"no lab registry was started in {lab.dir}", hint="run 'gpuops lab up' first"
        )
    pid = proc.pid_of(PROC, lab.dir)
    if pid is not None and proc.alive(pid):
        return
    _start(lab, facts)
