"""An inventory as Ansible reads it (group_vars, host_vars, the limit), through Ansible's own
InventoryManager: static inventory plugins only (files parsed, never run), the known-hosts files
beside it skipped, and every lookup refused, so nothing runs on the controller while gpuops
only reads. Errors are in our words: an inventory can hold secrets."""

from __future__ import annotations

import contextlib
import io
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpuops import fsio
from gpuops.adapters.ansible.plain import _plain
from gpuops.adapters.hostkeys import INVENTORY_FILE, LEARNED_FILE
from gpuops.core.inventory import HOST_VARS, Host, Inventory
from gpuops.core.values import shown
from gpuops.errors import InvalidInput, OperationFailed

log = logging.getLogger(__name__)


#: Largest file of an inventory gpuops lets Ansible read (inventories are configuration).
MAX_INVENTORY_FILE = 16 << 20


def load_inventory(path: str, limit: str | None = None, pattern: str = "gpu_nodes") -> Inventory:
    """The hosts of ``pattern`` in the inventory at ``path``, narrowed by ``limit``.

    A missing or unparsable inventory, or a limit matching no host, is an input error naming
    the option; the message is ours (an inventory can hold secrets)."""
    source = Path(path)
    try:
        source.stat()
    except FileNotFoundError:
        raise InvalidInput(
            f"inventory {shown(path)} does not exist",
            hint="pass --inventory PATH (a file or an inventory folder)",
            field="inventory",
        ) from None
    except (OSError, ValueError) as exc:  # a name too long, a loop of links, a NUL byte
        raise InvalidInput(
            f"inventory {shown(path)} cannot be read ({getattr(exc, 'strerror', None) or exc})",
            field="inventory",
        ) from None
    # Ansible reads the files itself: a device or FIFO among them would hang it
    fsio.check_readable_tree(source, cap=MAX_INVENTORY_FILE, what="inventory", option="inventory")
    os.environ.setdefault("ANSIBLE_INVENTORY_UNPARSED_FAILED", "True")
    os.environ.setdefault("ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED", "True")
    try:
        from ansible.errors import AnsibleError  # noqa: PLC0415 - heavy; only when used
        from ansible.inventory.manager import InventoryManager  # noqa: PLC0415
        from ansible.parsing.dataloader import DataLoader  # noqa: PLC0415
        from ansible.template import Templar  # noqa: PLC0415
        from ansible.vars.manager import VariableManager  # noqa: PLC0415
    except ImportError:  # pragma: no cover - a dependency of the wheel
        raise OperationFailed("ansible-core is not installed", hint="reinstall gpuops") from None
    # Ansible says what it could not parse on stderr, before our result or error document, and
    # quoting the inventory (which can hold secrets): its words are kept out, ours say it.
    said = io.StringIO()
    try:
        with (
            contextlib.redirect_stderr(said),
            contextlib.redirect_stdout(said),
            _lookups_refused() as tried,
        ):
            loader = DataLoader()
            manager = _static_inventory(InventoryManager, loader, str(source))
            variables = VariableManager(loader=loader, inventory=manager)
            everything = manager.get_hosts(pattern)
            if limit:
                manager.subset(limit)
            selected = manager.get_hosts(pattern)
    except (AnsibleError, _LookupRefused):
        raise InvalidInput(
            f"inventory {path} cannot be parsed as a static Ansible inventory (YAML, INI or "
            "TOML files): gpuops reads static inventories only (no inventory plugins such as "
            "constructed, no inventory scripts), so nothing runs on the controller while it reads",
            hint=f"check it with: ansible-inventory -i {path} --graph",
            field="inventory",
        ) from None
    if tried:  # pragma: no cover - a static source templates nothing
        raise InvalidInput(f"inventory {path}: a source needs a lookup", field="inventory")
    if said.getvalue():
        log.debug(
            "ansible-core said %d line(s) loading the inventory (not shown: it can hold secrets)",
            len(said.getvalue().splitlines()),
        )
    if not everything:
        raise InvalidInput(
            f"inventory {path} has no host in group {shown(pattern)}",
            hint="GPU nodes belong to gpu_nodes (S-6), one child group per GPU model",
            field="inventory",
        )
    if not selected:
        raise InvalidInput(
            f"limit {shown(limit)} matches no host of group {shown(pattern)} in {path}",
            hint=f"hosts: {', '.join(h.name for h in everything[:10])}"
            + (" ..." if len(everything) > 10 else ""),
            field="limit",
        )
    hosts = []
    for host in selected:
        found = variables.get_vars(host=host, include_hostvars=False)
        for name in REFUSED_HOST_VARS:
            if name in found:
                raise InvalidInput(
                    f"inventory {path}: host {host.name}: variable {name} is refused: it "
                    "replaces the ssh options gpuops sets (host keys checked)",
                    hint="use ansible_ssh_common_args or ansible_ssh_extra_args: gpuops' "
                    "options come before them, and ssh takes the first value given",
                    field="inventory",
                )
        templar = Templar(loader=loader, variables=found)
        wanted = {
            k: _read_only_value(templar, found[k], f"inventory {path}: host {host.name}", k)
            for k in HOST_VARS
            if k in found
        }
        groups = tuple(str(g) for g in found.get("group_names", ()))
        hosts.append(Host(name=str(host.name), groups=groups, vars=wanted))
    return Inventory(path=str(source), hosts=tuple(hosts), limit=limit)


#: The inventory plugins gpuops lets Ansible use while gpuops reads an inventory: files only,
#: parsed, never run (no ``script``, no ``constructed``, no ``auto`` of a collection's plugin).
STATIC_PLUGINS = ("yaml", "ini", "toml")
#: Files in a folder inventory that are not inventory sources (the host keys beside it).
NOT_SOURCES = (INVENTORY_FILE, LEARNED_FILE)
#: The same, as a regular expression for ``ANSIBLE_INVENTORY_IGNORE_REGEX`` (a list: no comma).
NOT_SOURCES_REGEX = r"^known_hosts(\.learned)?$"
#: Host variables that replace what gpuops gives ssh (``ANSIBLE_SSH_ARGS``, the ssh program).
REFUSED_HOST_VARS = ("ansible_ssh_args", "ansible_ssh_executable")


def _static_inventory(manager_class: Any, loader: Any, source: str) -> Any:
    """An InventoryManager of ``source`` that parses with :data:`STATIC_PLUGINS` only and
    skips the known-hosts files in a folder inventory. Done on the manager itself, not with
    ``ANSIBLE_INVENTORY_ENABLED`` / ``ANSIBLE_INVENTORY_IGNORE_REGEX``: ansible-core 2.19 reads
    those once, when ``ansible.constants`` (and ``ansible.inventory.manager``) are first
    imported, so setting them later in this process would change nothing."""
    from ansible.errors import AnsibleError  # noqa: PLC0415
    from ansible.plugins.loader import inventory_loader  # noqa: PLC0415
    from ansible.utils.path import unfrackpath  # noqa: PLC0415

    top = unfrackpath(source, follow=False)

    class StaticInventory(manager_class):  # type: ignore[misc]
        def _fetch_inventory_plugins(self) -> list[Any]:
            plugins = [p for p in (inventory_loader.get(n) for n in STATIC_PLUGINS) if p]
            if not plugins:  # pragma: no cover - ansible-core ships them
                raise AnsibleError("no static inventory plugin available")
            return plugins

        def parse_source(self, source: str, cache: bool = False) -> bool:
            if source != top and Path(source).name in NOT_SOURCES:
                return False
            parsed = bool(super().parse_source(source, cache=cache))
            # a file no static plugin parsed is an error here, whatever Ansible's
            # INVENTORY_*_UNPARSED settings were when it was first imported in this process
            if not parsed and not Path(source).is_dir():
                raise AnsibleError("an inventory source no static inventory plugin parses")
            return parsed

    return StaticInventory(loader=loader, sources=[source])


class _LookupRefused(Exception):
    """Raised by the lookup loader while gpuops reads the inventory (see
    :func:`_lookups_refused`)."""


@contextlib.contextmanager
def _lookups_refused() -> Iterator[list[str]]:
    """Ansible's templating with every lookup refused (``lookup``, ``query``/``q``: pipe, env,
    file, ... and any collection's): each one asks the lookup loader for its plugin, and here
    the loader refuses and records the name. ansible-core 2.19 ignores ``disable_lookups``,
    so the loader is where it is stopped; an ansible-core whose templating does not go through
    it is refused (fail closed), never read with lookups live. Yields the names tried."""
    from ansible._internal._templating import _jinja_plugins  # noqa: PLC0415
    from ansible.plugins import loader as plugin_loader  # noqa: PLC0415

    lookups: Any = getattr(plugin_loader, "lookup_loader", None)
    known = lookups is not None and getattr(_jinja_plugins, "lookup_loader", None) is lookups
    if not known:
        raise OperationFailed(
            "this ansible-core templates lookups in a way gpuops does not know: the inventory "
            "is not read (its lookups could run on the controller)",
            hint="install the ansible-core of gpuops' lock file",
        )
    tried: list[str] = []

    def refuse(name: Any, *_: Any, **__: Any) -> Any:
        tried.append(str(name))
        raise _LookupRefused(str(name))

    lookups.get = refuse
    lookups.get_with_context = refuse
    try:
        yield tried
    finally:
        del lookups.get
        del lookups.get_with_context


def _read_only_value(templar: Any, value: Any, where: str, name: str) -> Any:
    """One host variable gpuops reads, templated as Ansible would (``{{ other_var }}``,
    filters) but with lookups refused, as a plain value. A value that needs a lookup, or that
    cannot be templated, is an input error naming host and variable (never the value: an
    inventory can hold secrets)."""
    from ansible.errors import AnsibleError, AnsibleUndefinedVariable  # noqa: PLC0415

    failed: str | None = None
    with _lookups_refused() as tried:
        try:
            plain = _plain(templar.template(value))  # _plain inside: containers are lazy
        except AnsibleUndefinedVariable:
            failed = "it uses a variable that is not defined"
        except (AnsibleError, _LookupRefused):
            failed = "it cannot be templated"
    if tried:
        raise InvalidInput(
            f"{where}: variable {name} needs a lookup ({shown(tried[0], 40)}) to resolve; "
            "gpuops reads the inventory with lookups disabled, so nothing runs on the "
            "controller while it only reads",
            hint="give it a plain value, or compose it from other variables ({{ other_var }})",
            field="inventory",
        )
    if failed is not None:
        raise InvalidInput(f"{where}: variable {name}: {failed}", field="inventory")
    return plain
