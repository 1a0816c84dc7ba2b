"""What the nodes use cases share: the inventory, the fast inspection over ssh (one script,
no Python on the nodes), the pre-flight probe, the artifacts folder."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from gpuops import content
from gpuops.adapters import ansible, ssh
from gpuops.adapters.hostkeys import HostKeys
from gpuops.core import gpuhealth, gpuparse
from gpuops.core.inventory import Host, Inventory, driver_file
from gpuops.core.nodestate import HostBefore
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
    before: dict[str, HostBefore] = field(default_factory=dict)  # what each host runs now
    dcgmi: dict[str, bool] = field(default_factory=dict)  # whether dcgmi is on the host
    #: hosts whose previous driver's .run (the one they run now) the repository lacks
    missing_previous: dict[str, str] = field(default_factory=dict)  # host -> url (shown)
    #: hosts that could not look for that .run (no curl, no wget): not known to be there
    unchecked_previous: dict[str, str] = field(default_factory=dict)  # host -> url (shown)


#: The pre-flight script. The URLs to check arrive inside the script (on ssh's stdin, in the
#: here-document ``probe_script`` fills in), never as arguments: a repository URL can carry a
#: password, and a command line is visible to every user of the agent and of the node (ps).
#: On the node too: curl reads the URL from a config on its stdin (``-K -``); wget reads a URL
#: with credentials from its stdin (``-i -``, GNU wget) and takes one without as an argument
#: (BusyBox wget has no ``-i``); ``printf`` is the shell's builtin. Each line of the
#: here-document is ``secret|plain URL``; answers name a URL by its index. A line
#: ``prev-secret|prev-plain REPO/ WANTED`` asks for the .run of the driver the node runs now,
#: when that is not WANTED (answered ``@@prev-ok``/``@@prev-missing``, ``@@prev-unknown``:
#: no curl or wget to look with).
#: Before the URLs, what the host runs (read-only): ``nvidia-smi``'s exit status and its
#: version line (exit 18: "Driver/library version mismatch", a newer driver waits for a
#: reboot), the driver the role last installed (its local fact, first line, read beside a
#: mismatch), whether ``dcgmi`` is there, the versions of ``nv-fabricmanager`` and ``nvidia-ctk``.
PROBE_SCRIPT = r"""# gpuops pre-flight: the node answers; each URL below can be fetched (HEAD)
gpuops_head() {
  kind=$1 url=$2
  if command -v curl >/dev/null 2>&1; then
    printf 'url = "%s"\n' "$url" | curl -fsI --max-time 10 -o /dev/null -K - 2>/dev/null
  elif command -v wget >/dev/null 2>&1 && [ "$kind" = plain ]; then
    wget -q --spider -T 10 "$url" 2>/dev/null
  elif command -v wget >/dev/null 2>&1; then
    printf '%s\n' "$url" | wget -q --spider -T 10 -i - 2>/dev/null
  else
    return 2
  fi
}
gpuops_answer() {
  gpuops_head "$2" "$3"
  case $? in
    0) echo "@@${1}ok $n" ;;
    2) echo "@@${1}unknown $n" ;;
    *) echo "@@${1}missing $n" ;;
  esac
}
gpuops_ver=""
if command -v nvidia-smi >/dev/null 2>&1; then
  if command -v timeout >/dev/null 2>&1; then smi=$(timeout 30 nvidia-smi 2>&1); rc=$?
  else smi=$(nvidia-smi 2>&1); rc=$?; fi
  echo "@@smi-rc $rc"
  while IFS= read -r line; do
    case $line in
      *"Driver Version"*)
        echo "@@smi $line"
        rest=${line#*Driver Version:}
        set -- $rest
        gpuops_ver=${1:-}
        ;;
    esac
  done <<@@GPUOPS-SMI@@
$smi
@@GPUOPS-SMI@@
  [ "$rc" = 0 ] || gpuops_ver=""
else
  echo "@@smi-rc 127"
fi
case $gpuops_ver in *[!0-9.]*) gpuops_ver="" ;; esac
if [ -r '@@FACT@@' ]; then echo "@@installed $(head -n 1 '@@FACT@@' | head -c 200)"; fi
if command -v dcgmi >/dev/null 2>&1; then echo "@@dcgmi yes"; else echo "@@dcgmi no"; fi
if command -v nv-fabricmanager >/dev/null 2>&1; then
  echo "@@fm $(nv-fabricmanager --version 2>&1 | head -n 1)"
fi
if command -v nvidia-ctk >/dev/null 2>&1; then
  echo "@@ctk $(nvidia-ctk --version 2>&1 | head -n 1)"
fi
gpuops_probe() {
  n=0
  while IFS=' ' read -r kind url wanted; do
    case $kind in
      prev-*)
        if [ -n "$gpuops_ver" ] && [ "$gpuops_ver" != "$wanted" ]; then
          gpuops_answer prev- "${kind#prev-}" "${url}NVIDIA-Linux-x86_64-${gpuops_ver}.run"
        fi ;;
      *) gpuops_answer "" "$kind" "$url" ;;
    esac
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
_SMI_LINE = re.compile(r"Driver Version:\s*([0-9.]+)\s+CUDA Version:\s*([0-9.]+)")
_VERSION_IN = re.compile(r"\b([0-9]+(?:\.[0-9]+)+)\b")
_DRIVER = re.compile(r"[0-9]+\.[0-9]+(?:\.[0-9]+)?")
#: the local fact the role nvidia_driver writes after an install (``nvidia_driver_fact_file``,
#: tasks/install.yml: ``{"version": "570.133.20"}``) and reads in tasks/state.yml
FACT_FILE = "/etc/ansible/facts.d/gpuops_nvidia_driver.fact"
_FACT_PATH = re.compile(r"/[A-Za-z0-9._/-]+")
#: nvidia-smi's exit status when the loaded module and the installed library differ
SMI_MISMATCH = 18


def _kind(url: str) -> str:
    return "plain" if without_userinfo(url) == url else "secret"


def probe_script(urls: Sequence[str], previous: tuple[str, str] | None = None) -> str:
    """:data:`PROBE_SCRIPT` with ``urls`` in its here-document, one a line; ``previous``
    (repository URL, wanted driver): also ask for the .run of the driver the host runs now."""
    lines = "".join(f"{_kind(u)} {u}\n" for u in urls)
    if previous is not None:
        repo, wanted = previous
        lines += f"prev-{_kind(repo)} {repo}/ {wanted}\n"
    if not _FACT_PATH.fullmatch(FACT_FILE):  # it stands in single quotes in the script
        raise ValueError(f"fact file path {FACT_FILE!r}")
    return PROBE_SCRIPT.replace("@@FACT@@", FACT_FILE).replace("@@URLS@@", lines)


def _checked_url(host: Host, url: str) -> str:
    remember_userinfo(url)  # a password in it is redacted from every output from now on
    if not _PROBE_URL.fullmatch(url):
        raise InvalidInput(
            f"inventory host {host.name}: gpu_nodes_driver_repo_url {shown_url(host.repo_url)} "
            "holds a blank, a quote, a backslash or a character that is not ASCII",
            hint="percent-encode it (RFC 3986)",
            field="inventory",
        )
    return url


def _probe_url(host: Host, wanted: str) -> str:
    return _checked_url(host, f"{host.repo_url}/{driver_file(wanted)}")


def host_before(stdout: str) -> tuple[HostBefore, bool]:
    """What the probe's answer says the host runs, and whether ``dcgmi`` is there."""
    before, dcgmi, rc = HostBefore(), False, None
    for line in stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word == "@@smi-rc" and rest.strip().isdigit():
            rc = int(rest)
        elif word == "@@smi" and (m := _SMI_LINE.search(rest)):
            before.driver, before.cuda = m.group(1), m.group(2)
        elif word == "@@dcgmi":
            dcgmi = rest.strip() == "yes"
        elif word == "@@fm" and (m := _VERSION_IN.search(rest)):
            before.fabricmanager = m.group(1)
        elif word == "@@ctk" and (m := _VERSION_IN.search(rest)):
            before.container_toolkit = m.group(1)
        elif word == "@@installed":
            before.installed = _installed(rest)
    if rc == 0 and before.driver:
        before.module = "loaded"
    else:
        before.driver = before.cuda = None
        before.module = {None: "unknown", SMI_MISMATCH: "mismatch"}.get(rc, "none")
        if rc not in (None, 127, SMI_MISMATCH, 6, 9):  # 6/9: no GPU found, no driver loaded
            before.module = "unknown"
    before.run_file = driver_file(before.driver) if before.driver else None
    return before, dcgmi


def _installed(text: str) -> str | None:
    """The version in the role's local fact (``{"version": "570.133.20"}``); None when the
    text is not that."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    version = doc.get("version") if isinstance(doc, dict) else None
    return version if isinstance(version, str) and _DRIVER.fullmatch(version) else None


def probe(
    hosts: Sequence[Host],
    *,
    check_runs: bool,
    parallel: int = 50,
    host_keys: HostKeys | None = None,
    wanted: Mapping[str, str] | None = None,
    check_previous: bool = False,
) -> Probe:
    """Read-only pre-flight over ssh, one session per host: every host answers, what it runs
    now (:class:`HostBefore`), whether it has ``dcgmi``, and it finds its wanted driver's .run
    in the repository (when ``check_runs``; ``wanted``: host -> driver, else its group's) and
    the .run of the driver it runs now, when that differs (``check_previous``: what a
    rollback reinstalls). Groups of hosts share one repository check per wanted URL."""
    started = time.monotonic()
    want = {h.name: (wanted or {}).get(h.name) or h.driver_version for h in hosts}
    by_url: dict[str, list[Host]] = {}
    for host in hosts if check_runs else ():
        by_url.setdefault(_probe_url(host, want[host.name]), []).append(host)
    asked: dict[str, list[str]] = {h.name: [] for h in hosts}
    for url, group in by_url.items():
        asked[group[0].name].append(url)  # one host per URL asks the repository
    prev: dict[str, tuple[str, str] | None] = {
        h.name: (_checked_url(h, h.repo_url), want[h.name]) if check_previous else None
        for h in hosts
    }
    results: dict[str, ssh.Result] = {}
    groups: dict[tuple[tuple[str, ...], tuple[str, str] | None], list[Host]] = {}
    for host in hosts:
        groups.setdefault((tuple(asked[host.name]), prev[host.name]), []).append(host)
    for (urls, previous), group in groups.items():
        results.update(
            ssh.run_script(  # the URLs inside the script (stdin), never as arguments
                group,
                probe_script(urls, previous),
                timeout_s=90,
                parallel=parallel,
                host_keys=host_keys,
            )
        )
    reachable = {h.name: "@@alive" in results[h.name].stdout for h in hosts}
    reasons = {h.name: results[h.name].reason for h in hosts if not reachable[h.name]}
    missing: dict[str, list[str]] = {}  # by the URL as messages show it: no user:password@
    before: dict[str, HostBefore] = {}
    dcgmi: dict[str, bool] = {}
    missing_previous: dict[str, str] = {}
    unchecked_previous: dict[str, str] = {}
    for host in hosts:
        mine = asked[host.name]
        out = results[host.name].stdout
        before[host.name], dcgmi[host.name] = host_before(out)
        for line in out.splitlines():
            word, _, index = line.partition(" ")
            if word == "@@missing" and index.isdigit() and int(index) < len(mine):
                url = mine[int(index)]
                missing.setdefault(without_userinfo(url), []).extend(h.name for h in by_url[url])
            elif word in ("@@prev-missing", "@@prev-unknown") and before[host.name].run_file:
                found = missing_previous if word == "@@prev-missing" else unchecked_previous
                found[host.name] = f"{without_userinfo(host.repo_url)}/{before[host.name].run_file}"
    return Probe(
        reachable,
        reasons,
        missing,
        round(time.monotonic() - started, 3),
        before,
        dcgmi,
        missing_previous,
        unchecked_previous,
    )


def artifacts_dir(path: str | None, command: str, *, option: str = "artifacts_dir") -> OutDir:
    """The artifacts folder: ``path``, else ``./gpuops-artifacts/<command>-<UTC time>``. It is
    checked now and created by the first file written into it."""
    if path:
        return OutDir(path, option=option)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return OutDir(Path("gpuops-artifacts") / f"{command}-{stamp}", option=option)
