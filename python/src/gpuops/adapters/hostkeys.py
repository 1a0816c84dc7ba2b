"""How gpuops checks the host keys of the nodes it reaches over ssh (its own ssh sessions and
Ansible's): always, against a known-hosts file.

Where the keys come from, first found: ``--known-hosts FILE`` / ``GPUOPS_KNOWN_HOSTS`` (the
Jenkins steps bind a file credential to it), else a ``known_hosts`` file beside the inventory
(the inventory's repository), else ssh's own files (``~/.ssh/known_hosts``,
``/etc/ssh/ssh_known_hosts``). A host whose key is not there, or differs, is unreachable.

Learning keys is an explicit choice (``--learn-host-keys``): ssh's ``accept-new`` adds the
key of a host it has never seen to a file gpuops owns (a private temporary folder; a changed
key is still refused), and the keys learned are written to the artifacts folder for a person
to review (and add to the known-hosts file) before the next run.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpuops import fsio
from gpuops.core.values import shown
from gpuops.errors import InvalidInput

#: The environment variable naming the known-hosts file (the Jenkins file credential).
KNOWN_HOSTS_ENV = "GPUOPS_KNOWN_HOSTS"
#: The known-hosts file of an inventory's repository, beside the inventory.
INVENTORY_FILE = "known_hosts"
#: The file the learned keys are written to in the artifacts folder.
LEARNED_FILE = "known_hosts.learned"
MAX_BYTES = 4 << 20
#: ssh's own per-user known-hosts files (its default UserKnownHostsFile).
SSH_USER_FILES = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")


@dataclass(frozen=True)
class HostKeys:
    """The host-key policy of one command: ``file`` (None: ssh's own known-hosts files) and,
    when learning, the file ssh adds new keys to."""

    file: str | None = None
    learned: str | None = None

    @property
    def source(self) -> str:
        """The known-hosts file as messages name it."""
        return self.file or "ssh's known_hosts (~/.ssh/known_hosts, /etc/ssh/ssh_known_hosts)"

    def options(self) -> list[str]:
        """ssh ``-o`` options (first on the command line: ssh takes the first value given)."""
        files = [f for f in (self.learned, self.file) if f]
        opts = [
            "-o", "StrictHostKeyChecking=" + ("accept-new" if self.learned else "yes"),
            "-o", "HashKnownHosts=no",
            "-o", "CheckHostIP=no",
        ]  # fmt: skip
        if files:
            # ssh splits the value into words (double quotes group) and expands %-tokens
            words = " ".join('"' + f.replace("%", "%%") + '"' for f in files)
            if not self.file:  # learning beside ssh's own files: their keys still checked
                words += " " + " ".join(SSH_USER_FILES)
            opts += ["-o", f"UserKnownHostsFile={words}"]
        if self.file:
            opts += ["-o", "GlobalKnownHostsFile=none"]
        return opts

    def policy_id(self) -> str:
        """A short name for this policy and the keys it trusts now: Ansible's ssh master
        connections (ControlPersist) live in a folder of that name, so a run under another
        known-hosts file, or after the file changed, never reuses a connection whose host key
        was checked against other keys."""
        digest = hashlib.sha256()
        for part in (self.file, self.learned):
            digest.update(b"\0" + (part or "").encode())
            if part:
                with contextlib.suppress(OSError):
                    digest.update(Path(part).read_bytes())
        return digest.hexdigest()[:12]

    def ansible_ssh_args(self) -> str:
        """The same options as one string for ``ANSIBLE_SSH_ARGS`` (split by shlex)."""
        return shlex.join(self.options())

    def refusal(self, host: str, address: str, stderr: str) -> str | None:
        """The reason ``host`` was refused for its key, from ssh's own words; None when ssh
        did not refuse a key."""
        if "Host key verification failed" not in stderr:
            return None
        plain = address if re.fullmatch(r"[\w.:%-]{1,255}", address) else shown(address, 80)
        where = f"{host} ({plain})" if address != host else host
        if "REMOTE HOST IDENTIFICATION HAS CHANGED" in stderr or "differs from the key" in stderr:
            return (
                f"host key of {where} differs from the one in {self.source}: refused "
                "(a reinstalled node, or another machine at its address; check it, then "
                "update the known-hosts file)"
            )
        hint = "" if self.learned else "; to accept new keys: --learn-host-keys"
        return f"host key of {where} is not in {self.source}: refused{hint}"


def _validated(path: str, option: str) -> str:
    if not path:
        raise InvalidInput("--known-hosts must not be empty", field=option)
    if any(c in path for c in '"\n\r\0'):
        raise InvalidInput(
            f"known-hosts file {shown(path, 200)}: a path with a quote or a line break cannot be "
            "given to ssh",
            field=option,
        )
    fsio.read_bytes(path, cap=MAX_BYTES, what="known-hosts file", option=option)
    return str(Path(path).absolute())


def find(known_hosts: str | None, inventory: str) -> str | None:
    """The known-hosts file for ``inventory``: the one given (checked: a regular file), else
    ``known_hosts`` beside the inventory, else None (ssh's own files)."""
    if known_hosts is not None:
        return _validated(known_hosts, "known_hosts")
    source = Path(inventory)
    try:
        beside = (source if source.is_dir() else source.parent) / INVENTORY_FILE
        there = beside.exists() or beside.is_symlink()
    except (OSError, ValueError):  # the inventory's own check names what is wrong with it
        return None
    return _validated(str(beside), "inventory") if there else None


@contextlib.contextmanager
def policy(known_hosts: str | None, inventory: str, *, learn: bool) -> Iterator[HostKeys]:
    """The host-key policy of one command; when learning, the file ssh adds new keys to lives
    in a private temporary folder for as long as the command runs."""
    found = find(known_hosts, inventory)
    if not learn:
        yield HostKeys(found)
        return
    with fsio.private_tempdir("gpuops-hostkeys-") as tmp:
        yield HostKeys(found, str(tmp.file("learned")))


def learned_keys(keys: HostKeys) -> str:
    """The keys ssh learned during the command (empty when none or not learning)."""
    if not keys.learned or not Path(keys.learned).exists():
        return ""
    return fsio.read_text(keys.learned, cap=MAX_BYTES, what="learned host keys")


def save_learned(keys: HostKeys, folder: fsio.OutDir) -> str | None:
    """Write the learned keys (if any) into ``folder`` for review; the path, else None."""
    text = learned_keys(keys)
    if not text:
        return None
    header = (
        "# host keys gpuops learned (--learn-host-keys); review them, then add them to the\n"
        f"# known-hosts file ({keys.file or 'GPUOPS_KNOWN_HOSTS / the inventory known_hosts'})\n"
    )
    return str(folder.save_text(LEARNED_FILE, header + text, mode=fsio.PUBLIC))
