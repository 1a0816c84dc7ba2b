"""ansible-runner's events, as they come, folded into what each host did (tasks ok, changed,
failed, its diffs and task times), with a progress line per change or failure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuops.adapters.ansible.plain import _plain
from gpuops.adapters.hostkeys import HostKeys


@dataclass
class HostRun:
    """What one playbook run did on one host."""

    host: str
    ok: int = 0
    changed: int = 0
    failed: bool = False
    unreachable: bool = False
    skipped: int = 0
    failed_task: str = ""
    message: str = ""
    changed_tasks: list[str] = field(default_factory=list)
    task_seconds: dict[str, float] = field(default_factory=dict)
    diffs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.unreachable:
            return "unreachable"
        if self.failed:
            return "failed"
        return "changed" if self.changed else "unchanged"


@dataclass
class PlaybookRun:
    ident: str
    rc: int
    status: str
    hosts: dict[str, HostRun]
    artifacts: str
    elapsed_s: float


Progress = Callable[[str, str, str, float | None], None]  # host, status, task, seconds


def _message(res: Mapping[str, Any]) -> str:
    """A failed task's message in one line: the module's msg and, for a command, what it
    said on stderr (an installer's own error), else its output's last line."""
    text = str(res.get("msg") or "").strip()
    lines = [
        line.strip()
        for line in str(res.get("stderr") or res.get("module_stderr") or "").splitlines()
        if line.strip()
    ]
    if not lines and res.get("stdout"):
        lines = [str(res["stdout"]).strip().splitlines()[-1]]
    said = " ".join(lines)
    text = f"{text}: {said}" if text and said else (text or said)
    return " ".join(text.split())[:800]


class _Events:
    def __init__(self, progress: Progress | None, host_keys: HostKeys | None = None) -> None:
        self.hosts: dict[str, HostRun] = {}
        self.progress = progress
        self.host_keys = host_keys or HostKeys()

    def __call__(self, event: Mapping[str, Any]) -> bool:
        kind = str(event.get("event", ""))
        data = event.get("event_data") or {}
        name = data.get("host")
        if not name or not kind.startswith("runner_on_"):
            return True
        run = self.hosts.setdefault(str(name), HostRun(str(name)))
        res = data.get("res") or {}
        task = str(data.get("task") or "")
        role = data.get("role")
        label = f"{role} : {task}" if role else task
        seconds = data.get("duration")
        if isinstance(seconds, int | float):
            run.task_seconds[label] = round(run.task_seconds.get(label, 0.0) + seconds, 3)
        if kind == "runner_on_ok":
            run.ok += 1
            if res.get("changed"):
                run.changed += 1
                run.changed_tasks.append(label)
                diff = res.get("diff")
                if diff:
                    run.diffs.append({"task": label, "diff": _plain(diff)})
                self._say(run.host, "changed", label, seconds)
        elif kind == "runner_on_skipped":
            run.skipped += 1
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            run.failed, run.failed_task, run.message = True, label, _message(res)
            self._say(run.host, "failed", label, seconds)
        elif kind == "runner_on_unreachable":
            refused = self.host_keys.refusal(run.host, run.host, str(res.get("msg") or ""))
            run.unreachable, run.failed_task = True, label
            run.message = refused or _message(res)
            self._say(run.host, "unreachable", label, seconds)
        return True

    def _say(self, host: str, status: str, task: str, seconds: Any) -> None:
        if self.progress:
            self.progress(host, status, task, seconds if isinstance(seconds, float) else None)
