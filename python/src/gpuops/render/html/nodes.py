"""The GPU node pages: fleet health (a ``gpuops nodes inspect`` result) and node update (a
``gpuops nodes update`` result).

Fleet health answers: is any GPU node in trouble, which, and what to do (Xid meanings and
whether a reset helps); per group how many hosts are ok, warning, critical or unreachable.
Node update answers: what the rollout did, batch by batch (canary first), which hosts changed,
failed or were never started, and where the time went. Pages for large fleets stay readable:
groups are aggregates, and hosts are listed worst first up to a cap (the rest are counted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuops.core.gpuhealth import HOST_ONLY_CHECKS
from gpuops.errors import InvalidInput
from gpuops.fsio import OutDir
from gpuops.render.html import charts, page

#: Hosts listed by name at most (the rest are counted; the JSON has them all).
HOSTS_LISTED = 200
#: Batches drawn on the timeline at most (the table lists them all).
BATCHES_DRAWN = 60
_STATUS_ORDER = {"critical": 0, "unreachable": 1, "warning": 2, "ok": 3}
_UPDATE_ORDER = {"failed": 0, "not-started": 1, "changed": 2, "planned": 3, "unchanged": 4}


def _require(result: Mapping[str, Any], keys: Sequence[str], command: str) -> None:
    missing = [k for k in keys if k not in result]
    if missing or not isinstance(result.get("hosts"), list):
        raise InvalidInput(
            f"not a 'gpuops {command}' result: missing {', '.join(missing) or 'hosts'}",
            hint=f"pass the result (or error) document of 'gpuops {command}'",
            field="input",
        )
    bad = [h for h in result["hosts"] if not isinstance(h, Mapping) or "host" not in h]
    if bad:
        raise InvalidInput(
            f"not a 'gpuops {command}' result: {len(bad)} host entr(y/ies) without a name",
            field="input",
        )


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    """A list from the result, or none (a hand-made input may hold anything there)."""
    return value if isinstance(value, list) else []


# -- fleet health (nodes inspect) --------------------------------------------------------------
_INSPECT_KEYS = ("inventory", "status", "summary", "hosts_total", "hosts")


def _gpu_temp(h: Mapping[str, Any]) -> str:
    temps: list[float] = [
        g["temperature_c"]
        for g in _list(h.get("gpus"))
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
    for f in _list(h.get("findings")):
        if isinstance(f, Mapping) and "message" in f:
            found.setdefault(f.get("gpu"), []).append(f)
    return found


def _worst_of(findings: Sequence[Mapping[str, Any]]) -> str:
    severities = {_text(f.get("severity")) for f in findings}
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
    status = _text(h.get("status"))
    if not _list(h.get("gpus")):
        worst = {"unreachable": "critical", "critical": "critical"}.get(status, worst)
    messages = [_text(f["message"]) for f in wide]
    if not messages and status == "unreachable":
        messages = [_text(h.get("error")) or "unreachable"]
    return {"severity": worst, "findings": messages}


def _gpu_cells(
    h: Mapping[str, Any],
    found: Mapping[Any, list[Mapping[str, Any]]],
    wide: list[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """One cell per GPU: its worst finding (host-wide ones about GPUs included), its values,
    and every finding on it."""
    cells = []
    for i, g in enumerate(_list(h.get("gpus"))):
        if not isinstance(g, Mapping):
            continue
        index = g.get("index", i)
        mine = found.get(index, [])
        worst = _worst_of([*mine, *wide])
        if g.get("lost"):
            worst = "critical"
        ecc, rows = _mapping(g.get("ecc")), _mapping(g.get("remapped_rows"))
        messages = [_text(f["message"]) for f in mine] or (["lost"] if g.get("lost") else [])
        cells.append(
            {
                "gpu": _text(index),
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
    return _text(value)


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
    _require(result, _INSPECT_KEYS, "nodes inspect")
    hosts: list[Mapping[str, Any]] = result["hosts"]
    groups: dict[str, dict[str, Any]] = {}
    for h in hosts:
        g = groups.setdefault(
            _text(h.get("group")) or "-",
            {"hosts": 0, "ok": 0, "warning": 0, "critical": 0, "unreachable": 0, "drivers": set()},
        )
        g["hosts"] += 1
        status = _text(h.get("status"))
        if status in _STATUS_ORDER:
            g[status] += 1
        if h.get("driver"):
            g["drivers"].add(_text(h["driver"]))
    ranked = sorted(
        hosts, key=lambda h: (_STATUS_ORDER.get(_text(h.get("status")), 4), _text(h["host"]))
    )
    listed = [
        {
            "host": _text(h["host"]),
            "group": _text(h.get("group")),
            "status": _text(h.get("status")),
            "gpus": f"{h.get('gpu_count', len(_list(h.get('gpus'))))}/"
            f"{h.get('gpus_expected') or '?'}",
            "driver": _text(h.get("driver")) or "-",
            "cuda": _text(h.get("cuda")) or "-",
            "temp": _gpu_temp(h),
            "findings": [
                {"severity": _text(f.get("severity")), "message": _text(f["message"])}
                for f in _list(h.get("findings"))
                if isinstance(f, Mapping) and "message" in f
            ],
            **_grid_row(h),
        }
        for h in ranked[:HOSTS_LISTED]
    ]
    threshold_groups, threshold_rows = _threshold_rows(result)
    xids = [
        {
            "host": _text(h["host"]),
            **{k: _text(x.get(k)) for k in ("xid", "bus", "name", "meaning", "action")},
            "needs_reset": bool(x.get("needs_reset")),
        }
        for h in ranked
        for x in _list(h.get("xids"))
        if isinstance(x, Mapping) and "xid" in x
    ]
    summary = _mapping(result["summary"])
    status = _text(result["status"])
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
            {k: _text(a.get(k)) for k in ("host", "status", "detail")}
            for a in _list(result.get("alerts"))
            if isinstance(a, Mapping)
        ],
    }


def write_fleet(result: Mapping[str, Any], out_dir: OutDir) -> page.Written:
    return page.write(out_dir, "fleet", "fleet.html.j2", fleet_context(result), [])


# -- node update (nodes update) ----------------------------------------------------------------
_UPDATE_KEYS = ("inventory", "change", "check", "summary", "batches", "hosts")


def _cordon(h: Mapping[str, Any]) -> str:
    if h.get("cordoned_before"):
        return "admin (kept)"
    if h.get("uncordoned"):
        return "cordoned, uncordoned"
    if h.get("cordoned"):
        return "cordoned"
    return "-" if h.get("node") else "no node"


def _seconds(phases: Any) -> float:
    if not isinstance(phases, Mapping):
        return 0.0
    return round(sum(v for v in phases.values() if isinstance(v, (int, float))), 1)


def rollout_context(result: Mapping[str, Any]) -> dict[str, Any]:
    _require(result, _UPDATE_KEYS, "nodes update")
    summary = _mapping(result["summary"])
    failed = int(summary.get("failed", 0) or 0)
    if result["check"]:
        verdict, css = "plan", "ok"
    elif result.get("refused"):
        verdict, css = "refused", "bad"
    elif failed:
        verdict, css = "failed", "bad"
    elif result.get("stopped"):
        verdict, css = "stopped", "warn"
    else:
        verdict, css = "done", "ok"
    hosts = sorted(
        result["hosts"],
        key=lambda h: (
            _UPDATE_ORDER.get(_text(h.get("status")), 5),
            h.get("batch") if isinstance(h.get("batch"), int) else 10**9,
            _text(h["host"]),
        ),
    )
    listed = [
        {
            "host": _text(h["host"]),
            "group": _text(h.get("group")),
            "batch": "-" if h.get("batch") is None else _text(h.get("batch")),
            "status": _text(h.get("status")),
            "cordon": _cordon(h),
            "seconds": _seconds(h.get("phases_s")),
            "driver": _text(h.get("driver_wanted")) or "-",
            "detail": _text(h.get("reason"))
            or ", ".join(
                _text(t)
                for t in _list(h.get("planned_changes" if result["check"] else "changed_tasks"))
            ),
            "failed_task": _text(h.get("failed_task")),
        }
        for h in hosts[:HOSTS_LISTED]
    ]
    batches = [
        {
            "index": _text(b.get("index")),
            "kind": _text(b.get("kind")),
            "hosts": ", ".join(_text(x) for x in _list(b.get("hosts"))),
            "status": _text(b.get("status")),
            "elapsed": b.get("elapsed_s", 0),
            "headroom": _text(_mapping(b.get("headroom")).get("message")),
            "phases": ", ".join(
                f"{_PHASE_NAMES.get(k, k)} {v} s"
                for k, v in _mapping(b.get("phases_s")).items()
                if v is not None
            ),
        }
        for b in _list(result["batches"])
        if isinstance(b, Mapping)
    ]
    policy = _mapping(result.get("policy"))
    return {
        "r": result,
        "verdict": verdict,
        "verdict_class": css,
        "summary": {
            k: summary.get(k, 0)
            for k in ("changed", "unchanged", "failed", "not-started", "planned")
        },
        "change": ", ".join(_text(c) for c in _list(result["change"])),
        "policy": policy,
        "batches": batches,
        "hosts": listed,
        "hosts_more": max(0, len(hosts) - len(listed)),
        "timings": sorted(
            (k, v)
            for k, v in _mapping(result.get("timings_s")).items()
            if isinstance(v, (int, float))
        ),
    }


#: The timeline's series after the first: (name, colour). The first series is the gap before
#: a row starts (drawn transparent), so each bar sits at its time in the run.
_PHASES = (
    ("pre-flight and plan", "#c9c9c9"),
    ("drain (headroom gate, cordon, wait)", "#f28e2b"),
    ("change (Ansible)", "#3b6fb6"),
    ("verify and uncordon", "#59a14f"),
)
_BATCH_PHASES = ("kubernetes_before", "ansible", "kubernetes_after")
_PHASE_NAMES = dict(zip(_BATCH_PHASES, ("drain", "change", "verify"), strict=True))


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def timeline_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The timeline's rows, first to last: pre-flight and plan, then each batch at its start
    time with where its seconds went (a batch never started has no bar, only its label)."""
    timings = _mapping(result.get("timings_s"))
    preflight, plan = _number(timings.get("preflight")), _number(timings.get("plan"))
    rows = [
        {
            "label": "pre-flight and plan (check mode)",
            "start": 0.0,
            "phases": [preflight + plan, 0.0, 0.0, 0.0],
        }
    ]
    for b in _list(result.get("batches"))[:BATCHES_DRAWN]:
        if not isinstance(b, Mapping):
            continue
        hosts = _list(b.get("hosts"))
        names = ", ".join(_text(h) for h in hosts[:3]) + (
            f" +{len(hosts) - 3}" if len(hosts) > 3 else ""
        )
        label = (
            f"{_text(b.get('kind'))} {_text(b.get('index'))}: {names} ({_text(b.get('status'))})"
        )
        phases = _mapping(b.get("phases_s"))
        started = b.get("start_s")
        rows.append(
            {
                "label": label,
                "start": _number(started),
                "phases": [0.0, *(_number(phases.get(k)) for k in _BATCH_PHASES)]
                if started is not None
                else [0.0, 0.0, 0.0, 0.0],
            }
        )
    return rows


def _timeline_chart(result: Mapping[str, Any]) -> charts.Chart | None:
    """Batches as a timeline (pygal horizontal stacked bars; the first, invisible, series is
    each row's start): canary first, where each batch's time went, batches never started."""
    import pygal  # noqa: PLC0415 - reports only

    if result.get("check") or not _list(result.get("batches")):
        return None
    rows = timeline_rows(result)
    chart = pygal.HorizontalStackedBar(
        **charts.config(
            width=900,
            height=140 + 30 * len(rows),
            title="Where the time went: the rollout, batch by batch",
            x_title="seconds since the run started",
            print_values=False,
            style=charts.style(("transparent", *(colour for _, colour in _PHASES))),
            truncate_label=60,
            legend_at_bottom_columns=2,
        )
    )
    ordered = list(reversed(rows))  # pygal draws the first label at the bottom
    chart.x_labels = [r["label"] for r in ordered]
    chart.add(None, [r["start"] or None for r in ordered])  # no legend entry
    for i, (name, _) in enumerate(_PHASES):
        chart.add(name, [r["phases"][i] or None for r in ordered])
    return charts.finish(chart, "timeline")


def write_rollout(result: Mapping[str, Any], out_dir: OutDir) -> page.Written:
    context = rollout_context(result)
    timeline = _timeline_chart(result)
    return page.write(
        out_dir, "node-update", "node-update.html.j2", context, [timeline] if timeline else []
    )
