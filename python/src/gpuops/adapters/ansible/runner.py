"""A shipped playbook run through ansible-runner, in a private folder only gpuops writes; its
artifacts are copied out through the one writer, the environment it records scrubbed.

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
import json
import os
import shutil
import stat
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpuops import content, fsio
from gpuops.adapters import aborts
from gpuops.adapters.ansible.config import config_env
from gpuops.adapters.ansible.events import HostRun, PlaybookRun, Progress, _Events
from gpuops.adapters.hostkeys import HostKeys
from gpuops.errors import GpuOpsError, OperationFailed
from gpuops.fsio import OutDir

#: Environment variables the Jenkins step binds the SSH key and user to (S-25).
KEY_FILE_ENV = "GPUOPS_SSH_KEY_FILE"
USER_ENV = "GPUOPS_SSH_USER"


def run_playbook(
    playbook: str,
    inventory: str,
    hosts: list[str],
    *,
    data_dir: OutDir,
    ident: str,
    extravars: Mapping[str, Any] | None = None,
    check: bool = False,
    forks: int = 50,
    timeout_s: int = 3600,
    progress: Progress | None = None,
    host_keys: HostKeys | None = None,
) -> PlaybookRun:
    """Run a shipped playbook on exactly ``hosts``; ansible-runner's artifacts (events, stdout,
    status, rc, the command line) are copied into ``data_dir/artifacts/ident``."""
    import ansible_runner  # noqa: PLC0415 - heavy; only when used

    env = config_env(host_keys)
    key, user = os.environ.get(KEY_FILE_ENV), os.environ.get(USER_ENV)
    if key:
        env["ANSIBLE_PRIVATE_KEY_FILE"] = key
    if user:
        env["ANSIBLE_REMOTE_USER"] = user
    events = _Events(progress, host_keys)
    cmdline = "--check --diff" if check else "--diff"
    # the ansible-playbook of this installation (a venv's bin is often not on PATH)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "/usr/bin:/bin")])
    if shutil.which("ansible-playbook", path=env["PATH"]) is None:
        raise OperationFailed(
            "ansible-playbook is not installed beside gpuops", hint="reinstall gpuops"
        )
    data_dir.fd  # noqa: B018 - the folder exists now, made by the one writer, never through a link
    started = time.monotonic()
    # ansible-runner reads env/{envvars,extravars,settings,ssh_key,passwords} of its private
    # data dir: a fresh folder only gpuops writes, never the artifacts folder (which others
    # can write to); its artifacts are copied there afterwards.
    # cancel_callback: without one ansible-runner installs SIGTERM/SIGINT handlers of its own
    # that only set a flag and never puts ours back (a Jenkins abort was swallowed); with it, an
    # abort during the playbook stops ansible-playbook and is raised once the artifacts are kept
    with fsio.private_tempdir("gpuops-ansible-") as private, aborts.kept(), aborts.deferred():
        runner, failed = _run_runner(
            ansible_runner.run,
            private_data_dir=str(private.path),
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
            cancel_callback=aborts.requested,
            quiet=True,
            suppress_env_files=True,
        )
        _scrub(private, ident)
        copied = _copy_artifacts(private, data_dir, ident)
    aborts.check()  # aborted while the playbook ran: its artifacts are kept, then it ends
    if runner is None:
        raise OperationFailed(
            f"ansible-runner could not run playbook {playbook} ({failed})",
            hint=f"see the artifacts in {copied}",
        )
    for name in hosts:
        events.hosts.setdefault(name, HostRun(name))
    rc = int(runner.rc if runner.rc is not None else -1)
    if rc != 0 and not any(h.ok or h.failed or h.unreachable for h in events.hosts.values()):
        raise OperationFailed(
            f"ansible-playbook {playbook} did not run (status {runner.status}, exit {rc})",
            hint=f"see {copied / 'stdout'}",
        )
    return PlaybookRun(
        ident=ident,
        rc=rc,
        status=str(runner.status),
        hosts=events.hosts,
        artifacts=str(copied),
        elapsed_s=round(time.monotonic() - started, 3),
    )


def _run_runner(run: Callable[..., Any], **kwargs: Any) -> tuple[Any, str]:
    """``run(**kwargs)``, and None with the exception's type name when it raised (its text is
    not shown: it can quote the environment)."""
    try:
        return run(**kwargs), ""
    except Exception as exc:  # ansible-runner's own errors
        return None, type(exc).__name__


#: Largest artifact file copied out of ansible-runner's private folder (its stdout, an event).
MAX_ARTIFACT_FILE = 1 << 30


def _copy_artifacts(private: OutDir, data_dir: OutDir, ident: str) -> Path:
    """``artifacts/<ident>/`` of ansible-runner's private folder into ``data_dir`` (the same
    path below it) through the one writer; regular files only, links never followed."""
    source = private.path / "artifacts" / ident
    with data_dir.subdir("artifacts") as artifacts, artifacts.subdir(ident) as target:
        for folder, dirs, files in os.walk(source, followlinks=False):
            where = Path(folder).relative_to(source)
            dirs[:] = sorted(d for d in dirs if not Path(folder, d).is_symlink())
            out = target
            opened = []
            for part in where.parts:
                out = out.subdir(part)
                opened.append(out)
            try:
                for name in sorted(files):
                    data = _regular_bytes(Path(folder, name))
                    if data is not None:
                        out.save_bytes(name, data)
            finally:
                for one in opened:
                    one.close()
        return target.path


def _regular_bytes(path: Path) -> bytes | None:
    """The bytes of ``path`` when it is a regular file itself (not a link), else None."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return None
        return fsio.read_bytes(path, cap=MAX_ARTIFACT_FILE, what="ansible-runner artifact")
    except (OSError, GpuOpsError):
        return None


def _scrub(data_dir: OutDir, ident: str) -> None:
    """ansible-runner records the whole process environment in ``artifacts/<ident>/command``;
    a Jenkins step archives that folder and credentials live in the environment: keep only
    the command line."""
    try:
        folder = data_dir.subdir("artifacts").subdir(ident)
    except GpuOpsError:
        return  # ansible-runner wrote no artifacts
    with folder:
        try:
            doc = json.loads(folder.file("command").read_text())
            folder.save_json("command", {"command": doc.get("command"), "cwd": doc.get("cwd")})
        except FileNotFoundError:
            return
        except (OSError, ValueError, AttributeError, GpuOpsError):
            with contextlib.suppress(GpuOpsError):  # unreadable: its content is not kept
                folder.save_json("command", {"command": None, "cwd": None})
