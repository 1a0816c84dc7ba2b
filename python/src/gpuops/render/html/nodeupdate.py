"""The node update page: a ``gpuops nodes update`` result.

It answers: what the rollout did, batch by batch (canary first), which hosts changed, failed
or were never started, and where the time went (a timeline of the batches). Hosts are listed
worst first up to a cap (:data:`.nodefields.HOSTS_LISTED`; the rest are counted).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuops.fsio import OutDir
from gpuops.render.html import charts, page
from gpuops.render.html.nodefields import HOSTS_LISTED, as_list, mapping, require_result, text

__all__ = ["BATCHES_DRAWN", "HOSTS_LISTED", "rollout_context", "timeline_rows", "write_rollout"]

#: Batches drawn on the timeline at most (the table lists them all).
BATCHES_DRAWN = 60
_UPDATE_ORDER = {"failed": 0, "not-started": 1, "changed": 2, "planned": 3, "unchanged": 4}
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
    require_result(result, _UPDATE_KEYS, "nodes update")
    summary = mapping(result["summary"])
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
            _UPDATE_ORDER.get(text(h.get("status")), 5),
            h.get("batch") if isinstance(h.get("batch"), int) else 10**9,
            text(h["host"]),
        ),
    )
    listed = [
        {
            "host": text(h["host"]),
            "group": text(h.get("group")),
            "batch": "-" if h.get("batch") is None else text(h.get("batch")),
            "status": text(h.get("status")),
            "cordon": _cordon(h),
            "seconds": _seconds(h.get("phases_s")),
            "driver": text(h.get("driver_wanted")) or "-",
            "detail": text(h.get("reason"))
            or ", ".join(
                text(t)
                for t in as_list(h.get("planned_changes" if result["check"] else "changed_tasks"))
            ),
            "failed_task": text(h.get("failed_task")),
        }
        for h in hosts[:HOSTS_LISTED]
    ]
    batches = [
        {
            "index": text(b.get("index")),
            "kind": text(b.get("kind")),
            "hosts": ", ".join(text(x) for x in as_list(b.get("hosts"))),
            "status": text(b.get("status")),
            "elapsed": b.get("elapsed_s", 0),
            "headroom": text(mapping(b.get("headroom")).get("message")),
            "phases": ", ".join(
                f"{_PHASE_NAMES.get(k, k)} {v} s"
                for k, v in mapping(b.get("phases_s")).items()
                if v is not None
            ),
        }
        for b in as_list(result["batches"])
        if isinstance(b, Mapping)
    ]
    policy = mapping(result.get("policy"))
    return {
        "r": result,
        "verdict": verdict,
        "verdict_class": css,
        "summary": {
            k: summary.get(k, 0)
            for k in ("changed", "unchanged", "failed", "not-started", "planned")
        },
        "change": ", ".join(text(c) for c in as_list(result["change"])),
        "policy": policy,
        "batches": batches,
        "hosts": listed,
        "hosts_more": max(0, len(hosts) - len(listed)),
        "timings": sorted(
            (k, v)
            for k, v in mapping(result.get("timings_s")).items()
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
    timings = mapping(result.get("timings_s"))
    preflight, plan = _number(timings.get("preflight")), _number(timings.get("plan"))
    rows = [
        {
            "label": "pre-flight and plan",
            "start": 0.0,
            "phases": [preflight + plan, 0.0, 0.0, 0.0],
        }
    ]
    for b in as_list(result.get("batches"))[:BATCHES_DRAWN]:
        if not isinstance(b, Mapping):
            continue
        hosts = as_list(b.get("hosts"))
        names = ", ".join(text(h) for h in hosts[:3]) + (
            f" +{len(hosts) - 3}" if len(hosts) > 3 else ""
        )
        label = f"{text(b.get('kind'))} {text(b.get('index'))}: {names} ({text(b.get('status'))})"
        phases = mapping(b.get("phases_s"))
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

    if result.get("check") or not as_list(result.get("batches")):
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
