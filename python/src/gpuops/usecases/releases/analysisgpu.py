"""A canary's GPUs: the inspection core (``gpuops nodes inspect``'s script and
:mod:`gpuops.core.gpuhealth`) on the nodes the canary pods run on, mapped to the hosts of the
step's inventory by node name (``gpuops_node_name``, else the host's name).

What fails the measurement is what happened since the step began, not what a node carried
before (that is the fleet's health, ``nodes inspect``'s to report):

- an Xid event logged since then: the kernel log's timestamps are seconds since boot, so the
  script's run also reads the node's uptime, and an event counts when it was logged after
  ``uptime - (now - since)`` (a node rebooted since: every event of this boot counts); an
  event without a timestamp counts when the step's first reading did not have it;
- an ECC error counted since then: the step's first reading is the baseline of each GPU's
  ECC counters (by UUID); an uncorrected error beyond it fails, and so do more corrected ones
  than the host's ``ecc_corrected_volatile_warning``. (ECC is thus seen from the second
  measurement on: give a gpu analysis a count of 2 or more.)

A node that cannot be inspected (ssh unreachable, or not in the inventory) makes the
measurement inconclusive; a canary pod not yet on a node is skipped.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuops.adapters import hostkeys, ssh
from gpuops.core import gpuhealth, gpuparse, inventory
from gpuops.core.analysis import FAILED, INCONCLUSIVE, PASSED
from gpuops.core.gpuhealth import HostHealth, Thresholds
from gpuops.core.inventory import DEFAULT_PATTERN, Host, Inventory
from gpuops.core.releasestrategy import AnalysisStep, GpuCheck
from gpuops.usecases.nodes import common

TIMEOUT_S = 30
UPTIME_MARK = "@@gpuops-analysis uptime"
#: printed before the inspection's sections (which the parser reads from its first marker)
_UPTIME_LINE = f"printf '{UPTIME_MARK} %s\\n' \"$(cut -d' ' -f1 /proc/uptime 2>/dev/null)\"\n"
_UPTIME = re.compile(rf"^{re.escape(UPTIME_MARK)} ([0-9]+(?:\.[0-9]+)?)$", re.MULTILINE)
_ECC = ("corrected_volatile", "uncorrected_volatile", "uncorrected_aggregate")


@dataclass
class _Memory:
    """What a gpu step keeps between its measurements."""

    inventory: Inventory
    thresholds: dict[str, Thresholds]
    keys: hostkeys.HostKeys
    ecc: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # host, uuid
    lines: dict[str, set[str]] = field(default_factory=dict)  # host: untimed Xid lines


def inspect(
    step: AnalysisStep,
    check: GpuCheck,
    nodes: list[str],
    since: float,
    kept: dict[str, Any],
) -> tuple[str, float | None, str]:
    """One look at ``nodes`` (the canary pods' now) for what happened since ``since`` (epoch
    seconds): (verdict, new problems found, detail). ``kept``: what the step's measurements
    share (the first readings)."""
    memory = kept.get(f"gpu:{step.name}")
    if not isinstance(memory, _Memory):
        inv = common.load(check.inventory, None, DEFAULT_PATTERN)
        memory = _Memory(
            inv,
            inventory.check_thresholds(inv),
            hostkeys.HostKeys(hostkeys.find(None, check.inventory)),
        )
        kept[f"gpu:{step.name}"] = memory
    nodes = sorted(set(nodes))
    if not nodes:
        return INCONCLUSIVE, None, "no canary pod is on a node yet"
    by_node = {h.node_name: h for h in memory.inventory.hosts}
    missing = [n for n in nodes if n not in by_node]
    if missing:
        return (
            INCONCLUSIVE,
            None,
            f"node {missing[0]} of a canary pod is not a host of {check.inventory}",
        )
    hosts = [by_node[n] for n in nodes]
    results = ssh.run_script(
        hosts,
        _UPTIME_LINE + common.inspect_script(),
        [str(TIMEOUT_S), "/"],
        timeout_s=TIMEOUT_S + 30,
        parallel=len(hosts),
        host_keys=memory.keys,
    )
    elapsed = time.time() - since
    problems: list[str] = []
    unreachable: list[str] = []
    for host in hosts:
        res = results[host.name]
        found = None if res.unreachable else _parse(host, res.stdout, memory)
        if found is None:
            unreachable.append(f"{host.name}: {res.reason if res.unreachable else 'no inspection'}")
            continue
        health, uptime = found
        problems += _new_xids(host, health, uptime, elapsed, memory)
        problems += _new_ecc(host, health, memory)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return FAILED, float(len(problems)), problems[0] + more
    if unreachable:
        return INCONCLUSIVE, None, f"could not inspect {unreachable[0]}"
    names = ", ".join(h.name for h in hosts)
    return PASSED, 0.0, f"no Xid event or ECC error since the step began on {names}"


def _parse(host: Host, stdout: str, memory: _Memory) -> tuple[HostHealth, float | None] | None:
    try:
        raw = gpuparse.split_sections(stdout)
    except gpuparse.ParseError:
        return None
    m = _UPTIME.search(stdout.split("@@gpuops ", 1)[0])
    uptime = float(m[1]) if m else None
    t = memory.thresholds[host.name]
    return gpuhealth.evaluate(host.name, raw, host.gpu_count, t), uptime


def _new_xids(
    host: Host, health: HostHealth, uptime: float | None, elapsed: float, memory: _Memory
) -> list[str]:
    """Xid events logged since the step began (``elapsed`` seconds ago)."""
    since_boot = None if uptime is None else uptime - elapsed
    first = host.name not in memory.lines
    seen = memory.lines.setdefault(host.name, set())
    out = []
    for event in health.xids:
        at = event.get("uptime_s")
        line = str(event.get("line", ""))
        if isinstance(at, int | float) and since_boot is not None:
            new = at >= since_boot
        else:
            new = not first and line not in seen
            seen.add(line)
        if new:
            out.append(
                f"{host.name}: Xid {event.get('xid')} ({event.get('name')}) on PCI "
                f"{event.get('bus')} since the step began"
            )
    return out


def _new_ecc(host: Host, health: HostHealth, memory: _Memory) -> list[str]:
    """ECC errors counted beyond the step's first reading of each GPU."""
    baseline = memory.ecc.setdefault(host.name, {})
    corrected_limit = memory.thresholds[host.name].ecc_corrected_volatile_warning
    out = []
    for gpu in health.gpus:
        uuid = str(gpu.get("uuid") or gpu.get("index"))
        now = _counts(gpu.get("ecc"))
        before = baseline.setdefault(uuid, now)
        grew = {k: now[k] - before[k] for k in _ECC if k in now and k in before}
        where = f"{host.name}: GPU {gpu.get('index')} ({uuid})"
        if grew.get("uncorrected_volatile", 0) > 0 or grew.get("uncorrected_aggregate", 0) > 0:
            n = max(grew.get("uncorrected_volatile", 0), grew.get("uncorrected_aggregate", 0))
            out.append(f"{where}: {n} uncorrected ECC error(s) since the step began")
        elif grew.get("corrected_volatile", 0) > corrected_limit:
            out.append(
                f"{where}: {grew['corrected_volatile']} corrected ECC errors since the step "
                f"began, more than {corrected_limit}"
            )
    return out


def _counts(ecc: Any) -> dict[str, int]:
    if not isinstance(ecc, Mapping):
        return {}
    return {k: int(v) for k in _ECC if isinstance(v := ecc.get(k), int) and not isinstance(v, bool)}
