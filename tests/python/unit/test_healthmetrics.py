"""core/healthmetrics.py (the exposition text) and adapters/pushgateway.py (its group URL)."""

from __future__ import annotations

import base64
import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar

import pytest

from gpuops import logs
from gpuops.adapters import pushgateway
from gpuops.core import healthmetrics
from gpuops.errors import InvalidInput, OperationFailed, Unreachable

DOC = {
    "summary": {"ok": 1, "warning": 0, "critical": 1, "unreachable": 0},
    "timings_s": {"total": 2.5},
    "hosts": [
        {"host": "gpu-a", "group": "gpu_a100", "status": "critical",
         "findings": [{"severity": "critical"}, {"severity": "warning"}, {"severity": "critical"}]},
        {"host": 'we"ird\\host\n', "group": "gpu_a100", "status": "ok", "findings": []},
    ],
    "quarantine": {"quarantined": ["gpu-a"], "breakers_open": {"gpu_h800": {}}},
}  # fmt: skip


def _samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_exposition_series_and_escaping() -> None:
    text = healthmetrics.exposition(DOC, now=1700000000.5, extra={"environment": "prod"})
    s = _samples(text)
    env = 'environment="prod",'
    assert s[f'gpuops_node_health_status{{{env}host="gpu-a",group="gpu_a100"}}'] == 2
    assert s[f'gpuops_node_health_status{{{env}host="we\\"ird\\\\host\\n",group="gpu_a100"}}'] == 0
    assert s[f'gpuops_node_findings{{{env}host="gpu-a",group="gpu_a100",severity="critical"}}'] == 2
    assert s[f'gpuops_node_findings{{{env}host="gpu-a",group="gpu_a100",severity="warning"}}'] == 1
    assert s[f'gpuops_node_quarantined{{{env}host="gpu-a",group="gpu_a100"}}'] == 1
    assert s[f'gpuops_quarantine_breaker_open{{{env}class="gpu_h800"}}'] == 1
    assert s[f'gpuops_quarantine_breaker_open{{{env}class="gpu_a100"}}'] == 0
    assert s[f'gpuops_inspect_hosts{{{env}status="critical"}}'] == 1
    assert s['gpuops_inspect_last_run_timestamp_seconds{environment="prod"}'] == 1700000000.5
    assert s['gpuops_inspect_duration_seconds{environment="prod"}'] == 2.5
    assert text.endswith("\n") and "# TYPE gpuops_node_health_status gauge" in text
    # every family has HELP and TYPE once
    types = [ln.split()[2] for ln in text.splitlines() if ln.startswith("# TYPE")]
    assert len(types) == len(set(types)) == 7


def test_no_quarantine_no_quarantine_series() -> None:
    doc = {k: v for k, v in DOC.items() if k != "quarantine"}
    text = healthmetrics.exposition(doc, now=1.0)
    assert "gpuops_node_quarantined" not in text and "breaker" not in text
    assert "gpuops_inspect_last_run_timestamp_seconds 1\n" in text


def test_group_url_encodes_every_value() -> None:
    url = pushgateway.group_url("http://pg:9091/", "j", {"environment": "a/b", "scope": ""})
    assert url.startswith("http://pg:9091/metrics/job@base64/")
    parts = url.split("/metrics/")[1].split("/")
    assert parts[2] == "environment@base64"
    assert base64.urlsafe_b64decode(parts[3] + "==").decode() == "a/b"
    assert parts[4:] == ["scope@base64", "="]


class _Receiver(BaseHTTPRequestHandler):
    got: ClassVar[list[tuple[str, str, str | None, bytes]]] = []

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Receiver.got.append((self.command, self.path, self.headers["Authorization"], body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_push_puts_the_text_at_the_group_path_with_basic_auth() -> None:
    """The group path holds '@' (label@base64): the URL once lost its host to a userinfo
    stripper that read '.../job@' as user:password@."""
    _Receiver.got.clear()
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        pushed = pushgateway.push(
            f"http://ops:s3cret@127.0.0.1:{port}", "j", {"environment": "test"}, "m 1\n"
        )
    finally:
        server.shutdown()
        server.server_close()
    assert pushed.status == 200 and pushed.url == f"http://127.0.0.1:{port}"
    ((method, path, auth, body),) = _Receiver.got
    assert method == "PUT" and body == b"m 1\n"
    assert path == "/metrics/job@base64/ag/environment@base64/dGVzdA"
    assert auth == "Basic " + base64.b64encode(b"ops:s3cret").decode()


def test_push_to_nothing_is_unreachable() -> None:
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    port = server.server_address[1]
    server.server_close()
    with pytest.raises(Unreachable, match="did not answer"):
        pushgateway.push(f"http://127.0.0.1:{port}", "j", {}, "m 1\n")


def _push_with(environ: dict[str, str], url_auth: str = "") -> str | None:
    """One push with the auth env_auth reads from ``environ``: the Authorization header."""
    _Receiver.got.clear()
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://{url_auth}127.0.0.1:{server.server_address[1]}"
        pushgateway.push(url, "j", {}, "m 1\n", auth=pushgateway.env_auth(environ, url))
    finally:
        server.shutdown()
        server.server_close()
    ((_, _, auth, _),) = _Receiver.got
    return auth


USER_ENV, PASSWORD_ENV = pushgateway.USERNAME_ENV, pushgateway.PASSWORD_ENV


def test_basic_auth_comes_from_the_environment_and_its_password_is_redacted() -> None:
    auth = _push_with({USER_ENV: "metrics", PASSWORD_ENV: "pgw-unit-Secret-91"})
    assert auth == "Basic " + base64.b64encode(b"metrics:pgw-unit-Secret-91").decode()
    assert "pgw-unit-Secret-91" not in logs.redacted("push with pgw-unit-Secret-91 failed")
    assert _push_with({}) is None  # neither: no auth at all


@pytest.mark.parametrize(
    ("environ", "url_auth", "message"),
    [
        ({USER_ENV: "metrics"}, "", f"{USER_ENV} is set but {PASSWORD_ENV} is not"),
        ({PASSWORD_ENV: "pw-only-77"}, "", f"{PASSWORD_ENV} is set but {USER_ENV} is not"),
        ({USER_ENV: "a:b", PASSWORD_ENV: "x"}, "", "holds ':' or a control character"),
        ({USER_ENV: "a\nb", PASSWORD_ENV: "x"}, "", "holds ':' or a control character"),
        ({USER_ENV: "m", PASSWORD_ENV: "p"}, "u:pw-in-url-55@", "carries user:password@"),
    ],
)
def test_half_set_malformed_or_doubled_credentials_are_refused(
    environ: dict[str, str], url_auth: str, message: str
) -> None:
    url = f"http://{url_auth}127.0.0.1:9"
    with pytest.raises(InvalidInput, match=re.escape(message)) as caught:
        pushgateway.env_auth(environ, url)
    text = caught.value.message + (caught.value.hint or "")
    for secret in ("pw-only-77", "pw-in-url-55"):
        assert secret not in text


def test_a_refusal_of_the_credentials_names_where_they_come_from() -> None:
    class Refuses(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            self.send_response(401)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Refuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(OperationFailed, match="HTTP 401") as caught:
            pushgateway.push(f"http://127.0.0.1:{server.server_address[1]}", "j", {}, "m 1\n")
    finally:
        server.shutdown()
        server.server_close()
    assert USER_ENV in (caught.value.hint or "") and "pushgatewayCredentialsId" in (
        caught.value.hint or ""
    )
