"""Ansible as gpuops uses it: the inventory (Ansible's own rules) and playbooks run through
ansible-runner.

Why ansible-runner and not ``ansible-playbook`` with its output parsed: ansible-runner (what
AWX and Ansible Tower are built on) gives a structured event per task and host as it happens
(for the progress lines and the per-host report), a status and rc, and an artifacts folder
(``job_events/*.json``, ``stdout``) that a Jenkins step archives and a person can replay. The
text output of ``ansible-playbook`` is for people: it changes between versions and callbacks.

Secrets: the SSH key reaches Ansible as a file path in ``ANSIBLE_PRIVATE_KEY_FILE`` (bound by
the Jenkins step's ``withCredentials``), never as an argument; errors are built from our words.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuops import content
from gpuops.core.inventory import HOST_VARS, Host, Inventory
from gpuops.core.values import shown
from gpuops.errors import InvalidInput, OperationFailed

log = logging.getLogger(__name__)

#: Environment variables the Jenkins step binds the SSH key and user to (S-25).
KEY_FILE_ENV = "GPUOPS_SSH_KEY_FILE"
USER_ENV = "GPUOPS_SSH_USER"


def _plain(value: Any) -> Any:
    """Ansible's tagged values as plain Python values."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bool | None):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


def load_inventory(path: str, limit: str | None = None, pattern: str = "gpu_nodes") -> Inventory:
    """The hosts of ``pattern`` in the inventory at ``path``, narrowed by ``limit``.

    A missing or unparsable inventory, or a limit matching no host, is an input error naming
    the option; the message is ours (an inventory can hold secrets)."""
    source = Path(path)
    try:
        source.stat()
    except FileNotFoundError:
        raise InvalidInput(
            f"inventory {shown(path)} does not exist",
            hint="pass --inventory PATH (a file or an inventory folder)",
            field="inventory",
        ) from None
    except (OSError, ValueError) as exc:  # a name too long, a loop of links, a NUL byte
        raise InvalidInput(
            f"inventory {shown(path)} cannot be read ({getattr(exc, 'strerror', None) or exc})",
            field="inventory",
        ) from None
    os.environ.setdefault("ANSIBLE_INVENTORY_UNPARSED_FAILED", "True")
    os.environ.setdefault("ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED", "True")
    try:
        from ansible.errors import AnsibleError  # noqa: PLC0415 - heavy; only when used
        from ansible.inventory.manager import InventoryManager  # noqa: PLC0415
        from ansible.parsing.dataloader import DataLoader  # noqa: PLC0415
        from ansible.template import Templar  # noqa: PLC0415
        from ansible.vars.manager import VariableManager  # noqa: PLC0415
    except ImportError:  # pragma: no cover - a dependency of the wheel
        raise OperationFailed("ansible-core is not installed", hint="reinstall gpuops") from None
    # Ansible says what it could not parse on stderr, before our result or error document, and
    # quoting the inventory (which can hold secrets): its words are kept out, ours say it.
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
            loader = DataLoader()
            manager = InventoryManager(loader=loader, sources=[str(source)])
            variables = VariableManager(loader=loader, inventory=manager)
            everything = manager.get_hosts(pattern)
            if limit:
                manager.subset(limit)
            selected = manager.get_hosts(pattern)
    except AnsibleError:
        raise InvalidInput(
            f"inventory {path} cannot be parsed as an Ansible inventory (YAML or INI)",
            hint=f"check it with: ansible-inventory -i {path} --graph",
            field="inventory",
        ) from None
    if said.getvalue():
        log.debug(
            "ansible-core said %d line(s) loading the inventory (not shown: it can hold secrets)",
            len(said.getvalue().splitlines()),
        )
    if not everything:
        raise InvalidInput(
            f"inventory {path} has no host in group {shown(pattern)}",
            hint="GPU nodes belong to gpu_nodes (S-6), one child group per GPU model",
            field="inventory",
        )
    if not selected:
        raise InvalidInput(
            f"limit {shown(limit)} matches no host of group {shown(pattern)} in {path}",
            hint=f"hosts: {', '.join(h.name for h in everything[:10])}"
            + (" ..." if len(everything) > 10 else ""),
            field="limit",
        )
    hosts = []
    for host in selected:
        found = variables.get_vars(host=host, include_hostvars=False)
        wanted = {k: found[k] for k in HOST_VARS if k in found}
        try:
            if any("{{" in str(v) for v in wanted.values()):
                wanted = Templar(loader=loader, variables=found).template(wanted)
        except AnsibleError:
            raise InvalidInput(
                f"inventory {path}: a variable of host {host.name} cannot be templated",
                field="inventory",
            ) from None
        groups = tuple(str(g) for g in found.get("group_names", ()))
        hosts.append(Host(name=str(host.name), groups=groups, vars=_plain(wanted)))
    return Inventory(path=str(source), hosts=tuple(hosts), limit=limit)


# -- playbooks --------------------------------------------------------------------------------
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
    def __init__(self, progress: Progress | None) -> None:
        self.hosts: dict[str, HostRun] = {}
        self.progress = progress

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
            run.unreachable, run.failed_task, run.message = True, label, _message(res)
            self._say(run.host, "unreachable", label, seconds)
        return True

    def _say(self, host: str, status: str, task: str, seconds: Any) -> None:
        if self.progress:
            self.progress(host, status, task, seconds if isinstance(seconds, float) else None)


def run_playbook(
    playbook: str,
    inventory: str,
    hosts: list[str],
    *,
    data_dir: Path,
    ident: str,
    extravars: Mapping[str, Any] | None = None,
    check: bool = False,
    forks: int = 50,
    timeout_s: int = 3600,
    progress: Progress | None = None,
) -> PlaybookRun:
    """Run a shipped playbook on exactly ``hosts``; events land in ``data_dir/artifacts/ident``."""
    import ansible_runner  # noqa: PLC0415 - heavy; only when used

    env = {
        "ANSIBLE_CONFIG": str(content.ansible_dir() / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
    }
    key, user = os.environ.get(KEY_FILE_ENV), os.environ.get(USER_ENV)
    if key:
        env["ANSIBLE_PRIVATE_KEY_FILE"] = key
    if user:
        env["ANSIBLE_REMOTE_USER"] = user
    events = _Events(progress)
    cmdline = "--check --diff" if check else "--diff"
    # the ansible-playbook of this installation (a venv's bin is often not on PATH)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "/usr/bin:/bin")])
    if shutil.which("ansible-playbook", path=env["PATH"]) is None:
        raise OperationFailed(
            "ansible-playbook is not installed beside gpuops", hint="reinstall gpuops"
        )
    data_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        runner = ansible_runner.run(
            private_data_dir=str(data_dir),
            ident=ident,
            playbook=str(content.playbook(playbook)),
            inventory=str(Path(inventory).resolve()),
            limit=",".join(hosts),
            extravars=dict(extravars or {}),
            envvars=env,
            cmdline=cmdline,
            forks=min(forks, max(1, len(hosts))),
            timeout=timeout_s,
            event_handler=events,
            quiet=True,
            suppress_env_files=True,
        )
    except Exception as exc:  # ansible-runner's own errors; its text is not shown
        raise OperationFailed(
            f"ansible-runner could not run playbook {playbook} ({type(exc).__name__})",
            hint=f"see the artifacts in {data_dir}",
        ) from None
    _scrub(data_dir / "artifacts" / ident)
    for name in hosts:
        events.hosts.setdefault(name, HostRun(name))
    rc = int(runner.rc if runner.rc is not None else -1)
    if rc != 0 and not any(h.ok or h.failed or h.unreachable for h in events.hosts.values()):
        raise OperationFailed(
            f"ansible-playbook {playbook} did not run (status {runner.status}, exit {rc})",
            hint=f"see {data_dir / 'artifacts' / ident / 'stdout'}",
        )
    return PlaybookRun(
        ident=ident,
        rc=rc,
        status=str(runner.status),
        hosts=events.hosts,
        artifacts=str(data_dir / "artifacts" / ident),
        elapsed_s=round(time.monotonic() - started, 3),
    )


def _scrub(artifacts: Path) -> None:
    """ansible-runner records the whole process environment in ``artifacts/<ident>/command``;
    a Jenkins step archives that folder and credentials live in the environment: keep only
    the command line."""
    command = artifacts / "command"
    try:
        doc = json.loads(command.read_text())
        command.write_text(json.dumps({"command": doc.get("command"), "cwd": doc.get("cwd")}))
    except (OSError, ValueError, AttributeError):
        command.unlink(missing_ok=True)
