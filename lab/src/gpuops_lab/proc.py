"""Process helpers for the lab: start daemons with logs and pid files, wait, stop for sure.

The lab runs as root on shared machines, so it signals only processes it can prove are its
own: one it recorded when it started it (:class:`Recorded`: pid, start time, command line),
or one a caller's check proves (its network namespace, its lab paths), always through a pidfd
opened before the check (:func:`signal_if`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import select
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuops.errors import OperationFailed
from gpuops_lab import safefiles

log = logging.getLogger(__name__)


#: A pid file: the pid, its start time (clock ticks after boot, field 22 of /proc/<pid>/stat)
#: and the command line the lab started, as JSON. Only a process that still has that start
#: time and runs (a suffix of) that command line is the lab's: pids are reused.
PID_FILE_KEYS = ("pid", "start", "argv")


@dataclass(frozen=True)
class Recorded:
    """A process as the lab recorded it when it started it."""

    pid: int
    start: int
    argv: tuple[str, ...]

    def is_running(self) -> bool:
        """Whether ``pid`` is still this process (a zombie of it counts)."""
        if start_time(self.pid) != self.start:
            return False
        now = cmdline(self.pid)
        if now is None:
            return False
        # nsenter and the like exec the program named after their options: the process then
        # runs the tail of the recorded command line; a zombie has none left
        return not now or (len(now) <= len(self.argv) and tuple(now) == self.argv[-len(now) :])


def start_time(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks after boot, None if there is no such process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="surrogateescape") for a in raw.split(b"\0")[:-1]]


def spawn(
    name: str,
    argv: Sequence[str],
    lab_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """Start ``argv`` as a daemon in its own session; stdout/stderr go to ``logs/<name>.log``.

    The pid, start time and command line are written to ``pids/<name>.pid`` so that
    :func:`stop_all` finds the process, and only it, even after the process that started it
    is gone. Neither file is written through a symlink.
    """
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    fd = open_log(lab_dir, name)
    try:
        child = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
        )
    finally:
        os.close(fd)
    record(name, lab_dir, child.pid, argv)
    log.debug("started %s (pid %d): %s", name, child.pid, " ".join(argv))
    return child.pid


def open_log(lab_dir: Path, name: str) -> int:
    """``logs/<name>.log`` opened for appending; never through a symlink."""
    path = safefiles.ensure_dir(lab_dir / "logs") / f"{name}.log"
    try:
        return os.open(path, LOG_FLAGS, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OperationFailed(
                f"lab log file {path} is a symlink: refusing to write through it",
                hint="remove it (and ask who put it there)",
            ) from None
        raise


LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


def record(name: str, lab_dir: Path, pid: int, argv: Sequence[str]) -> None:
    """Write ``pids/<name>.pid`` for a process the lab just started."""
    start = start_time(pid)
    if start is None:  # gone already: nothing of ours to find later
        return
    doc = {"pid": pid, "start": start, "argv": [str(a) for a in argv]}
    pids = safefiles.ensure_dir(lab_dir / "pids")
    safefiles.write_atomic(pids / f"{name}.pid", json.dumps(doc) + "\n")


def recorded(name: str, lab_dir: Path) -> Recorded | None:
    """What ``pids/<name>.pid`` says, None when it is missing or not a record of ours."""
    path = lab_dir / "pids" / f"{name}.pid"
    try:
        if path.is_symlink():
            return None
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or set(doc) != set(PID_FILE_KEYS):
        return None  # e.g. a bare pid, as older labs wrote: it proves nothing
    pid, start, argv = doc["pid"], doc["start"], doc["argv"]
    if (
        not isinstance(pid, int)
        or isinstance(pid, bool)
        or pid <= 1
        or not isinstance(start, int)
        or not isinstance(argv, list)
        or not argv
        or not all(isinstance(a, str) for a in argv)
    ):
        return None
    return Recorded(pid, start, tuple(argv))


def pid_of(name: str, lab_dir: Path) -> int | None:
    """The pid of the lab's process ``name`` while it still runs, else None."""
    rec = recorded(name, lab_dir)
    return rec.pid if rec is not None and rec.is_running() else None


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


def _pidfd(pid: int) -> int | None:
    """A pidfd pinning ``pid`` (-1 when there is no such process, None without pidfds)."""
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return -1
    except OSError:  # a kernel without pidfds (< 5.3): the check alone guards
        return None


def _send(pid: int, fd: int | None, sig: int, group: bool) -> bool:
    if group:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
    try:
        if fd is not None:
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        return group  # the leader went; its group (if any) was signalled
    return True


def signal_if(pid: int, sig: int, ours: Callable[[int], bool], *, group: bool = False) -> bool:
    """Send ``sig`` to ``pid`` only if ``ours(pid)`` holds; True if it was sent.

    The process is pinned by a pidfd opened *before* the check, and the signal goes through
    that pidfd: a process that exits meanwhile, and another that gets its pid, are never
    signalled. ``group``: also the process group it leads (a session the lab started).
    """
    fd = _pidfd(pid)
    if fd == -1:
        return False
    try:
        return ours(pid) and _send(pid, fd, sig, group)
    finally:
        if fd is not None:
            os.close(fd)


def _exited(pid: int, fd: int | None, timeout: float) -> bool:
    """Wait until the process is gone (every thread of it: a pidfd becomes readable only
    then), reaping it if it is our child."""
    deadline = time.monotonic() + timeout
    while True:
        if fd is not None:
            ready, _, _ = select.select([fd], [], [], 0.05)
            gone = bool(ready)
        else:
            gone = not alive(pid)
        if gone:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            return True
        if time.monotonic() >= deadline:
            return False
        if fd is None:
            time.sleep(0.05)


def stop_process(
    pid: int,
    ours: Callable[[int], bool],
    *,
    timeout: float = 10.0,
    sig: int = signal.SIGTERM,
    group: bool = False,
) -> None:
    """Signal ``pid`` (and its group) if ``ours(pid)`` holds, wait, then SIGKILL it if needed.
    Both signals and the wait go through one pidfd opened before the check."""
    fd = _pidfd(pid)
    if fd == -1:
        return
    try:
        if not ours(pid) or not _send(pid, fd, sig, group):
            return
        if not _exited(pid, fd, timeout) and (fd is not None or ours(pid)):
            _send(pid, fd, signal.SIGKILL, group)
            _exited(pid, fd, 5.0)
    finally:
        if fd is not None:
            os.close(fd)


def signal_named(name: str, lab_dir: Path, sig: int) -> int | None:
    """Signal the lab's process ``name`` and its process group; its pid if it was running."""
    rec = recorded(name, lab_dir)
    if rec is None:
        return None
    return rec.pid if signal_if(rec.pid, sig, lambda _p: rec.is_running(), group=True) else None


def stop(name: str, lab_dir: Path, *, timeout: float = 10.0) -> None:
    """Stop the lab's process ``name`` (and its process group) and drop its pid file; a pid
    file that names a process the lab did not start (any more) signals nothing."""
    rec = recorded(name, lab_dir)
    if rec is not None:
        stop_process(rec.pid, lambda _p: rec.is_running(), timeout=timeout, group=True)
    else:
        log.debug("no running process of ours recorded as %s in %s", name, lab_dir)
    pidfile = lab_dir / "pids" / f"{name}.pid"
    with contextlib.suppress(FileNotFoundError):
        if pidfile.is_symlink() or pidfile.is_file():
            pidfile.unlink()


def stop_all(lab_dir: Path, prefix: str = "", *, timeout: float = 10.0) -> None:
    pids = lab_dir / "pids"
    if pids.is_symlink() or not pids.is_dir():
        return
    for pidfile in sorted(pids.glob(f"{prefix}*.pid"), reverse=True):
        stop(pidfile.stem, lab_dir, timeout=timeout)


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
