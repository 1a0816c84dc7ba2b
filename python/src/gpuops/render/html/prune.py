"""The registry retention page, from a ``gpuops image prune`` result (a dry run or a prune).

Answers at a glance: per repository, what goes (or went) and why every other manifest stays:
protected (a release history, a running Deployment or ReplicaSet, a registry tag), kept by the
policy (last N builds, a tag pattern, its age) or by what is kept (an index, a signature's
subject). Newest first, as the command prints it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuops.fsio import OutDir
from gpuops.render.html import page


def _row(d: Mapping[str, Any], deleted: set[str]) -> dict[str, Any]:
    digest = str(d.get("digest", ""))
    reasons = [str(r) for r in d.get("reasons") or []]
    action = str(d.get("action", ""))
    protected = any(r.startswith("protected:") for r in reasons)
    return {
        "digest": digest[:19],
        "digest_full": digest,
        "tags": ", ".join(str(t) for t in d.get("tags") or []) or "(untagged)",
        "created": str(d.get("created") or ""),
        "action": "deleted" if digest in deleted else action,
        # protected: green; kept by the policy (last N, a pattern, young): grey
        "action_class": "bad" if action == "delete" else ("ok" if protected else "muted"),
        "reasons": reasons if action != "delete" else [],
    }


def context(result: Mapping[str, Any]) -> dict[str, Any]:
    repos = []
    for repo in result.get("repositories") or []:
        deleted = {str(x) for x in repo.get("deleted") or []}
        rows = [_row(d, deleted) for d in repo.get("decisions") or []]
        repos.append(
            {
                "name": str(repo.get("repository", "")),
                "environments": ", ".join(str(e) for e in repo.get("environments") or []),
                "tags": repo.get("tags", 0),
                "rows": rows,
                "doomed": sum(1 for r in rows if r["action"] in ("delete", "deleted")),
                "protected": len(repo.get("protected") or {}),
            }
        )
    state = str(result.get("state", ""))
    dry = bool(result.get("dry_run"))
    doomed = sum(r["doomed"] for r in repos)
    if state == "refused":
        verdict, verdict_class = "refused: nothing deleted", "warn"
    elif dry or state == "planned":
        verdict, verdict_class = f"plan: {doomed} manifests would be deleted", "ok"
    elif state in ("failed", "partial"):
        verdict, verdict_class = f"{state}: {result.get('deleted', 0)} deleted", "bad"
    else:
        verdict, verdict_class = f"pruned: {result.get('deleted', 0)} deleted", "ok"
    message = (
        f"{len(repos)} repositories, {result.get('kept', 0)} manifests kept; locks: "
        f"{', '.join(str(x) for x in result.get('locks') or []) or 'none'}"
    )
    return {
        "r": result,
        "repos": repos,
        "verdict": verdict,
        "verdict_class": verdict_class,
        "message": message,
    }


def write(result: Mapping[str, Any], out_dir: OutDir) -> page.Written:
    return page.write(out_dir, "prune", "prune.html.j2", context(result), [])
