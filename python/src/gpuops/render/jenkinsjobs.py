"""Text rendering of ``gpuops jenkins apply``."""

from __future__ import annotations

from gpuops.usecases.jenkinsjobs import ApplyOutcome


def apply_text(out: ApplyOutcome) -> str:
    lines = [
        f"jobs on {out.url} (as {out.user}){' -- check only, nothing changed' if out.check else ''}"
    ]
    for job in out.jobs:
        extra = f"  rollback choices: previous, {', '.join(job.choices)}" if job.environment else ""
        lines.append(f"  {job.action:<13} {job.path}{extra}")
        if job.diff and out.check:
            lines.extend(f"    {line}" for line in job.diff.splitlines())
    lines.append(f"{out.changed} job(s) {'would change' if out.check else 'changed'}")
    return "\n".join(lines)
