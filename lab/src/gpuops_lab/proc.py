"""Process helpers for the lab: start daemons with logs and pid files, wait, stop for sure."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from gpuops.errors import OperationFailed

log = logging.getLogger(__name__)


def spawn(
    name: str,
    argv: Sequence[str],
    lab_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """Start ``argv`` as a daemon in its own session; stdout/stderr go to ``logs/<name>.log``.

    The pid is written to ``pids/<name>.pid`` so that :func:`stop_all` finds it even after
    the process that started it is gone.
    """
    logs = lab_dir / "logs"
    pids = lab_dir / "pids"
    logs.mkdir(parents=True, exist_ok=True)
    pids.mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    with (logs / f"{name}.log").open("ab") as out:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
        )
    (pids / f"{name}.pid").write_text(f"{proc.pid}\n")
    log.debug("started %s (pid %d): %s", name, proc.pid, " ".join(argv))
    return proc.pid


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours still answers kill(0); reap it if it is ours
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def stop_pid(pid: int, *, timeout: float = 10.0, sig: int = signal.SIGTERM) -> None:
    """Signal the process group of ``pid`` (then the pid), escalate to SIGKILL."""
    _signal(pid, sig)
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(pid):
        _signal(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def pid_of(name: str, lab_dir: Path) -> int | None:
    try:
        return int((lab_dir / "pids" / f"{name}.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def stop(name: str, lab_dir: Path, *, timeout: float = 10.0) -> None:
    pid = pid_of(name, lab_dir)
    if pid is not None:
        stop_pid(pid, timeout=timeout)
        (lab_dir / "pids" / f"{name}.pid").unlink(missing_ok=True)


def stop_all(lab_dir: Path, prefix: str = "") -> None:
    pids = lab_dir / "pids"
    if not pids.is_dir():
        return
    for pidfile in sorted(pids.glob(f"{prefix}*.pid"), reverse=True):
        stop(pidfile.stem, lab_dir)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(
    check: Callable[[], bool],
    what: str,
    *,
    timeout: float = 30.0,
    interval: float = 0.05,
    pid: int | None = None,
    log_file: Path | None = None,
) -> None:
    """Poll ``check`` until it is true; fail with the tail of ``log_file`` otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if pid is not None and not alive(pid):
            raise OperationFailed(f"{what}: the process exited{_tail(log_file)}")
        time.sleep(interval)
    raise OperationFailed(f"{what}: not ready after {timeout:.0f}s{_tail(log_file)}")


def _tail(log_file: Path | None, lines: int = 15) -> str:
    if log_file is None or not log_file.exists():
        return ""
    text = log_file.read_text(errors="replace").splitlines()[-lines:]
    return "\n--- " + str(log_file) + " ---\n" + "\n".join(text)


def tcp_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def http_ok(
    url: str, *, context: ssl.SSLContext | None = None, expect: tuple[int, ...] = (200,)
) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1, context=context) as resp:  # noqa: S310
            return int(resp.status) in expect
    except urllib.error.HTTPError as exc:
        return exc.code in expect
    except (OSError, ValueError):
        return False
