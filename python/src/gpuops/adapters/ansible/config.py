"""The environment of a playbook run: Ansible reads one config file (the site's ansible.cfg,
else the one gpuops ships), and what gpuops needs is set over it as ``ANSIBLE_*`` variables,
which win over any config file (see :func:`config_env`)."""

from __future__ import annotations

import configparser
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from gpuops import content, fsio
from gpuops.adapters.ansible.inventory import NOT_SOURCES_REGEX
from gpuops.adapters.hostkeys import HostKeys
from gpuops.core.values import shown
from gpuops.errors import InvalidInput

#: Ansible's own default of [ssh_connection] ssh_args (kept when a site's config sets none).
DEFAULT_SSH_ARGS = "-C -o ControlMaster=auto -o ControlPersist=60s"
DEFAULT_COLLECTIONS_PATH = "~/.ansible/collections:/usr/share/ansible/collections"
MAX_CONFIG_BYTES = 1 << 20


@dataclass(frozen=True)
class AnsibleConfig:
    """The one ansible.cfg Ansible reads, and whether it is the site's own."""

    path: Path
    site: bool
    parser: configparser.ConfigParser

    def get(self, section: str, key: str) -> str | None:
        value = self.parser.get(section, key, raw=True, fallback=None)
        return value.strip() if value and value.strip() else None


def site_config() -> Path | None:
    """The site's ansible.cfg as Ansible finds it: ``ANSIBLE_CONFIG`` (a file, or a folder
    holding ansible.cfg) when set, else ``./ansible.cfg`` (not in a world-writable folder,
    which Ansible skips); None when there is neither."""
    given = os.environ.get("ANSIBLE_CONFIG")
    if given:
        path = Path(given).expanduser().absolute()
        return path / "ansible.cfg" if path.is_dir() else path
    try:
        cwd = Path.cwd()
        if cwd.stat().st_mode & stat.S_IWOTH:
            return None
        here = cwd / "ansible.cfg"
        return here if here.exists() else None
    except OSError:  # no working directory: Ansible finds none there either
        return None


def ansible_config() -> AnsibleConfig:
    """The site's ansible.cfg (read and parsed: exit 2 naming it when it is not a readable
    config), else the one gpuops ships."""
    site = site_config()
    path = site or content.ansible_dir() / "ansible.cfg"
    what = "ansible.cfg (ANSIBLE_CONFIG)" if os.environ.get("ANSIBLE_CONFIG") else "ansible.cfg"
    text = fsio.read_text(path, cap=MAX_CONFIG_BYTES, what=what, option="ansible_config")
    parser = configparser.ConfigParser(inline_comment_prefixes=(";",), interpolation=None)
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error:
        raise InvalidInput(
            f"{what} {shown(str(path), 200)} is not an INI file Ansible can read",
            field="ansible_config",
        ) from None
    return AnsibleConfig(path, site is not None, parser)


def config_env(
    host_keys: HostKeys | None = None, config: AnsibleConfig | None = None
) -> dict[str, str]:
    """The environment of a playbook run: Ansible reads one config file, the site's own
    ansible.cfg when it has one (else the shipped one), and what gpuops needs is applied over
    it as ``ANSIBLE_*`` variables, which win over any config file: host keys checked against
    the command's known-hosts file (its ssh options first: ssh takes the first value given,
    so neither the site's ssh_args nor an inventory's ``ansible_ssh_common_args`` /
    ``ansible_ssh_extra_args`` can turn it off; an inventory's ``ansible_ssh_args`` or
    ``ansible_ssh_executable`` would replace them, and :func:`load_inventory` refuses those),
    the known-hosts files in a folder inventory not read as inventory sources (added to the
    site's own ignore patterns), gpuops' roles and collection found, no colour, no retry
    files."""
    cfg = config or ansible_config()
    shipped = content.ansible_dir()
    ssh_args = (
        os.environ.get("ANSIBLE_SSH_ARGS")
        or cfg.get("ssh_connection", "ssh_args")
        or DEFAULT_SSH_ARGS
    )
    paths = (
        os.environ.get("ANSIBLE_COLLECTIONS_PATH")
        or cfg.get("defaults", "collections_path")
        or cfg.get("defaults", "collections_paths")
        or DEFAULT_COLLECTIONS_PATH
    )
    collections = [str(shipped / "collections")] + [
        str(cfg.path.parent / Path(p).expanduser()) if not p.startswith(("/", "~")) else p
        for p in paths.split(os.pathsep)
        if p
    ]
    ignore = [
        p.strip()
        for p in (
            os.environ.get("ANSIBLE_INVENTORY_IGNORE_REGEX")
            or cfg.get("defaults", "inventory_ignore_patterns")
            or cfg.get("inventory", "ignore_patterns")
            or ""
        ).split(",")
        if p.strip()
    ]
    keys = host_keys or HostKeys()
    sockets = Path(cfg.get("ssh_connection", "control_path_dir") or "~/.ansible/cp")
    return {
        "ANSIBLE_CONFIG": str(cfg.path),
        # ssh master connections per host-key policy (see HostKeys.policy_id)
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(sockets.expanduser() / keys.policy_id()),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_SSH_ARGS": f"{keys.ansible_ssh_args()} {ssh_args}",
        "ANSIBLE_INVENTORY_IGNORE_REGEX": ",".join(dict.fromkeys([*ignore, NOT_SOURCES_REGEX])),
        "ANSIBLE_ROLES_PATH": str(shipped / "roles"),
        "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(dict.fromkeys(collections)),
    }
