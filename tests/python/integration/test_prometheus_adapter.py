"""The Prometheus adapter against a real Prometheus (Debian's 2.42) behind TLS: a private CA
(the analysis' ``prometheus.ca_file``), an untrusted certificate, plain HTTP to a TLS port,
and the 401 of a server that wants other credentials than the bearer token sent.

This test starts its own Prometheus (not the lab's plain-HTTP one) with a web config
(``--web.config.file``: TLS, and basic-auth users when a test writes them: Prometheus reads
that file again on every request). Nothing here is a stand-in.
"""

from __future__ import annotations

import logging
import shutil
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from gpuops.adapters.prometheus import (
    Prometheus,
    PrometheusRefused,
    QueryRejected,
)
from gpuops.errors import InvalidInput, OperationFailed, Unreachable
from gpuops.logs import redacted
from gpuops_lab import proc

pytestmark = pytest.mark.timeout(180)

TOKEN = "lab-bearer-9f2c61d0"


@dataclass
class TlsPrometheus:
    url: str
    ca: Path
    web_config: Path
    tls: dict[str, str]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _certs(d: Path) -> None:
    """A CA and a server certificate for 127.0.0.1 signed by it."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
             "ca.crt", "-days", "2", "-subj", "/CN=gpuops test CA", cwd=d)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
             "server.csr", "-subj", "/CN=127.0.0.1", cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "san.ext",
             cwd=d)  # fmt: skip


@pytest.fixture(scope="module")
def tls_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsPrometheus]:
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed (scripts/setup.sh installs it)"
    d = tmp_path_factory.mktemp("prom-tls")
    _certs(d)
    tls = {"cert_file": str(d / "server.crt"), "key_file": str(d / "server.key")}
    web = d / "web.yml"
    web.write_text(yaml.safe_dump({"tls_server_config": tls}))
    port = proc.free_port()
    (d / "prometheus.yml").write_text(yaml.safe_dump({"global": {"scrape_interval": "1s"}}))
    log = (d / "prometheus.log").open("w")
    child = subprocess.Popen(  # our own child: stopped by its handle, never by name
        [
            binary,
            f"--config.file={d / 'prometheus.yml'}",
            f"--web.config.file={web}",
            f"--storage.tsdb.path={d / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        cwd=d,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"https://127.0.0.1:{port}"
    ctx = ssl.create_default_context(cafile=str(d / "ca.crt"))
    try:
        deadline = time.monotonic() + 60
        while True:
            assert child.poll() is None, (d / "prometheus.log").read_text()[-2000:]
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2, context=ctx) as r:  # noqa: S310
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the TLS Prometheus did not become ready"
            time.sleep(0.3)
        yield TlsPrometheus(url, d / "ca.crt", web, tls)
    finally:
        child.terminate()
        try:
            child.wait(20)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        log.close()


def test_a_private_ca_is_trusted_and_only_it(tls_prometheus: TlsPrometheus) -> None:
    prom = Prometheus(tls_prometheus.url, ca_file=str(tls_prometheus.ca))
    assert prom.query("vector(1)") == [({}, 1.0)]
    assert prom.query('label_replace(vector(2), "pod", "p-1", "", "")') == [({"pod": "p-1"}, 2.0)]
    with pytest.raises(Unreachable, match="its TLS certificate is not trusted") as info:
        Prometheus(tls_prometheus.url).query("vector(1)")
    assert info.value.hint == "give the CA that signed it as the analysis' prometheus.ca_file"


def test_plain_http_to_a_tls_port_is_named(tls_prometheus: TlsPrometheus) -> None:
    plain = tls_prometheus.url.replace("https://", "http://")
    with pytest.raises(OperationFailed, match="answered HTTP 400 with no Prometheus API answer"):
        Prometheus(plain).query("vector(1)")


def test_a_refused_token_is_never_shown(
    tls_prometheus: TlsPrometheus, caplog: pytest.LogCaptureFixture
) -> None:
    """A server wanting basic auth (Prometheus' own web config) refuses the bearer token:
    PrometheusRefused (exit 1), the token in neither the message, the hint, nor the log."""
    hashed = subprocess.run(
        ["htpasswd", "-nbBC", "5", "lab", "lab-password"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    user, _, bcrypt = hashed.partition(":")
    web = {"tls_server_config": tls_prometheus.tls, "basic_auth_users": {user: bcrypt}}
    tls_prometheus.web_config.write_text(yaml.safe_dump(web))
    try:
        caplog.set_level(logging.DEBUG, logger="gpuops")
        prom = Prometheus(tls_prometheus.url, token=TOKEN, ca_file=str(tls_prometheus.ca))
        assert TOKEN not in repr(prom)
        with pytest.raises(PrometheusRefused, match=r"refused the query: HTTP 401$") as info:
            prom.query("vector(1)")
        assert TOKEN not in f"{info.value.message} {info.value.hint}"
        assert TOKEN not in caplog.text
        assert TOKEN not in redacted(f"Authorization: Bearer {TOKEN}")  # remembered as a secret
    finally:
        tls_prometheus.web_config.write_text(
            yaml.safe_dump({"tls_server_config": tls_prometheus.tls})
        )


def test_bad_settings_are_input_errors(tls_prometheus: TlsPrometheus, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="does not exist"):
        Prometheus(tls_prometheus.url, ca_file=str(tmp_path / "none.crt"))
    junk = tmp_path / "junk.crt"
    junk.write_text("not a certificate\n")
    with pytest.raises(InvalidInput, match="holds no usable PEM certificate"):
        Prometheus(tls_prometheus.url, ca_file=str(junk))
    with pytest.raises(InvalidInput, match="which speaks plain HTTP"):
        Prometheus("http://127.0.0.1:9090", ca_file=str(tls_prometheus.ca))
    with pytest.raises(InvalidInput, match="holds a blank, a line break") as info:
        Prometheus(tls_prometheus.url, token="abc\r\nX-Evil: 1")
    assert "X-Evil" not in info.value.message
    with pytest.raises(InvalidInput, match="carries a user name or password"):
        Prometheus("https://u:pw@127.0.0.1:1")
    with pytest.raises(QueryRejected, match="refused the query: bad_data"):
        Prometheus(tls_prometheus.url, ca_file=str(tls_prometheus.ca)).query("rate(")
