"""The GPU validation settings of an inventory host (``gpu_nodes_validation``,
``gpu_nodes_validation_level``): defaults, the values the nvidia_driver role knows, and an
input error naming the group for anything else. Read through the real Ansible adapter from
the repository's inventories and from one written here."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from gpuops.adapters.ansible import load_inventory
from gpuops.core.inventory import Host, Inventory, check_validation
from gpuops.errors import InvalidInput

REPO = Path(__file__).resolve().parents[3]


def host(**values: Any) -> Host:
    return Host("gpu-01", groups=("gpu_h800", "gpu_nodes"), vars=values)


def test_validation_defaults_to_dcgm_level_1() -> None:
    assert (host().validation, host().validation_level) == ("dcgm", 1)


@pytest.mark.parametrize(
    ("value", "level", "want"),
    [
        ("dcgm", 3, ("dcgm", 3)),
        ("none", 1, ("none", 1)),
        (["/opt/site/gpu-burn", "-d", "60"], 2, (("/opt/site/gpu-burn", "-d", "60"), 2)),
    ],
)
def test_known_validation_settings_are_read(value: Any, level: int, want: Any) -> None:
    h = host(gpu_nodes_validation=value, gpu_nodes_validation_level=level)
    assert (h.validation, h.validation_level) == want


@pytest.mark.parametrize(
    "value", ["DCGM", "", "dcgmi diag -r 1", [], ["dcgmi", ""], ["dcgmi", 1], {"argv": ["x"]}, 1]
)
def test_an_unknown_validation_is_an_input_error_naming_the_group(value: Any) -> None:
    with pytest.raises(InvalidInput) as err:
        _ = host(gpu_nodes_validation=value).validation
    assert "group gpu_h800" in err.value.message
    assert "gpu_nodes_validation " in err.value.message
    assert "must be dcgm, none or a command's argv" in err.value.message
    assert err.value.hint == "set gpu_nodes_validation in group_vars/gpu_h800.yml"


@pytest.mark.parametrize("level", [0, 4, "2", True, 1.0, None])
def test_a_level_other_than_1_2_3_is_an_input_error_naming_the_group(level: Any) -> None:
    with pytest.raises(InvalidInput) as err:
        _ = host(gpu_nodes_validation_level=level).validation_level
    assert "group gpu_h800" in err.value.message
    assert "gpu_nodes_validation_level" in err.value.message
    assert "must be 1, 2 or 3" in err.value.message


def test_check_validation_refuses_the_first_bad_host() -> None:
    good = host()
    bad = Host("gpu-02", groups=("gpu_l40s", "gpu_nodes"), vars={"gpu_nodes_validation": "x"})
    check_validation(Inventory("inv", (good,)))
    with pytest.raises(InvalidInput, match=r"gpu-02 \(group gpu_l40s\)"):
        check_validation(Inventory("inv", (good, bad)))


@pytest.mark.parametrize("fleet", ["production", "test"])
def test_the_repository_inventories_validate_with_dcgm_level_1(fleet: str, tmp_path: Path) -> None:
    folder = REPO / "ansible" / "inventory" / fleet
    if fleet == "test":  # the lab writes the hosts; the group_vars are the repository's
        shutil.copytree(folder / "group_vars", tmp_path / "group_vars")
        (tmp_path / "hosts.yml").write_text(
            "all:\n  children:\n    gpu_nodes:\n      children:\n"
            "        gpu_h800: {hosts: {gpu-h800-01: {}}}\n"
            "        gpu_a100: {hosts: {gpu-a100-01: {}}}\n"
            "        gpu_l40s: {hosts: {gpu-l40s-01: {}}}\n",
            encoding="utf-8",
        )
        folder = tmp_path
    inv = load_inventory(str(folder / "hosts.yml"))
    assert len(inv.hosts) >= 3
    assert {(h.validation, h.validation_level) for h in inv.hosts} == {("dcgm", 1)}
    # said in the group_vars, not only the default
    assert all(
        {"gpu_nodes_validation", "gpu_nodes_validation_level"} <= set(h.vars) for h in inv.hosts
    )


def test_the_adapter_hands_over_a_groups_argv_and_level(tmp_path: Path) -> None:
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "hosts.yml").write_text(
        "all:\n  children:\n    gpu_nodes:\n      children:\n"
        "        gpu_h800: {hosts: {gpu-01: {}}}\n",
        encoding="utf-8",
    )
    (tmp_path / "group_vars" / "gpu_h800.yml").write_text(
        "gpu_nodes_validation: [/opt/site/gpu-burn, '-d', '60']\ngpu_nodes_validation_level: 2\n",
        encoding="utf-8",
    )
    h = load_inventory(str(tmp_path / "hosts.yml")).hosts[0]
    assert (h.validation, h.validation_level) == (("/opt/site/gpu-burn", "-d", "60"), 2)
