"""The content gpuops ships: the Ansible roles, playbooks, example inventory and ansible.cfg,
and the Jenkins job templates.

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


def jobs_dir() -> Path:
    """The Jenkins job templates of ``gpuops jenkins apply`` (the library's
    ``resources/org/gpuops/jobs``, shipped as ``gpuops/jobs``)."""
    path = Path(__file__).resolve().parent / "jobs"
    if not (path / "pipeline-job.xml.j2").is_file():
        raise InternalError(
            f"gpuops' Jenkins job templates are missing at {path}",
            hint="reinstall gpuops: the wheel carries gpuops/jobs",
        )
    return path
