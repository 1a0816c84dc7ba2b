"""No secret in any message: a canary planted in every secret-bearing input never shows.

Secret-bearing inputs of the product's commands: the kubeconfig's user entry (token, basic-auth
password, OIDC client-secret / refresh-token / id-token, client key and certificate data, an
exec plugin's output), a user:password in the server URL, and the webhook URL (in
``$GPUOPS_WEBHOOK_URL`` or the variable ``--webhook-url-env`` names). Each is planted with a
canary and the CLI runs against the lab's real kube-apiserver, as a subprocess as Jenkins runs
it (text and JSON output, with and without ``--debug``). The canary, raw or base64-encoded, must
not appear on stdout, stderr, in the result or the error document.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.conftest_kube import KubeLab

pytestmark = pytest.mark.timeout(600)

CANARY = f"canary{uuid.uuid4().hex}"
FORMS = (CANARY, base64.b64encode(CANARY.encode()).decode()[:24])
GPUOPS = [sys.executable, "-c", "from gpuops.cli.main import main; main()"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _jwt(claims: dict[str, Any]) -> str:
    def part(doc: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}.{part({'sig': CANARY})}"


def _pem_with_canary(kind: str) -> str:
    body = base64.b64encode((CANARY * 4).encode()).decode()
    pem = f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----\n"
    return base64.b64encode(pem.encode()).decode()


def _users() -> dict[str, dict[str, Any]]:
    idp = f"http://127.0.0.1:{_closed_port()}"
    exec_fail = "import sys; sys.stderr.write('token " + CANARY + " rejected\\n'); sys.exit(1)"
    exec_garbage = "print('" + CANARY + "')"
    return {
        "token": {"token": CANARY},
        "basic-auth": {"username": "ci", "password": CANARY},
        "oidc-expired": {  # an expired id-token: the client tries to refresh at the idp
            "auth-provider": {
                "name": "oidc",
                "config": {
                    "client-id": "gpuops",
                    "client-secret": CANARY,
                    "refresh-token": CANARY,
                    "id-token": _jwt({"exp": 1, "sub": CANARY}),
                    "idp-issuer-url": idp,
                },
            }
        },
        "oidc-not-a-jwt": {
            "auth-provider": {
                "name": "oidc",
                "config": {"client-id": "gpuops", "client-secret": CANARY, "id-token": CANARY},
            }
        },
        "client-key-not-base64": {
            "client-certificate-data": CANARY,
            "client-key-data": CANARY,
        },
        "client-key-garbage": {
            "client-certificate-data": _pem_with_canary("CERTIFICATE"),
            "client-key-data": _pem_with_canary("PRIVATE KEY"),
        },
        "exec-fails": {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": sys.executable,
                "args": ["-c", exec_fail],
                "env": [{"name": "CANARY_ENV", "value": CANARY}],
                "interactiveMode": "Never",
            }
        },
        "exec-garbage": {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": sys.executable,
                "args": ["-c", exec_garbage],
                "interactiveMode": "Never",
            }
        },
    }


def _kubeconfig(path: Path, server: str, ca: str, user: dict[str, Any]) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": {"server": server, "certificate-authority": ca}}],
        "users": [{"name": "ci", "user": user}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "ci"}}],
        "current-context": "lab",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def _gpuops(tmp: Path, args: list[str], env: dict[str, str]) -> list[tuple[str, str]]:
    """Run the CLI four ways; every text it left: (where, text)."""
    texts = []
    for i, mode in enumerate((["--output", "json", "--debug"], ["--output", "text"])):
        result, error = tmp / f"result{i}.json", tmp / f"error{i}.json"
        base = {"PATH": os.environ["PATH"], "HOME": str(tmp), "LANG": "C.UTF-8"}
        done = subprocess.run(
            [*GPUOPS, *mode, "--result-file", str(result), "--error-file", str(error), *args],
            env={**base, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode in (1, 2, 3, 4), (done.returncode, done.stderr)
        texts += [("stdout", done.stdout), ("stderr", done.stderr)]
        texts += [(p.name, p.read_text()) for p in (result, error) if p.exists()]
        assert error.exists(), done.stderr
    return texts


def _assert_clean(texts: list[tuple[str, str]]) -> None:
    for where, text in texts:
        for form in FORMS:
            assert form not in text, f"the canary reached {where}:\n{text}"


@pytest.mark.parametrize("user", sorted(_users()))
def test_kubeconfig_credentials_never_reach_a_message(
    kube_lab: KubeLab, tmp_path: Path, user: str
) -> None:
    facts = kube_lab.facts
    kc = _kubeconfig(tmp_path / "kc.yaml", facts["server"], facts["ca_file"], _users()[user])
    texts = _gpuops(
        tmp_path, ["headroom", "check", "--gpus-per-pod", "1", "--kubeconfig", str(kc)], {}
    )
    _assert_clean(texts)


def test_a_password_in_the_server_url_never_reaches_a_message(
    kube_lab: KubeLab, tmp_path: Path
) -> None:
    facts = kube_lab.facts
    server = facts["server"].replace("https://", f"https://ci:{CANARY}@")
    kc = _kubeconfig(tmp_path / "kc.yaml", server, facts["ca_file"], {"token": "x" * 16})
    texts = _gpuops(
        tmp_path, ["headroom", "check", "--gpus-per-pod", "1", "--kubeconfig", str(kc)], {}
    )
    _assert_clean(texts)
    assert any("127.0.0.1" in text for _, text in texts)  # the server is still named


def test_a_kubeconfig_that_is_not_yaml_never_shows_its_content(tmp_path: Path) -> None:
    kc = tmp_path / "kc.yaml"
    kc.write_text(f"users:\n- name: ci\n  user: {{token: {CANARY}\n  other: [\n")
    texts = _gpuops(
        tmp_path, ["headroom", "check", "--gpus-per-pod", "1", "--kubeconfig", str(kc)], {}
    )
    _assert_clean(texts)


class _Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hook_500() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def hook_garbage() -> Iterator[str]:
    """Answers every connection with a line that is no HTTP status line (BadStatusLine)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                time.sleep(0.05)
                conn.sendall(f"{CANARY} nonsense\r\n\r\n".replace(CANARY, "x").encode())

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    listener.close()


HOOKS = ["closed-port", "http-500", "bad-status-line", "control-char", "bad-port", "no-host"]


@pytest.mark.parametrize(
    ("variable", "hook"),
    [
        *[("GPUOPS_WEBHOOK_URL", h) for h in HOOKS],
        # a variable whose name says nothing of secrets: its value is still one
        ("ONCALL_HOOK", "bad-status-line"),
        ("ONCALL_HOOK", "bad-port"),
    ],
)
def test_the_webhook_url_never_reaches_a_message_and_never_changes_the_verdict(
    kube_lab: KubeLab,
    tmp_path: Path,
    hook_500: str,
    hook_garbage: str,
    variable: str,
    hook: str,
) -> None:
    url = {
        "closed-port": f"http://127.0.0.1:{_closed_port()}/hooks/{CANARY}",
        "http-500": f"{hook_500}/hooks/{CANARY}",
        "bad-status-line": f"{hook_garbage}/hooks/{CANARY}",
        "control-char": f"{hook_500}/hooks/{CANARY}\x01",
        "bad-port": f"http://127.0.0.1:99999/hooks/{CANARY}",
        "no-host": f"http:///hooks/{CANARY}",
    }[hook]
    args = ["headroom", "check", "--gpus-per-pod", "1024", "--kubeconfig",
            str(kube_lab.kubeconfig), "--webhook-url-env", variable]  # fmt: skip
    texts = _gpuops(tmp_path, args, {variable: url})
    _assert_clean(texts)
    errors = [json.loads(t) for w, t in texts if w.startswith("error")]
    for doc in errors:
        if hook in ("bad-port", "no-host"):  # refused before anything ran, naming the variable
            assert doc["error"]["exit_code"] == 2 and f"${variable}" in doc["error"]["message"]
        else:  # the verdict stands; the failed notification is reported beside it
            assert doc["error"]["exit_code"] == 3, doc
            assert doc["result"]["notification"]["status"] == "failed"
