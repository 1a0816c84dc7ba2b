"""The node change history page of a fleet, from a ``gpuops nodes history`` result.

Answers at a glance: what the last node change did and how it ended, what each group ran
before and after each run, who ran it from which build and inventory revision, which hosts
failed or were rolled back. Newest first, as the command prints it; links only where the
record holds an http(s) URL (the CI build). Every value is printed as text: the input's kinds
are checked by :mod:`gpuops.render.html.inputs` before this runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuops.core.urls import without_userinfo
from gpuops.fsio import OutDir
from gpuops.render.html import page

STATUS_CLASS = {"succeeded": "ok", "failed": "bad", "refused": "warn"}
HOST_CLASS = {
    "changed": "ok",
    "unchanged": "ok",
    "failed": "bad",
    "rollback-failed": "bad",
    "rolled-back": "warn",
    "not-started": "warn",
}


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _link(value: Any) -> str | None:
    text = without_userinfo(_text(value))  # a link is for everyone: no user:password@
    return text if text.startswith(("https://", "http://")) else None


def _drivers(counts: Any) -> str:
    if not isinstance(counts, Mapping):
        return ""
    return ", ".join(
        f"{v}" + (f" x{n}" if _text(n) != "1" else "") for v, n in sorted(counts.items())
    )


def _row(r: Mapping[str, Any]) -> dict[str, Any]:
    hosts: Mapping[str, Any] = r["hosts"] if isinstance(r.get("hosts"), Mapping) else {}
    groups: Mapping[str, Any] = r["groups"] if isinstance(r.get("groups"), Mapping) else {}
    host_rows = []
    for name, item in sorted(hosts.items()):
        h = item if isinstance(item, Mapping) else {}
        status = _text(h.get("status"))
        host_rows.append(
            {
                "host": _text(name),
                "group": _text(h.get("group")),
                "status": status,
                "status_class": HOST_CLASS.get(status, "warn"),
                "before": _text(h.get("driver_before")) or "?",
                "after": _text(h.get("driver_after")) or "?",
                "rolled_back": h.get("rolled_back") is True,
                "reason": _text(h.get("reason")),
            }
        )
    status = _text(r.get("status"))
    rollback_of = r.get("rollback_of")
    return {
        "id": f"{_text(r.get('fleet'))}-{_text(r.get('number'))}",
        "number": _text(r.get("number")),
        "action": _text(r.get("action"))
        + (
            f" {'before' if r.get('rollback_before') is True else 'to'} {_text(rollback_of)}"
            if rollback_of is not None
            else ""
        ),
        "status": status,
        "status_class": STATUS_CLASS.get(status, "warn"),
        "started": _text(r.get("started")),
        "finished": _text(r.get("finished")),
        "who": _text(r.get("who")),
        "limit": _text(r.get("limit")),
        "revision": _text(r.get("inventory_revision"))[:12],
        "revision_full": _text(r.get("inventory_revision")),
        "link": _link(r.get("link")),
        "stopped": _text(r.get("stopped")),
        "groups": [
            {
                "group": _text(g),
                "before": _drivers(v.get("before")) if isinstance(v, Mapping) else "",
                "after": _drivers(v.get("after")) if isinstance(v, Mapping) else "",
            }
            for g, v in sorted(groups.items())
        ],
        "hosts": host_rows,
    }


def context(result: Mapping[str, Any]) -> dict[str, Any]:
    rows = [_row(r) for r in result["records"] if isinstance(r, Mapping)]
    fleet = _text(result.get("fleet"))
    if not rows:
        verdict, verdict_class = "no node change yet", "warn"
        message = f"fleet {fleet} has no node change recorded"
    else:
        last = rows[0]
        verdict, verdict_class = f"last change {last['status']}", last["status_class"]
        message = f"fleet {fleet}: record {last['id']} ({last['action']}) {last['status']}"
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    return {
        "r": {k: _text(result.get(k)) for k in ("fleet", "namespace", "configmap", "server")},
        "total": _text(result.get("total")),
        "rows": rows,
        "verdict": verdict,
        "verdict_class": verdict_class,
        "message": message,
        "counts": sorted(counts.items()),
    }


def write(result: Mapping[str, Any], out_dir: OutDir) -> page.Written:
    return page.write(out_dir, "node-history", "node-history.html.j2", context(result), [])
