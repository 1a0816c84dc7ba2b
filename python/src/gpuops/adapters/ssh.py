"""One shell script on many hosts at once over OpenSSH: the fast, read-only path of
``gpuops nodes inspect`` and ``label`` and of the update's pre-flight probe.

Measured (bench/nodes_bench.py): no Python starts on the nodes, one ssh session per host
(the script arrives on stdin, ``sh -s``), all hosts in parallel. The connection follows the
inventory as Ansible's ssh connection would: ``ansible_host``, ``ansible_port``,
``ansible_user``, ``ansible_ssh_private_key_file``, ``ansible_ssh_common_args`` and
``ansible_ssh_extra_args``; the key and user the Jenkins step binds (``GPUOPS_SSH_KEY_FILE``,
``GPUOPS_SSH_USER``) apply where the inventory sets none. Host keys are checked against the
command's known-hosts file (:mod:`gpuops.adapters.hostkeys`); its options come first, so an
inventory's ssh arguments cannot turn the check off.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from gpuops.adapters.ansible import KEY_FILE_ENV, USER_ENV
from gpuops.adapters.hostkeys import HostKeys
from gpuops.core.inventory import Host
from gpuops.errors import InvalidInput

#: ssh exits 255 for its own errors (connection refused or timed out, authentication)
SSH_FAILED = 255


@dataclass
class Result:
    host: str
    rc: int
    stdout: str
    stderr: str
    elapsed_s: float
    #: why ssh refused the host's key (unknown or changed), naming the known-hosts file
    key_refused: str = ""

    @property
    def unreachable(self) -> bool:
        return self.rc == SSH_FAILED

    @property
    def reason(self) -> str:
        """ssh's own last word when the host could not be reached (no secrets in it)."""
        if self.key_refused:
            return self.key_refused
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        return lines[-1][:300] if lines else f"ssh exited {self.rc}"


def argv(
    host: Host, command: str, *, connect_timeout: int = 10, host_keys: HostKeys | None = None
) -> list[str]:
    """The ssh command line for ``host`` (the remote command as one word)."""
    v = host.vars
    args = [
        "ssh",
        *(host_keys or HostKeys()).options(),
        # no master connection opened earlier (under another known-hosts file) is reused
        "-o", "ControlPath=none",
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={connect_timeout}",
        "-o", "LogLevel=ERROR",
        "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4",
    ]  # fmt: skip
    key = v.get("ansible_ssh_private_key_file") or os.environ.get(KEY_FILE_ENV)
    if key:
        args += ["-o", "IdentitiesOnly=yes", "-i", str(key)]
    user = v.get("ansible_user") or os.environ.get(USER_ENV)
    if user:
        args += ["-l", str(user)]
    if v.get("ansible_port"):
        args += ["-p", str(v["ansible_port"])]
    for name in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        if v.get(name):
            try:
                args += shlex.split(str(v[name]))
            except ValueError:
                raise InvalidInput(
                    f"inventory host {host.name}: {name} is not valid shell words",
                    field="inventory",
                ) from None
    return [*args, str(v.get("ansible_host") or host.name), command]


def run_script(
    hosts: Sequence[Host],
    script: str,
    args: Sequence[str] = (),
    *,
    timeout_s: float = 120,
    parallel: int = 50,
    connect_timeout: int = 10,
    host_keys: HostKeys | None = None,
) -> dict[str, Result]:
    """Run ``script`` (POSIX sh) with ``args`` on every host at once; results by host.

    ``args`` are command-line words, on the agent (ssh's) and on the node (``sh -s --``):
    every user of both machines can read them (ps), so never a secret. Secrets go inside
    ``script``, which travels on ssh's stdin (the pre-flight probe's repository URLs do)."""
    command = "sh -s --" + "".join(" " + shlex.quote(a) for a in args)

    def one(host: Host) -> Result:
        started = time.monotonic()
        try:
            done = subprocess.run(
                argv(host, command, connect_timeout=connect_timeout, host_keys=host_keys),
                input=script,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return Result(
                host.name,
                SSH_FAILED,
                "",
                f"no answer within {timeout_s:.0f}s",
                round(time.monotonic() - started, 3),
            )
        refused = None
        if done.returncode == SSH_FAILED:
            keys = host_keys or HostKeys()
            refused = keys.refusal(
                host.name, str(host.vars.get("ansible_host") or host.name), done.stderr
            )
        return Result(
            host.name,
            done.returncode,
            done.stdout,
            done.stderr,
            round(time.monotonic() - started, 3),
            refused or "",
        )

    if not hosts:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(hosts)))) as pool:
        return {r.host: r for r in pool.map(one, hosts)}
