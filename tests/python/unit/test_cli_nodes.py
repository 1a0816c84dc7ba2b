"""``gpuops nodes``: bad input is exit 2 naming the input, before any host or node is touched
(the hosts below do not exist: any attempt to reach one would fail differently), through the
installed command as Jenkins runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
GPUOPS = str(Path(sys.executable).parent / "gpuops")
UNREACHABLE = "192.0.2.250"  # TEST-NET-1: nothing answers there


def gpuops(*args: str, params: dict[str, Any] | None = None, tmp: Path) -> tuple[int, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUOPS_", "KUBECONFIG"))}
    env["KUBECONFIG"] = str(tmp / "no-such-kubeconfig")
    error = tmp / "error.json"
    env["GPUOPS_ERROR_FILE"] = str(error)
    if params is not None:
        (tmp / "params.json").write_text(json.dumps(params))
        env["GPUOPS_PARAMS_FILE"] = str(tmp / "params.json")
    done = subprocess.run(
        [GPUOPS, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
        cwd=tmp,
    )
    doc = json.loads(error.read_text()) if error.exists() else None
    return done.returncode, doc


def inventory(tmp: Path, group_vars: dict[str, str]) -> Path:
    folder = tmp / "inv"
    (folder / "group_vars").mkdir(parents=True)
    host = f"{{ansible_host: {UNREACHABLE}}}"
    (folder / "hosts.yml").write_text(
        "all:\n  children:\n    gpu_nodes:\n      children:\n"
        f"        gpu_h800:\n          hosts:\n            gpu-h800-01: {host}\n"
        f"        gpu_a100:\n          hosts:\n            gpu-a100-01: {host}\n"
    )
    for name, text in group_vars.items():
        (folder / "group_vars" / f"{name}.yml").write_text(text)
    return folder / "hosts.yml"


SHA = {"550.90.07": "a" * 64, "535.161.08": "b" * 64}
GOOD_VARS = {
    "all": 'gpu_nodes_driver_repo_url: "http://192.0.2.250/nvidia"\n'
    f"gpu_nodes_driver_sha256: {json.dumps(SHA)}\n",
    "gpu_h800": 'gpu_nodes_driver_version: "550.90.07"\n',
    "gpu_a100": 'gpu_nodes_driver_version: "535.161.08"\n',
}


@pytest.mark.parametrize("command", ["update", "inspect", "label"])
def test_missing_inventory(command: str, tmp_path: Path) -> None:
    rc, doc = gpuops("nodes", command, "-i", str(tmp_path / "nope.yml"), tmp=tmp_path)
    assert rc == 2 and doc["error"]["field"] == "inventory"
    assert "does not exist" in doc["error"]["message"]


@pytest.mark.parametrize("command", ["update", "inspect", "label"])
def test_an_inventory_name_too_long_to_exist_is_an_input_error(
    command: str, tmp_path: Path
) -> None:
    rc, doc = gpuops("nodes", command, "-i", "x" * 300, tmp=tmp_path)
    assert rc == 2 and doc["error"]["field"] == "inventory", doc
    assert "cannot be read" in doc["error"]["message"]
    assert len(doc["error"]["message"]) < 200  # the value is shown cut


def test_an_alert_state_file_in_a_missing_folder_is_refused_before_any_host(
    tmp_path: Path,
) -> None:
    inv = inventory(tmp_path, GOOD_VARS)
    state = tmp_path / "no" / "such" / "alerts.json"
    rc, doc = gpuops("nodes", "inspect", "-i", str(inv), "--alert-state", str(state), tmp=tmp_path)
    assert rc == 2 and doc["error"]["field"] == "alert_state", doc
    assert "folder does not exist" in doc["error"]["message"]


def test_malformed_inventory(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("all:\n  children: [gpu_nodes: {hosts: \n")
    rc, doc = gpuops("nodes", "inspect", "-i", str(bad), tmp=tmp_path)
    assert rc == 2 and doc["error"]["field"] == "inventory", doc
    assert "cannot be parsed" in doc["error"]["message"]


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "password": "hunter2"}',  # JSON, not an inventory: Ansible warns and skips
        "all:\n  children: [gpu_nodes: {hosts: \n# password: hunter2\n",  # not parsable
    ],
)
def test_with_json_output_stderr_holds_only_the_error_document(text: str, tmp_path: Path) -> None:
    """Ansible's own warnings (which quote the inventory) never precede the document."""
    bad = tmp_path / "inventory.yml"
    bad.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUOPS_", "KUBECONFIG"))}
    done = subprocess.run(
        [GPUOPS, "--output", "json", "nodes", "inspect", "-i", str(bad)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert json.loads(done.stderr)["error"]["field"] == "inventory"
    assert done.stdout == "" and "hunter2" not in done.stderr


def test_limit_matching_no_host(tmp_path: Path) -> None:
    inv = inventory(tmp_path, GOOD_VARS)
    rc, doc = gpuops(
        "nodes", "update", "-i", str(inv), "--limit", "gpu_l40s", "--no-kube", tmp=tmp_path
    )
    assert rc == 2 and doc["error"]["field"] == "limit"
    assert "matches no host" in doc["error"]["message"]
    assert "gpu-a100-01" in doc["error"]["hint"]


def test_group_without_driver_version(tmp_path: Path) -> None:
    inv = inventory(tmp_path, {k: v for k, v in GOOD_VARS.items() if k != "gpu_a100"})
    rc, doc = gpuops("nodes", "update", "-i", str(inv), "--no-kube", tmp=tmp_path)
    assert rc == 2 and doc["error"]["field"] == "inventory"
    assert "group gpu_a100 (host gpu-a100-01) has no driver version" in doc["error"]["message"]
    assert doc["result"] is None


def test_bad_thresholds_in_group_vars(tmp_path: Path) -> None:
    inv = inventory(
        tmp_path, {**GOOD_VARS, "gpu_h800": "gpu_inspect_thresholds: {temperature_warn: 80}\n"}
    )
    rc, doc = gpuops("nodes", "inspect", "-i", str(inv), tmp=tmp_path)
    assert rc == 2 and doc["error"]["field"] == "inventory"
    assert (
        "gpu-h800-01 (group gpu_h800): unknown threshold(s) temperature_warn"
        in (doc["error"]["message"])
    )


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"inventory": "x", "batch_size": "0%"}, "batch_size"),
        ({"inventory": "x", "batch_size": "many"}, "batch_size"),
        ({"inventory": "x", "canary": -1}, "canary"),
        ({"inventory": "x", "on_timeout": "kill"}, "on_timeout"),
        ({"inventory": "x", "limit": "a;rm -rf /"}, "limit"),
        ({"inventory": "x", "failure_budget": True}, "failure_budget"),
        ({"inventory": "x", "budget_max_unavailable": ["0"]}, "budget_max_unavailable"),
        ({"inventory": "x", "budget_max_unavailable": ["1", "2"]}, "budget_max_unavailable"),
        ({"inventory": "x", "budget_max_unavailable": ["a b=1"]}, "budget_max_unavailable"),
        ({"inventory": "x", "budget_max_unavailable": ["101%"]}, "budget_max_unavailable"),
        ({"inventory": "x", "budget_wait": -1}, "budget_wait"),
        ({"inventory": "x", "budget_lease": 1}, "budget_lease"),
        ({"inventory": "x", "kured_daemonset": "kured"}, "kured_daemonset"),
        ({"inventory": "x", "kured_daemonset": "a/$(id)"}, "kured_daemonset"),
    ],
)
def test_bad_update_parameters(params: dict[str, Any], field: str, tmp_path: Path) -> None:
    rc, doc = gpuops("nodes", "update", params=params, tmp=tmp_path)
    assert rc == 2 and doc["error"]["field"] == field, doc


def test_a_kubeconfig_that_does_not_exist_is_an_input_error(tmp_path: Path) -> None:
    inv = inventory(tmp_path, GOOD_VARS)
    rc, doc = gpuops(
        "nodes", "update", "-i", str(inv), "--kubeconfig", str(tmp_path / "kc"), tmp=tmp_path
    )
    assert rc == 2 and "kubeconfig" in doc["error"]["message"]


def test_a_driver_without_checksum_is_refused_before_anything(tmp_path: Path) -> None:
    only_h800 = 'gpu_nodes_driver_sha256: {"550.90.07": "' + "a" * 64 + '"}\n'
    inv = inventory(tmp_path, {**GOOD_VARS, "all": GOOD_VARS["all"].split("\n")[0] + "\n"})
    (inv.parent / "group_vars" / "gpu_h800.yml").write_text(GOOD_VARS["gpu_h800"] + only_h800)
    folder = tmp_path / "new" / "artifacts"
    rc, doc = gpuops(
        "nodes", "update", "-i", str(inv), "--no-kube", "--artifacts-dir", str(folder), tmp=tmp_path
    )
    assert rc == 2 and doc["error"]["field"] == "inventory", doc
    message = doc["error"]["message"]
    assert "group gpu_a100 (host gpu-a100-01) has no sha256 for driver 535.161.08" in message
    assert "gpu_nodes_driver_sha256" in doc["error"]["hint"]
    assert not (tmp_path / "new").exists()  # nothing made, no host reached


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('{"535.161.08": "ABC"}', "is not 64 lowercase hexadecimal digits"),
        ('{"535.161.08": "' + "A" * 64 + '"}', "is not 64 lowercase hexadecimal digits"),
        ('"' + "b" * 64 + '"', "must be a map of driver version to sha256"),
    ],
)
def test_a_malformed_driver_checksum_is_refused(table: str, said: str, tmp_path: Path) -> None:
    inv = inventory(tmp_path, GOOD_VARS)
    (inv.parent / "group_vars" / "gpu_a100.yml").write_text(
        GOOD_VARS["gpu_a100"] + f"gpu_nodes_driver_sha256: {table}\n"
    )
    rc, doc = gpuops("nodes", "update", "-i", str(inv), "--no-kube", tmp=tmp_path)
    assert rc == 2 and doc["error"]["field"] == "inventory", doc
    assert said in doc["error"]["message"]


@pytest.mark.parametrize("command", ["update", "inspect", "label"])
@pytest.mark.parametrize("given", ["missing", "/dev/null", "folder"])
def test_a_known_hosts_that_is_no_readable_file_is_refused(
    command: str, given: str, tmp_path: Path
) -> None:
    inv = inventory(tmp_path, GOOD_VARS)
    path = {"missing": str(tmp_path / "nope"), "folder": str(tmp_path)}.get(given, given)
    rc, doc = gpuops("nodes", command, "-i", str(inv), "--known-hosts", path, tmp=tmp_path)
    assert rc == 2 and doc["error"]["field"] == "known_hosts", doc
    assert "known-hosts file" in doc["error"]["message"]
