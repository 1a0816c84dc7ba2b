"""gpuops.gpu.sysctl, our own module (no Galaxy, no `ansible` bundle): the file editing logic
as a unit, and the module itself through the real ``ansible`` command on localhost with
``reload: false`` (it never touches this machine's kernel parameters here; the live path
runs on the lab hosts' own /proc/sys in test_nodes_roles)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
MODULE = ROOT / "ansible/collections/ansible_collections/gpuops/gpu/plugins/modules/sysctl.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpuops_sysctl", MODULE)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


sysctl = _module()


def test_edit_keeps_other_lines_and_one_line_per_name() -> None:
    text = "# site\nvm.swappiness = 10\nvm.max_map_count=65530\n# old\nvm.max_map_count = 1\n"
    out = sysctl.edit(text, "vm.max_map_count", "6553000", "present")
    assert out == "# site\nvm.swappiness = 10\nvm.max_map_count = 6553000\n# old\n"
    assert sysctl.edit(out, "vm.max_map_count", "6553000", "present") == out
    assert (
        sysctl.edit(out, "vm.max_map_count", None, "absent")
        == "# site\nvm.swappiness = 10\n# old\n"
    )
    fresh = sysctl.edit("", "net.core.rmem_max", "134217728", "present")
    assert fresh.startswith("# Managed by gpuops.gpu.sysctl") and fresh.endswith(
        "net.core.rmem_max = 134217728\n"
    )


def test_values_compare_as_the_kernel_prints_them() -> None:
    assert sysctl.normalise("4096\t87380\t134217728\n") == sysctl.normalise("4096 87380  134217728")
    assert sysctl.proc_path("net.ipv4.tcp_rmem", "/x") == "/x/net/ipv4/tcp_rmem"


def _ansible(args: str, tmp: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    """The exit status of ``ansible`` (0 ok, 2 the module failed) and the module's result."""
    tree = tmp / "tree"
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible" / "ansible.cfg"),
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.tree",
        "ANSIBLE_CALLBACK_TREE_DIR": str(tree),
        "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp"),
    }
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible"),
            "localhost",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "-m",
            "gpuops.gpu.sysctl",
            "-a",
            args,
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert (tree / "localhost").exists(), done.stdout + done.stderr
    doc: dict[str, Any] = json.loads((tree / "localhost").read_text())
    return done.returncode, doc


def test_module_writes_the_file_once_and_supports_check_mode(tmp_path: Path) -> None:
    conf = tmp_path / "sysctl.d" / "90-gpuops.conf"
    args = f"name=vm.max_map_count value=6553000 sysctl_file={conf} reload=false"
    rc, dry = _ansible(args, tmp_path, "--check")
    assert (rc, dry["changed"], conf.exists()) == (0, True, False)
    rc, first = _ansible(args, tmp_path)
    assert (rc, first["changed"]) == (0, True)
    assert conf.read_text().endswith("vm.max_map_count = 6553000\n")
    rc, second = _ansible(args, tmp_path)
    assert (rc, second["changed"]) == (0, False)  # S-28: a second run changes nothing


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ("name=vm.max_map_count reload=false", "state is present but all of the following are"),
        ("name='vm max' value=1 reload=false", "is not a kernel parameter"),
        (
            "name=vm.max_map_count value=1 reload=false sysctl_file=/dev/null/x.conf",
            "cannot read /dev/null/x.conf: Not a directory",
        ),
        # reload (the default) only reads /proc/sys here: the parameter does not exist
        (
            "name=vm.no_such_parameter value=1 sysctl_file={tmp}/x.conf",
            "the running kernel has no such parameter",
        ),
    ],
)
def test_module_refuses_bad_input(args: str, says: str, tmp_path: Path) -> None:
    rc, result = _ansible(args.format(tmp=tmp_path), tmp_path)
    assert rc == 2, result
    assert says in str(result.get("msg", ""))
