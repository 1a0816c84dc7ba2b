"""gpuops's own Kubernetes transport against the lab's real kube-apiserver: the kubeconfig
shapes it reads itself (and never imports the official client for), an exec plugin through
the official loader, TLS verification and server names, and how failures are reported."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.conftest_kube import KubeLab

from gpuops.adapters import kube
from gpuops.adapters.kube import calls, pager
from gpuops.cli.main import run
from gpuops_lab import kube as labkube

pytestmark = pytest.mark.timeout(300)


def lab_parts(lab: KubeLab) -> tuple[str, str, str]:
    """(server, CA data, token) of the lab's admin kubeconfig."""
    doc = yaml.safe_load(lab.kubeconfig.read_text())
    cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
    return cluster["server"], cluster["certificate-authority-data"], user["token"]


def write_kubeconfig(path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": cluster}],
        "users": [{"name": "me", "user": user}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "me"}}],
        "current-context": "lab",
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(yaml.safe_dump(doc))
    return path


def check(kubeconfig: Path, tmp: Path) -> tuple[int, dict[str, Any]]:
    """``gpuops headroom check`` with this kubeconfig: (exit code, result or error document)."""
    result, error = tmp / "result.json", tmp / "error.json"
    for f in (result, error):
        f.unlink(missing_ok=True)
    code = run(
        [
            "--result-file", str(result), "--error-file", str(error),
            "headroom", "check", "--gpus-per-pod", "1", "--kubeconfig", str(kubeconfig),
        ]
    )  # fmt: skip
    doc = json.loads((result if code in (0, 3) else error).read_text())
    return code, doc


LIST_NODES = textwrap.dedent(
    """
    import sys
    from gpuops.adapters.kube import KubeClient
    kube = KubeClient.connect(sys.argv[1])
    try:
        print(len(kube.list_nodes()), "kubernetes" in sys.modules)
    finally:
        kube.close()
    """
)


def nodes_and_import(kubeconfig: Path) -> tuple[int, bool]:
    """(nodes listed, whether the official client was imported) in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", LIST_NODES, str(kubeconfig)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    count, imported = out.stdout.split()
    return int(count), imported == "True"


def exec_user(tmp: Path, token: str) -> dict[str, Any]:
    """A kubeconfig user whose token comes from an exec credential plugin (as cloud CLIs do);
    the plugin reads the token from a private file, never from its argv."""
    secret = tmp / "plugin-token"
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    plugin = tmp / "plugin.py"
    plugin.write_text(
        "import json, os, pathlib\n"
        "token = pathlib.Path(os.environ['PLUGIN_TOKEN_FILE']).read_text()\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1',\n"
        "                  'kind': 'ExecCredential', 'status': {'token': token}}))\n"
    )
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "env": [{"name": "PLUGIN_TOKEN_FILE", "value": str(secret)}],
            "interactiveMode": "Never",
        }
    }


def test_plain_kubeconfig_lists_without_the_official_client(
    kube_lab: KubeLab, tmp_path: Path
) -> None:
    server, ca, token = lab_parts(kube_lab)
    expected = len(kube_lab.core.list_node().items)
    assert nodes_and_import(kube_lab.kubeconfig) == (expected, False)
    # an exec plugin needs the official loader; the answer is the same
    kc = write_kubeconfig(
        tmp_path / "exec.kubeconfig",
        {"server": server, "certificate-authority-data": ca},
        exec_user(tmp_path, token),
    )
    assert nodes_and_import(kc) == (expected, True)
    code, doc = check(kc, tmp_path)
    assert code == 0 and doc["result"]["server"] == server


def test_token_file_tls_server_name_and_skipped_verification(
    kube_lab: KubeLab, tmp_path: Path
) -> None:
    server, ca, token = lab_parts(kube_lab)
    (tmp_path / "token").write_text(token + "\n")  # as `echo $TOKEN > token` writes it
    (tmp_path / "ca.crt").write_bytes(base64.b64decode(ca))
    shapes = {
        "token file, CA file": (
            {"server": server, "certificate-authority": "ca.crt"},
            {"tokenFile": "token"},
        ),
        # the apiserver's certificate names kubernetes.default, not the address dialled
        "TLS server name": (
            {
                "server": server,
                "certificate-authority-data": ca,
                "tls-server-name": "kubernetes.default",
            },
            {"token": token},
        ),
        "no verification": ({"server": server, "insecure-skip-tls-verify": True}, {"token": token}),
    }
    for name, (cluster, user) in shapes.items():
        kc = write_kubeconfig(tmp_path / "kubeconfig", cluster, user)
        code, doc = check(kc, tmp_path)
        assert code == 0, (name, doc)
        assert doc["result"]["server"] == server


def test_tls_failures_are_unreachable_naming_the_server(kube_lab: KubeLab, tmp_path: Path) -> None:
    server, ca, token = lab_parts(kube_lab)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-subj", "/CN=not-the-lab", "-days", "1",
         "-keyout", str(tmp_path / "other.key"), "-out", str(tmp_path / "other.crt")],
        check=True, capture_output=True,
    )  # fmt: skip
    other_ca = base64.b64encode((tmp_path / "other.crt").read_bytes()).decode()
    for cluster in (
        {"server": server, "certificate-authority-data": other_ca},  # someone else's CA
        {"server": server, "certificate-authority-data": ca, "tls-server-name": "evil.example"},
    ):
        kc = write_kubeconfig(tmp_path / "kubeconfig", cluster, {"token": token})
        code, doc = check(kc, tmp_path)
        assert code == 4, doc
        assert doc["error"]["category"] == "unreachable"
        assert server in doc["error"]["message"] and "TLS" in doc["error"]["message"]
        assert token not in json.dumps(doc)


def test_a_refused_token_is_an_operation_failure_not_a_verdict(
    kube_lab: KubeLab, tmp_path: Path
) -> None:
    server, ca, _ = lab_parts(kube_lab)
    kc = write_kubeconfig(
        tmp_path / "kubeconfig",
        {"server": server, "certificate-authority-data": ca},
        {"token": "not-a-lab-token"},
    )
    code, doc = check(kc, tmp_path)
    assert code == 1, doc
    assert "HTTP 401" in doc["error"]["message"] and server in doc["error"]["message"]
    assert "not-a-lab-token" not in json.dumps(doc)


def test_pages_asked_for_ahead_give_the_same_list(kube_lab: KubeLab) -> None:
    """Tiny pages, several in flight at once, against one unpaged LIST: the same pods and
    nodes (the continue chain is followed to its end, nothing twice, nothing lost)."""
    ns = f"pages-{os.getpid()}"
    kube_lab.core.create_namespace({"metadata": {"name": ns}})
    node = kube_lab.core.list_node().items[0].metadata.name
    for i in range(9):
        body = labkube.pod_body(f"p{i}", namespace=ns, node=node, gpus=i % 2)
        kube_lab.core.create_namespaced_pod(ns, body)
    client = kube.KubeClient.connect(str(kube_lab.kubeconfig))
    saved = pager.PAGE_SIZE
    try:
        pager.PAGE_SIZE = 0
        whole = sorted(p.key for p in client.list_bound_pods())
        nodes = sorted(n.name for n in client.list_nodes())
        pager.PAGE_SIZE = 2
        paged = [p.key for p in client.list_bound_pods()]
        assert sorted(paged) == whole and len(set(paged)) == len(paged)
        assert {f"{ns}/p{i}" for i in range(9)} <= set(whole)
        assert sorted(n.name for n in client.list_nodes()) == nodes
    finally:
        pager.PAGE_SIZE = saved
        client.close()
        kube_lab.core.delete_namespace(ns)


def test_protobuf_lists_give_what_json_lists_give(kube_lab: KubeLab) -> None:
    """The node and pod LISTs are answered in protobuf (asked for first) and decode to the
    same nodes and pods as the same LISTs answered in JSON: GPU requests of containers and
    of init containers (a sidecar), owners, labels, taints, conditions; paged too."""
    ns = f"proto-{os.getpid()}"
    kube_lab.core.create_namespace({"metadata": {"name": ns}})
    node = kube_lab.core.list_node().items[0].metadata.name
    for i in range(5):
        body = labkube.pod_body(f"p{i}", namespace=ns, node=node, gpus=i % 3)
        if i == 4:  # a sidecar asking for a GPU next to the main container
            body["spec"]["initContainers"] = [
                {
                    "name": "side",
                    "image": "registry.invalid/side:1",
                    "restartPolicy": "Always",
                    "resources": {
                        "requests": {labkube.GPU_RESOURCE: "1"},
                        "limits": {labkube.GPU_RESOURCE: "1"},
                    },
                }
            ]
        kube_lab.core.create_namespaced_pod(ns, body)
    client = kube.KubeClient.connect(str(kube_lab.kubeconfig))
    media: list[str] = []
    stream = client._http.stream

    def spy(*args: Any, **kwargs: Any) -> Any:
        cm = stream(*args, **kwargs)

        class Spy:
            def __enter__(self) -> Any:
                status, got, read = cm.__enter__()
                media.append(got)
                return status, got, read

            def __exit__(self, *exc: Any) -> Any:
                return cm.__exit__(*exc)

        return Spy()

    saved_accept, saved_size = pager.LIST_ACCEPT, pager.PAGE_SIZE
    client._http.stream = spy  # type: ignore[method-assign]
    try:
        lists = {}
        for accept in (saved_accept, "application/json"):
            pager.LIST_ACCEPT = accept
            for size in (0, 3):
                pager.PAGE_SIZE = size
                media.clear()
                lists[accept, size] = (client.list_nodes(), client.list_bound_pods())
                want = pager.PROTOBUF_MEDIA if accept == saved_accept else "application/json"
                assert set(media) == {want}, (accept, size, media)
        proto, json_ = lists[saved_accept, 0], lists["application/json", 0]
        assert proto == json_ == lists[saved_accept, 3] == lists["application/json", 3]
        pods = {p.key: p for p in proto[1]}
        assert pods[f"{ns}/p2"].requests[labkube.GPU_RESOURCE] == 2
        assert pods[f"{ns}/p4"].requests[labkube.GPU_RESOURCE] == 2  # 1 main + 1 sidecar
        assert any(n.labels and n.allocatable.get(labkube.GPU_RESOURCE) for n in proto[0])
    finally:
        pager.LIST_ACCEPT, pager.PAGE_SIZE = saved_accept, saved_size
        client.close()
        kube_lab.core.delete_namespace(ns)


def test_a_protobuf_status_answer_is_read_like_json(kube_lab: KubeLab) -> None:
    """An error to a LIST asked for as protobuf comes as a protobuf Status: its reason and
    message are read (a 404 of a Kubernetes path is "not found", not "not an API path")."""
    client = kube.KubeClient.connect(str(kube_lab.kubeconfig))
    try:
        with client._http.stream(
            "/api/v1/namespaces/no-such-ns/pods/no-such-pod", what="get", accept=pager.LIST_ACCEPT
        ) as (status, media, read):
            body = b"".join(iter(lambda: read(1 << 16), b""))
        assert (status, media) == (404, pager.PROTOBUF_MEDIA) and body.startswith(b"k8s\x00")
        assert calls.status_reason(body) == "NotFound"
        assert 'pods "no-such-pod" not found' in calls.status_message(body)
        with pytest.raises(kube.NotFound):
            client._check_status(status, body, "get pod", "/api/v1/namespaces/no-such-ns/pods")
    finally:
        client.close()
