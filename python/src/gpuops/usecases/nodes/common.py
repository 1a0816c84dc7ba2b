"""What the nodes use cases share: the inventory, the fast inspection over ssh (one script,
no Python on the nodes), the pre-flight probe, the artifacts folder."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuops import content
from gpuops.adapters import ansible, ssh
from gpuops.core import gpuhealth, gpuparse
from gpuops.core.inventory import Host, Inventory, driver_file
from gpuops.errors import InvalidInput, OperationFailed

log = logging.getLogger(__name__)

INSPECT_SCRIPT = "roles/gpu_inspect/files/gpu-inspect.sh"
Say = Callable[[str], None]


def load(inventory: str, limit: str | None, pattern: str) -> Inventory:
    return ansible.load_inventory(inventory, limit, pattern)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def say(line: str) -> None:
    """A progress line for a person watching (stderr; stdout carries the result)."""
    print(line, file=sys.stderr, flush=True)


def inspect_script() -> str:
    return (content.ansible_dir() / INSPECT_SCRIPT).read_text()


def inspect_hosts(
    hosts: Sequence[Host],
    thresholds: Mapping[str, gpuhealth.Thresholds],
    *,
    timeout_s: int,
    parallel: int,
    mounts: Sequence[str] = ("/", "/var"),
) -> tuple[dict[str, gpuhealth.HostHealth], dict[str, str]]:
    """Every host's health through one ssh session each; (health by host, raw output)."""
    results = ssh.run_script(
        hosts,
        inspect_script(),
        [str(timeout_s), *mounts],
        timeout_s=timeout_s + 30,
        parallel=parallel,
    )
    health: dict[str, gpuhealth.HostHealth] = {}
    raw: dict[str, str] = {}
    for host in hosts:
        res = results[host.name]
        raw[host.name] = res.stdout
        t = thresholds[host.name]
        if res.unreachable:
            health[host.name] = gpuhealth.unreachable(
                host.name, f"unreachable: {res.reason}", host.gpu_count, t
            )
            continue
        try:
            parsed = gpuparse.split_sections(res.stdout)
        except gpuparse.ParseError as exc:
            found = gpuhealth.unreachable(host.name, f"{exc} (exit {res.rc})", host.gpu_count, t)
            found.status = gpuhealth.CRITICAL
            found.findings[0].check = "inspection-failed"
            health[host.name] = found
            continue
        health[host.name] = gpuhealth.evaluate(host.name, parsed, host.gpu_count, t)
    return health, raw


@dataclass
class Probe:
    reachable: dict[str, bool]
    reasons: dict[str, str]
    missing_runs: dict[str, list[str]]  # url -> hosts that could not fetch it
    elapsed_s: float


PROBE_SCRIPT = r"""# gpuops pre-flight: the node answers; each URL given can be fetched (HEAD)
for url in "$@"; do
  if command -v curl >/dev/null 2>&1; then
    curl -fsSI --max-time 10 -o /dev/null "$url" && echo "@@ok $url" || echo "@@missing $url"
  elif command -v wget >/dev/null 2>&1; then
    wget -q --spider -T 10 "$url" && echo "@@ok $url" || echo "@@missing $url"
  else
    echo "@@unknown $url"
  fi
done
echo "@@alive"
"""


def probe(hosts: Sequence[Host], *, check_runs: bool, parallel: int = 50) -> Probe:
    """Read-only pre-flight over ssh: every host answers and finds its driver's .run in the
    repository (when ``check_runs``). Groups of hosts share one repository check per URL."""
    started = time.monotonic()
    by_url: dict[str, list[Host]] = {}
    for host in hosts:
        by_url.setdefault(f"{host.repo_url}/{driver_file(host.driver_version)}", []).append(host)
    asked: dict[str, list[str]] = {h.name: [] for h in hosts}
    if check_runs:
        for url, group in by_url.items():
            asked[group[0].name].append(url)  # one host per URL asks the repository
    results: dict[str, ssh.Result] = {}
    groups: dict[tuple[str, ...], list[Host]] = {}
    for host in hosts:
        groups.setdefault(tuple(asked[host.name]), []).append(host)
    for urls, group in groups.items():
        results.update(ssh.run_script(group, PROBE_SCRIPT, urls, timeout_s=60, parallel=parallel))
    reachable = {h.name: "@@alive" in results[h.name].stdout for h in hosts}
    reasons = {h.name: results[h.name].reason for h in hosts if not reachable[h.name]}
    missing: dict[str, list[str]] = {}
    for host in hosts:
        for line in results[host.name].stdout.splitlines():
            if line.startswith("@@missing "):
                url = line.split(" ", 1)[1]
                missing[url] = [h.name for h in by_url.get(url, [])]
    return Probe(reachable, reasons, missing, round(time.monotonic() - started, 3))


def artifacts_dir(path: str | None, command: str) -> Path:
    """The artifacts folder: ``path``, else ``./gpuops-artifacts/<command>-<UTC time>``."""
    if path:
        target = Path(path)
    else:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        target = Path("gpuops-artifacts") / f"{command}-{stamp}"
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInput(
            f"artifacts folder {target} cannot be created ({exc.strerror})",
            field="artifacts_dir",
        ) from None
    return target


def write(path: Path, text: str) -> str:
    try:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    except OSError as exc:
        raise OperationFailed(f"cannot write {path} ({exc.strerror})") from None
    return str(path)


def write_json(path: Path, doc: Any) -> str:
    return write(path, json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
