"""The lab's ``systemctl``: a stand-in for systemd's on lab hosts (which have no systemd), for
the one unit the lab models, ``nvidia-fabricmanager.service``. Test data, not systemd.

Modelled, with systemd's output text: ``is-active`` (``active``/``inactive``/``failed``, exit 0
or 3), ``is-enabled``, ``show`` (``-p A,B``/``--property=A``, ``--value``; ``Id``,
``LoadState``, ``ActiveState``, ``SubState``, ``Result``, ``MainPID``, ``ExecMainPID``,
``UnitFileState``, ``FragmentPath``), ``start``/``stop``/``restart`` (``ExecStart`` of the unit
file run as ``Type=forking``: the main PID is read from its ``PIDFile``), ``enable``/``disable``
(the ``multi-user.target.wants`` link) and ``daemon-reload``. The lab's boot starts the unit
when it is enabled. Any other unit or verb is a clear error, never a silent success. Runtime
state lives in ``/run/lab-systemd`` (a tmpfs: a reboot clears it, as it clears systemd's).
Only the standard library may be imported here: the program runs on lab hosts.
"""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

UNITS = ("nvidia-fabricmanager.service",)
UNIT_DIRS = (Path("/etc/systemd/system"), Path("/usr/lib/systemd/system"))
WANTS = Path("/etc/systemd/system/multi-user.target.wants")
STATE = Path("/run/lab-systemd")
NAME = "lab systemctl (gpu-ops lab stand-in for systemd)"


def _unit(name: str) -> str:
    unit = name if "." in name else name + ".service"
    if unit not in UNITS:
        print(
            f"{NAME}: unit {unit} is not modelled; the lab models {', '.join(UNITS)}",
            file=sys.stderr,
        )
        raise SystemExit(1)
    return unit


def _fragment(unit: str) -> Path | None:
    for d in UNIT_DIRS:
        if (d / unit).is_file():
            return d / unit
    return None


def _service(path: Path) -> dict[str, str]:
    keys: dict[str, str] = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key in ("ExecStart", "ExecStop", "PIDFile", "Type"):
            keys[key] = value.strip()
    return keys


def _state(unit: str) -> dict[str, object]:
    path = STATE / f"{unit}.json"
    state: dict[str, object] = json.loads(path.read_text()) if path.exists() else {}
    pid = int(str(state.get("pid") or 0))
    if state.get("active") == "active" and not _alive(pid):
        state.update(active="failed", sub="failed", result="signal", pid=0)
        _save(unit, state)
    return state


def _save(unit: str, state: dict[str, object]) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    tmp = STATE / f"{unit}.json.tmp"
    tmp.write_text(json.dumps(state))
    tmp.replace(STATE / f"{unit}.json")


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        return "nv-fabricmanager" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(
            errors="replace"
        )
    except OSError:
        return False


def start(unit: str) -> int:
    if _state(unit).get("active") == "active":
        return 0
    path = _fragment(unit)
    if path is None:
        print(f"Failed to start {unit}: Unit {unit} not found.", file=sys.stderr)
        return 5
    svc = _service(path)
    argv = shlex.split(svc.get("ExecStart", ""))
    try:
        rc = subprocess.run(
            argv,
            check=False,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
        ).returncode
    except (OSError, subprocess.TimeoutExpired):
        rc = 1
    pid_file = Path(svc.get("PIDFile", "/nonexistent"))
    pid = int(pid_file.read_text().strip() or 0) if rc == 0 and pid_file.exists() else 0
    if rc != 0 or not _alive(pid):
        _save(unit, {"active": "failed", "sub": "failed", "result": "exit-code", "pid": 0})
        print(
            f"Job for {unit} failed because the control process exited with error code.\n"
            f'See "systemctl status {unit}" and "journalctl -xeu {unit}" for details.',
            file=sys.stderr,
        )
        return 1
    _save(unit, {"active": "active", "sub": "running", "result": "success", "pid": pid})
    return 0


def stop(unit: str) -> int:
    pid = int(str(_state(unit).get("pid") or 0))
    if _alive(pid):
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            if not _alive(pid):
                break
            time.sleep(0.05)
    _save(unit, {"active": "inactive", "sub": "dead", "result": "success", "pid": 0})
    return 0


def enable(unit: str, on: bool) -> int:
    path = _fragment(unit)
    link = WANTS / unit
    if path is None:
        print(
            f"Failed to {'enable' if on else 'disable'} unit: Unit file {unit} does not exist.",
            file=sys.stderr,
        )
        return 1
    if on and not link.is_symlink():
        WANTS.mkdir(parents=True, exist_ok=True)
        link.symlink_to(path)
        print(f"Created symlink {link} \u2192 {path}.", file=sys.stderr)
    elif not on and link.is_symlink():
        link.unlink()
        print(f'Removed "{link}".', file=sys.stderr)
    return 0


def show(unit: str, props: list[str], value_only: bool) -> int:
    state = _state(unit)
    path = _fragment(unit)
    known = {
        "Id": unit,
        "LoadState": "loaded" if path else "not-found",
        "ActiveState": str(state.get("active", "inactive")),
        "SubState": str(state.get("sub", "dead")),
        "Result": str(state.get("result", "success")),
        "MainPID": str(state.get("pid", 0)),
        "ExecMainPID": str(state.get("pid", 0)),
        "UnitFileState": ("enabled" if (WANTS / unit).is_symlink() else "disabled") if path else "",
        "FragmentPath": str(path or ""),
    }
    wanted = props or list(known)
    unknown = [p for p in wanted if p not in known]
    if unknown:
        print(
            f"{NAME}: property {', '.join(unknown)} is not modelled; known: {', '.join(known)}",
            file=sys.stderr,
        )
        return 1
    for p in wanted:
        print(known[p] if value_only else f"{p}={known[p]}")
    return 0


def main(argv: list[str]) -> int:
    props: list[str] = []
    value_only = quiet = False
    words: list[str] = []
    args = iter(argv)
    for a in args:
        if a in ("-p", "--property"):
            props += next(args, "").split(",")
        elif a.startswith("--property="):
            props += a.split("=", 1)[1].split(",")
        elif a == "--value":
            value_only = True
        elif a in ("-q", "--quiet"):
            quiet = True
        elif a == "--no-pager":
            pass
        elif a.startswith("-"):
            print(f"{NAME}: option {a} is not modelled", file=sys.stderr)
            return 1
        else:
            words.append(a)
    verb, names = (words[0], words[1:]) if words else ("", [])
    if verb == "daemon-reload" and not names:
        STATE.mkdir(parents=True, exist_ok=True)
        (STATE / "reloaded").touch()
        return 0
    if (
        verb
        not in ("is-active", "is-enabled", "show", "start", "stop", "restart", "enable", "disable")
        or len(names) != 1
    ):
        print(
            f"{NAME}: '{' '.join(words)}' is not modelled (one unit: is-active, is-enabled, "
            "show, start, stop, restart, enable, disable; or daemon-reload)",
            file=sys.stderr,
        )
        return 1
    unit = _unit(names[0])
    if verb == "is-active":
        active = str(_state(unit).get("active", "inactive"))
        if not quiet:
            print(active)
        return 0 if active == "active" else 3
    if verb == "is-enabled":
        if _fragment(unit) is None:
            print(
                f"Failed to get unit file state for {unit}: No such file or directory",
                file=sys.stderr,
            )
            return 1
        on = (WANTS / unit).is_symlink()
        if not quiet:
            print("enabled" if on else "disabled")
        return 0 if on else 1
    if verb == "show":
        return show(unit, props, value_only)
    if verb == "start":
        return start(unit)
    if verb == "stop":
        return stop(unit)
    if verb == "restart":
        stop(unit)
        return start(unit)
    return enable(unit, verb == "enable")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
