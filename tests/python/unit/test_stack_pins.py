"""The GPU stack's pins per group (Fabric Manager, container toolkit) are checked before any
cordon: ``inventory.check_stack_pins`` is pure and refuses a group whose pins disagree."""

from __future__ import annotations

from typing import Any

import pytest

from gpuops.core import gpustack, inventory
from gpuops.core.inventory import Host, Inventory
from gpuops.core.nodestate import DriverPin
from gpuops.errors import InvalidInput

SHA_550 = "a" * 64
SHA_535 = "b" * 64


def _inv(**overrides: Any) -> Inventory:
    base: dict[str, Any] = {
        "gpu_nodes_driver_version": "550.90.07",
        "gpu_nodes_fabricmanager_version": "550.90.07",
        "gpu_nodes_fabricmanager_sha256": {"550.90.07": SHA_550, "535.161.08": SHA_535},
        "gpu_nodes_container_toolkit_version": "1.17.8",
    }
    base.update(overrides)
    host = Host(
        "gpu-h800-01", ("gpu_nodes", "gpu_h800"), {k: v for k, v in base.items() if v is not None}
    )
    return Inventory("inv/hosts.yml", (host,))


def test_agreeing_pins_pass() -> None:
    inventory.check_stack_pins(_inv())
    host = _inv().hosts[0]
    assert host.fabricmanager_version == "550.90.07"
    assert host.container_toolkit_version == "1.17.8"
    assert host.fabricmanager_sha256("550.90.07") == SHA_550


def test_no_fabric_manager_and_no_toolkit_pass() -> None:
    # PCIe groups (L40S): no Fabric Manager; the toolkit not managed
    inv = _inv(
        gpu_nodes_fabricmanager_version="",
        gpu_nodes_fabricmanager_sha256=None,
        gpu_nodes_container_toolkit_version="",
    )
    inventory.check_stack_pins(inv)
    assert inv.hosts[0].fabricmanager_version == ""


def test_fabric_manager_at_another_version_is_refused_naming_group_and_both() -> None:
    with pytest.raises(InvalidInput) as err:
        inventory.check_stack_pins(_inv(gpu_nodes_fabricmanager_version="535.161.08"))
    msg = err.value.message
    assert "group gpu_h800" in msg
    assert "Fabric Manager 535.161.08 disagrees with driver 550.90.07" in msg
    assert "nothing was changed" in msg
    assert err.value.field == "inventory"


def test_missing_archive_sha256_is_refused() -> None:
    with pytest.raises(InvalidInput) as err:
        inventory.check_stack_pins(_inv(gpu_nodes_fabricmanager_sha256={"535.161.08": SHA_535}))
    assert "group gpu_h800" in err.value.message
    assert "no sha256 for Fabric Manager 550.90.07" in err.value.message
    assert "fabricmanager-linux-x86_64-550.90.07-archive.tar.xz" in (err.value.hint or "")


@pytest.mark.parametrize("sha", ["A" * 64, "a" * 63, 12])
def test_malformed_sha256_is_refused(sha: Any) -> None:
    with pytest.raises(InvalidInput, match="not 64 lowercase hexadecimal digits"):
        inventory.check_stack_pins(_inv(gpu_nodes_fabricmanager_sha256={"550.90.07": sha}))


def test_sha256_table_must_be_a_map() -> None:
    with pytest.raises(InvalidInput, match="must be a map"):
        inventory.check_stack_pins(_inv(gpu_nodes_fabricmanager_sha256=[SHA_550]))


@pytest.mark.parametrize("bad", ["550", "550.90.07; rm -rf /", "latest"])
def test_fabric_manager_version_must_be_a_version(bad: str) -> None:
    with pytest.raises(InvalidInput, match="is not a version"):
        inventory.check_stack_pins(_inv(gpu_nodes_fabricmanager_version=bad))


@pytest.mark.parametrize("bad", ["1.17", "1.17.8-1; x", "latest"])
def test_toolkit_version_must_be_a_version(bad: str) -> None:
    with pytest.raises(InvalidInput, match="gpu_nodes_container_toolkit_version"):
        inventory.check_stack_pins(_inv(gpu_nodes_container_toolkit_version=bad))


def test_a_pinned_host_needs_the_pin_versions_archive() -> None:
    pins = {"gpu-h800-01": DriverPin("535.161.08", "12.2")}
    inventory.check_stack_pins(_inv(), pins)  # 535.161.08's sha256 is known
    with pytest.raises(InvalidInput) as err:
        inventory.check_stack_pins(
            _inv(gpu_nodes_fabricmanager_sha256={"550.90.07": SHA_550}), pins
        )
    assert "no sha256 for Fabric Manager 535.161.08" in err.value.message
    # a pin on another host changes nothing here
    inventory.check_stack_pins(
        _inv(gpu_nodes_fabricmanager_sha256={"550.90.07": SHA_550}),
        {"gpu-h800-02": DriverPin("535.161.08")},
    )


def test_tool_versions_are_read_from_the_real_texts() -> None:
    # leptonai/gpud's parseFabricManagerVersion sample (blank lines and a tab around it)
    assert gpustack.fabricmanager_version("\n\n\n\tFabric Manager version is : 535.161.08\n\n") == (
        "535.161.08"
    )
    assert (
        gpustack.fabricmanager_version("Fabric Manager version is : 580.159.03\n") == "580.159.03"
    )
    assert gpustack.fabricmanager_version("bash: nv-fabricmanager: command not found\n") is None
    assert gpustack.fabricmanager_version("Fabric Manager version is : 550.90.07; rm\n") is None
    ctk = (
        "NVIDIA Container Toolkit CLI version 1.17.8\n"
        "commit: f202b80a9b9d0db00d9b1d73c0128c8962c55f4d\n"
    )
    assert gpustack.container_toolkit_version(ctk) == "1.17.8"
    assert gpustack.container_toolkit_version("NVIDIA Container Runtime version 1.17.6\n") is None
    assert gpustack.container_toolkit_version("") is None
