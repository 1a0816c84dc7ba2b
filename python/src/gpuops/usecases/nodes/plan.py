"""The plan of ``gpuops nodes update``: which hosts the update would change, what it would change
on each (the tasks a check-mode run names, with their diffs) and where a host would fail.

The ``nvidia_driver`` role is planned from its own state script (``files/driver-state.sh``)
read over one ssh session per host (no Python on the nodes, all hosts at once) and decided by
the same function the role's tasks act on (:mod:`gpuops.core.driverstate`; what check mode of
those tasks reports: :mod:`gpuops.core.driverplan`). The checks that fail a host before
anything changes are made on the nodes as the role makes them: the repository's ``.run`` (and
Fabric Manager archive) against its sha256, once per file and sha256 (on the first host that
needs it), the verdict for every host that needs it. The ``node_init`` role, when it is in
``--change``, is planned by Ansible's check mode (its many small settings have no reading of
their own); its changes come first, as its tasks run first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import yaml

from gpuops import content
from gpuops.adapters import ansible, ssh
from gpuops.adapters.hostkeys import HostKeys
from gpuops.core import driverplan, driverstate
from gpuops.core.inventory import ROLE_DEFAULTS_READ, Host, Inventory
from gpuops.core.nodestate import DriverPin
from gpuops.core.urls import remember_userinfo, without_userinfo
from gpuops.errors import InternalError, InvalidInput
from gpuops.fsio import OutDir

ROLE_DIR = "roles/nvidia_driver"
_BOOL_TRUE = frozenset(("y", "yes", "on", "1", "true", "t"))  # Ansible's bool filter
#: what a URL handed to the checksum script may hold (a line of a here-document, a quoted
#: string of curl's config): printable ASCII without blanks, quotes or backslashes
_URL = re.compile(r"[!#-\[\]-~]+")


@dataclass
class HostPlan:
    """The plan of one host: ``status`` "" (planned; changes or none), failed or unreachable."""

    changes: list[str] = field(default_factory=list)
    diffs: list[dict[str, Any]] = field(default_factory=list)
    status: str = ""
    failed_task: str = ""
    message: str = ""
    by: str = ""  # what said so: "check mode" (node_init) or "" (the driver role's reading)


@dataclass
class Plan:
    hosts: dict[str, HostPlan]
    artifacts: str | None = None  # the check-mode run's artifacts (node_init), when it ran
    readings: dict[str, str] = field(default_factory=dict)  # host -> driver-state.sh output


@cache
def _role_file(name: str) -> dict[str, Any]:
    path = content.ansible_dir() / ROLE_DIR / name
    doc = yaml.safe_load(path.read_text())
    if not isinstance(doc, dict):
        raise InternalError(f"{path} is not a map of variables")
    return doc


def _truth(value: Any) -> bool:
    """``value | bool`` as Ansible's filter reads it."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in _BOOL_TRUE


def _words(host: Host, name: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise InvalidInput(
            f"inventory host {host.name}: {name} must be a list of non-empty strings",
            field="inventory",
        )
    return tuple(value)


def _text(host: Host, name: str, value: Any) -> str:
    if not isinstance(value, str) or not value or "\n" in value:
        raise InvalidInput(
            f"inventory host {host.name}: {name} must be a non-empty string of one line",
            field="inventory",
        )
    return value


def settings(host: Host, pin: DriverPin | None) -> driverplan.Settings:
    """The ``nvidia_driver`` role's inputs on ``host`` as ``playbooks/update_gpu_nodes.yml``
    gives them: the pinned driver (and Fabric Manager) where ``pin``, else the group's; the
    role's defaults (``defaults/main.yml``) where the inventory sets none of
    :data:`ROLE_DEFAULTS_READ`; what ``tasks/nouveau.yml`` writes (``vars/main.yml``)."""
    defaults, fixed = _role_file("defaults/main.yml"), _role_file("vars/main.yml")

    def role(name: str) -> Any:
        if name not in ROLE_DEFAULTS_READ:  # else the inventory's value would never be read
            raise InternalError(f"{name} is not among the role defaults gpuops reads")
        return host.vars[name] if name in host.vars else defaults[name]

    driver = pin.version if pin else host.driver_version
    fm = (pin.version if pin else host.fabricmanager_version) if host.fabricmanager_version else ""
    table = host.vars.get("gpu_nodes_driver_sha256")
    sha = table.get(driver) if isinstance(table, Mapping) else None
    fm_sha = host.fabricmanager_sha256(fm) if fm else None
    return driverplan.Settings(
        driver=driver,
        repo_url=host.repo_url,
        driver_sha256=sha if isinstance(sha, str) else "",
        fabricmanager=fm,
        fabricmanager_sha256=fm_sha if isinstance(fm_sha, str) else "",
        container_toolkit=host.container_toolkit_version,
        toolkit_installer=host.text("gpu_nodes_container_toolkit_installer") or "apt",
        blacklist_nouveau=_truth(role("nvidia_driver_blacklist_nouveau")),
        reboot=_truth(host.vars.get("gpu_nodes_driver_reboot", True)),
        nvidia_smi=_text(host, "nvidia_driver_nvidia_smi", role("nvidia_driver_nvidia_smi")),
        fact_file=_text(host, "nvidia_driver_fact_file", role("nvidia_driver_fact_file")),
        fm_bin_dir=_text(
            host, "nvidia_driver_fabricmanager_bin_dir", role("nvidia_driver_fabricmanager_bin_dir")
        ),
        fm_unit=_text(
            host, "nvidia_driver_fabricmanager_unit", role("nvidia_driver_fabricmanager_unit")
        ),
        headers_paths=_words(
            host, "nvidia_driver_kernel_headers_paths", role("nvidia_driver_kernel_headers_paths")
        ),
        required_tools=_words(
            host, "nvidia_driver_required_tools", role("nvidia_driver_required_tools")
        ),
        modprobe_dir=driverplan.Written(
            fixed["_nvidia_driver_modprobe_dir"], int(fixed["_nvidia_driver_modprobe_dir_mode"], 8)
        ),
        blacklist=driverplan.Written(
            fixed["_nvidia_driver_blacklist_file"],
            int(fixed["_nvidia_driver_blacklist_mode"], 8),
            fixed["_nvidia_driver_blacklist_content"],
        ),
    )


def _read(
    hosts: Sequence[Host],
    plans: Mapping[str, driverplan.Settings],
    *,
    parallel: int,
    host_keys: HostKeys | None,
) -> dict[str, ssh.Result]:
    """driver-state.sh on every host, hosts with the same arguments in one batch of sessions."""
    script = (content.ansible_dir() / driverstate.SCRIPT).read_text()
    groups: dict[tuple[str, ...], list[Host]] = {}
    for host in hosts:
        groups.setdefault(tuple(plans[host.name].script_args()), []).append(host)
    out: dict[str, ssh.Result] = {}
    for args, group in groups.items():
        out.update(
            ssh.run_script(
                group, script, list(args), timeout_s=120, parallel=parallel, host_keys=host_keys
            )
        )
    return out


#: The checksum script: one file of the repository per line of its here-document
#: (``secret|plain URL``), each read on the node and hashed (``@@sum N HEX``), or
#: ``@@sum-failed N RC`` (curl or wget failed), ``@@sum-unknown N`` (no curl or wget, or no
#: sha256sum). The URLs travel inside the script, on ssh's stdin (they can carry a password),
#: and reach curl in a config on its stdin (``-K -``), wget on its (``-i -``) unless plain.
#: Nothing is written on the node but a temporary file holding the download's exit status.
SUM_SCRIPT = r"""# gpuops plan: the sha256 of files in the driver repository, read on the node
gpuops_fetch() {
  if command -v curl >/dev/null 2>&1; then
    printf 'url = "%s"\n' "$2" | curl -fsS --connect-timeout 10 -y 60 -Y 1 -K - 2>/dev/null
  elif [ "$1" = plain ]; then
    wget -q -T 60 -O - "$2" 2>/dev/null
  else
    printf '%s\n' "$2" | wget -q -T 60 -O - -i - 2>/dev/null
  fi
}
gpuops_sum() {
  if ! command -v sha256sum >/dev/null 2>&1 ||
    { ! command -v curl >/dev/null 2>&1 && ! command -v wget >/dev/null 2>&1; } ||
    ! t=$(mktemp /tmp/gpuops-sum.XXXXXX); then
    echo "@@sum-unknown $n"
    return
  fi
  sum=$( { gpuops_fetch "$1" "$2"; echo $? > "$t"; } | sha256sum )
  rc=$(cat "$t")
  rm -f "$t"
  if [ "$rc" = 0 ]; then echo "@@sum $n ${sum%% *}"; else echo "@@sum-failed $n $rc"; fi
}
n=0
while IFS=' ' read -r kind url; do
  gpuops_sum "$kind" "$url" </dev/null
  n=$((n + 1))
done <<'@@GPUOPS-URLS@@'
@@URLS@@@@GPUOPS-URLS@@
echo "@@alive"
"""


def sum_script(urls: Sequence[str]) -> str:
    """:data:`SUM_SCRIPT` with ``urls`` in its here-document."""
    lines = ""
    for url in urls:
        remember_userinfo(url)  # a password in it is redacted from every output from now on
        if not _URL.fullmatch(url):
            raise InvalidInput(
                "a driver repository URL holds a blank, a quote, a backslash or a character "
                "that is not ASCII",
                hint="percent-encode it (RFC 3986)",
                field="inventory",
            )
        kind = "plain" if without_userinfo(url) == url else "secret"
        lines += f"{kind} {url}\n"
    return SUM_SCRIPT.replace("@@URLS@@", lines)


def _verdicts(
    checks: Sequence[driverplan.Check], host: Host, result: ssh.Result
) -> dict[driverplan.Check, str]:
    """Each check's verdict from ``host``'s answer: "" passed, else why it failed."""
    said: dict[int, list[str]] = {}
    for line in result.stdout.splitlines():
        word, _, rest = line.partition(" ")
        parts = rest.split()
        if word in ("@@sum", "@@sum-failed", "@@sum-unknown") and parts and parts[0].isdigit():
            said[int(parts[0])] = [word, *parts[1:]]
    out: dict[driverplan.Check, str] = {}
    for i, check in enumerate(checks):
        got = said.get(i)
        if result.unreachable or got is None:
            why = result.reason if result.unreachable else f"no answer (exit {result.rc})"
            out[check] = f"the plan could not check {check.name} on {host.name}: {why}"
        elif got[0] == "@@sum":
            sha = got[1] if len(got) > 1 else ""
            out[check] = "" if sha == check.sha256 else driverplan.checksum_message(check, sha)
        elif got[0] == "@@sum-failed":
            code = got[1] if len(got) > 1 else "?"
            out[check] = (
                f"{check.name} cannot be read from the driver repository (on {host.name}: curl "
                f"or wget exited {code})"
            )
        else:
            out[check] = (
                f"the plan could not check the sha256 of {check.name} on {host.name}: it has "
                "no curl or wget, or no sha256sum (install them, as pre-flight needs them too)"
            )
    return out


def _checks(
    needed: Mapping[str, Sequence[driverplan.Check]],
    inv: Inventory,
    *,
    host_keys: HostKeys | None,
) -> dict[driverplan.Check, str]:
    """Every check once, on the first host that needs it (all of a host's in one session),
    the hosts in parallel."""
    first: dict[tuple[str, str], str] = {}
    mine: dict[str, list[driverplan.Check]] = {}
    for name in inv.names():
        for check in needed.get(name, ()):
            key = (check.url, check.sha256)
            if key not in first:
                first[key] = name
                mine.setdefault(name, []).append(check)

    def one(name: str) -> dict[driverplan.Check, str]:
        host, checks = inv.host(name), mine[name]
        script = sum_script([c.url for c in checks])
        result = ssh.run_script([host], script, timeout_s=3600, host_keys=host_keys)[name]
        return _verdicts(checks, host, result)

    verdicts: dict[tuple[str, str], str] = {}
    if mine:
        with ThreadPoolExecutor(max_workers=min(8, len(mine))) as pool:
            for done in pool.map(one, list(mine)):
                verdicts.update({(c.url, c.sha256): v for c, v in done.items()})
    return {c: verdicts[(c.url, c.sha256)] for checks in needed.values() for c in checks}


def _until_failure(found: Sequence[driverplan.Step]) -> list[driverplan.Check]:
    """The checks a host meets before its first certain failure (check mode stops there)."""
    out = []
    for step in found:
        if step.kind == "fail":
            break
        if step.kind == "check" and step.check is not None:
            out.append(step.check)
    return out


def driver_plans(
    inv: Inventory,
    pins: Mapping[str, DriverPin],
    *,
    parallel: int,
    host_keys: HostKeys | None,
) -> tuple[dict[str, HostPlan], dict[str, str]]:
    """The ``nvidia_driver`` role's plan of every host, and what each host's script printed."""
    wanted = {h.name: settings(h, pins.get(h.name)) for h in inv.hosts}
    read = _read(inv.hosts, wanted, parallel=parallel, host_keys=host_keys)
    found: dict[str, list[driverplan.Step]] = {}
    out: dict[str, HostPlan] = {}
    for host in inv.hosts:
        res = read[host.name]
        if res.unreachable:
            out[host.name] = HostPlan(
                status="unreachable",
                failed_task=driverplan.label(driverplan.READ_STATE),
                message=f"unreachable: {res.reason}",
            )
            continue
        found[host.name] = driverplan.steps(
            driverstate.parse(res.stdout), wanted[host.name], host.name
        )
    checks = _checks({h: _until_failure(s) for h, s in found.items()}, inv, host_keys=host_keys)
    for name, steps in found.items():
        settled = driverplan.settle(steps, checks)
        out[name] = HostPlan(
            settled.changes,
            settled.diffs,
            "failed" if settled.failed_task else "",
            settled.failed_task,
            settled.message,
        )
    return out, {h: r.stdout for h, r in read.items()}


def plan(
    inv: Inventory,
    change: Sequence[str],
    *,
    pins: Mapping[str, DriverPin],
    extravars: Mapping[str, Any],
    folder: OutDir,
    parallel: int,
    host_keys: HostKeys | None,
) -> Plan:
    """The plan of every host for the roles in ``change`` (``extravars``: the playbook's,
    for the check-mode run of ``node_init``)."""
    hosts = {h: HostPlan() for h in inv.names()}
    out = Plan(hosts)
    if "node_init" in change:
        checked = ansible.run_playbook(
            "update_gpu_nodes",
            inv.path,
            inv.names(),
            data_dir=folder.subdir("ansible"),
            ident="plan",
            extravars={**extravars, "update_gpu_nodes_roles": ["node_init"]},
            check=True,
            forks=parallel,
            host_keys=host_keys,
        )
        out.artifacts = checked.artifacts
        for name in inv.names():
            hr = checked.hosts[name]
            one = hosts[name]
            one.changes, one.diffs, one.by = list(hr.changed_tasks), list(hr.diffs), "check mode"
            if hr.status in ("failed", "unreachable") or (checked.rc != 0 and not hr.ok):
                one.status = hr.status if hr.status in ("failed", "unreachable") else "failed"
                one.failed_task, one.message = hr.failed_task, hr.message
    if "nvidia_driver" in change:
        todo = [h for h in inv.hosts if not hosts[h.name].status]
        if todo:
            sub = replace(inv, hosts=tuple(todo))
            driver, out.readings = driver_plans(sub, pins, parallel=parallel, host_keys=host_keys)
            for name, one in driver.items():
                mine = hosts[name]
                mine.changes += one.changes
                mine.diffs += one.diffs
                if one.status:
                    mine.status, mine.failed_task, mine.message = (
                        one.status,
                        one.failed_task,
                        one.message,
                    )
                    mine.by = ""
    return out
