"""No secret in any message: a canary planted in every secret-bearing input never shows.

Secret-bearing inputs of the product's commands: the kubeconfig's user entry (token, basic-auth
password, OIDC client-secret / refresh-token / id-token, client key and certificate data, an
exec plugin's output), a user:password in the server URL, and the webhook URL (in
``$GPUOPS_WEBHOOK_URL`` or the variable ``--webhook-url-env`` names). Each is planted with a
canary and the CLI runs against the lab's real kube-apiserver, as a subprocess as Jenkins runs
it (text and JSON output, with and without ``--debug``). The canary, raw or base64-encoded, must
not appear on stdout, stderr, in the result or the error document.

More secret-bearing inputs, the same way: the Jenkins controller's URL with a
``user:password@`` (and its API token), the registry password in a variable the user named
(``--registry-password-env``), the driver repository URL with credentials
(``gpu_nodes_driver_repo_url``) through ``nodes update`` on the lab fleet. While each command
runs, a thread reads every process's command line (``/proc/*/cmdline``): gpuops' own, the
ssh and Ansible processes it starts on the agent, and the lab hosts' (each host is a PID
namespace of this machine, so this machine's /proc lists its processes too; the test checks
that it saw them). No secret may appear in any of them: secrets travel on stdin or in the
environment, never as an argument, on the agent and on the node.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
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
from integration.conftest_nodes import DEFAULT_DRIVERS
from integration.conftest_registry import RegistryLab
from integration.fleetlab import FleetLab
from integration.imagelab import cli_env
from result_documents import load_document

from gpuops_lab import fleet as labfleet
from gpuops_lab import hoststate
from gpuops_lab import registry as labregistry

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


class Cmdlines:
    """Every process's command line on this machine, sampled in a thread while a command runs
    (``with Cmdlines() as seen:``), with the PID namespace each one ran in: the agent's
    processes are in ours, a lab host's in its own."""

    def __init__(self) -> None:
        self.own_ns = str(Path("/proc/self/ns/pid").readlink())
        self.seen: dict[str, set[str]] = {}  # command line -> PID namespaces
        self.sweeps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sweep(self) -> None:
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                raw = (proc / "cmdline").read_bytes()
                ns = str((proc / "ns" / "pid").readlink())
            except OSError:  # gone between the listing and the read
                continue
            if raw:
                line = raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
                self.seen.setdefault(line, set()).add(ns)
        self.sweeps += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sweep()
            time.sleep(0.002)

    def __enter__(self) -> Cmdlines:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def on_agent(self) -> list[str]:
        return [c for c, ns in self.seen.items() if self.own_ns in ns]

    def on_hosts(self) -> list[str]:
        return [c for c, ns in self.seen.items() if ns - {self.own_ns}]

    def assert_clean(self, *secrets: str) -> None:
        assert self.sweeps > 10, self.sweeps
        leaks = [
            ("agent" if self.own_ns in ns else "lab host", line[-300:])
            for line, ns in self.seen.items()
            if any(secret in line for secret in secrets or FORMS)
        ]
        assert not leaks, "a secret is in a command line:\n" + "\n".join(map(str, leaks))


def _gpuops(
    tmp: Path, args: list[str], env: dict[str, str], *, ok: bool = False
) -> list[tuple[str, str]]:
    """Run the CLI four ways; every text it left: (where, text). ``ok``: it must succeed."""
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
        if ok:
            assert done.returncode == 0 and result.exists(), (done.returncode, done.stderr)
        else:
            assert done.returncode in (1, 2, 3, 4), (done.returncode, done.stderr)
            assert error.exists(), done.stderr
        texts += [("stdout", done.stdout), ("stderr", done.stderr)]
        texts += [(p.name, p.read_text()) for p in (result, error) if p.exists()]
        for p in (result, error):
            if p.exists():
                load_document(p)  # redacted, and still what its schema says
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


# -- Jenkins: a user:password@ in the controller's URL, the API token -------------------------
JENKINS_CONFIG = """\
jenkins: {folder: ai, name: infer, repository: "https://git.example.com/ai/infer.git"}
environments:
  staging: {namespace: NAMESPACE, deployment: infer, image: harbor.example.com/ai/infer}
"""


@pytest.fixture
def staging(kube_lab: KubeLab) -> Iterator[str]:
    """A namespace with the Deployment the environments file names (no release history yet:
    the rollback job's choices are empty)."""
    namespace = f"leak-{uuid.uuid4().hex[:6]}"
    kube_lab.core.create_namespace({"metadata": {"name": namespace}})
    labels = {"app": "infer"}
    template = {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "infer", "image": "harbor.example.com/ai/infer:1"}]},
    }
    kube_lab.apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "infer"},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": template},
        },
    )
    yield namespace
    kube_lab.core.delete_namespace(namespace)


@pytest.mark.parametrize("where", ["url-userinfo", "token"])
def test_the_jenkins_credentials_never_reach_a_message_or_a_command_line(
    kube_lab: KubeLab, staging: str, tmp_path: Path, where: str
) -> None:
    config = tmp_path / "gpuops-release.yaml"
    config.write_text(JENKINS_CONFIG.replace("NAMESPACE", staging))
    port = _closed_port()
    url = (
        f"https://admin:{CANARY}@127.0.0.1:{port}/"
        if where == "url-userinfo"
        else (f"https://127.0.0.1:{port}/")
    )
    env = {"JENKINS_URL": url, "CI_JENKINS_API": CANARY if where == "token" else "t" * 16}
    args = ["jenkins", "apply", "--config", str(config), "--kubeconfig", str(kube_lab.kubeconfig),
            "--user", "bot", "--token-env", "CI_JENKINS_API"]  # fmt: skip
    with Cmdlines() as seen:
        texts = _gpuops(tmp_path, args, env)
    _assert_clean(texts)
    seen.assert_clean()
    errors = [json.loads(t) for w, t in texts if w.startswith("error")]
    for doc in errors:  # it got as far as connecting, and says where, without the password
        assert doc["error"]["exit_code"] == 4, doc
        assert f"cannot reach Jenkins at https://127.0.0.1:{port}/" in doc["error"]["message"]


def test_a_jenkins_url_that_cannot_be_parsed_is_refused_before_anything(tmp_path: Path) -> None:
    config = tmp_path / "gpuops-release.yaml"
    config.write_text(JENKINS_CONFIG.replace("NAMESPACE", "staging"))
    texts = _gpuops(
        tmp_path,
        ["jenkins", "apply", "--config", str(config)],
        {"JENKINS_URL": f"http://admin:{CANARY}@[::1"},
    )
    _assert_clean(texts)
    for doc in [json.loads(t) for w, t in texts if w.startswith("error")]:
        assert doc["error"]["exit_code"] == 2 and doc["error"]["field"] == "url", doc


# -- the registry: a password in a variable the user named ------------------------------------
def test_a_registry_password_in_a_named_variable_is_redacted_from_every_output(
    auth_registry_lab: RegistryLab, tmp_path: Path
) -> None:
    """The password of ``--registry-password-env ROBOT_PASS`` is a secret like the default
    variable's: should the registry hand it back (here: an image label holding it), the
    result document on stdout and in the result file shows ``****``."""
    rlab = auth_registry_lab
    secret = labregistry.password(rlab.lab)
    ref = rlab.ref("leak")
    rlab.build(ref, f'FROM {rlab.base_image}\nLABEL org.example.note="{secret}"\n')
    rlab.push(ref)
    env = {k: v for k, v in cli_env(rlab, tmp_path / "home").items()
           if not k.startswith("GPUOPS_REGISTRY_")}  # fmt: skip
    env.update(ROBOT_USER=str(rlab.registry["username"]), ROBOT_PASS=secret)
    args = ["image", "inspect", "--image", ref, "--registry-ca", str(rlab.registry["ca"]),
            "--registry-username-env", "ROBOT_USER",
            "--registry-password-env", "ROBOT_PASS"]  # fmt: skip
    (tmp_path / "home").mkdir(exist_ok=True)
    with Cmdlines() as seen:
        texts = _gpuops(tmp_path, args, env, ok=True)
    seen.assert_clean(secret)
    for where, text in texts:
        assert secret not in text, f"the password reached {where}:\n{text}"
    result = json.loads(dict(texts)["result0.json"])
    assert result["result"]["labels"]["org.example.note"] == "****"
    text_output = [t for w, t in texts if w == "stdout"][1]  # the second mode: text
    assert "org.example.note=****" in text_output, text_output


# -- the driver repository: credentials in gpu_nodes_driver_repo_url --------------------------
CUDA = {"535": "12.2", "550": "12.4", "570": "12.8"}


def _inventory_with_repo_credentials(fleet: FleetLab, tmp: Path, **drivers: str) -> Path:
    """A copy of the lab's inventory whose driver repository URL carries ``ci:<canary>@``
    (the lab's repository serves anyone: the credentials only have to travel), the lab's
    known_hosts beside it; ``gpu_h800="570.133.20"`` makes a group want another driver."""
    folder = tmp / "inventory"
    shutil.copytree(Path(fleet.facts["inventory"]).parent, folder)
    shutil.copy(fleet.facts["known_hosts"], folder / "known_hosts")
    for group, version in drivers.items():
        path = folder / "group_vars" / f"{group}.yml"
        lines = [
            f'gpu_nodes_driver_version: "{version}"'
            if line.startswith("gpu_nodes_driver_version:")
            else f'gpu_nodes_cuda_version: "{CUDA.get(version.split(".")[0], "")}"'
            if line.startswith("gpu_nodes_cuda_version:")
            else line
            for line in path.read_text().splitlines()
        ]
        path.write_text("\n".join(lines) + "\n")
    all_vars = folder / "group_vars" / "all.yml"
    doc = yaml.safe_load(all_vars.read_text())
    if isinstance(doc.get("gpu_nodes_driver_sha256"), dict):  # a version the repo has not
        doc["gpu_nodes_driver_sha256"].setdefault("999.1.1", "0" * 64)
        all_vars.write_text(yaml.safe_dump(doc, sort_keys=False))
    hosts = folder / "hosts.yml"
    doc = yaml.safe_load(hosts.read_text())
    url = str(doc["all"]["vars"]["gpu_nodes_driver_repo_url"])
    doc["all"]["vars"]["gpu_nodes_driver_repo_url"] = url.replace("http://", f"http://ci:{CANARY}@")
    hosts.write_text(yaml.safe_dump(doc, sort_keys=False))
    return hosts


def _nodes(tmp: Path, *args: str) -> tuple[int, dict[str, Any] | None, str, str]:
    """``gpuops nodes ...`` as Jenkins runs it; (exit, result or error document, stdout,
    stderr)."""
    tmp.mkdir(parents=True, exist_ok=True)
    result, error = tmp / "result.json", tmp / "error.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUOPS_", "ANSIBLE_"))}
    env.update(GPUOPS_RESULT_FILE=str(result), GPUOPS_ERROR_FILE=str(error))
    done = subprocess.run(
        [str(Path(sys.executable).parent / "gpuops"), *args],
        capture_output=True, text=True, env=env, timeout=900, check=False, cwd=tmp,
    )  # fmt: skip
    path = result if done.returncode == 0 else error
    doc = json.loads(path.read_text()) if path.exists() else None
    return done.returncode, doc, done.stdout, done.stderr


def _files_under(folder: Path) -> list[tuple[str, str]]:
    return [
        (str(p), p.read_text(errors="replace")) for p in sorted(folder.rglob("*")) if p.is_file()
    ]


def _assert_lab_hosts_seen(fleet: FleetLab, seen: Cmdlines) -> None:
    """This machine's /proc showed the lab hosts' processes (their sshd, each in its host's
    PID namespace, and the sessions gpuops opened there) and the agent's ssh clients to them:
    the command lines checked are those of both sides."""
    on_hosts = seen.on_hosts()
    assert any(c.startswith("sshd: /usr/sbin/sshd") for c in on_hosts), sorted(on_hosts)[:20]
    assert any(c.startswith("sshd: root") for c in on_hosts), sorted(on_hosts)[:20]
    ips = {str(h["ip"]) for h in fleet.hosts}
    clients = [c for c in seen.on_agent() if c.startswith("ssh ")]
    assert any(f" {ip} " in c for c in clients for ip in ips), clients[:20]


@pytest.mark.parametrize("case", ["check", "missing-run"])
def test_driver_repository_credentials_never_reach_a_message_or_a_command_line(
    fleet_lab: FleetLab, tmp_path: Path, case: str
) -> None:
    """``nodes update --check``: the pre-flight probe fetches every driver's .run (HEAD) on
    the nodes, then Ansible's check mode; and the refusal of a driver the repository does not
    have ("missing .run"), which names the URL."""
    drivers = {"gpu_h800": "999.1.1"} if case == "missing-run" else {}
    inv = _inventory_with_repo_credentials(fleet_lab, tmp_path / "inv", **drivers)
    runs = []
    with Cmdlines() as seen:
        for mode in ("text", "json"):
            art = tmp_path / f"art-{mode}"
            args = ["--output", mode, "nodes", "update", "-i", str(inv), "-l", "gpu_h800",
                    "--no-kube", "--change", "driver", "--check",
                    "--artifacts-dir", str(art)]  # fmt: skip
            runs.append((_nodes(tmp_path / f"run-{mode}", *args), art))
    _assert_lab_hosts_seen(fleet_lab, seen)
    seen.assert_clean()
    for (rc, doc, stdout, stderr), art in runs:
        texts = [("stdout", stdout), ("stderr", stderr), ("document", json.dumps(doc)),
                 *_files_under(art)]  # fmt: skip
        _assert_clean(texts)
        assert doc is not None, stderr
        if case == "missing-run":
            assert rc == 2, stderr
            message = doc["error"]["message"]
            assert "driver 999.1.1 (group gpu_h800) is not in the repository" in message
            assert "http://10.200.0.1:" in message and "ci:" not in message  # no userinfo
        else:
            assert rc == 0, stderr
            assert (art / "update.json").is_file()


def _restore(fleet: FleetLab, host: str, group: str) -> None:
    labfleet.start_sshd(fleet.lab, host)
    hoststate.set_gpu_state(
        fleet.lab, host, driver=DEFAULT_DRIVERS[group], install_error=None, install_delay_s=0
    )
    fleet.ssh(
        host,
        "rm -rf /etc/ansible/facts.d/gpuops_nvidia_driver.fact /root/.cache/gpuops/nvidia",
    )  # what the install left on the lab host (its download): the next test finds it clean


def test_a_driver_install_keeps_the_repository_credentials_off_every_command_line(
    fleet_lab: FleetLab, tmp_path: Path
) -> None:
    """A real install on one host: Ansible downloads the .run from the repository with the
    credentials (get_url on the node), and neither the agent's nor the node's processes, nor
    Ansible's events in the artifacts, show them."""
    host = fleet_lab.host("gpu_l40s")
    inv = _inventory_with_repo_credentials(fleet_lab, tmp_path / "inv", gpu_l40s="570.133.20")
    art = tmp_path / "art"
    try:
        with Cmdlines() as seen:
            args = ["nodes", "update", "-i", str(inv), "-l", host, "--no-kube",
                    "--change", "driver", "--artifacts-dir", str(art)]  # fmt: skip
            rc, doc, stdout, stderr = _nodes(tmp_path / "run", *args)
        assert rc == 0, stderr
        assert doc is not None and doc["result"]["changed"] == [host]
        _assert_lab_hosts_seen(fleet_lab, seen)
        seen.assert_clean()
        assert list(art.rglob("job_events/*.json"))
        _assert_clean([("stdout", stdout), ("stderr", stderr), ("document", json.dumps(doc)),
                       *_files_under(art)])  # fmt: skip
    finally:
        _restore(fleet_lab, host, "gpu_l40s")
