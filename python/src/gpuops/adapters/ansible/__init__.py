"""Ansible as gpuops uses it: the inventory (Ansible's own rules) and playbooks run through
ansible-runner.

Rooms:

- :mod:`.inventory`: an inventory read through Ansible's InventoryManager, static inventory
  plugins only and every lookup refused, so nothing runs on the controller while gpuops reads;
- :mod:`.config`: the environment of a playbook run, gpuops' ``ANSIBLE_*`` variables over the
  site's ansible.cfg (host keys checked whatever the site sets);
- :mod:`.runner`: a shipped playbook run through ansible-runner in a private folder, its
  artifacts copied out through the one writer;
- :mod:`.events`: ansible-runner's events folded into what each host did, and progress lines;
- :mod:`.plain`: Ansible's tagged values as plain Python values.

Every name is re-exported here, so ``from gpuops.adapters import ansible`` and ``ansible.X``
work as they did when this was one module (the private ones are for the unit tests).
"""

from gpuops.adapters.ansible.config import (
    DEFAULT_COLLECTIONS_PATH,
    DEFAULT_SSH_ARGS,
    MAX_CONFIG_BYTES,
    AnsibleConfig,
    ansible_config,
    config_env,
    site_config,
)
from gpuops.adapters.ansible.events import HostRun, PlaybookRun, Progress, _Events, _message
from gpuops.adapters.ansible.inventory import (
    MAX_INVENTORY_FILE,
    NOT_SOURCES,
    NOT_SOURCES_REGEX,
    REFUSED_HOST_VARS,
    STATIC_PLUGINS,
    _LookupRefused,
    _lookups_refused,
    _read_only_value,
    _static_inventory,
    load_inventory,
)
from gpuops.adapters.ansible.plain import _plain
from gpuops.adapters.ansible.runner import (
    KEY_FILE_ENV,
    MAX_ARTIFACT_FILE,
    USER_ENV,
    _copy_artifacts,
    _regular_bytes,
    _run_runner,
    _scrub,
    run_playbook,
)

__all__ = [
    "DEFAULT_COLLECTIONS_PATH",
    "DEFAULT_SSH_ARGS",
    "KEY_FILE_ENV",
    "MAX_ARTIFACT_FILE",
    "MAX_CONFIG_BYTES",
    "MAX_INVENTORY_FILE",
    "NOT_SOURCES",
    "NOT_SOURCES_REGEX",
    "REFUSED_HOST_VARS",
    "STATIC_PLUGINS",
    "USER_ENV",
    "AnsibleConfig",
    "HostRun",
    "PlaybookRun",
    "Progress",
    "_Events",
    "_LookupRefused",
    "_copy_artifacts",
    "_lookups_refused",
    "_message",
    "_plain",
    "_read_only_value",
    "_regular_bytes",
    "_run_runner",
    "_scrub",
    "_static_inventory",
    "ansible_config",
    "config_env",
    "load_inventory",
    "run_playbook",
    "site_config",
]
