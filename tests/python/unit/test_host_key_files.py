"""Which known-hosts files ssh reads under gpuops' host-key policy, and which files of a folder
inventory Ansible reads as inventory sources in a playbook run (issue 16 review)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpuops.adapters import ansible, hostkeys


def _known_hosts_files(options: list[str]) -> str:
    words = [o.split("=", 1) for o in options if o.startswith("UserKnownHostsFile=")]
    assert len(words) == 1
    return words[0][1]


def test_learning_without_a_file_still_reads_ssh_own_known_hosts() -> None:
    """``--learn-host-keys`` without a known-hosts file: ssh read only the learned file, so a
    host whose key in ~/.ssh/known_hosts changed was accepted as new."""
    keys = hostkeys.HostKeys(None, learned="/tmp/gpuops-hostkeys-x/learned")
    value = _known_hosts_files(keys.options())
    assert value == '"/tmp/gpuops-hostkeys-x/learned" ~/.ssh/known_hosts ~/.ssh/known_hosts2'
    assert "GlobalKnownHostsFile=none" not in keys.options()  # ssh's global files still read
    assert "StrictHostKeyChecking=accept-new" in keys.options()


def test_a_known_hosts_file_given_is_the_only_one_read_learning_or_not() -> None:
    assert _known_hosts_files(hostkeys.HostKeys("/k").options()) == '"/k"'
    learn = hostkeys.HostKeys("/k", learned="/tmp/x/learned").options()
    assert _known_hosts_files(learn) == '"/tmp/x/learned" "/k"'
    assert "GlobalKnownHostsFile=none" in learn


def test_ssh_itself_reads_the_learned_file_and_its_own_files(tmp_path: Path) -> None:
    """``ssh -G`` prints the configuration ssh would use (it connects nowhere)."""
    learned = tmp_path / "learned"
    keys = hostkeys.HostKeys(None, learned=str(learned))
    done = subprocess.run(
        ["ssh", "-F", "/dev/null", *keys.options(), "-G", "gpu-01.example"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("userknownhostsfile "))
    files = line.split()[1:]
    home = Path.home()
    assert files == [str(learned), str(home / ".ssh/known_hosts"), str(home / ".ssh/known_hosts2")]


def test_playbook_runs_skip_known_hosts_in_a_folder_inventory_keeping_the_sites_patterns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANSIBLE_INVENTORY_IGNORE_REGEX", raising=False)
    env = ansible.config_env(hostkeys.HostKeys("/srv/known_hosts"))
    assert env["ANSIBLE_INVENTORY_IGNORE_REGEX"] == r"^known_hosts(\.learned)?$"
    (tmp_path / "ansible.cfg").write_text("[defaults]\ninventory_ignore_patterns = ^old-\n")
    env = ansible.config_env()
    assert env["ANSIBLE_INVENTORY_IGNORE_REGEX"] == r"^old-,^known_hosts(\.learned)?$"
    monkeypatch.setenv("ANSIBLE_INVENTORY_IGNORE_REGEX", "^a$, ^b$")
    env = ansible.config_env()
    assert env["ANSIBLE_INVENTORY_IGNORE_REGEX"] == r"^a$,^b$,^known_hosts(\.learned)?$"
