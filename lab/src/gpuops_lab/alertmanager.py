"""Lab component ``alertmanager``: a real Alertmanager (Debian ``prometheus-alertmanager``
0.25), started by the lab (there is no systemd), on ``127.0.0.1:<free port>``.

Its config and storage live in ``<lab dir>/alertmanager`` (``alertmanager.yml``, ``data/``):
one route to a receiver that notifies nobody (the lab has no mail or chat to send to), and
no cluster peer (``--cluster.listen-address=``: one Alertmanager, no gossip port). Ready when
``/-/ready`` answers 200. Its URL is the fact ``url``. Process name ``alertmanager`` (pid with
start time in ``<lab dir>/pids/alertmanager.pid``; stopped only while provably the lab's, like
every lab daemon).

Alerts reach it as they reach a real one: ``POST /api/v2/alerts`` (what Prometheus' notifier
sends). The lab's Prometheus does not send it any (no rule file is wired): tests post the
alerts they need through that API themselves, which is the same path into Alertmanager.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
import urllib.request
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from gpuops.errors import OperationFailed
from gpuops_lab import proc, safefiles

if TYPE_CHECKING:
    from gpuops_lab import Lab

log = logging.getLogger(__name__)

PROC = "alertmanager"
BINARY = "prometheus-alertmanager"
START_TIMEOUT_S = 60.0
RECEIVER = "lab-nobody"


def _dir(lab: Lab) -> Path:
    return lab.dir / "alertmanager"


def config() -> dict[str, Any]:
    """One route to a receiver without notifiers: alerts are kept and served, sent nowhere."""
    return {
        "route": {"receiver": RECEIVER, "group_by": ["alertname"]},
        "receivers": [{"name": RECEIVER}],
    }


def _ready(url: str) -> bool:
    return proc.http_ok(f"{url}/-/ready")


def up(lab: Lab) -> dict[str, Any]:
    binary = shutil.which(BINARY)
    if binary is None:
        raise OperationFailed(
            "prometheus-alertmanager is not installed",
            hint="run scripts/setup.sh system (Debian package prometheus-alertmanager)",
        )
    base = _dir(lab)
    shutil.rmtree(base, ignore_errors=True)
    safefiles.ensure_dir(base / "data")
    port = proc.free_port()
    config_file = base / "alertmanager.yml"
    safefiles.write_atomic(config_file, yaml.safe_dump(config(), sort_keys=False))
    url = f"http://127.0.0.1:{port}"
    argv = [
        binary,
        f"--config.file={config_file}",
        f"--storage.path={base / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",  # one Alertmanager: no gossip port (it binds :9094 else)
        "--log.level=warn",
    ]
    started = time.monotonic()
    pid = proc.spawn(PROC, argv, lab.dir, cwd=base)
    proc.wait_for(
        lambda: _ready(url),
        "alertmanager /-/ready",
        timeout=START_TIMEOUT_S,
        pid=pid,
        log_file=lab.dir / "logs" / f"{PROC}.log",
    )
    ready_s = round(time.monotonic() - started, 3)
    log.info("alertmanager ready on %s in %.2fs", url, ready_s)
    return {
        "url": url,
        "port": port,
        "config": str(config_file),
        "data": str(base / "data"),
        "ready_s": ready_s,
        "summary": f"{url} (Alertmanager: alerts posted to /api/v2/alerts, notifies nobody)",
    }


def down(lab: Lab) -> None:
    proc.stop(PROC, lab.dir)
    shutil.rmtree(_dir(lab), ignore_errors=True)


def status(lab: Lab) -> dict[str, Any]:
    facts = lab.facts("alertmanager")
    pid = proc.pid_of(PROC, lab.dir)
    running = pid is not None and proc.alive(pid)
    answering = bool(facts) and running and _ready(str(facts["url"]))
    return {"healthy": answering, "pid": pid if running else None}


def post_alert(
    url: str,
    labels: Mapping[str, str],
    *,
    lasts_s: float = 3600.0,
    annotations: Mapping[str, str] | None = None,
) -> None:
    """Fire an alert as Prometheus' notifier does (``POST /api/v2/alerts``): it is active from
    now and resolves by itself after ``lasts_s`` seconds (0 or less: resolve it now)."""
    now = datetime.now(UTC)
    alert = {
        "labels": dict(labels),
        "annotations": dict(annotations or {}),
        "startsAt": (now - timedelta(seconds=1)).isoformat(),
        "endsAt": (now + timedelta(seconds=lasts_s)).isoformat(),
        "generatorURL": "http://lab.invalid/gpuops-lab",
    }
    req = urllib.request.Request(  # noqa: S310 (the lab's loopback URL)
        f"{url}/api/v2/alerts",
        data=json.dumps([alert]).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310
        if resp.status != 200:
            raise OperationFailed(f"alertmanager refused the alert: HTTP {resp.status}")
