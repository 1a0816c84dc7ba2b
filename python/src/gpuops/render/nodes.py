"""Text tables for ``gpuops nodes update|inspect|label`` (the JSON result is the contract)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(c) for c in header]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def update_text(doc: dict[str, Any]) -> str:
    s = doc["summary"]
    head = [
        f"gpuops nodes update{' --check (nothing changed)' if doc['check'] else ''}: "
        f"{doc['inventory']} ({doc['environment']}), change: {', '.join(doc['change'])}",
        f"plan: {len(doc['plan'])} batch(es): "
        + "; ".join(f"{b['kind']} {b['index']}: {' '.join(b['hosts'])}" for b in doc["plan"]),
        f"changed {s['changed']}, unchanged {s['unchanged']}, failed {s['failed']}, "
        f"not started {s['not-started']}"
        + (f", planned {s['planned']}" if doc["check"] else "")
        + (f", rolled back {s['rolled-back']}" if s.get("rolled-back") else "")
        + (
            f", rollback failed {s['rollback-failed']} (left broken)"
            if s.get("rollback-failed")
            else ""
        ),
    ]
    if doc["stopped"]:
        head.append(f"stopped: {doc['stopped']}")
    if doc.get("resumed_from"):
        head.append(f"resumed record {doc['resumed_from']}")
    resume = doc.get("resume")
    if resume and resume["left"]:
        head.append(
            f"resumable: {len(resume['done'])} host(s) done, {len(resume['left'])} left "
            f"({' '.join(resume['left'][:10])}{' ...' if len(resume['left']) > 10 else ''}): "
            "gpuops nodes update --resume with the same inventory, limit and change"
        )
    rows = []
    for h in doc["hosts"]:
        if h["cordoned_before"]:
            cordon = "admin (kept)"
        elif h["uncordoned"]:
            cordon = "done"
        elif h["cordoned"]:
            cordon = "cordoned"
        else:
            cordon = "-" if h["node"] else "no node"
        detail = h["reason"] or (
            ", ".join(h["planned_changes"][:3])
            if doc["check"]
            else ", ".join(h["changed_tasks"][:3])
        )
        rows.append(
            [
                h["host"],
                h["group"],
                "-" if h["batch"] is None else h["batch"],
                h["status"],
                cordon,
                round(sum(h["phases_s"].values()), 1),
                detail,
            ]
        )
    body = table(rows, ["host", "group", "batch", "status", "cordon", "seconds", "detail"])
    tail = f"artifacts: {doc['artifacts'].get('folder', '')}"
    return "\n".join(head) + "\n\n" + body + "\n\n" + tail


def inspect_text(doc: dict[str, Any]) -> str:
    s = doc["summary"]
    head = (
        f"gpuops nodes inspect: {doc['hosts_total']} host(s) in {doc['inventory']} "
        f"({doc['environment']}): ok {s['ok']}, warning {s['warning']}, critical "
        f"{s['critical']}, unreachable {s['unreachable']}"
    )
    rows = []
    for h in doc["hosts"]:
        gpus = f"{h['gpu_count']}/{h['gpus_expected'] or '?'}"
        worst = sorted({f["check"] for f in h["findings"] if f["severity"] == h["status"]})
        rows.append(
            [
                h["host"],
                h["group"],
                h["status"],
                gpus,
                h["driver"] or "-",
                h["cuda"] or "-",
                ", ".join(worst),
            ]
        )
    body = table(rows, ["host", "group", "status", "gpus", "driver", "cuda", "findings"])
    findings = [
        f"  {h['host']}: {f['severity']}: {f['message']}"
        for h in doc["hosts"]
        for f in h["findings"]
    ]
    alerts = [f"  {a['host']}: {a['status']} {a['detail']}".rstrip() for a in doc["alerts"]]
    out = head + "\n\n" + body
    if findings:
        out += "\n\nfindings:\n" + "\n".join(findings)
    if alerts:
        out += "\n\nalerts:\n" + "\n".join(alerts)
    if doc.get("quarantine"):
        out += "\n\n" + quarantine_text(doc["quarantine"])
    m = doc.get("metrics") or {}
    if m:
        out += "\n\nmetrics: " + ", ".join(f"{k} {v}" for k, v in m.items())
    return out


def quarantine_text(q: dict[str, Any]) -> str:
    lines = [
        f"quarantine (state {q['configmap']}; release after {q['release_after']} healthy "
        f"inspections; at most {q['share_pct']:g}% of a class):",
        f"  quarantined: {', '.join(q['quarantined']) or '-'}"
        + (f" (new: {', '.join(q['newly'])})" if q["newly"] else ""),
    ]
    if q["released"]:
        lines.append(f"  released: {', '.join(q['released'])}")
    if q["drained"]:
        lines.append(f"  drained: {', '.join(q['drained'])}")
    for host, why in q.get("not_drained", {}).items():
        lines.append(f"  not drained: {host}: {why}")
    for c, b in q["breakers_open"].items():
        lines.append(
            f"  BREAKER OPEN for class {c} since {b['since']}: {b['reason']} "
            f"(reset: gpuops nodes quarantine-reset --class {c})"
        )
    for host, why in q["held"].items():
        lines.append(f"  not quarantined: {host}: {why}")
    return "\n".join(lines)


def quarantine_reset_text(doc: dict[str, Any]) -> str:
    closed = ", ".join(doc["closed"]) or "none (no named breaker was open)"
    return (
        f"quarantine state {doc['configmap']}: breakers closed: {closed}; still open: "
        f"{', '.join(doc['still_open']) or '-'}; quarantined nodes (released by healthy "
        f"inspections): {', '.join(doc['quarantined']) or '-'}"
    )


def label_text(doc: dict[str, Any]) -> str:
    rows = []
    for h in doc["hosts"]:
        change = h["change"] or {}
        rows.append(
            [
                h["host"],
                h["node"],
                h["status"],
                h["health"],
                ", ".join(f"{k}={v}" for k, v in sorted((change.get("set_labels") or {}).items())),
                ", ".join(change.get("remove_labels") or []),
                ", ".join(
                    (change.get("taints_added") or [])
                    + [f"-{t}" for t in change.get("taints_removed") or []]
                ),
            ]
        )
    head = f"gpuops nodes label: {doc['inventory']} -> {doc['server']}" + (
        " (dry run: nothing written)" if doc["dry_run"] else ""
    )
    return (
        head
        + "\n\n"
        + table(rows, ["host", "node", "status", "health", "labels set", "removed", "taints"])
    )
