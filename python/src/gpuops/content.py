"""The Ansible content gpuops ships: roles, playbooks, the example inventory, ansible.cfg.

It is package data (``gpuops/ansible``, the repository's ``ansible/`` folder), so the CLI
runs its playbooks on an agent without a checkout, and what the tests and ansible-lint
check is what ships.
"""

from __future__ import annotations

from pathlib import Path

from gpuops.errors import InternalError


def ansible_dir() -> Path:
    """The folder holding ``ansible.cfg``, ``roles/``, ``playbooks/`` and ``inventory/``."""
    path = Path(__file__).resolve().parent / "ansible"
    if not (path / "playbooks").is_dir():
        raise InternalError(
            f"gpuops' Ansible content is missing at {path}",
            hint="reinstall gpuops: the wheel carries gpuops/ansible",
        )
    return path


def playbook(name: str) -> Path:
    """A shipped playbook by name (``gpu_inspect`` -> ``playbooks/gpu_inspect.yml``)."""
    path = ansible_dir() / "playbooks" / f"{name}.yml"
    if not path.is_file():
        raise InternalError(f"gpuops ships no playbook {name!r} (looked for {path})")
    return path


def roles_dir() -> Path:
    return ansible_dir() / "roles"
