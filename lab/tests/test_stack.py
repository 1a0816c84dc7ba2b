"""The lab's stand-ins for the GPU stack beside the driver (gpuops_lab.stack): the Fabric
Manager archive, ``nv-fabricmanager``, ``systemctl`` and ``nvidia-ctk``. Expected texts are the
real tools' (sources in gpuops_lab.stack/fmstandin/systemctl)."""

from __future__ import annotations

import io
import json
import lzma
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from gpuops import content
from gpuops_lab import fmstandin, gpus, stack, systemctl


def _run_program(tmp: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    prog = tmp / "prog"
    prog.write_text(text)
    return subprocess.run(
        [sys.executable, "-IS", str(prog), *args], capture_output=True, text=True, check=False
    )


def test_test_inventory_records_the_lab_archives_sha256() -> None:
    path = content.ansible_dir() / "inventory" / "test" / "group_vars" / "all.yml"
    recorded = yaml.safe_load(path.read_text())["gpu_nodes_fabricmanager_sha256"]
    assert recorded == {v: stack.fabricmanager_sha256(v) for v in gpus.REPO_DRIVERS}


def test_archive_has_nvidias_layout_and_is_reproducible() -> None:
    data = stack.fabricmanager_archive("550.90.07")
    assert data == stack.fabricmanager_archive("550.90.07")
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress(data))) as tar:
        names = tar.getnames()
        top = "fabricmanager-linux-x86_64-550.90.07-archive"
        for member in (
            "bin/nv-fabricmanager",
            "etc/fabricmanager.cfg",
            "systemd/nvidia-fabricmanager.service",
            "LAB-STAND-IN.txt",
        ):
            assert f"{top}/{member}" in names
        assert all(n == top or n.startswith(top + "/") for n in names)
        unit = tar.extractfile(f"{top}/systemd/nvidia-fabricmanager.service")
        assert unit is not None
        text = unit.read().decode()
    assert (
        "ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg"
        in text
    )
    assert "Type=forking" in text


def test_nv_fabricmanager_prints_the_real_version_text(tmp_path: Path) -> None:
    done = _run_program(tmp_path, stack.fabricmanager_program("535.161.08"), "--version")
    assert done.returncode == 0
    # leptonai/gpud's sample: "Fabric Manager version is : 535.161.08"
    assert done.stdout == "Fabric Manager version is : 535.161.08\n"


def _fm_paths(monkeypatch: pytest.MonkeyPatch, tmp: Path, driver: str | None) -> None:
    monkeypatch.setattr(fmstandin, "LOG", tmp / "fabricmanager.log")
    monkeypatch.setattr(fmstandin, "FAULTS", tmp / "fm.json")
    monkeypatch.setattr(fmstandin, "GPUS", tmp / "gpus.json")
    monkeypatch.setattr(fmstandin, "MODULES", tmp / "loaded-modules")
    monkeypatch.setattr(fmstandin, "MODULE_VERSION", tmp / "module-version")
    monkeypatch.setattr(fmstandin, "PID_FILE", tmp / "run" / "nv-fabricmanager.pid")
    monkeypatch.setattr(fmstandin, "VERSION", "550.90.07")
    (tmp / "gpus.json").write_text(json.dumps({"driver": driver}))
    (tmp / "loaded-modules").write_text("nvidia\n" if driver else "")


def test_fabric_manager_refuses_a_driver_at_another_version(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fm_paths(monkeypatch, tmp_path, "570.133.20")
    assert fmstandin.start() == 1
    assert fmstandin.MISMATCH in (tmp_path / "fabricmanager.log").read_text()
    # an old module still loaded (an upgrade waiting for a reboot) counts, not the installed one
    (tmp_path / "gpus.json").write_text(json.dumps({"driver": "550.90.07"}))
    (tmp_path / "module-version").write_text("535.161.08\n")
    assert fmstandin.loaded_driver() == "535.161.08"
    assert fmstandin.start() == 1
    (tmp_path / "module-version").unlink()
    assert fmstandin.loaded_driver() == "550.90.07"
    (tmp_path / "fm.json").write_text(json.dumps({"start_error": True}))
    assert fmstandin.start() == 1
    assert fmstandin.START_ERROR in (tmp_path / "fabricmanager.log").read_text()


def _systemd(monkeypatch: pytest.MonkeyPatch, tmp: Path, exec_start: str | None) -> None:
    units = tmp / "etc-systemd"
    units.mkdir()
    monkeypatch.setattr(systemctl, "UNIT_DIRS", (units,))
    monkeypatch.setattr(systemctl, "WANTS", units / "multi-user.target.wants")
    monkeypatch.setattr(systemctl, "STATE", tmp / "run")
    if exec_start is not None:
        (units / stack.FM_UNIT).write_text(
            stack.FM_SERVICE.replace(
                f"ExecStart=/usr/bin/nv-fabricmanager -c {stack.FM_CONFIG}",
                f"ExecStart={exec_start}",
            )
        )


def test_systemctl_refuses_what_it_does_not_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _systemd(monkeypatch, tmp_path, "/bin/true")
    with pytest.raises(SystemExit) as done:
        systemctl.main(["is-active", "containerd"])
    assert done.value.code == 1
    assert "unit containerd.service is not modelled" in capsys.readouterr().err
    assert systemctl.main(["status", "nvidia-fabricmanager"]) == 1
    assert "'status nvidia-fabricmanager' is not modelled" in capsys.readouterr().err
    assert systemctl.main(["show", "-p", "MemoryCurrent", "nvidia-fabricmanager"]) == 1
    assert systemctl.main(["--user", "start", "nvidia-fabricmanager"]) == 1


def test_systemctl_enable_show_and_a_failing_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _systemd(monkeypatch, tmp_path, "/bin/false")
    assert systemctl.main(["is-active", "nvidia-fabricmanager"]) == 3
    assert capsys.readouterr().out == "inactive\n"
    assert systemctl.main(["is-enabled", "nvidia-fabricmanager"]) == 1
    assert systemctl.main(["enable", "nvidia-fabricmanager"]) == 0
    assert "Created symlink" in capsys.readouterr().err
    assert systemctl.main(["enable", "nvidia-fabricmanager"]) == 0
    assert capsys.readouterr().err == ""  # already enabled: nothing to say, as systemd
    assert systemctl.main(["start", "nvidia-fabricmanager"]) == 1
    err = capsys.readouterr().err
    assert "Job for nvidia-fabricmanager.service failed because the control process exited" in err
    assert systemctl.main(["is-active", "nvidia-fabricmanager"]) == 3
    assert capsys.readouterr().out == "failed\n"
    assert (
        systemctl.main(
            ["show", "--property=ActiveState,ExecMainPID,UnitFileState", "nvidia-fabricmanager"]
        )
        == 0
    )
    assert capsys.readouterr().out == "ActiveState=failed\nExecMainPID=0\nUnitFileState=enabled\n"
    assert systemctl.main(["show", "-p", "Result", "--value", "nvidia-fabricmanager"]) == 0
    assert capsys.readouterr().out == "exit-code\n"


def test_systemctl_without_the_unit_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _systemd(monkeypatch, tmp_path, None)
    assert systemctl.main(["start", "nvidia-fabricmanager"]) == 5
    assert "Unit nvidia-fabricmanager.service not found." in capsys.readouterr().err
    assert systemctl.main(["show", "-p", "LoadState", "nvidia-fabricmanager"]) == 0
    assert capsys.readouterr().out == "LoadState=not-found\n"


def test_nvidia_ctk_prints_the_real_version_text(tmp_path: Path) -> None:
    ctk = tmp_path / "nvidia-ctk"
    ctk.write_text(stack.nvidia_ctk("1.17.8"))
    done = subprocess.run(
        ["sh", str(ctk), "--version"], capture_output=True, text=True, check=False
    )
    # a public `nvidia-ctk --version` capture of 1.17.8
    assert done.stdout == (
        "NVIDIA Container Toolkit CLI version 1.17.8\n"
        "commit: f202b80a9b9d0db00d9b1d73c0128c8962c55f4d\n"
    )
    assert (
        subprocess.run(["sh", str(ctk), "cdi", "list"], capture_output=True, check=False).returncode
        == 1
    )
    script = tmp_path / "install"
    script.write_text(stack.toolkit_installer())
    assert subprocess.run(["sh", "-n", str(script)], check=False).returncode == 0
    refused = subprocess.run(
        ["sh", str(script), "9.9.9"], capture_output=True, text=True, check=False
    )
    assert refused.returncode == 100
    assert "version 9.9.9 is not in the lab repository" in refused.stderr
