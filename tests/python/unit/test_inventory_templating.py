"""Reading the inventory runs nothing: the host variables gpuops reads are templated with
Ansible's own engine (so ``{{ other_var }}`` composes) but with every lookup refused, so
``lookup('pipe', ...)`` and friends never execute on the controller while gpuops merely reads
(``nodes inspect``, the planning of ``nodes update``). Real ansible-core, real inventories on
disk; the command runs through the installed CLI as Jenkins runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuops.adapters.ansible import load_inventory
from gpuops.core.values import shown
from gpuops.errors import InvalidInput

GPUOPS = str(Path(sys.executable).parent / "gpuops")
UNREACHABLE = "192.0.2.250"  # TEST-NET-1: nothing answers there


def write_inventory(tmp: Path, host_vars: dict[str, str], group_all: str = "") -> Path:
    """gpu-01 (plain) and gpu-02 (``host_vars``, YAML lines) in gpu_nodes/gpu_h800."""
    folder = tmp / "inv"
    (folder / "group_vars").mkdir(parents=True)
    (folder / "host_vars").mkdir()
    (folder / "hosts.yml").write_text(
        "all:\n  children:\n    gpu_nodes:\n      children:\n        gpu_h800:\n"
        f"          hosts:\n            gpu-01: {{ansible_host: {UNREACHABLE}}}\n"
        f"            gpu-02: {{ansible_host: {UNREACHABLE}}}\n",
        encoding="utf-8",
    )
    (folder / "group_vars" / "all.yml").write_text(
        'gpu_nodes_driver_repo_url: "http://{{ repo_host }}/nvidia"\n'
        f"repo_host: {UNREACHABLE}\n"
        'gpu_nodes_driver_version: "550.90.07"\n' + group_all,
        encoding="utf-8",
    )
    (folder / "host_vars" / "gpu-02.yml").write_text(
        "".join(f"{k}: {v}\n" for k, v in host_vars.items()), encoding="utf-8"
    )
    return folder / "hosts.yml"


def pipe(marker: Path) -> str:
    return f"touch {marker}"


@pytest.mark.parametrize(
    "template",
    [
        "{{{{ lookup('pipe', '{cmd}') }}}}",
        "{{{{ query('pipe', '{cmd}') }}}}",
        "{{{{ q('pipe', '{cmd}') | first }}}}",
        "{{{{ lookup('ansible.builtin.pipe', '{cmd}') | default('r01') }}}}",
        "r{{% for x in lookup('pipe', '{cmd}', wantlist=True) %}}{{{{ x }}}}{{% endfor %}}",
        "{{{{ (lookup)('pipe', '{cmd}') }}}}",
    ],
)
def test_a_lookup_in_a_variable_gpuops_reads_runs_nothing_and_is_exit_2(
    tmp_path: Path, template: str
) -> None:
    marker = tmp_path / "MARKER"
    value = template.format(cmd=pipe(marker))
    inv = write_inventory(tmp_path, {"rack": json.dumps(value)})
    with pytest.raises(InvalidInput) as err:
        load_inventory(str(inv))
    assert not marker.exists()
    assert err.value.exit_code == 2
    assert err.value.field == "inventory"
    message = err.value.message
    assert "host gpu-02" in message and "rack" in message and "lookup" in message
    assert str(marker) not in message  # the value is not quoted: an inventory can hold secrets


def test_a_lookup_reached_through_another_variable_is_refused_too(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    inv = write_inventory(
        tmp_path,
        {
            "rack": json.dumps("{{ site }}"),
            "site": json.dumps(f"{{{{ lookup('pipe', '{pipe(marker)}') }}}}"),
        },
    )
    with pytest.raises(InvalidInput) as err:
        load_inventory(str(inv))
    assert not marker.exists()
    assert "host gpu-02" in err.value.message and "rack" in err.value.message


@pytest.mark.parametrize(
    "lookup",
    ["lookup('env', 'HOME')", "lookup('file', '/etc/hostname')", "query('first_found', ['x'])"],
)
def test_every_lookup_plugin_is_refused_not_only_pipe(tmp_path: Path, lookup: str) -> None:
    inv = write_inventory(tmp_path, {"gpu_nodes_accelerator": json.dumps(f"{{{{ {lookup} }}}}")})
    with pytest.raises(InvalidInput) as err:
        load_inventory(str(inv))
    assert "host gpu-02" in err.value.message
    assert "gpu_nodes_accelerator" in err.value.message


def test_plain_composition_still_works_and_unread_variables_are_not_evaluated(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "MARKER"
    inv = write_inventory(
        tmp_path,
        {
            "site": "bj",
            "rack": json.dumps("{{ site }}-r{{ '%02d' | format(3) }}"),
            "gpu_nodes_accelerator": json.dumps("{{ 'NVIDIA-H800' | lower }}"),
            # not a variable gpuops reads: the playbook's business, never evaluated here
            "playbook_only": json.dumps(f"{{{{ lookup('pipe', '{pipe(marker)}') }}}}"),
        },
    )
    found = load_inventory(str(inv))
    plain, composed = found.host("gpu-01"), found.host("gpu-02")
    assert composed.rack == "bj-r03"
    assert composed.accelerator == "nvidia-h800"
    assert plain.repo_url == composed.repo_url == f"http://{UNREACHABLE}/nvidia"
    assert not marker.exists()


def test_an_undefined_variable_names_host_and_variable(tmp_path: Path) -> None:
    inv = write_inventory(tmp_path, {"rack": json.dumps("{{ nowhere_defined }}")})
    with pytest.raises(InvalidInput) as err:
        load_inventory(str(inv))
    assert "host gpu-02" in err.value.message and "rack" in err.value.message


def _cli(tmp: Path, *args: str) -> tuple[int, dict[str, object] | None, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUOPS_", "KUBECONFIG"))}
    env["KUBECONFIG"] = str(tmp / "no-such-kubeconfig")
    error = tmp / "error.json"
    env["GPUOPS_ERROR_FILE"] = str(error)
    done = subprocess.run(
        [GPUOPS, *args], capture_output=True, text=True, env=env, timeout=120, check=False, cwd=tmp
    )
    doc = json.loads(error.read_text()) if error.exists() else None
    return done.returncode, doc, done.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("nodes", "inspect"),
        ("nodes", "update", "--artifacts-dir", "art"),
    ],
)
def test_nodes_commands_refuse_a_lookup_before_anything_runs(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """The planted value of the issue: ``nodes inspect`` (which runs no playbook) and the
    planning of ``nodes update`` evaluated it on the controller."""
    marker = tmp_path / "MARKER"
    value = f"{{{{ lookup('pipe', '{pipe(marker)}') }}}}"
    inv = write_inventory(tmp_path, {"rack": json.dumps(value)})
    code, doc, stderr = _cli(tmp_path, *command, "-i", str(inv))
    assert not marker.exists()
    assert code == 2, stderr
    assert doc is not None
    error = doc["error"]
    assert isinstance(error, dict)
    assert error["field"] == "inventory"
    assert "host gpu-02" in str(error["message"]) and "rack" in str(error["message"])
    assert shown(str(marker)) not in str(error["message"])


# -- only static inventory sources while gpuops reads (issue 16 review) -----------------------


def _folder_inventory(tmp: Path) -> Path:
    """A folder inventory as the README uses (``-i ansible/inventory/production``)."""
    inv = write_inventory(tmp, {"rack": "r07"})
    return inv.parent


def _constructed(folder: Path, marker: Path) -> None:
    (folder / "02-constructed.yml").write_text(
        "plugin: constructed\nstrict: false\ncompose:\n"
        f"  x: \"lookup('pipe', 'touch {marker}')\"\n",
        encoding="utf-8",
    )


def _script(folder: Path, marker: Path) -> None:
    script = folder / "03-script.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\necho '{{}}'\n", encoding="utf-8")
    script.chmod(0o755)


@pytest.mark.parametrize("plant", [_constructed, _script], ids=["constructed", "script"])
def test_reading_an_inventory_runs_no_inventory_plugin_code(tmp_path: Path, plant: Any) -> None:
    """A ``constructed`` source with a pipe lookup in ``compose``, and an executable inventory
    script, ran on the agent while gpuops only read the inventory."""
    marker = tmp_path / "PWNED"
    folder = _folder_inventory(tmp_path)
    plant(folder, marker)
    with pytest.raises(InvalidInput) as err:
        load_inventory(str(folder))
    assert not marker.exists()
    assert err.value.exit_code == 2
    assert err.value.field == "inventory"


@pytest.mark.parametrize("plant", [_constructed, _script], ids=["constructed", "script"])
def test_nodes_inspect_refuses_a_dynamic_inventory_source(tmp_path: Path, plant: Any) -> None:
    marker = tmp_path / "PWNED"
    folder = _folder_inventory(tmp_path)
    plant(folder, marker)
    code, doc, stderr = _cli(tmp_path, "nodes", "inspect", "-i", str(folder))
    assert not marker.exists()
    assert code == 2, stderr
    assert doc is not None
    error = doc["error"]
    assert isinstance(error, dict)
    assert error["field"] == "inventory"
    assert "static" in str(error["message"])


@pytest.mark.parametrize("name", ["known_hosts", "known_hosts.learned"])
def test_a_known_hosts_file_inside_a_folder_inventory_is_not_an_inventory_source(
    tmp_path: Path, name: str
) -> None:
    folder = _folder_inventory(tmp_path)
    (folder / name).write_text(
        f"{UNREACHABLE} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOmTXUjr9ovM5PUMM0Cbg8nYwFZFMIxP4l\n",
        encoding="utf-8",
    )
    found = load_inventory(str(folder))
    assert [h.name for h in found.hosts] == ["gpu-01", "gpu-02"]
    assert found.host("gpu-02").rack == "r07"


@pytest.mark.parametrize("variable", ["ansible_ssh_args", "ansible_ssh_executable"])
@pytest.mark.parametrize("where", ["host", "group"])
def test_an_inventory_cannot_replace_the_ssh_options_gpuops_sets(
    tmp_path: Path, variable: str, where: str
) -> None:
    """``ansible_ssh_args`` replaces ANSIBLE_SSH_ARGS (host-key checking off from the
    inventory); ``ansible_ssh_executable`` runs another program in place of ssh."""
    value = "-o StrictHostKeyChecking=no" if variable == "ansible_ssh_args" else "/bin/true"
    if where == "host":
        inv = write_inventory(tmp_path, {variable: json.dumps(value)})
    else:
        inv = write_inventory(tmp_path, {}, group_all=f"{variable}: {json.dumps(value)}\n")
    with pytest.raises(InvalidInput) as err:
        load_inventory(str(inv))
    assert err.value.exit_code == 2
    assert err.value.field == "inventory"
    message = err.value.message
    assert variable in message and "host gpu-0" in message
    assert "ansible_ssh_common_args" in (err.value.hint or "")
    assert value not in message
