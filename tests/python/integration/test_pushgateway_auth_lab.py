"""``gpuops nodes inspect --pushgateway`` against a real Pushgateway that asks for basic auth.

The Pushgateway is Debian's ``prometheus-pushgateway`` (the lab's binary) started by this test
with a web configuration (``--web.config.file``: ``basic_auth_users`` with a bcrypt hash, as
Prometheus' exporter-toolkit documents it). The credentials reach gpuops only through the
environment (``GPUOPS_PUSHGATEWAY_USERNAME`` / ``GPUOPS_PUSHGATEWAY_PASSWORD``, what the
``inspectGpuNodes`` step's ``pushgatewayCredentialsId`` binds), never in the URL or argv:
without them the push is refused (HTTP 401, exit 1, the rest of the inspection kept); with
them the group is stored, as the Pushgateway's own ``/api/v1/metrics`` says; the password is
in no output.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from integration.conftest_nodes import NodesLab

from gpuops_lab import proc
from gpuops_lab import pushgateway as labpushgateway

pytestmark = pytest.mark.timeout(300)

USER = "metrics"
PASSWORD = "pgw-Secret-7f3c9a"  # the test's own credential
HOST = "gpu-l40s-01"  # a healthy host: exit 0 unless the push fails


def _bcrypt(password: str) -> str:
    """A bcrypt hash (libxcrypt through the standard library's crypt; tests only)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt  # deprecated (gone in 3.13); Python 3.11's only bcrypt here

    hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 4))  # noqa: S324 - bcrypt
    assert hashed is not None and hashed.startswith("$2b$"), hashed
    return hashed


@pytest.fixture
def guarded_pushgateway(tmp_path: Path) -> Iterator[str]:
    """A Pushgateway of this test's own (its own pid file under tmp_path), basic auth on."""
    exe = labpushgateway.binary()
    assert exe is not None, "prometheus-pushgateway is installed by scripts/setup.sh"
    run_dir = tmp_path / "pgw"
    run_dir.mkdir()
    web = run_dir / "web.yml"
    web.write_text(yaml.safe_dump({"basic_auth_users": {USER: _bcrypt(PASSWORD)}}))
    port = proc.free_port()
    url = f"http://127.0.0.1:{port}"
    # in memory only, as the lab's own (test_lab_pushgateway.py)
    argv = [exe, f"--web.listen-address=127.0.0.1:{port}", f"--web.config.file={web}",
            "--persistence.file=", "--log.level=warn"]  # fmt: skip
    pid = proc.spawn("pushgateway-auth", argv, run_dir, cwd=run_dir)
    try:
        # /-/ready sits behind the same auth: 401 means it answers
        proc.wait_for(
            lambda: _status(f"{url}/-/ready") == 401,
            "pushgateway with basic auth",
            timeout=30,
            pid=pid,
            log_file=run_dir / "logs" / "pushgateway-auth.log",
        )
        yield url
    finally:
        proc.stop("pushgateway-auth", run_dir)


def _status(url: str, auth: tuple[str, str] | None = None) -> int:
    req = urllib.request.Request(url)  # noqa: S310 - the test's loopback
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:  # noqa: S310
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def _groups(url: str) -> list[dict[str, str]]:
    """The groups the Pushgateway holds (its API), as their label sets."""
    req = urllib.request.Request(f"{url}/api/v1/metrics")  # noqa: S310
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    req.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(req, timeout=5) as resp:  # noqa: S310
        doc = json.loads(resp.read())
    return [dict(g["labels"]) for g in doc["data"]]


def test_the_pushgateways_basic_auth_comes_from_the_environment_only(
    nodes_lab: NodesLab, guarded_pushgateway: str, tmp_path: Path
) -> None:
    url = guarded_pushgateway
    inv = nodes_lab.fleet.facts["inventory"]
    base = ["nodes", "inspect", "-i", inv, "-l", HOST, "--pushgateway", url]

    # without credentials: refused by the Pushgateway (HTTP 401: exit 1, failed; no answer at
    # all would be 4), said; the inspection itself kept
    bare = nodes_lab.gpuops(*base, tmp=tmp_path / "bare")
    assert bare.rc == 1, bare.stderr
    assert "HTTP 401" in bare.stderr, bare.stderr
    assert bare.result["metrics"]["pushgateway_error"].startswith(
        f"the Pushgateway {url} refused the metrics: HTTP 401"
    )
    assert [h["host"] for h in bare.result["hosts"]] == [HOST]
    assert _groups(url) == []

    # a wrong password: refused the same way, and never shown
    wrong = nodes_lab.gpuops(
        *base,
        tmp=tmp_path / "wrong",
        env={"GPUOPS_PUSHGATEWAY_USERNAME": USER, "GPUOPS_PUSHGATEWAY_PASSWORD": "not-it-0042"},
    )
    assert wrong.rc == 1 and "HTTP 401" in wrong.stderr, wrong.stderr
    assert "not-it-0042" not in wrong.stderr + json.dumps(wrong.doc)
    assert _groups(url) == []

    # from the environment: pushed; the group is there; the password in no output
    pushed = nodes_lab.gpuops(
        *base,
        tmp=tmp_path / "pushed",
        env={"GPUOPS_PUSHGATEWAY_USERNAME": USER, "GPUOPS_PUSHGATEWAY_PASSWORD": PASSWORD},
    )
    assert pushed.rc == 0, pushed.stderr
    metrics = pushed.result["metrics"]
    assert metrics["pushgateway"].startswith(f"{url}/metrics/job@base64/"), metrics
    (group,) = _groups(url)
    assert group["job"] == "gpuops_nodes_inspect" and group["scope"] == HOST, group
    for text in (pushed.stderr, json.dumps(pushed.doc)):
        assert PASSWORD not in text
