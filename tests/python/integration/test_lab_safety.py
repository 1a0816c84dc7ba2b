"""The lab runs as root: it touches only what it made and can prove is its own.

- ``up`` marks the directory it creates (``.gpuops-lab``, an id); ``down``, ``status`` and a
  second ``up`` act only on a marked directory and refuse anything else with exit 2 naming it,
  whichever way the directory was given (``--dir``, ``$GPUOPS_LAB_DIR``, the params file's
  ``lab_dir``); ``GPUOPS_LAB_DIR=`` (set but empty) is refused, never taken for ``.``.
- a pid from a pid file is signalled only while it is still the process the lab started
  (start time and command line recorded at spawn);
- state, pid and log files are never written through a symlink.

Real directories, real processes (``sleep`` started here) and real symlinks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuops.errors import InvalidInput, OperationFailed
from gpuops_lab import MARKER, Lab, LabConfig, proc

GPUOPS = [sys.executable, "-c", "from gpuops.cli.main import main; main()"]


def _gpuops(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPUOPS_")}
    return subprocess.run(
        [*GPUOPS, "--output", "json", *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        cwd=cwd,
        timeout=120,
        check=False,
    )


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text() if p.is_file() else "<dir>"
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def precious(tmp_path: Path) -> Path:
    """A directory that is not a lab, with files that must survive every lab command."""
    d = tmp_path / "precious"
    (d / "sub").mkdir(parents=True)
    (d / "notes.txt").write_text("keep me\n")
    (d / "sub" / "data.bin").write_text("1234\n")
    (d / "state.json").write_text('{"components": {}}\n')  # looks like a lab, is not one
    (d / "pids").mkdir()
    return d


@pytest.mark.parametrize("command", ["down", "status", "up"])
@pytest.mark.parametrize("how", ["flag", "env", "params"])
def test_lab_commands_refuse_a_directory_that_is_not_a_lab(
    precious: Path, tmp_path: Path, command: str, how: str
) -> None:
    before = _tree(precious)
    extra = ["--components", "registry"] if command == "up" else []
    env: dict[str, str] = {}
    args = ["lab", command, *extra]
    if how == "flag":
        args += ["--dir", str(precious)]
    elif how == "env":
        env["GPUOPS_LAB_DIR"] = str(precious)
    else:
        params = tmp_path / "params.json"
        params.write_text(json.dumps({"lab_dir": str(precious)}))
        env["GPUOPS_PARAMS_FILE"] = str(params)
    done = _gpuops(*args, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    error = json.loads(done.stderr)["error"]
    assert error["category"] == "invalid-input"
    assert str(precious) in error["message"] and "not a gpuops lab" in error["message"]
    assert _tree(precious) == before


@pytest.mark.parametrize("command", ["down", "status", "up"])
def test_an_empty_lab_dir_variable_never_means_the_current_directory(
    precious: Path, command: str
) -> None:
    before = _tree(precious)
    extra = ["--components", "registry"] if command == "up" else []
    done = _gpuops("lab", command, *extra, env={"GPUOPS_LAB_DIR": ""}, cwd=precious)
    assert done.returncode == 2, done.stdout + done.stderr
    error = json.loads(done.stderr)["error"]
    assert "GPUOPS_LAB_DIR" in error["message"] and "empty" in error["message"]
    assert _tree(precious) == before
    done = _gpuops("lab", command, *extra, "--dir", "", cwd=precious)
    assert done.returncode == 2, done.stdout + done.stderr
    assert _tree(precious) == before


@pytest.mark.parametrize("command", ["down", "status", "up"])
def test_a_lab_dir_no_directory_can_have_is_an_input_error(
    precious: Path, tmp_path: Path, command: str
) -> None:
    extra = ["--components", "registry"] if command == "up" else []
    for bad in (tmp_path / ("x" * 300), precious / "notes.txt" / "lab"):
        done = _gpuops("lab", command, *extra, "--dir", str(bad))
        assert done.returncode == 2, done.stdout + done.stderr
        assert json.loads(done.stderr)["error"]["category"] == "invalid-input"


def test_a_forged_or_linked_marker_is_not_a_lab(precious: Path, tmp_path: Path) -> None:
    before = _tree(precious)
    (precious / MARKER).write_text("I am a lab, trust me\n")
    assert _gpuops("lab", "down", "--dir", str(precious)).returncode == 2
    (precious / MARKER).unlink()
    real = tmp_path / "real-lab"
    Lab(LabConfig(dir=real)).claim()
    (precious / MARKER).symlink_to(real / MARKER)
    assert _gpuops("lab", "down", "--dir", str(precious)).returncode == 2
    (precious / MARKER).unlink()
    assert _tree(precious) == before
    linked = tmp_path / "linked-lab"
    linked.symlink_to(real)  # the lab dir itself must not be a symlink
    assert _gpuops("lab", "down", "--dir", str(linked)).returncode == 2
    assert (real / MARKER).is_file()


def test_up_marks_its_directory_and_down_removes_only_a_marked_one(tmp_path: Path) -> None:
    lab_dir = tmp_path / "lab"
    up = _gpuops("lab", "up", "--components", "registry", "--dir", str(lab_dir))
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        marker = json.loads((lab_dir / MARKER).read_text())
        assert len(marker["id"]) == 32
        again = _gpuops("lab", "up", "--components", "registry", "--dir", str(lab_dir))
        assert again.returncode == 0, again.stderr  # a re-up of a marked lab keeps it
        assert json.loads((lab_dir / MARKER).read_text()) == marker
        status = _gpuops("lab", "status", "--dir", str(lab_dir))
        assert status.returncode == 0
        assert json.loads(status.stdout)["result"]["components"]["registry"]["healthy"]
    finally:
        down = _gpuops("lab", "down", "--dir", str(lab_dir))
    assert down.returncode == 0, down.stdout + down.stderr
    assert not lab_dir.exists()
    # down of a directory that does not exist (any more) touches nothing and says so
    again = _gpuops("lab", "down", "--dir", str(lab_dir))
    assert again.returncode == 0
    assert json.loads(again.stdout)["result"]["removed"] is False


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated process: it must survive everything below."""
    child = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        yield child
    finally:
        child.kill()
        child.wait()


def _alive(child: subprocess.Popen[bytes]) -> bool:
    return child.poll() is None


def test_a_pid_file_naming_another_process_is_not_signalled(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    lab = Lab(LabConfig(dir=tmp_path / "lab"))
    lab.claim()
    pids = lab.dir / "pids"
    pids.mkdir()
    # the old format (a bare pid), a record with another start time, one with another command
    (pids / "registry.pid").write_text(f"{sleeper.pid}\n")
    start = proc.start_time(sleeper.pid)
    assert start is not None
    (pids / "kube-etcd.pid").write_text(
        json.dumps({"pid": sleeper.pid, "start": start - 1, "argv": ["sleep", "600"]})
    )
    (pids / "podman.pid").write_text(
        json.dumps({"pid": sleeper.pid, "start": start, "argv": ["etcd", "--data-dir=x"]})
    )
    for name in ("registry", "kube-etcd", "podman"):
        assert proc.pid_of(name, lab.dir) is None
    proc.stop_all(lab.dir, timeout=1)
    lab.down()
    time.sleep(0.2)
    assert _alive(sleeper)
    assert not lab.dir.exists()


def test_a_recorded_process_is_stopped(tmp_path: Path) -> None:
    """The positive control: what the lab started and recorded is what it stops."""
    lab = Lab(LabConfig(dir=tmp_path / "lab"))
    lab.claim()
    pid = proc.spawn("sleeper", ["sleep", "600"], lab.dir)
    assert proc.pid_of("sleeper", lab.dir) == pid
    proc.stop("sleeper", lab.dir, timeout=5)
    assert not proc.alive(pid)
    assert not (lab.dir / "pids" / "sleeper.pid").exists()


def test_a_process_that_is_no_longer_ours_is_not_signalled(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """signal_if checks that the process is ours through a pidfd opened before the check."""
    assert not proc.signal_if(sleeper.pid, signal.SIGTERM, lambda _pid: False)
    time.sleep(0.1)
    assert _alive(sleeper)
    assert proc.signal_if(sleeper.pid, signal.SIGTERM, lambda _pid: True)
    sleeper.wait(5)


def test_pid_log_and_state_files_are_not_written_through_symlinks(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    lab = Lab(LabConfig(dir=tmp_path / "lab"))
    lab.claim()
    (lab.dir / "pids").mkdir()
    (lab.dir / "logs").mkdir()
    (lab.dir / "pids" / "sleeper.pid").symlink_to(victim)
    pid = proc.spawn("sleeper", ["sleep", "600"], lab.dir)
    try:
        assert victim.read_text() == "untouched\n"
        assert not (lab.dir / "pids" / "sleeper.pid").is_symlink()
        assert proc.pid_of("sleeper", lab.dir) == pid
    finally:
        proc.stop("sleeper", lab.dir, timeout=5)
    (lab.dir / "logs" / "other.log").symlink_to(victim)
    with pytest.raises(OperationFailed, match="symlink"):
        proc.spawn("other", ["sleep", "600"], lab.dir)
    assert victim.read_text() == "untouched\n"
    assert proc.pid_of("other", lab.dir) is None
    lab.state_file.symlink_to(victim)
    lab.save_config()
    assert victim.read_text() == "untouched\n"
    assert json.loads(lab.state_file.read_text())["config"]["hosts"] == lab.config.hosts
    lab.down()
    assert victim.read_text() == "untouched\n"
    assert not lab.dir.exists()


def test_symlinked_pids_or_logs_directories_are_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    lab = Lab(LabConfig(dir=tmp_path / "lab"))
    lab.claim()
    (lab.dir / "pids").symlink_to(elsewhere)
    with pytest.raises(OperationFailed, match="symlink"):
        proc.spawn("sleeper", ["sleep", "600"], lab.dir)
    assert list(elsewhere.iterdir()) == []


def test_lab_dir_value_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuops_lab import default_lab_dir

    monkeypatch.setenv("GPUOPS_LAB_DIR", "")
    with pytest.raises(InvalidInput, match="GPUOPS_LAB_DIR is set but empty"):
        default_lab_dir()
    monkeypatch.delenv("GPUOPS_LAB_DIR")
    assert default_lab_dir() == Path("/tmp/gpuops-lab")
