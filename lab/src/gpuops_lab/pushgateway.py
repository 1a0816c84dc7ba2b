"""Lab component ``pushgateway``: the real Prometheus Pushgateway (Debian
``prometheus-pushgateway`` 1.5), started by the lab (there is no systemd), on
``127.0.0.1:<free port>``, no persistence (``--persistence.file=``: a lab restart forgets what
was pushed, and nothing is written outside the lab, where Debian's default file would be).

The lab's Prometheus scrapes it (``honor_labels: true``, as the Pushgateway's documentation
asks, so pushed ``job``/``instance`` labels stay) when both run: ``pushgateway`` starts before
``prometheus``. Its URL is the fact ``url``. Process name ``pushgateway`` (pid with start time
in ``<lab dir>/pids/pushgateway.pid``; stopped only while provably the lab's, like every lab
daemon). Ready when ``/-/ready`` answers 200.
"""

from __future__ import annotations

import logging
import shutil
import time
from typing import TYPE_CHECKING, Any

from gpuops.errors import OperationFailed
from gpuops_lab import proc, safefiles

if TYPE_CHECKING:
    from gpuops_lab import Lab

log = logging.getLogger(__name__)

PROC = "pushgateway"
BINARIES = ("prometheus-pushgateway", "pushgateway")
START_TIMEOUT_S = 30.0


def binary() -> str | None:
    for name in BINARIES:
        found = shutil.which(name)
        if found:
            return found
    return None


def up(lab: Lab) -> dict[str, Any]:
    exe = binary()
    if exe is None:
        raise OperationFailed(
            "prometheus-pushgateway is not installed",
            hint="run scripts/setup.sh system (Debian package prometheus-pushgateway)",
        )
    base = lab.dir / "pushgateway"
    shutil.rmtree(base, ignore_errors=True)
    safefiles.ensure_dir(base)
    port = proc.free_port()
    url = f"http://127.0.0.1:{port}"
    # --persistence.file= (empty): in memory only. Debian's build persists by default to
    # /var/lib/prometheus/pushgateway.data, outside the lab, loaded again by every later lab
    argv = [
        exe,
        f"--web.listen-address=127.0.0.1:{port}",
        "--persistence.file=",
        "--log.level=warn",
    ]
    started = time.monotonic()
    pid = proc.spawn(PROC, argv, lab.dir, cwd=base)
    proc.wait_for(
        lambda: proc.http_ok(f"{url}/-/ready"),
        "pushgateway /-/ready",
        timeout=START_TIMEOUT_S,
        pid=pid,
        log_file=lab.dir / "logs" / f"{PROC}.log",
    )
    ready_s = round(time.monotonic() - started, 3)
    log.info("pushgateway ready on %s in %.2fs", url, ready_s)
    return {
        "url": url,
        "port": port,
        "ready_s": ready_s,
        "summary": f"{url} (Prometheus Pushgateway; the lab's Prometheus scrapes it)",
    }


def down(lab: Lab) -> None:
    proc.stop(PROC, lab.dir)
    shutil.rmtree(lab.dir / "pushgateway", ignore_errors=True)


def status(lab: Lab) -> dict[str, Any]:
    facts = lab.facts("pushgateway")
    pid = proc.pid_of(PROC, lab.dir)
    running = pid is not None and proc.alive(pid)
    answering = bool(facts) and running and proc.http_ok(f"{facts['url']}/-/ready")
    return {"healthy": answering, "pid": pid if running else None}
