"""The release history page of an environment, from a ``gpuops release history`` result.

Answers at a glance: what runs now, what ran before it, which releases failed and why, who
released and approved what, and which tags a rollback can go back to. Newest first, as the
command prints it; links only where the record holds an http(s) URL (the CI build).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuops.core.urls import without_userinfo
from gpuops.errors import InvalidInput
from gpuops.fsio import OutDir
from gpuops.render.html import page

_REQUIRED = ("environment", "namespace", "releases", "rollback_choices")
#: How each record status reads on the page (and its CSS class).
STATUS_CLASS = {
    "succeeded": "ok",
    "failed": "bad",
    "aborted": "warn",
    "interrupted": "warn",
    "pending": "warn",
}


def _check(result: Mapping[str, Any]) -> None:
    missing = [k for k in _REQUIRED if k not in result]
    if missing or not isinstance(result.get("releases"), list):
        raise InvalidInput(
            f"not a 'gpuops release history' result: missing {', '.join(missing) or 'releases'}",
            hint="pass the result document of 'gpuops --output json release history'",
            field="input",
        )
    if not all(isinstance(r, Mapping) for r in result["releases"]):
        raise InvalidInput("not a 'gpuops release history' result: a release is no object")


def _link(value: Any) -> str | None:
    text = without_userinfo(str(value or ""))  # a link is for everyone: no user:password@
    return text if text.startswith(("https://", "http://")) else None


def _changed_by(failure: Mapping[str, Any] | None) -> str:
    """An aborted release's status, as it reads: who changed the Deployment, when, and what
    it runs now (the record's ``failure.changed_by``; empty for any other record)."""
    if not failure or failure.get("kind") != "foreign-change":
        return ""
    by = failure.get("changed_by")
    if not isinstance(by, Mapping):
        return ""
    who = str(by.get("manager") or "someone")
    when = f" at {by['time']}" if by.get("time") else ""
    runs = f": runs {by['image']}" if by.get("image") else ""
    return f"changed by {who}{when}{runs}"


#: How each step state reads on the page (and its CSS class).
STEP_CLASS = {"passed": "ok", "failed": "bad", "paused": "warn", "running": "warn", "skipped": ""}


def _value(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "" if value is None else str(value)
    return f"{value:.4g}"


def _steps(r: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A progressive release's steps (issue 20) as the page lists them: kind, state, what it
    did or why it stopped, and an analysis' measurements (value and verdict each)."""
    out = []
    for s in r.get("steps") or ():
        if not isinstance(s, Mapping):
            continue
        measured = [
            {
                "at": str(x.get("at", "")),
                "verdict": str(x.get("verdict", "")),
                "value": _value(x.get("value")),
                "detail": str(x.get("detail", "")),
            }
            for x in s.get("measurements") or ()
            if isinstance(x, Mapping)
        ]
        what = str(s.get("kind", ""))
        if s.get("kind") == "analysis":
            what = f"analysis {s.get('name', '')} ({s.get('provider', '')})"
        elif s.get("kind") == "replicas" and s.get("replicas") is not None:
            what = f"replicas {s['replicas']}"
        out.append(
            {
                "n": "all" if s.get("kind") == "all" else str(int(s.get("index", 0)) + 1),
                "what": what,
                "mode": str(s.get("mode") or ""),
                "state": str(s.get("state", "")),
                "state_class": STEP_CLASS.get(str(s.get("state")), "warn"),
                "detail": str(s.get("detail", "")),
                "finished": str(s.get("finished") or ""),
                "measurements": measured,
            }
        )
    return out


def _row(r: Mapping[str, Any], current: Any) -> dict[str, Any]:
    failure = r.get("failure") if isinstance(r.get("failure"), Mapping) else {}
    after = []
    if r.get("rolled_back_to") is not None:
        after.append(f"restored #{r['rolled_back_to']}")
    if r.get("rolled_back_by") is not None:
        after.append(f"replaced by rollback #{r['rolled_back_by']}")
    digest = str(r.get("digest") or "")
    return {
        "number": r.get("number"),
        "current": r.get("number") == current,
        "action": r.get("action", ""),
        "status": str(r.get("status", "")),
        "status_class": STATUS_CLASS.get(str(r.get("status")), "warn"),
        "status_by": _changed_by(failure) if r.get("status") == "aborted" else "",
        "tag": r.get("tag") or "",
        "digest": digest[:19],
        "digest_full": digest,
        "model": r.get("model") or "",
        "node_change": str(r.get("node_change") or ""),
        "started": r.get("started", ""),
        "finished": r.get("finished") or "",
        "who": ", ".join(
            x
            for x in (
                f"by {r['requested_by']}" if r.get("requested_by") else "",
                f"approved by {r['approved_by']}" if r.get("approved_by") else "",
            )
            if x
        ),
        "approved_by": r.get("approved_by") or "",
        "reason": r.get("reason") or "",
        "git_revision": str(r.get("git_revision") or "")[:12],
        "link": _link(r.get("link")),
        "failure_kind": failure.get("kind", "") if failure else "",
        "failure": failure.get("message", "") if failure else "",
        "after": "; ".join(after),
        "steps": _steps(r),
        "note": str(r.get("note") or ""),
    }


def context(result: Mapping[str, Any]) -> dict[str, Any]:
    _check(result)
    current = result.get("current")
    rows = [_row(r, current) for r in result["releases"]]
    running = next((row for row in rows if row["current"]), None)
    latest = rows[0] if rows else None
    if running is None and latest is not None and latest["status_by"]:
        verdict, verdict_class = "last release aborted", latest["status_class"]
        message = (
            f"{result['environment']} runs no gpuops release: the last release "
            f"#{latest['number']} {latest['tag']} aborted, {latest['status_by']}"
        )
    elif running is None:
        verdict, verdict_class = "no gpuops release runs", "warn"
        message = f"{result['environment']} runs nothing gpuops released (or nothing yet)"
    elif latest is not None and latest["status"] != "succeeded":
        verdict, verdict_class = f"last release {latest['status']}", latest["status_class"]
        message = (
            f"{result['environment']} runs #{running['number']} {running['tag']}; "
            f"the last release #{latest['number']} {latest['tag']} {latest['status']}"
        )
    else:
        verdict, verdict_class = "running", "ok"
        message = f"{result['environment']} runs #{running['number']} {running['tag']}"
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    return {
        "r": result,
        "rows": rows,
        "verdict": verdict,
        "verdict_class": verdict_class,
        "message": message,
        "deployments": ", ".join(str(d) for d in result.get("deployments") or []),
        "choices": [str(c) for c in result.get("rollback_choices") or []],
        "counts": sorted(counts.items()),
        "open": sorted((str(k), str(v)) for k, v in (result.get("open") or {}).items()),
    }


def write(result: Mapping[str, Any], out_dir: OutDir) -> page.Written:
    return page.write(out_dir, "releases", "releases.html.j2", context(result), [])
