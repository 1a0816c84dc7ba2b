"""GPU hosts as the Ansible inventory describes them, and the checks every nodes command makes
on it before any host or node is touched.

The adapter (:mod:`gpuops.adapters.ansible`) resolves the inventory with Ansible's own rules
(group_vars, host_vars, precedence) and hands over, per host, only the variables named in
:data:`HOST_VARS`; everything here is pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuops.core.gpuhealth import Thresholds
from gpuops.core.kubeinput import dns_subdomain
from gpuops.core.nodestate import DriverPin
from gpuops.core.values import shown
from gpuops.errors import InvalidInput

#: The ``nvidia_driver`` role's defaults (``defaults/main.yml``) that the plan of ``nodes
#: update`` reads (what the role's state script is given); an inventory may set them.
ROLE_DEFAULTS_READ: tuple[str, ...] = (
    "nvidia_driver_nvidia_smi",
    "nvidia_driver_fact_file",
    "nvidia_driver_fabricmanager_bin_dir",
    "nvidia_driver_fabricmanager_unit",
    "nvidia_driver_kernel_headers_paths",
    "nvidia_driver_required_tools",
    "nvidia_driver_blacklist_nouveau",
)
#: Host variables the nodes commands read (connection, policy, facts of the fleet).
HOST_VARS: tuple[str, ...] = (
    "ansible_host",
    "ansible_port",
    "ansible_user",
    "ansible_ssh_private_key_file",
    "ansible_ssh_common_args",
    "ansible_ssh_extra_args",
    "gpuops_environment",
    "gpuops_history_namespace",  # where the fleet's node history lives (nodes history)
    "gpuops_node_name",
    "gpu_nodes_driver_version",
    "gpu_nodes_cuda_version",
    "gpu_nodes_driver_repo_url",
    "gpu_nodes_driver_sha256",
    "gpu_nodes_gpu_count",
    "gpu_nodes_gpu_name",
    "gpu_nodes_validation",
    "gpu_nodes_validation_level",
    "gpu_nodes_accelerator",
    "gpu_nodes_fabricmanager_version",
    "gpu_nodes_fabricmanager_sha256",
    "gpu_nodes_container_toolkit_version",
    "gpu_nodes_container_toolkit_installer",
    "gpu_nodes_driver_reboot",
    "gpu_inspect_thresholds",
    "rack",
    # the nvidia_driver role's defaults an inventory may override, which the plan of nodes
    # update passes to the role's state script as the role does (usecases/nodes/plan.py)
    *ROLE_DEFAULTS_READ,
)
DEFAULT_PATTERN = "gpu_nodes"
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_TOOLKIT_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
_GENERIC_GROUPS = {"all", "ungrouped", DEFAULT_PATTERN}
#: ``gpu_nodes_validation`` by name (else a command's argv) and ``gpu_nodes_validation_level``
VALIDATIONS = ("dcgm", "none")
VALIDATION_LEVELS = (1, 2, 3)


@dataclass(frozen=True)
class Host:
    """One inventory host: its name, groups and the variables of :data:`HOST_VARS`."""

    name: str
    groups: tuple[str, ...] = ()
    vars: Mapping[str, Any] = field(default_factory=dict)

    @property
    def group(self) -> str:
        """The most specific group (the GPU model group, e.g. gpu_h800)."""
        specific = [g for g in self.groups if g not in _GENERIC_GROUPS]
        return specific[0] if specific else (self.groups[0] if self.groups else "ungrouped")

    def text(self, key: str) -> str:
        value = self.vars.get(key)
        return "" if value is None else str(value)

    @property
    def node_name(self) -> str:
        """The Kubernetes node of this host: ``gpuops_node_name``, else the inventory name."""
        return self.text("gpuops_node_name") or self.name

    @property
    def driver_version(self) -> str:
        return self.text("gpu_nodes_driver_version")

    @property
    def cuda_version(self) -> str:
        return self.text("gpu_nodes_cuda_version")

    @property
    def repo_url(self) -> str:
        return self.text("gpu_nodes_driver_repo_url").rstrip("/")

    @property
    def driver_sha256(self) -> Any:
        """The sha256 the inventory gives for the wanted driver's .run (``None``: none), from
        ``gpu_nodes_driver_sha256``, a map of driver version to sha256."""
        table = self.vars.get("gpu_nodes_driver_sha256")
        return table.get(self.driver_version) if isinstance(table, Mapping) else None

    @property
    def gpu_count(self) -> int:
        value = self.vars.get("gpu_nodes_gpu_count")
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    @property
    def rack(self) -> str:
        return self.text("rack")

    @property
    def accelerator(self) -> str:
        return self.text("gpu_nodes_accelerator")

    @property
    def validation(self) -> str | tuple[str, ...]:
        """How the role validates the GPUs after the driver (``gpu_nodes_validation``):
        ``"dcgm"`` (the default: ``dcgmi diag``), ``"none"``, or a command's argv (judged by
        its exit code). Anything else is an input error naming the group."""
        value = self.vars.get("gpu_nodes_validation", "dcgm")
        if value in VALIDATIONS:
            return str(value)
        if (
            isinstance(value, list | tuple)
            and value
            and all(isinstance(a, str) and a for a in value)
        ):
            return tuple(value)
        raise InvalidInput(
            f"inventory host {self.name} (group {self.group}): gpu_nodes_validation "
            f"{shown(value)} must be dcgm, none or a command's argv (a list of strings)",
            hint=f"set gpu_nodes_validation in group_vars/{self.group}.yml",
            field="inventory",
        )

    @property
    def validation_level(self) -> int:
        """The level of ``dcgmi diag -r`` (``gpu_nodes_validation_level``): 1 (the default,
        seconds), 2 or 3 (longer). Anything else is an input error naming the group."""
        value = self.vars.get("gpu_nodes_validation_level", 1)
        if isinstance(value, int) and not isinstance(value, bool) and value in VALIDATION_LEVELS:
            return value
        raise InvalidInput(
            f"inventory host {self.name} (group {self.group}): gpu_nodes_validation_level "
            f"{shown(value)} must be 1, 2 or 3 (dcgmi diag -r N)",
            hint=f"set gpu_nodes_validation_level in group_vars/{self.group}.yml",
            field="inventory",
        )

    @property
    def fabricmanager_version(self) -> str:
        """The NVIDIA Fabric Manager version wanted (``gpu_nodes_fabricmanager_version``; ""
        none: PCIe GPUs have no NVSwitch). HGX A100/H800 need it at exactly the driver's."""
        return self.text("gpu_nodes_fabricmanager_version")

    def fabricmanager_sha256(self, version: str) -> Any:
        """The sha256 of Fabric Manager ``version``'s archive (``None``: none), from
        ``gpu_nodes_fabricmanager_sha256``, a map of version to sha256."""
        table = self.vars.get("gpu_nodes_fabricmanager_sha256")
        return table.get(version) if isinstance(table, Mapping) else None

    @property
    def container_toolkit_version(self) -> str:
        """The NVIDIA container toolkit version wanted (``gpu_nodes_container_toolkit_version``;
        "" not managed)."""
        return self.text("gpu_nodes_container_toolkit_version")

    def thresholds(self) -> Thresholds:
        return Thresholds.from_mapping(
            self.vars.get("gpu_inspect_thresholds") or None,
            f"inventory host {self.name} (group {self.group})",
        )


@dataclass(frozen=True)
class Inventory:
    """The hosts a command works on (inventory order, after the pattern and the limit)."""

    path: str
    hosts: tuple[Host, ...]
    limit: str | None = None

    @property
    def environment(self) -> str:
        found = {h.text("gpuops_environment") for h in self.hosts} - {""}
        return ",".join(sorted(found)) or "unspecified"

    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)


def check_driver_policy(inventory: Inventory) -> None:
    """Every host has a wanted driver version (S-7) and a driver repository (S-13)."""
    for host in inventory.hosts:
        where = f"inventory {inventory.path}: group {host.group} (host {host.name})"
        if not host.driver_version:
            raise InvalidInput(
                f"{where} has no driver version",
                hint=f"set gpu_nodes_driver_version in group_vars/{host.group}.yml",
                field="inventory",
            )
        if not _VERSION.match(host.driver_version):
            raise InvalidInput(
                f"{where}: gpu_nodes_driver_version {shown(host.driver_version)} is not a version "
                "like 550.90.07",
                field="inventory",
            )
        if not host.repo_url.startswith(("http://", "https://", "file://")):
            raise InvalidInput(
                f"{where} has no driver repository URL (gpu_nodes_driver_repo_url)",
                hint="set gpu_nodes_driver_repo_url in group_vars/all.yml",
                field="inventory",
            )
        table = host.vars.get("gpu_nodes_driver_sha256")
        if table is not None and not isinstance(table, Mapping):
            raise InvalidInput(
                f"{where}: gpu_nodes_driver_sha256 must be a map of driver version to sha256",
                field="inventory",
            )
        sha = host.driver_sha256
        if sha is None:
            raise InvalidInput(
                f"{where} has no sha256 for driver {host.driver_version}: the driver's .run is "
                "checked on the node before anything changes",
                hint=f'add "{host.driver_version}": <sha256sum of '
                f"{driver_file(host.driver_version)}> to gpu_nodes_driver_sha256 in group_vars "
                "(quote the version); nothing was changed",
                field="inventory",
            )
        if not isinstance(sha, str) or not _SHA256.match(sha):
            raise InvalidInput(
                f"{where}: gpu_nodes_driver_sha256 of driver {host.driver_version} "
                f"({shown(str(sha))}) is not 64 lowercase hexadecimal digits",
                field="inventory",
            )


def check_validation(inventory: Inventory) -> None:
    """Every host's validation setting is one the role knows (an input error up front)."""
    for host in inventory.hosts:
        _ = host.validation, host.validation_level


def check_stack_pins(inventory: Inventory, pins: Mapping[str, DriverPin] | None = None) -> None:
    """The GPU stack of each group agrees with its driver, before any cordon: Fabric Manager
    (where pinned) at exactly the driver's version with its archive's sha256 known, and a
    container toolkit version that is a version. A host pinned to another driver (``pins``:
    rollback, ``nodes rollback --to``) moves Fabric Manager to the pin's version, so that
    version's archive sha256 must be known too. Pure: reads only the inventory."""
    for host in inventory.hosts:
        where = f"inventory {inventory.path}: group {host.group} (host {host.name})"
        fm = host.fabricmanager_version
        pin = (pins or {}).get(host.name)
        driver = pin.version if pin else host.driver_version
        if fm:
            if not _VERSION.match(fm):
                raise InvalidInput(
                    f"{where}: gpu_nodes_fabricmanager_version {shown(fm)} is not a version "
                    "like 550.90.07",
                    field="inventory",
                )
            if fm != host.driver_version:
                raise InvalidInput(
                    f"{where}: Fabric Manager {fm} disagrees with driver "
                    f"{host.driver_version}: NVIDIA Fabric Manager must run at exactly the "
                    "driver's version (it refuses to start otherwise); nothing was changed",
                    hint=f'set gpu_nodes_fabricmanager_version: "{host.driver_version}" in '
                    f'group_vars/{host.group}.yml (or "" on hosts without NVSwitch)',
                    field="inventory",
                )
            table = host.vars.get("gpu_nodes_fabricmanager_sha256")
            if table is not None and not isinstance(table, Mapping):
                raise InvalidInput(
                    f"{where}: gpu_nodes_fabricmanager_sha256 must be a map of version to sha256",
                    field="inventory",
                )
            sha = host.fabricmanager_sha256(driver)
            if sha is None:
                raise InvalidInput(
                    f"{where} has no sha256 for Fabric Manager {driver} (driver "
                    f"{driver}): its archive is checked on the node before anything changes; "
                    "nothing was changed",
                    hint=f'add "{driver}": <sha256sum of {fabricmanager_file(driver)}> to '
                    "gpu_nodes_fabricmanager_sha256 in group_vars (quote the version)",
                    field="inventory",
                )
            if not isinstance(sha, str) or not _SHA256.match(sha):
                raise InvalidInput(
                    f"{where}: gpu_nodes_fabricmanager_sha256 of Fabric Manager {driver} "
                    f"({shown(str(sha))}) is not 64 lowercase hexadecimal digits",
                    field="inventory",
                )
        toolkit = host.container_toolkit_version
        if toolkit and not _TOOLKIT_VERSION.match(toolkit):
            raise InvalidInput(
                f"{where}: gpu_nodes_container_toolkit_version {shown(toolkit)} is not a "
                "version like 1.17.8",
                field="inventory",
            )


def check_node_names(inventory: Inventory) -> None:
    for host in inventory.hosts:
        dns_subdomain(host.node_name, f"Kubernetes node name of inventory host {host.name}")


def check_thresholds(inventory: Inventory) -> dict[str, Thresholds]:
    """Each host's thresholds; a bad ``gpu_inspect_thresholds`` is an input error up front."""
    out = {}
    for host in inventory.hosts:
        try:
            out[host.name] = host.thresholds()
        except InvalidInput as exc:
            raise InvalidInput(exc.message, hint=exc.hint, field="inventory") from None
    return out


def driver_file(version: str) -> str:
    return f"NVIDIA-Linux-x86_64-{version}.run"


def fabricmanager_file(version: str) -> str:
    """NVIDIA's redistributable Fabric Manager archive for ``version``."""
    return f"fabricmanager-linux-x86_64-{version}-archive.tar.xz"
