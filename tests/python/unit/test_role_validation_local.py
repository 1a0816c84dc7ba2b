"""The nvidia_driver role's validation paths the lab does not reach, and the playbook's driver
pin check: real ansible-playbook, real role tasks, on this machine (``ansible_connection:
local``, one inventory host per case, all in one run). Nothing here needs DCGM: the cases are
a command that fails or hangs, a dcgmi that is not installed, and a program that never answers
standing in for a hung dcgmi. DCGM's own output is judged in the lab
(tests/python/integration/test_nodes_roles.py) and in test_dcgmdiag.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

FATAL = re.compile(r"^fatal: \[(\S+)\]: FAILED! => (\{.*\})$", re.MULTILINE)

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")


def run(tmp: Path, playbook: Path, hosts: dict[str, dict[str, Any]], **extra: Any) -> str:
    """``playbook`` on ``hosts`` (name -> host vars); what ansible-playbook printed."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = tmp / "hosts.json"
    hosts = {h: {**local, **v} for h, v in hosts.items()}
    inventory.write_text(
        json.dumps({"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}), encoding="utf-8"
    )
    env = {
        **os.environ,
        "ANSIBLE_ROLES_PATH": str(REPO / "ansible" / "roles"),
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / "ansible" / "collections"),
        "ANSIBLE_NOCOLOR": "1",
    }
    done = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", str(inventory), str(playbook), "-e", json.dumps(extra)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert "PLAY RECAP" in done.stdout, done.stdout + done.stderr
    return done.stdout


def failures(out: str, task: str) -> dict[str, dict[str, Any]]:
    """Per host that failed the task named ``task``, its result (one JSON line per host)."""
    block = out[out.index(f"TASK [{task}]") :]
    end = block.find("\nTASK [")
    return {m[1]: json.loads(m[2]) for m in FATAL.finditer(block[:end] if end > 0 else block)}


def test_validation_commands_timeouts_and_a_missing_dcgmi(tmp_path: Path) -> None:
    hung = tmp_path / "dcgmi"
    hung.write_text("#!/bin/sh\nexec sleep 60\n", encoding="utf-8")
    hung.chmod(0o755)
    # a dcgmi printing a recorded DCGM 4.2.3 -r 1 run on 4 GPUs (unit/data/dcgm/SOURCES.md)
    four = tmp_path / "dcgmi-4-gpus"
    four.write_text(
        f"#!/bin/sh\nexec cat {REPO / 'tests/python/unit/data/dcgm/dcgm4-r1-pass.json'}\n",
        encoding="utf-8",
    )
    four.chmod(0o755)
    playbook = tmp_path / "validate.yml"
    # each host writes what it got: the verdict fact, and the failed task and its message
    playbook.write_text(
        f"""- hosts: all
  gather_facts: false
  tasks:
    - block:
        - ansible.builtin.include_role: {{name: nvidia_driver, tasks_from: validate}}
        - ansible.builtin.set_fact: {{failed_task: "", failed_msg: ""}}
      rescue:
        - ansible.builtin.set_fact:
            failed_task: "{{{{ ansible_failed_task.name }}}}"
            failed_msg: "{{{{ ansible_failed_result.msg }}}}"
      always:
        - ansible.builtin.copy:
            dest: "{tmp_path}/{{{{ inventory_hostname }}}}.json"
            content: "{{{{ {{'fact': nvidia_driver_validation_result, 'task': failed_task,
                           'msg': failed_msg}} | to_json }}}}"
            mode: "0600"
""",
        encoding="utf-8",
    )
    argv = "nvidia_driver_validation"
    cases = {
        "passes": {argv: ["sh", "-c", "exit 0"]},
        "fails": {argv: ["sh", "-c", "echo one; echo two; echo boom >&2; exit 3"]},
        "hangs": {argv: ["sleep", "60"], "nvidia_driver_validation_timeout": 1},
        "no-program": {argv: [str(tmp_path / "no-such-burn")]},
        "no-dcgmi": {"nvidia_driver_dcgmi": str(tmp_path / "no-such-dcgmi")},
        "dcgmi-hangs": {"nvidia_driver_dcgmi": str(hung), "nvidia_driver_validation_timeout": 1},
        "dcgm-4-of-4": {"nvidia_driver_dcgmi": str(four), "nvidia_driver_gpu_count": 4},
        "dcgm-4-of-8": {"nvidia_driver_dcgmi": str(four), "nvidia_driver_gpu_count": 8},
    }
    run(tmp_path, playbook, cases)
    got = {h: json.loads((tmp_path / f"{h}.json").read_text()) for h in cases}
    assert got["passes"] == {
        "fact": {
            "passed": True,
            "method": "command",
            "rc": 0,
            "message": "validation passed on passes: sh exited 0",
        },
        "task": "",
        "msg": "",
    }
    assert (got["dcgm-4-of-4"]["task"], got["dcgm-4-of-4"]["fact"]["message"]) == (
        "",
        "validation passed on dcgm-4-of-4: dcgmi diag -r 1 (DCGM 4.2.3): passed: 1 test(s) on "
        "4 GPU(s)",
    )
    assert got["dcgm-4-of-8"]["msg"] == (
        "validation failed on dcgm-4-of-8: dcgmi diag -r 1 (DCGM 4.2.3): DCGM tested 4 GPU(s), "
        "the host has 8"
    )
    for host in ("fails", "hangs", "no-program", "no-dcgmi", "dcgmi-hangs", "dcgm-4-of-8"):
        assert got[host]["task"] == "Validate the GPUs", got[host]
        assert got[host]["fact"]["passed"] is False
        assert got[host]["msg"] == got[host]["fact"]["message"]
        assert got[host]["msg"].startswith(f"validation failed on {host}: ")
    assert got["fails"]["msg"] == "validation failed on fails: sh exited 3: one / two / boom"
    assert got["fails"]["fact"]["rc"] == 3
    assert got["hangs"]["msg"] == (
        "validation failed on hangs: sleep did not finish in 1 s and was stopped"
    )
    assert got["no-program"]["msg"].startswith(
        "validation failed on no-program: no-such-burn exited 127: timeout: failed to run command"
    )
    assert got["no-dcgmi"]["msg"].startswith(
        "validation failed on no-dcgmi: dcgmi diag -r 1 could not run (is DCGM installed? "
    )
    assert got["no-dcgmi"]["fact"]["method"] == "dcgm"
    assert got["dcgmi-hangs"]["msg"] == (
        "validation failed on dcgmi-hangs: dcgmi diag -r 1 did not finish in 1 s and was stopped"
    )


def test_a_driver_pin_of_another_shape_is_refused_before_the_roles(tmp_path: Path) -> None:
    pins = {
        "ok": {"version": "550.90.07", "cuda": "12.4"},
        "no-cuda": {"version": "550.90.07"},
        "bad-version": {"version": "550; reboot"},
        "number": {"version": 550.9},
        "bad-cuda": {"version": "550.90.07", "cuda": "12"},
        "extra-key": {"version": "550.90.07", "sha256": "0" * 64},
        "not-a-map": "550.90.07",
    }
    out = run(
        tmp_path,
        REPO / "ansible" / "playbooks" / "update_gpu_nodes.yml",
        {h: {} for h in [*pins, "unpinned"]},
        update_gpu_nodes_roles=[],
        gpuops_driver_pins=pins,
    )
    got = failures(out, "Check the driver pin")
    assert set(got) == {
        "bad-version",
        "number",
        "bad-cuda",
        "extra-key",
        "not-a-map",
    }
    assert got["bad-version"]["msg"] == (
        'gpuops_driver_pins must map a host to {"version": "550.90.07", "cuda": "12.4"} ("cuda" '
        'may be empty or left out: not checked); bad-version has {"version": "550; reboot"}; '
        "nothing was changed"
    )
    # pins that are not a map at all: every host is refused
    out = run(
        tmp_path,
        REPO / "ansible" / "playbooks" / "update_gpu_nodes.yml",
        {"a": {}},
        update_gpu_nodes_roles=[],
        gpuops_driver_pins=["a"],
    )
    assert failures(out, "Check the driver pin")["a"]["msg"].endswith(
        '; a has ["a"]; nothing was changed'
    )
