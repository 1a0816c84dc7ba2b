"""Lab component ``prometheus``: a real Prometheus (Debian ``prometheus`` 2.42), started by
the lab (there is no systemd), on ``127.0.0.1:<free port>``.

Its config and storage live in ``<lab dir>/prometheus`` (``prometheus.yml``, ``data/``);
``scrape_interval`` and ``evaluation_interval`` are 1 s. It scrapes itself and, when the
``apps`` component runs, the app stand-in's exporter with ``honor_labels`` (the series keep
their ``namespace``, ``pod``, ``app``, ``track`` labels), and, when the ``pushgateway``
component runs, the Pushgateway (``honor_labels`` too). Ready when ``/-/ready`` answers 200.
Its URL is the fact ``url``. Process name ``prometheus`` (pid with start time in
``<lab dir>/pids/prometheus.pid``; stopped only while provably the lab's, like every lab
daemon).

A real cluster runs Prometheus in the cluster (e.g. kube-prometheus), discovers pods through
the API server (``kubernetes_sd_configs``) and scrapes each pod's ``/metrics`` every 15-60 s;
the lab scrapes one stand-in exporter every second so that tests see a rate within seconds.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from gpuops.errors import OperationFailed
from gpuops_lab import proc, safefiles

if TYPE_CHECKING:
    from gpuops_lab import Lab

log = logging.getLogger(__name__)

PROC = "prometheus"
BINARY = "prometheus"
START_TIMEOUT_S = 60.0
SCRAPE_INTERVAL = "1s"


def _dir(lab: Lab) -> Path:
    return lab.dir / "prometheus"


def config(port: int, apps_port: int | None, push_port: int | None = None) -> dict[str, Any]:
    """The Prometheus config: itself, the app stand-in's exporter and the Pushgateway when
    they run (both with ``honor_labels``: the series keep the labels they were exported or
    pushed with)."""
    jobs: list[dict[str, Any]] = [
        {"job_name": "prometheus", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
    ]
    for name, target in (("lab-apps", apps_port), ("pushgateway", push_port)):
        if target is not None:
            jobs.append(
                {
                    "job_name": name,
                    "honor_labels": True,
                    "static_configs": [{"targets": [f"127.0.0.1:{target}"]}],
                }
            )
    return {
        "global": {
            "scrape_interval": SCRAPE_INTERVAL,
            "scrape_timeout": SCRAPE_INTERVAL,
            "evaluation_interval": SCRAPE_INTERVAL,
        },
        "scrape_configs": jobs,
    }


def _ready(url: str) -> bool:
    return proc.http_ok(f"{url}/-/ready")


def _scraping(url: str, jobs: int) -> bool:
    """Whether every target has been scraped (and answered) once: Prometheus hands its
    scrape loops their targets up to 5 s after it is ready (discovery's update throttle)."""
    try:
        with urllib.request.urlopen(f"{url}/api/v1/targets", timeout=2) as resp:  # noqa: S310
            targets = json.loads(resp.read())["data"]["activeTargets"]
    except (OSError, ValueError, KeyError):
        return False
    return len(targets) == jobs and all(t.get("health") == "up" for t in targets)


def up(lab: Lab) -> dict[str, Any]:
    binary = shutil.which(BINARY)
    if binary is None:
        raise OperationFailed(
            "prometheus is not installed",
            hint="run scripts/setup.sh system (Debian package prometheus)",
        )
    base = _dir(lab)
    shutil.rmtree(base, ignore_errors=True)
    safefiles.ensure_dir(base / "data")
    port = proc.free_port()
    apps = lab.facts("apps")
    apps_port = int(apps["port"]) if apps.get("port") else None
    push = lab.facts("pushgateway")
    push_port = int(push["port"]) if push.get("port") else None
    config_file = base / "prometheus.yml"
    safefiles.write_atomic(
        config_file, yaml.safe_dump(config(port, apps_port, push_port), sort_keys=False)
    )
    url = f"http://127.0.0.1:{port}"
    argv = [
        binary,
        f"--config.file={config_file}",
        f"--storage.tsdb.path={base / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=1d",
        "--log.level=warn",
    ]
    started = time.monotonic()
    pid = proc.spawn(PROC, argv, lab.dir, cwd=base)
    log_file = lab.dir / "logs" / f"{PROC}.log"
    proc.wait_for(
        lambda: _ready(url),
        "prometheus /-/ready",
        timeout=START_TIMEOUT_S,
        pid=pid,
        log_file=log_file,
    )
    ready_s = round(time.monotonic() - started, 3)
    jobs = len(config(port, apps_port, push_port)["scrape_configs"])
    proc.wait_for(
        lambda: _scraping(url, jobs),
        "prometheus scraping its targets",
        timeout=START_TIMEOUT_S,
        interval=0.2,
        pid=pid,
        log_file=log_file,
    )
    scraping_s = round(time.monotonic() - started, 3)
    log.info("prometheus ready on %s in %.2fs, scraping in %.2fs", url, ready_s, scraping_s)
    scraped = ", ".join(
        [*(["the app stand-in"] if apps_port is not None else []),
         *(["the Pushgateway"] if push_port is not None else [])]
    ) or "itself only (no apps or pushgateway component)"  # fmt: skip
    return {
        "url": url,
        "port": port,
        "config": str(config_file),
        "data": str(base / "data"),
        "scrape_interval": SCRAPE_INTERVAL,
        "apps_target": f"127.0.0.1:{apps_port}" if apps_port is not None else None,
        "pushgateway_target": f"127.0.0.1:{push_port}" if push_port is not None else None,
        "ready_s": ready_s,
        "scraping_s": scraping_s,
        "summary": f"{url} (Prometheus, scrape every {SCRAPE_INTERVAL}: {scraped})",
    }


def down(lab: Lab) -> None:
    proc.stop(PROC, lab.dir)
    shutil.rmtree(_dir(lab), ignore_errors=True)


def status(lab: Lab) -> dict[str, Any]:
    """Healthy: running, ready, and scraping the app stand-in that runs now (a restarted
    stand-in listens on another port: ``lab up`` then starts Prometheus again)."""
    facts = lab.facts("prometheus")
    pid = proc.pid_of(PROC, lab.dir)
    running = pid is not None and proc.alive(pid)
    answering = bool(facts) and running and _ready(str(facts["url"]))
    apps = lab.facts("apps")
    target = f"127.0.0.1:{apps['port']}" if apps.get("port") else None
    push = lab.facts("pushgateway")
    push_target = f"127.0.0.1:{push['port']}" if push.get("port") else None
    current = (
        bool(facts)
        and facts.get("apps_target") == target
        and facts.get("pushgateway_target") == push_target
    )
    return {"healthy": answering and current, "pid": pid if running else None}
