"""Kubeconfig credentials without the official client (gpuops.adapters.kube.creds) against the
official loader itself: for every plain kubeconfig the same server, TLS material and token;
everything else is handed to the official loader (None)."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config as kconfig
from kubernetes.client import Configuration

from gpuops.adapters.kube.creds import Credentials, from_configuration, plain_kubeconfig
from gpuops.adapters.kube.transport import Transport
from gpuops.errors import InvalidInput

CA_PEM = b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
CERT_PEM = b"-----BEGIN CERTIFICATE-----\nMIIBclient\n-----END CERTIFICATE-----\n"
KEY_PEM = b"-----BEGIN EC PRIVATE KEY-----\nMHckey\n-----END EC PRIVATE KEY-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(
    path: Path,
    cluster: dict[str, Any],
    user: dict[str, Any] | None,
    *,
    extra_contexts: int = 0,
    current: str = "main",
) -> Path:
    contexts = [{"name": "main", "context": {"cluster": "c", "user": "u", "namespace": "x"}}]
    contexts += [
        {"name": f"other{i}", "context": {"cluster": f"c{i}", "user": "u"}}
        for i in range(extra_contexts)
    ]
    clusters = [{"name": "c", "cluster": cluster}]
    clusters += [
        {"name": f"c{i}", "cluster": {"server": f"https://other{i}.example:6443"}}
        for i in range(extra_contexts)
    ]
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "users": [{"name": "u", "user": user}] if user is not None else [],
        "contexts": contexts,
        "current-context": current,
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def official(path: Path, context: str | None = None) -> Credentials:
    cfg = Configuration()
    kconfig.load_kube_config(
        config_file=str(path), context=context, client_configuration=cfg, persist_config=False
    )
    return from_configuration(cfg)


def material(creds: Credentials) -> dict[str, Any]:
    """What a connection would use, with files read (the two loaders keep PEM differently)."""

    def read(data: bytes | str | None, file: str | None) -> bytes | None:
        if data is not None:
            return data.encode() if isinstance(data, str) else data
        return Path(file).read_bytes() if file else None

    return {
        "server": creds.server,
        "verify": creds.verify,
        "tls_server_name": creds.tls_server_name,
        "ca": read(creds.ca_pem, creds.ca_file),
        "cert": read(creds.cert_pem, creds.cert_file),
        "key": read(creds.key_pem, creds.key_file),
        "authorization": creds.authorization() if creds.authorization else None,
        "proxy": creds.proxy,
    }


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki/ca.crt").write_bytes(CA_PEM)
    (tmp_path / "pki/client.crt").write_bytes(CERT_PEM)
    (tmp_path / "pki/client.key").write_bytes(KEY_PEM)
    (tmp_path / "token").write_text("file-token")
    return tmp_path


PLAIN: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "token and CA data (the lab's)": (
        {"server": "https://127.0.0.1:6443/", "certificate-authority-data": b64(CA_PEM)},
        {"token": "abc.def-123"},
    ),
    "token file and CA file, relative": (
        {"server": "https://k8s.example:443", "certificate-authority": "pki/ca.crt"},
        {"tokenFile": "token"},
    ),
    "client certificate data": (
        {"server": "https://k8s.example", "certificate-authority-data": b64(CA_PEM)},
        {"client-certificate-data": b64(CERT_PEM), "client-key-data": b64(KEY_PEM)},
    ),
    "client certificate files": (
        {"server": "https://k8s.example/k8s/clusters/c-1", "certificate-authority": "pki/ca.crt"},
        {"client-certificate": "pki/client.crt", "client-key": "pki/client.key", "token": "t"},
    ),
    "no verification, a TLS server name": (
        {
            "server": "https://10.0.0.1:6443",
            "insecure-skip-tls-verify": True,
            "tls-server-name": "kubernetes.default",
        },
        {"token": "t"},
    ),
    "verification stated, no user": (
        {"server": "https://10.0.0.1:6443", "insecure-skip-tls-verify": False},
        None,
    ),
    "empty token data means no token": (
        {"server": "https://10.0.0.1:6443", "certificate-authority-data": b64(CA_PEM)},
        {"token": ""},
    ),
}


@pytest.mark.parametrize("case", sorted(PLAIN))
def test_plain_kubeconfigs_give_what_the_official_loader_gives(files: Path, case: str) -> None:
    cluster, user = PLAIN[case]
    path = kubeconfig(files / "config", cluster, user if user is not None else None)
    if user is None:  # a context without a user
        doc = yaml.safe_load(path.read_text())
        del doc["contexts"][0]["context"]["user"]
        path.write_text(yaml.safe_dump(doc))
    ours = plain_kubeconfig(str(path), None)
    assert ours is not None
    assert material(ours) == material(official(path))


def test_the_context_asked_for_and_kubeconfig_from_the_environment(
    files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = kubeconfig(
        files / "config", {"server": "https://a.example"}, {"token": "t"}, extra_contexts=2
    )
    ours = plain_kubeconfig(str(path), "other1")
    assert ours is not None and ours.server == "https://other1.example:6443"
    assert material(ours) == material(official(path, "other1"))
    monkeypatch.setenv("KUBECONFIG", str(path))
    env = plain_kubeconfig(None, None)
    assert env is not None and env.server == "https://a.example"


def test_a_token_file_ending_in_a_newline_is_trimmed_like_kubectl(files: Path) -> None:
    (files / "token").write_text("file-token\n")
    path = kubeconfig(files / "config", {"server": "https://a.example"}, {"tokenFile": "token"})
    ours = plain_kubeconfig(str(path), None)
    assert ours is not None and ours.authorization is not None
    assert ours.authorization() == "Bearer file-token"


HANDED_ON: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "exec plugin": (
        {"server": "https://a.example"},
        {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}},
    ),
    "auth provider": (
        {"server": "https://a.example"},
        {"auth-provider": {"name": "oidc", "config": {"client-secret": "s"}}},
    ),
    "basic auth": ({"server": "https://a.example"}, {"username": "a", "password": "b"}),
    "proxy": ({"server": "https://a.example", "proxy-url": "http://p:3128"}, {"token": "t"}),
    "plain http": ({"server": "http://a.example"}, {"token": "t"}),
    "insecure as text": ({"server": "https://a", "insecure-skip-tls-verify": "yes"}, {}),
    "missing CA file": ({"server": "https://a", "certificate-authority": "nope.crt"}, {}),
    "CA data not base64": ({"server": "https://a", "certificate-authority-data": "%%"}, {}),
    "token with a space": ({"server": "https://a.example"}, {"token": "two words"}),
    "missing token file": ({"server": "https://a.example"}, {"tokenFile": "missing"}),
}


@pytest.mark.parametrize("case", sorted(HANDED_ON))
def test_everything_else_goes_to_the_official_loader(files: Path, case: str) -> None:
    cluster, user = HANDED_ON[case]
    path = kubeconfig(files / "config", cluster, user)
    assert plain_kubeconfig(str(path), None) is None


def test_unreadable_or_ambiguous_files_go_to_the_official_loader(
    files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = kubeconfig(files / "config", {"server": "https://a.example"}, {"token": "t"})
    assert plain_kubeconfig(str(good), "no-such-context") is None
    assert plain_kubeconfig(str(files / "absent"), None) is None
    assert plain_kubeconfig(f"{good}{os.pathsep}{good}", None) is None  # merged files
    (files / "bad").write_text("clusters: [\n")
    assert plain_kubeconfig(str(files / "bad"), None) is None
    (files / "list").write_text("- 1\n")
    assert plain_kubeconfig(str(files / "list"), None) is None
    doc = yaml.safe_load(good.read_text())
    doc["users"].append(doc["users"][0])  # two users named u
    (files / "dup").write_text(yaml.safe_dump(doc))
    assert plain_kubeconfig(str(files / "dup"), None) is None
    doc = yaml.safe_load(good.read_text())
    doc["contexts"][0]["context"]["user"] = "ghost"
    (files / "ghost").write_text(yaml.safe_dump(doc))
    assert plain_kubeconfig(str(files / "ghost"), None) is None
    monkeypatch.setenv("KUBECONFIG", "")
    assert plain_kubeconfig(None, None) is None


def test_credentials_keep_secrets_out_of_repr() -> None:
    creds = Credentials(
        "https://a.example", cert_pem=b"CERT", key_pem=b"SECRET-KEY", authorization=lambda: "X"
    )
    assert "SECRET-KEY" not in repr(creds) and "CERT" not in repr(creds)


def _self_signed(tmp: Path) -> tuple[bytes, bytes]:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-subj", "/CN=gpuops-test", "-days", "1",
         "-keyout", str(tmp / "k.pem"), "-out", str(tmp / "c.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    return (tmp / "c.pem").read_bytes(), (tmp / "k.pem").read_bytes()


def test_transport_loads_inline_client_certificates_and_leaves_no_file(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    before = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("gpuops-tls-*"))
    Transport(Credentials("https://a.example", ca_pem=cert.decode(), cert_pem=cert, key_pem=key))
    assert set(Path(os.environ.get("TMPDIR", "/tmp")).glob("gpuops-tls-*")) == before


def test_unusable_tls_material_is_an_input_error_naming_no_secret(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    for creds in (
        Credentials("https://a.example", ca_pem=CA_PEM.decode()),  # not a certificate
        Credentials("https://a.example", cert_pem=cert, key_pem=b"-----BEGIN junk"),
        Credentials("https://a.example", key_pem=key),  # a key without a certificate
    ):
        with pytest.raises(InvalidInput, match=r"TLS settings for https://a\.example") as err:
            Transport(creds)
        assert "BEGIN" not in str(err.value) and "junk" not in str(err.value)
    with pytest.raises(InvalidInput, match="not an https:// \\(or http://\\) URL"):
        Transport(Credentials("ftp://a.example"))
    Transport(Credentials("http://127.0.0.1:8001")).close()  # kubectl proxy: plain HTTP
