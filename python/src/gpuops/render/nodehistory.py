"""``gpuops nodes history`` as text: one line per record, newest first, then its groups."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _drivers(counts: Mapping[str, Any]) -> str:
    return ", ".join(f"{v}" + (f" x{n}" if n != 1 else "") for v, n in sorted(counts.items()))


def _hosts(r: Mapping[str, Any]) -> str:
    counts: dict[str, int] = {}
    for h in (r.get("hosts") or {}).values():
        counts[str(h.get("status"))] = counts.get(str(h.get("status")), 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no hosts"


def history_text(doc: Mapping[str, Any]) -> str:
    lines = [
        f"node history of fleet {doc['fleet']} (ConfigMap {doc['namespace']}/"
        f"{doc['configmap']} on {doc['server']}), {doc['total']} record(s), newest first",
        f" {'RECORD':<18} {'ACTION':<9} {'STATUS':<10} {'STARTED':<21} {'WHO':<16} "
        f"{'LIMIT':<14} HOSTS",
    ]
    for r in doc["records"]:
        rid = f"{r['fleet']}-{r['number']}"
        how = "before" if r.get("rollback_before") else "to"
        action = r["action"] + (f" {how} {r['rollback_of']}" if r.get("rollback_of") else "")
        lines.append(
            f" {rid:<18} {action:<9} {r['status']:<10} {r['started']:<21} "
            f"{(r.get('who') or '-')[:16]:<16} {(r.get('limit') or '-')[:14]:<14} {_hosts(r)}"
        )
        for group, g in sorted((r.get("groups") or {}).items()):
            before, after = _drivers(g.get("before") or {}), _drivers(g.get("after") or {})
            lines.append(f"   {group}: {before} -> {after}")
        extra = [
            f"inventory {str(r['inventory_revision'])[:12]}"
            + (" (uncommitted changes)" if r.get("inventory_dirty") is True else "")
            if r.get("inventory_revision")
            else "",
            "hosts left out (too large): "
            + ", ".join(f"{n} {s}" for s, n in sorted(r["hosts_omitted"].items()))
            if r.get("hosts_omitted")
            else "",
            f"build {r['link']}" if r.get("link") else "",
            f"stopped: {r['stopped']}" if r.get("stopped") else "",
        ]
        if any(extra):
            lines.append("   " + "; ".join(x for x in extra if x))
    if not doc["records"]:
        lines.append(" (no node change recorded yet)")
    return "\n".join(lines)
