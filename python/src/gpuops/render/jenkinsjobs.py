"""Text rendering of ``gpuops jenkins apply``.

Render imports only the core: :class:`ApplyShown` names what the text reads of the use
case's result (``gpuops.usecases.jenkinsjobs.ApplyResult`` has these attributes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class _Job(Protocol):
    @property
    def path(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def diff(self) -> str: ...
    @property
    def environment(self) -> str | None: ...
    @property
    def choices(self) -> Sequence[str]: ...


class ApplyShown(Protocol):
    """What :func:`apply_text` reads of the jobs applied (or checked)."""

    @property
    def url(self) -> str: ...
    @property
    def user(self) -> str: ...
    @property
    def check(self) -> bool: ...
    @property
    def jobs(self) -> Sequence[_Job]: ...
    @property
    def changed(self) -> int: ...


def apply_text(out: ApplyShown) -> str:
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
