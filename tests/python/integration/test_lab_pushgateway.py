"""The lab's Pushgateway (Debian's ``prometheus-pushgateway`` 1.5) keeps what is pushed in
memory only, as gpuops_lab.pushgateway says: Debian's build persists by default to
``/var/lib/prometheus/pushgateway.data``, a file outside the lab that every later lab (and
test) would load again. Found when test_pushgateway_auth_lab.py saw a group pushed by its
previous run in a freshly started Pushgateway."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from gpuops_lab import Lab, LabConfig

DEBIAN_DEFAULT = Path("/var/lib/prometheus/pushgateway.data")


def _groups(url: str) -> list[dict[str, str]]:
    with urllib.request.urlopen(f"{url}/api/v1/metrics", timeout=5) as resp:  # noqa: S310
        return [dict(g["labels"]) for g in json.loads(resp.read())["data"]]


def _stat(path: Path) -> tuple[int, int] | None:
    return (path.stat().st_mtime_ns, path.stat().st_size) if path.exists() else None


def test_the_labs_pushgateway_forgets_on_restart_and_writes_nothing_outside_the_lab(
    tmp_path: Path,
) -> None:
    lab = Lab(LabConfig(dir=tmp_path / "lab"))
    default_before = _stat(DEBIAN_DEFAULT)
    try:
        lab.up(["pushgateway"])
        url = lab.facts("pushgateway")["url"]
        put = urllib.request.Request(  # noqa: S310 - the lab's loopback
            f"{url}/metrics/job/lab-persistence-probe", data=b"probe 1\n", method="PUT"
        )
        with urllib.request.urlopen(put, timeout=5) as resp:  # noqa: S310
            assert resp.status == 200
        assert {"job": "lab-persistence-probe"} in _groups(url)

        lab.stop(["pushgateway"])  # SIGTERM: a persisting Pushgateway writes its file now
        lab.up(["pushgateway"])
        assert _groups(lab.facts("pushgateway")["url"]) == []
        assert _stat(DEBIAN_DEFAULT) == default_before  # not written, not created
    finally:
        lab.down()
