"""Bearer-token registries (Harbor and most hosted ones): the real docker-registry in token-auth
mode, which itself validates every token's signature, issuer, audience, expiry and granted
actions; the token service beside it is this test's (the docker token protocol: GET realm with
basic credentials, a JWT signed by a key whose certificate the registry trusts)."""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import secrets
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID
from imagelab import GPUOPS
from result_documents import check_document

from gpuops_lab import proc

pytestmark = pytest.mark.lab

SERVICE, ISSUER = "gpuops-test-registry", "gpuops-test-issuer"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class TokenService:
    """Issues tokens for ``users`` (name -> (password, allowed actions)); logs what it saw."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    users: dict[str, tuple[str, tuple[str, ...]]]
    seen: list[dict[str, Any]] = field(default_factory=list)

    def token(self, user: str, scopes: list[str]) -> str:
        allowed = self.users[user][1]
        access = []
        for scope in scopes:
            kind, name, actions = scope.split(":")
            access.append(
                {
                    "type": kind,
                    "name": name,
                    "actions": [a for a in actions.split(",") if a in allowed],
                }
            )
        now = int(time.time())
        header = {
            "typ": "JWT",
            "alg": "ES256",
            "x5c": [base64.b64encode(self.cert.public_bytes(serialization.Encoding.DER)).decode()],
        }
        claims = {
            "iss": ISSUER,
            "sub": user,
            "aud": SERVICE,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": uuid.uuid4().hex,
            "access": access,
        }
        signing = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        r, s = decode_dss_signature(self.key.sign(signing.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signing}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                auth = self.headers.get("Authorization", "")
                user, _, password = (
                    base64.b64decode(auth.removeprefix("Basic ") or b"").decode().partition(":")
                )
                service.seen.append({"path": self.path, "user": user, "basic": bool(auth)})
                if user not in service.users or service.users[user][0] != password:
                    self.send_response(401)
                    self.end_headers()
                    return
                body = json.dumps({"token": service.token(user, query.get("scope", []))}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


@dataclass
class TokenRegistry:
    host: str
    tokens: TokenService
    log: Path

    def api(
        self,
        method: str,
        path: str,
        scope: str,
        *,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str]]:
        req = urllib.request.Request(f"http://{self.host}{path}", method=method, data=data)
        req.add_header("Authorization", f"Bearer {self.tokens.token('admin', [scope])}")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310
                return resp.status, dict(resp.headers)
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers)

    def push_image(self, repo: str, tag: str) -> str:
        """A one-layer OCI image, uploaded with an admin token; returns its manifest digest."""
        scope = f"repository:{repo}:pull,push"
        layer, config = (
            secrets.token_bytes(256),
            json.dumps(
                {"architecture": "amd64", "os": "linux", "config": {"Env": ["CUDA_VERSION=12.4.1"]}}
            ).encode(),
        )
        blobs = []
        for data in (config, layer):
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            status, headers = self.api("POST", f"/v2/{repo}/blobs/uploads/", scope)
            assert status == 202, status
            location = urlsplit(headers["Location"])
            status, _ = self.api(
                "PUT",
                f"{location.path}?{location.query}&digest={digest}",
                scope,
                data=data,
                headers={"Content-Type": "application/octet-stream"},
            )
            assert status == 201, status
            blobs.append({"digest": digest, "size": len(data)})
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **blobs[0]},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **blobs[1]}],
            }
        ).encode()
        status, headers = self.api(
            "PUT",
            f"/v2/{repo}/manifests/{tag}",
            scope,
            data=manifest,
            headers={"Content-Type": OCI_MANIFEST},
        )
        assert status == 201, status
        return str(headers["Docker-Content-Digest"])


def _cert(key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuops test token signer")])
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )


@pytest.fixture(scope="module")
def token_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenRegistry]:
    if shutil.which("docker-registry") is None:
        pytest.fail("docker-registry is not installed: run scripts/setup.sh")
    base = tmp_path_factory.mktemp("tokenreg")
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _cert(key)
    (base / "root.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    tokens = TokenService(
        key,
        cert,
        {
            "admin": ("admin-" + secrets.token_hex(8), ("pull", "push")),
            "robot": ("robot-" + secrets.token_hex(8), ("pull", "push")),
            "reader": ("reader-" + secrets.token_hex(8), ("pull",)),
        },
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), tokens.handler())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = proc.free_port()
    config = {
        "version": 0.1,
        "log": {"level": "info", "accesslog": {"disabled": True}},
        "storage": {
            "filesystem": {"rootdirectory": str(base / "data")},
            "delete": {"enabled": True},
        },
        "http": {"addr": f"127.0.0.1:{port}"},
        "auth": {
            "token": {
                "realm": f"http://127.0.0.1:{server.server_port}/token",
                "service": SERVICE,
                "issuer": ISSUER,
                "rootcertbundle": str(base / "root.crt"),
            }
        },
    }
    (base / "config.yml").write_text(yaml.safe_dump(config))
    log = base / "registry.log"
    with log.open("wb") as out:
        registry = subprocess.Popen(
            ["docker-registry", "serve", str(base / "config.yml")],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 20
        while not proc.tcp_open("127.0.0.1", port):
            assert registry.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "token registry did not start"
            time.sleep(0.1)
        yield TokenRegistry(f"127.0.0.1:{port}", tokens, log)
    finally:
        registry.terminate()
        registry.wait(10)
        server.shutdown()


def _gpuops(
    reg: TokenRegistry, user: str, password: str, *args: str
) -> tuple[int, dict[str, Any], str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "GPUOPS_REGISTRY_USERNAME": user,
        "GPUOPS_REGISTRY_PASSWORD": password,
    }
    done = subprocess.run(
        [GPUOPS, "--output", "json", *args, "--plain-http"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    doc = check_document(json.loads(done.stdout if done.returncode == 0 else done.stderr))
    return done.returncode, doc, done.stdout + done.stderr


def test_bearer_tokens_for_inspect_and_a_tag_move(token_registry: TokenRegistry) -> None:
    reg = token_registry
    digest = reg.push_image("team/infer", "1")
    robot = reg.tokens.users["robot"][0]
    seen = len(reg.tokens.seen)
    code, doc, out = _gpuops(
        reg, "robot", robot, "image", "inspect", "--image", f"{reg.host}/team/infer:1"
    )
    assert code == 0, out
    assert (doc["result"]["digest"], doc["result"]["cuda_version"]) == (digest, "12.4.1")
    code, doc, out = _gpuops(
        reg,
        "robot",
        robot,
        "image",
        "tag",
        "--source",
        f"{reg.host}/team/infer:1",
        "--target",
        "prod",
    )
    assert code == 0, out
    assert doc["result"]["digest"] == digest
    asked = reg.tokens.seen[seen:]
    assert asked and all(a["user"] == "robot" and a["basic"] for a in asked)
    assert any("scope=repository%3Ateam%2Finfer%3Apull%2Cpush" in a["path"] for a in asked)
    assert robot not in out
    assert robot not in reg.log.read_text()  # the password went to the token service only


def test_a_pull_only_token_moves_no_tag(token_registry: TokenRegistry) -> None:
    reg = token_registry
    digest = reg.push_image("team/train", "1")
    reader = reg.tokens.users["reader"][0]
    code, doc, _ = _gpuops(
        reg,
        "reader",
        reader,
        "image",
        "tag",
        "--source",
        f"{reg.host}/team/train:1",
        "--target",
        "prod",
    )
    assert code == 1
    assert "refused the token" in doc["error"]["message"]
    code, doc, _ = _gpuops(
        reg, "reader", reader, "image", "inspect", "--image", f"{reg.host}/team/train:prod"
    )
    assert code == 2  # the tag was not created
    code, doc, _ = _gpuops(
        reg, "reader", reader, "image", "inspect", "--image", f"{reg.host}/team/train:1"
    )
    assert (code, doc["result"]["digest"]) == (0, digest)


def test_wrong_credentials_are_refused_by_the_token_service(token_registry: TokenRegistry) -> None:
    reg = token_registry
    reg.push_image("team/eval", "1")
    code, doc, out = _gpuops(
        reg, "robot", "not-the-password", "image", "inspect", "--image", f"{reg.host}/team/eval:1"
    )
    assert code == 1
    assert "token service" in doc["error"]["message"]
    assert "not-the-password" not in out
