"""What the nodes use cases share: the inventory, the fast inspection over ssh (one script,
no Python on the nodes), the pre-flight probe, the artifacts folder."""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gpuops import content
from gpuops.adapters import ansible, ssh
from gpuops.adapters.hostkeys import HostKeys
from gpuops.core import gpuhealth, gpuparse
from gpuops.core.inventory import Host, Inventory, driver_file
from gpuops.core.urls import remember_userinfo, shown_url, without_userinfo
from gpuops.errors import InvalidInput
from gpuops.fsio import OutDir
from gpuops.logs import progress_line

log = logging.getLogger(__name__)

INSPECT_SCRIPT = "roles/gpu_inspect/files/gpu-inspect.sh"
Say = Callable[[str], None]


def load(inventory: str, limit: str | None, pattern: str) -> Inventory:
    return ansible.load_inventory(inventory, limit, pattern)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def say(line: str) -> None:
    """A progress line for a person watching (stderr; stdout carries the result), after the
    time it was said and redacted with the secrets known now (:func:`gpuops.logs.progress_line`;
    progress.log is redacted by the writer)."""
    print(progress_line(line), file=sys.stderr, flush=True)


def inspect_script() -> str:
    return (content.ansible_dir() / INSPECT_SCRIPT).read_text()


def inspect_hosts(
    hosts: Sequence[Host],
    thresholds: Mapping[str, gpuhealth.Thresholds],
    *,
    timeout_s: int,
    parallel: int,
    mounts: Sequence[str] = ("/", "/var"),
    host_keys: HostKeys | None = None,
) -> tuple[dict[str, gpuhealth.HostHealth], dict[str, str]]:
    """Every host's health through one ssh session each; (health by host, raw output)."""
    results = ssh.run_script(
        hosts,
        inspect_script(),
        [str(timeout_s), *mounts],
        timeout_s=timeout_s + 30,
        parallel=parallel,
        host_keys=host_keys,
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
    missing_runs: dict[str, list[str]]  # url (without userinfo) -> hosts that could not fetch it
    elapsed_s: float


#: The pre-flight script. The URLs to check arrive inside the script (on ssh's stdin, in the
#: here-document ``probe_script`` fills in), never as arguments: a repository URL can carry a
#: password, and a command line is visible to every user of the agent and of the node (ps).
#: On the node too: curl reads the URL from a config on its stdin (``-K -``); wget reads a URL
#: with credentials from its stdin (``-i -``, GNU wget) and takes one without as an argument
#: (BusyBox wget has no ``-i``); ``printf`` is the shell's builtin. Each line of the
#: here-document is ``secret|plain URL``; answers name a URL by its index.
PROBE_SCRIPT = r"""# gpuops pre-flight: the node answers; each URL below can be fetched (HEAD)
gpuops_probe() {
  n=0
  while IFS=' ' read -r kind url; do
    if command -v curl >/dev/null 2>&1; then
      if printf 'url = "%s"\n' "$url" | curl -fsI --max-time 10 -o /dev/null -K - 2>/dev/null
      then echo "@@ok $n"; else echo "@@missing $n"; fi
    elif command -v wget >/dev/null 2>&1 && [ "$kind" = plain ]; then
      if wget -q --spider -T 10 "$url" 2>/dev/null
      then echo "@@ok $n"; else echo "@@missing $n"; fi
    elif command -v wget >/dev/null 2>&1; then
      if printf '%s\n' "$url" | wget -q --spider -T 10 -i - 2>/dev/null
      then echo "@@ok $n"; else echo "@@missing $n"; fi
    else
      echo "@@unknown $n"
    fi
    n=$((n + 1))
  done
}
gpuops_probe <<'@@GPUOPS-URLS@@'
@@URLS@@@@GPUOPS-URLS@@
echo "@@alive"
"""

#: What a URL handed to the probe may hold: printable ASCII without blanks, quotes or
#: backslashes (it is a line of a here-document and a quoted string of curl's config).
_PROBE_URL = re.compile(r"[!#-\[\]-~]+")


def probe_script(urls: Sequence[str]) -> str:
    """:data:`PROBE_SCRIPT` with ``urls`` in its here-document, one a line."""
    lines = "".join(f"{'plain' if without_userinfo(u) == u else 'secret'} {u}\n" for u in urls)
    return PROBE_SCRIPT.replace("@@URLS@@", lines)


def _probe_url(host: Host) -> str:
    url = f"{host.repo_url}/{driver_file(host.driver_version)}"
    remember_userinfo(url)  # a password in it is redacted from every output from now on
    if not _PROBE_URL.fullmatch(url):
        raise InvalidInput(
            f"inventory host {host.name}: gpu_nodes_driver_repo_url {shown_url(host.repo_url)} "
            "holds a blank, a quote, a backslash or a character that is not ASCII",
            hint="percent-encode it (RFC 3986)",
            field="inventory",
        )
    return url


def probe(
    hosts: Sequence[Host],
    *,
    check_runs: bool,
    parallel: int = 50,
    host_keys: HostKeys | None = None,
) -> Probe:
    """Read-only pre-flight over ssh: every host answers and finds its driver's .run in the
    repository (when ``check_runs``). Groups of hosts share one repository check per URL."""
    started = time.monotonic()
    by_url: dict[str, list[Host]] = {}
    for host in hosts if check_runs else ():
        by_url.setdefault(_probe_url(host), []).append(host)
    asked: dict[str, list[str]] = {h.name: [] for h in hosts}
    for url, group in by_url.items():
        asked[group[0].name].append(url)  # one host per URL asks the repository
    results: dict[str, ssh.Result] = {}
    groups: dict[tuple[str, ...], list[Host]] = {}
    for host in hosts:
        groups.setdefault(tuple(asked[host.name]), []).append(host)
    for urls, group in groups.items():
        results.update(
            ssh.run_script(  # the URLs inside the script (stdin), never as arguments
                group, probe_script(urls), timeout_s=60, parallel=parallel, host_keys=host_keys
            )
        )
    reachable = {h.name: "@@alive" in results[h.name].stdout for h in hosts}
    reasons = {h.name: results[h.name].reason for h in hosts if not reachable[h.name]}
    missing: dict[str, list[str]] = {}  # by the URL as messages show it: no user:password@
    for host in hosts:
        mine = asked[host.name]
        for line in results[host.name].stdout.splitlines():
            word, _, index = line.partition(" ")
            if word == "@@missing" and index.isdigit() and int(index) < len(mine):
                url = mine[int(index)]
                missing.setdefault(without_userinfo(url), []).extend(h.name for h in by_url[url])
    return Probe(reachable, reasons, missing, round(time.monotonic() - started, 3))


def artifacts_dir(path: str | None, command: str, *, option: str = "artifacts_dir") -> OutDir:
    """The artifacts folder: ``path``, else ``./gpuops-artifacts/<command>-<UTC time>``. It is
    checked now and created by the first file written into it."""
    if path:
        return OutDir(path, option=option)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return OutDir(Path("gpuops-artifacts") / f"{command}-{stamp}", option=option)
