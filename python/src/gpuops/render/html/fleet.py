"""The fleet health page: a ``gpuops nodes inspect`` result.

It answers: is any GPU node in trouble, which, and what to do (Xid meanings and whether a
reset helps); per group how many hosts are ok, warning, critical or unreachable. Pages for
large fleets stay readable: groups are aggregates, and hosts are listed worst first up to a
cap (:data:`.nodefields.HOSTS_LISTED`; the rest are counted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuops.core.gpuhealth import HOST_ONLY_CHECKS
from gpuops.fsio import OutDir
from gpuops.render.html import page
from gpuops.render.html.nodefields import HOSTS_LISTED, as_list, mapping, require_result, text

__all__ = ["HOSTS_LISTED", "fleet_context", "write_fleet"]

_STATUS_ORDER = {"critical": 0, "unreachable": 1, "warning": 2, "ok": 3}
_INSPECT_KEYS = ("inventory", "status", "summary", "hosts_total", "hosts")


def _gpu_temp(h: Mapping[str, Any]) -> str:
    temps: list[float] = [
        g["temperature_c"]
        for g in as_list(h.get("gpus"))
        if isinstance(g, Mapping) and isinstance(g.get("temperature_c"), (int, float))
    ]
    return f"{max(temps)}" if temps else "-"


#: A cell's colour: the worst finding of that GPU or of its host (reboot pending colours them all).
_SEVERITY_ORDER = ("critical", "warning", "ok")


def _num(value: Any) -> str:
    return "-" if value is None or isinstance(value, bool) else str(value)


def _findings_by_gpu(h: Mapping[str, Any]) -> dict[Any, list[Mapping[str, Any]]]:
    """The host's findings by GPU index; host-wide ones (reboot pending, nvidia-smi failing,
    a GPU missing) under None."""
    found: dict[Any, list[Mapping[str, Any]]] = {}
    for f in as_list(h.get("findings")):
        if isinstance(f, Mapping) and "message" in f:
            found.setdefault(f.get("gpu"), []).append(f)
    return found


def _worst_of(findings: Sequence[Mapping[str, Any]]) -> str:
    severities = {text(f.get("severity")) for f in findings}
    return next((s for s in _SEVERITY_ORDER if s in severities), "ok")


def _gpu_wide(found: Mapping[Any, list[Mapping[str, Any]]]) -> list[Mapping[str, Any]]:
    """The host-wide findings about its GPUs (not its disks or NICs), from _findings_by_gpu."""
    return [f for f in found.get(None, []) if f.get("check") not in HOST_ONLY_CHECKS]


def _grid_row(h: Mapping[str, Any]) -> dict[str, Any]:
    """A host's row of the GPU grid: its cells and what colours the whole row."""
    found = _findings_by_gpu(h)
    wide = _gpu_wide(found)
    return {"cells": _gpu_cells(h, found, wide), "wide": _host_wide(h, wide)}


def _host_wide(h: Mapping[str, Any], wide: list[Mapping[str, Any]]) -> dict[str, Any]:
    """What colours a whole grid row: the host-wide findings about its GPUs, named under the
    host; a host without GPU readings (unreachable, nvidia-smi failing) is its own status."""
    worst = _worst_of(wide)
    status = text(h.get("status"))
    if not as_list(h.get("gpus")):
        worst = {"unreachable": "critical", "critical": "critical"}.get(status, worst)
    messages = [text(f["message"]) for f in wide]
    if not messages and status == "unreachable":
        messages = [text(h.get("error")) or "unreachable"]
    return {"severity": worst, "findings": messages}


def _gpu_cells(
    h: Mapping[str, Any],
    found: Mapping[Any, list[Mapping[str, Any]]],
    wide: list[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """One cell per GPU: its worst finding (host-wide ones about GPUs included), its values,
    and every finding on it."""
    cells = []
    for i, g in enumerate(as_list(h.get("gpus"))):
        if not isinstance(g, Mapping):
            continue
        index = g.get("index", i)
        mine = found.get(index, [])
        worst = _worst_of([*mine, *wide])
        if g.get("lost"):
            worst = "critical"
        ecc, rows = mapping(g.get("ecc")), mapping(g.get("remapped_rows"))
        messages = [text(f["message"]) for f in mine] or (["lost"] if g.get("lost") else [])
        cells.append(
            {
                "gpu": text(index),
                "severity": worst,
                "readings": [
                    f"{_num(g.get('temperature_c'))} °C",
                    f"ECC {_num(ecc.get('uncorrected_volatile'))}/"
                    f"{_num(ecc.get('uncorrected_aggregate'))}",
                    f"remap {_num(rows.get('uncorrectable'))}",
                ],
                "findings": messages,
            }
        )
    return cells


def _limit(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value)) or "none"
    return text(value)


def _threshold_rows(result: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The limits per group as a table: (group names, rows of limit name and values)."""
    by_group = result.get("thresholds")
    if not isinstance(by_group, Mapping):
        return [], []
    groups = sorted(str(g) for g in by_group if isinstance(by_group[g], Mapping))
    names: list[str] = []
    for g in groups:
        names += [str(n) for n in by_group[g] if str(n) not in names]
    rows = [{"name": n, "limits": [_limit(by_group[g].get(n)) for g in groups]} for n in names]
    return groups, rows


def fleet_context(result: Mapping[str, Any]) -> dict[str, Any]:
    require_result(result, _INSPECT_KEYS, "nodes inspect")
    hosts: list[Mapping[str, Any]] = result["hosts"]
    groups: dict[str, dict[str, Any]] = {}
    for h in hosts:
        g = groups.setdefault(
            text(h.get("group")) or "-",
            {"hosts": 0, "ok": 0, "warning": 0, "critical": 0, "unreachable": 0, "drivers": set()},
        )
        g["hosts"] += 1
        status = text(h.get("status"))
        if status in _STATUS_ORDER:
            g[status] += 1
        if h.get("driver"):
            g["drivers"].add(text(h["driver"]))
    ranked = sorted(
        hosts, key=lambda h: (_STATUS_ORDER.get(text(h.get("status")), 4), text(h["host"]))
    )
    listed = [
        {
            "host": text(h["host"]),
            "group": text(h.get("group")),
            "status": text(h.get("status")),
            "gpus": f"{h.get('gpu_count', len(as_list(h.get('gpus'))))}/"
            f"{h.get('gpus_expected') or '?'}",
            "driver": text(h.get("driver")) or "-",
            "cuda": text(h.get("cuda")) or "-",
            "temp": _gpu_temp(h),
            "findings": [
                {"severity": text(f.get("severity")), "message": text(f["message"])}
                for f in as_list(h.get("findings"))
                if isinstance(f, Mapping) and "message" in f
            ],
            **_grid_row(h),
        }
        for h in ranked[:HOSTS_LISTED]
    ]
    threshold_groups, threshold_rows = _threshold_rows(result)
    xids = [
        {
            "host": text(h["host"]),
            **{k: text(x.get(k)) for k in ("xid", "bus", "name", "meaning", "action")},
            "needs_reset": bool(x.get("needs_reset")),
        }
        for h in ranked
        for x in as_list(h.get("xids"))
        if isinstance(x, Mapping) and "xid" in x
    ]
    summary = mapping(result["summary"])
    status = text(result["status"])
    return {
        "r": result,
        "status": status,
        "verdict_class": {"ok": "ok", "warning": "warn"}.get(status, "bad"),
        "summary": {k: summary.get(k, 0) for k in ("ok", "warning", "critical", "unreachable")},
        "groups": [
            {**g, "name": name, "drivers": ", ".join(sorted(g["drivers"])) or "-"}
            for name, g in sorted(groups.items())
        ],
        "hosts": listed,
        "gpu_columns": max((len(h["cells"]) for h in listed), default=0),
        "threshold_groups": threshold_groups,
        "thresholds": threshold_rows,
        "hosts_more": max(0, len(hosts) - len(listed)),
        "xids": xids[:HOSTS_LISTED],
        "alerts": [
            {k: text(a.get(k)) for k in ("host", "status", "detail")}
            for a in as_list(result.get("alerts"))
            if isinstance(a, Mapping)
        ],
    }


def write_fleet(result: Mapping[str, Any], out_dir: OutDir) -> page.Written:
    return page.write(out_dir, "fleet", "fleet.html.j2", fleet_context(result), [])
