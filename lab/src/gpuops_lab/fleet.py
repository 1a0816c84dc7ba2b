"""Lab component ``fleet``: SSH "GPU nodes", each isolated in its own namespaces.

Each host runs ``sshd`` as PID 1 of fresh mount, UTS and PID namespaces inside its own network
namespace, with its own hostname, ``/proc``, ``/etc`` and ``/usr/bin`` overlays (so its own
``nvidia-smi`` and GPU state), ``/root``, ``/var/log``, ``/run`` and ``/tmp``. Hosts sit on a
bridge in a control namespace; Ansible and gpuops stay in the root namespace and reach them
through an ssh ``ProxyCommand`` that enters the control namespace, so no lab route exists
outside the lab. A driver repository (``python -m http.server`` on the bridge address) serves
the lab's ``NVIDIA-Linux-x86_64-<v>.run`` installers to the hosts.

Fault injection: :func:`stop_sshd` / :func:`start_sshd` (sshd is the host's init, so this is
a host going down and booting again: its disk, the overlay upper dirs, is kept; ``/run`` and
``/tmp`` are fresh), :func:`disconnect` / :func:`reconnect` (link down: connections hang and
time out); a host's GPU, driver and kernel-log state: :mod:`gpuops_lab.hoststate`.
A host reboots itself (``shutdown -r``, Ansible's reboot module) inside its namespaces:
``host.sh`` boots it again.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuops.errors import InvalidInput, OperationFailed
from gpuops_lab import fleetfiles, gpus, hostscripts, netns, proc
from gpuops_lab.spec import GpuHost

if TYPE_CHECKING:
    from gpuops_lab import Lab

log = logging.getLogger(__name__)

REPO_PORT = 8080
SERVER = "fleet-driver-repo"


def fleet_dir(lab: Lab) -> Path:
    return lab.dir / "fleet"


def _pidname(host: str) -> str:
    return f"fleet-host-{host}"


# -- up / down / status ---------------------------------------------------------------------
def up(lab: Lab) -> dict[str, Any]:
    started = time.monotonic()
    fdir = fleet_dir(lab)
    if len(str(fdir / "cp")) > 50:  # ssh ControlPath: dir + 40 (%C) + 17 (temp) < 108 bytes
        raise InvalidInput(
            f"lab dir {lab.dir} is too long for ssh ControlPath sockets",
            hint="use a lab dir of at most 40 characters (GPUOPS_LAB_DIR)",
        )
    prefix = netns.prefix_for(lab.dir)
    ctl = netns.control_ns(prefix)
    if netns.existing(prefix):
        down(lab)
    hosts = [(h, netns.host_link(prefix, i)) for i, h in enumerate(lab.fleet())]
    fdir.mkdir(parents=True, exist_ok=True)
    (fdir / "cp").mkdir(mode=0o700, exist_ok=True)
    key, public = fleetfiles.client_key(fdir)
    fleetfiles.shared_tree(fdir / "shared", hosts, public)
    host_keys = {h.name: fleetfiles.host_tree(fdir / "hosts" / h.name, h) for h, _ in hosts}
    fleetfiles.write(fdir / "known_hosts", fleetfiles.known_hosts(hosts, host_keys))
    fleetfiles.write(fdir / "host.sh", hostscripts.HOST_SH, 0o755)
    fleetfiles.write(fdir / "boot.sh", hostscripts.BOOT_SH, 0o755)
    fleetfiles.write(
        fdir / "ssh_config", fleetfiles.ssh_config(hosts, key, ctl, fdir / "known_hosts")
    )
    repo_url = f"http://{netns.GATEWAY}:{REPO_PORT}"
    inventory = fleetfiles.inventory_dir(
        fdir / "inventory", fleetfiles.inventory(hosts, key, ctl, repo_url, fdir / "cp")
    )
    fleetfiles.write(fdir / "ansible.cfg", fleetfiles.ansible_cfg(fdir, min(50, len(hosts))))
    versions = sorted(set(gpus.REPO_DRIVERS) | {h.driver for h, _ in hosts if h.driver})
    runs = fleetfiles.driver_repo(fdir / "repo", versions)
    netns.create(prefix, [link for _, link in hosts])
    server = proc.spawn(
        SERVER,
        [
            "/usr/bin/nsenter",
            f"--net=/run/netns/{ctl}",
            "/usr/bin/python3",
            "-m",
            "http.server",
            "--bind",
            netns.GATEWAY,
            "--directory",
            str(fdir / "repo"),
            str(REPO_PORT),
        ],
        lab.dir,
    )
    for host, link in hosts:
        _boot(lab, host.name, link)
    _wait_listening(lab, [h.name for h, _ in hosts])
    proc.wait_for(
        lambda: _listening(server, REPO_PORT),
        "lab driver repository",
        timeout=15,
        pid=server,
        log_file=lab.dir / "logs" / f"{SERVER}.log",
    )
    elapsed = round(time.monotonic() - started, 3)
    return {
        "healthy": True,
        "summary": f"{len(hosts)} SSH GPU hosts in netns {prefix}-*, driver repo {repo_url}",
        "prefix": prefix,
        "control_ns": ctl,
        "dir": str(fdir),
        "inventory": str(inventory),
        "ansible_cfg": str(fdir / "ansible.cfg"),
        "ssh_config": str(fdir / "ssh_config"),
        # the hosts' keys: pass it to every gpuops nodes command (--known-hosts)
        "known_hosts": str(fdir / "known_hosts"),
        "private_key": str(key),
        "driver_repo_url": repo_url,
        "driver_runs": runs,
        "started_s": elapsed,
        "hosts": [
            {**h.to_dict(), "ip": link.ip, "ns": link.ns, "index": link.index} for h, link in hosts
        ],
    }


def down(lab: Lab) -> None:
    """Stop every host and the repo server, delete the namespaces and the fleet dir."""
    fdir = fleet_dir(lab)
    prefix = netns.prefix_for(lab.dir)
    pids = lab.dir / "pids"
    names = sorted(p.stem for p in pids.glob("fleet-*.pid")) if pids.is_dir() else []
    # sshd (the hosts' init) handles SIGTERM; unshare ignores it. Only processes recorded
    # at spawn and still the same (start time, command line) are signalled.
    running = [p for p in (proc.signal_named(n, lab.dir, signal.SIGTERM) for n in names) if p]
    deadline = time.monotonic() + 5
    while any(proc.alive(p) for p in running) and time.monotonic() < deadline:
        time.sleep(0.02)
    for name in names:
        proc.stop(name, lab.dir, timeout=2)
    needles = _needles(fdir, prefix)  # ssh ControlPersist masters, ProxyCommands
    netns.kill(_lab_processes(needles), lambda pid: _is_lab_process(pid, needles))
    netns.destroy(prefix)
    shutil.rmtree(fdir, ignore_errors=True)


def _needles(fdir: Path, prefix: str) -> tuple[bytes, ...]:
    """What only this lab's ssh clients carry on their command line: its fleet dir, its
    network namespaces."""
    return (str(fdir).encode() + b"/", f"/run/netns/{prefix}-".encode())


def _is_lab_process(pid: int, needles: tuple[bytes, ...]) -> bool:
    """An ssh, nc or nsenter whose command line names this lab's files or namespaces (the
    name alone proves nothing)."""
    if pid == os.getpid():
        return False
    try:
        if Path(f"/proc/{pid}/comm").read_text().strip() not in ("ssh", "nc", "nsenter"):
            return False
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return any(n in cmdline for n in needles)


def _lab_processes(needles: tuple[bytes, ...]) -> list[int]:
    """ssh clients the lab's configs started (ControlPersist masters, ProxyCommands)."""
    return [
        int(e.name)
        for e in Path("/proc").iterdir()
        if e.name.isdigit() and _is_lab_process(int(e.name), needles)
    ]


def status(lab: Lab) -> dict[str, Any]:
    facts = lab.facts("fleet")
    hosts = [h["name"] for h in facts.get("hosts", [])]
    if not hosts:
        return {"healthy": False, "reason": "not started"}
    down_hosts = [h for h in hosts if not _sshd_listening(lab, h)]
    server = proc.pid_of(SERVER, lab.dir)
    repo_ok = server is not None and proc.alive(server) and _listening(server, REPO_PORT)
    return {
        "healthy": not down_hosts and repo_ok,
        "hosts_up": len(hosts) - len(down_hosts),
        "hosts_down": down_hosts,
        "driver_repo": repo_ok,
    }


# -- hosts ----------------------------------------------------------------------------------
def _boot(lab: Lab, name: str, link: netns.Link) -> int:
    """Power the host on: ``host.sh`` boots it in its namespaces (and again on reboot)."""
    fdir = fleet_dir(lab)
    argv = [
        "/bin/sh",
        str(fdir / "host.sh"),
        str(fdir),
        link.ns,
        name,
        f"{link.ip}/{netns.SUBNET_PREFIX}",
    ]
    return _spawn(_pidname(name), argv, lab.dir)


def _spawn(name: str, argv: list[str], lab_dir: Path) -> int:
    """:func:`proc.spawn` (same log and pid files) via posix_spawn: a fleet of 50 starts
    without forking the Python process 50 times."""
    log_fd = proc.open_log(lab_dir, name)  # never through a symlink
    try:
        pid = os.posix_spawn(
            argv[0],
            argv,
            dict(os.environ),
            setsid=True,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, log_fd, 1),
                (os.POSIX_SPAWN_DUP2, log_fd, 2),
            ],
        )
    finally:
        os.close(log_fd)
    proc.record(name, lab_dir, pid, argv)
    return pid


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def init_pid(lab: Lab, name: str) -> int | None:
    """Root-namespace pid of the host's PID 1 (sshd): ``host.sh`` -> ``unshare`` -> PID 1.
    None while the host is down (also between a reboot's shutdown and its boot)."""
    pid = proc.pid_of(_pidname(name), lab.dir)
    if pid is None:
        return None
    for child in _children(pid):
        try:
            if Path(f"/proc/{child}/comm").read_text().strip() != "unshare":
                continue
        except OSError:
            continue
        inits = _children(child)
        return inits[0] if inits else None
    return None


def _listening(pid: int, port: int) -> bool:
    """Whether the network namespace of ``pid`` has a TCP listener on ``port``."""
    try:
        lines = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    want = f":{port:04X}"
    return any(
        parts[1].endswith(want) and parts[3] == "0A"
        for parts in (line.split() for line in lines)
        if len(parts) > 3
    )


def _sshd_listening(lab: Lab, name: str) -> bool:
    pid = init_pid(lab, name)
    if pid is None:
        return False
    try:  # until boot.sh has exec'd sshd there is nothing to look for
        if Path(f"/proc/{pid}/comm").read_text().strip() != "sshd":
            return False
    except OSError:
        return False
    return _listening(pid, 22)


def _wait_listening(lab: Lab, names: list[str], timeout: float = 30.0) -> None:
    pending = set(names)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        pending = {n for n in pending if not _sshd_listening(lab, n)}
        for n in pending:
            pid = proc.pid_of(_pidname(n), lab.dir)
            if pid is None or not proc.alive(pid):
                logf = lab.dir / "logs" / f"{_pidname(n)}.log"
                tail = logf.read_text(errors="replace")[-2000:] if logf.exists() else ""
                raise OperationFailed(f"lab host {n} exited while starting:\n{tail}")
        if pending:
            time.sleep(0.05)
    if pending:
        raise OperationFailed(f"lab hosts not listening after {timeout:.0f}s: {sorted(pending)}")


def host_entry(lab: Lab, name: str) -> tuple[dict[str, Any], netns.Link]:
    facts = lab.facts("fleet")
    for h in facts.get("hosts", []):
        if h["name"] == name:
            return h, netns.host_link(facts["prefix"], int(h["index"]))
    known = ", ".join(h["name"] for h in facts.get("hosts", [])) or "none (is the fleet up?)"
    raise InvalidInput(f"no lab host named {name!r}", hint=f"lab hosts: {known}")


def hosts(lab: Lab) -> list[GpuHost]:
    fields = set(GpuHost.__dataclass_fields__)
    return [
        GpuHost(**{k: v for k, v in h.items() if k in fields})
        for h in lab.facts("fleet").get("hosts", [])
    ]


# -- fault injection ------------------------------------------------------------------------
def stop_sshd(lab: Lab, name: str) -> None:
    """Stop a host's sshd (its init): connections are refused until :func:`start_sshd`."""
    host_entry(lab, name)
    pid = proc.pid_of(_pidname(name), lab.dir)
    init = init_pid(lab, name)
    if init is not None:  # still the child of the host's recorded unshare when signalled
        proc.signal_if(init, signal.SIGTERM, lambda p: init_pid(lab, name) == p)
    if pid is not None:
        proc.wait_for(lambda: not proc.alive(pid), f"stopping lab host {name}", timeout=10)
    proc.stop(_pidname(name), lab.dir, timeout=2)


def start_sshd(lab: Lab, name: str) -> None:
    """Boot a stopped host again (its /etc and /usr/bin changes are kept, like a disk)."""
    _, link = host_entry(lab, name)
    if _sshd_listening(lab, name):
        return
    proc.stop(_pidname(name), lab.dir, timeout=2)
    _boot(lab, name, link)
    _wait_listening(lab, [name])


def restart(lab: Lab, name: str) -> None:
    """Reboot a host: what a real reboot does to nouveau and loaded modules happens here."""
    stop_sshd(lab, name)
    start_sshd(lab, name)


def disconnect(lab: Lab, name: str) -> None:
    """Take the host's link down: packets are dropped, so connections hang and time out."""
    _, link = host_entry(lab, name)
    netns.set_link(lab.facts("fleet")["prefix"], link, up=False)


def reconnect(lab: Lab, name: str) -> None:
    _, link = host_entry(lab, name)
    netns.set_link(lab.facts("fleet")["prefix"], link, up=True)


def ssh(lab: Lab, name: str, command: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run ``command`` on a lab host with the generated ssh_config (tests, diagnostics)."""
    host_entry(lab, name)
    cfg = lab.facts("fleet")["ssh_config"]
    return subprocess.run(
        ["ssh", "-F", cfg, name, command],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
