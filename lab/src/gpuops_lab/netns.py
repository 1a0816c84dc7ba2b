"""Network namespaces of the lab fleet: a control namespace with a bridge, one per host.

Everything lives inside namespaces the lab creates; the root namespace gets no interface,
route or address, so no lab traffic can leave the lab. Names carry a prefix unique to the lab
directory (``gol-<hash>``) so two labs never collide. ``ip -batch`` keeps start-up at a few
``ip`` processes whatever the fleet size.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuops.errors import OperationFailed
from gpuops_lab import proc

log = logging.getLogger(__name__)

NETNS_DIR = Path("/run/netns")
SUBNET_PREFIX = 16
GATEWAY = "10.200.0.1"
FIRST_HOST = 10  # host i gets 10.200.0.0 + FIRST_HOST + i


def prefix_for(lab_dir: Path) -> str:
    digest = hashlib.sha256(str(lab_dir.resolve()).encode()).hexdigest()[:6]
    return f"gol-{digest}"


@dataclass(frozen=True)
class Link:
    """One host's place on the lab network."""

    index: int
    ns: str  # the host's network namespace
    veth: str  # the bridge-side end, inside the control namespace
    ip: str
    mac: str


def host_link(prefix: str, index: int) -> Link:
    n = FIRST_HOST + index
    if n > 65000:
        raise OperationFailed(f"the lab network has room for 64990 hosts, not {index + 1}")
    ip = f"10.200.{n // 256}.{n % 256}"
    mac = f"02:00:0a:c8:{n // 256:02x}:{n % 256:02x}"
    return Link(index=index, ns=f"{prefix}-{index}", veth=f"v{index}", ip=ip, mac=mac)


def control_ns(prefix: str) -> str:
    return f"{prefix}-c"


def _ip_batch(commands: Iterable[str], netns: str | None = None, *, force: bool = False) -> None:
    with tempfile.NamedTemporaryFile("w", prefix="gpuops-ip-", suffix=".batch") as f:
        f.write("".join(c + "\n" for c in commands))
        f.flush()
        argv = ["ip"] + (["-n", netns] if netns else []) + (["-force"] if force else [])
        res = subprocess.run([*argv, "-batch", f.name], capture_output=True, text=True, check=False)
    if res.returncode != 0 and not force:
        raise OperationFailed(f"ip -batch failed: {res.stderr.strip()}")


def create(prefix: str, links: Sequence[Link]) -> None:
    """Control namespace with bridge ``br0`` (the gateway address) and one veth per host."""
    ctl = control_ns(prefix)
    _ip_batch([f"netns add {ctl}", *(f"netns add {link.ns}" for link in links)])
    cmds = [
        "link set lo up",
        "link add br0 type bridge",
        f"addr add {GATEWAY}/{SUBNET_PREFIX} dev br0",
        "link set br0 up",
    ]
    for link in links:
        cmds += [
            f"link add {link.veth} type veth peer name eth0 address {link.mac} netns {link.ns}",
            f"link set {link.veth} master br0 up",
            # permanent neighbours: no ARP, and a host whose link is down swallows packets
            # (connections time out) instead of answering "no route to host"
            f"neigh replace {link.ip} lladdr {link.mac} dev br0 nud permanent",
        ]
    _ip_batch(cmds, ctl)


def set_link(prefix: str, link: Link, up: bool) -> None:
    _ip_batch([f"link set {link.veth} {'up' if up else 'down'}"], control_ns(prefix))


def link_is_up(prefix: str, link: Link) -> bool:
    res = subprocess.run(
        ["ip", "-n", control_ns(prefix), "-o", "link", "show", link.veth],
        capture_output=True,
        text=True,
        check=False,
    )
    flags = res.stdout.split("<", 1)[-1].split(">", 1)[0].split(",")
    return res.returncode == 0 and "UP" in flags


def existing(prefix: str) -> list[str]:
    """Namespaces of this lab that exist now (a crashed ``up`` may leave some)."""
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir() if p.name.startswith(prefix + "-"))


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


def _in_namespaces(names: Iterable[str]) -> Callable[[int], bool]:
    inodes = {i for i in (_inode(NETNS_DIR / n) for n in names) if i is not None}
    return lambda pid: _inode(Path(f"/proc/{pid}/ns/net")) in inodes


def pids_in(names: Iterable[str]) -> list[int]:
    """Processes whose network namespace is one of ``names``."""
    inside = _in_namespaces(names)
    return [
        int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit() and inside(int(e.name))
    ]


def kill(pids: Iterable[int], ours: Callable[[int], bool], timeout: float = 5.0) -> None:
    """SIGKILL each of ``pids`` that ``ours`` still proves is a lab process (checked through a
    pidfd, so a pid reused meanwhile is left alone) and wait until they are gone."""
    pids = [pid for pid in pids if proc.signal_if(pid, signal.SIGKILL, ours)]
    deadline = time.monotonic() + timeout
    for pid in pids:
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            if not Path(f"/proc/{pid}").exists() or _zombie(pid):
                break
            time.sleep(0.02)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def destroy(prefix: str) -> None:
    """Kill what still runs inside this lab's namespaces, then delete them (idempotent)."""
    names = existing(prefix)
    if not names:
        return
    kill(pids_in(names), _in_namespaces(names))
    _ip_batch([f"netns del {n}" for n in names], force=True)
    left = existing(prefix)
    if left:
        raise OperationFailed(f"could not delete network namespaces: {', '.join(left)}")
