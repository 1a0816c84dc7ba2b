"""Files of the lab fleet: keys, per-host root trees, ssh/Ansible configuration, driver repo.

Layout under ``<lab dir>/fleet``::

    keys/id_ed25519[.pub]       the client key pair Ansible uses (S-8)
    ssh_config  ansible.cfg
    inventory/hosts.yml         the fleet's inventory; inventory/group_vars/ are the shipped
                                test inventory's (gpuops' ansible/inventory/test, S-27)
    host.sh  boot.sh            each host's power (boot, reboot) and boot (hostscripts)
    shared/{etc,bin,sbin,src,root}/
                                lower layers shared by all hosts (sshd_config, /etc/hosts,
                                nvidia-smi, lsmod, dmesg, shutdown, kernel headers, a clean
                                root profile, authorized_keys)
    hosts/<name>/etc/           upper dir of the host's /etc overlay (hostname, host key,
                                GPU state); likewise bin/ (/usr/bin), sbin/, src/, home/, root/
    hosts/<name>/log/           its /var/log
    hosts/<name>/work/          overlay work dirs
    repo/                       the driver repository (NVIDIA-Linux-x86_64-<v>.run and the
                                lab's fabricmanager-linux-x86_64-<v>-archive.tar.xz)
    cp/                         ssh ControlPersist sockets

Lower layers are written before any host starts and never change while mounted; each host's
writes land in its own upper dirs. Few files per host keep start and teardown fast.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gpuops import content
from gpuops_lab import dcgmi, gpus, hostscripts, installer, nvsmi, stack
from gpuops_lab.netns import Link
from gpuops_lab.spec import GpuHost

KEX = "curve25519-sha256"

SSHD_CONFIG = """# lab GPU hosts: each listens on its own network namespace's addresses
HostKey /etc/ssh/ssh_host_ed25519_key
PidFile none
PermitRootLogin prohibit-password
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
KexAlgorithms {kex}
UseDNS no
PrintMotd no
PrintLastLog no
MaxStartups 200:30:400
MaxSessions 100
Subsystem sftp internal-sftp
LogLevel INFO
"""

#: a host's overlay upper dirs (boot.sh mounts them)
OVERLAYS = ("etc", "bin", "sbin", "src", "home", "root", "share")

PROFILE = "# lab host: a clean root profile (no pyenv), as a real GPU node has\n"


def write(path: Path, text: str | bytes, mode: int = 0o644) -> None:
    """Write a file with ``mode`` (umask permitting) and no extra syscalls."""
    data = text if isinstance(text, bytes) else text.encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def keypair(comment: str) -> tuple[bytes, str]:
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return private, f"{public.decode()} {comment}\n"


def client_key(fleet_dir: Path) -> tuple[Path, str]:
    private, public = keypair("gpuops-lab-ansible")
    key = fleet_dir / "keys" / "id_ed25519"
    write(key, private, 0o600)
    write(key.with_suffix(".pub"), public)
    return key, public


def nvidia_smi_script() -> str:
    return "#!/usr/bin/python3 -IS\n" + Path(nvsmi.__file__).read_text()


def dcgmi_script() -> str:
    """The lab's stand-in for DCGM's ``dcgmi`` (:mod:`gpuops_lab.dcgmi`)."""
    return "#!/usr/bin/python3 -IS\n" + Path(dcgmi.__file__).read_text()


def shared_tree(sdir: Path, hosts: list[tuple[GpuHost, Link]], authorized: str) -> None:
    """Lower layers shared by every host; written before any host starts."""
    etc_hosts = "127.0.0.1\tlocalhost\n" + "".join(f"{link.ip}\t{h.name}\n" for h, link in hosts)
    write(sdir / "etc" / "hosts", etc_hosts)
    write(sdir / "etc" / "ssh" / "sshd_config", SSHD_CONFIG.format(kex=KEX))
    root = sdir / "root"
    write(root / ".ssh" / "authorized_keys", authorized, 0o600)
    for name in (".bashrc", ".profile"):
        write(root / name, PROFILE)
    bin_dir = sdir / "bin"
    (sdir / "share").mkdir(parents=True, exist_ok=True)  # lower layer of /usr/share
    write(bin_dir / "nvidia-smi", nvidia_smi_script(), 0o755)
    write(bin_dir / "dcgmi", dcgmi_script(), 0o755)
    write(bin_dir / "lsmod", hostscripts.LSMOD, 0o755)
    write(bin_dir / "dmesg", hostscripts.DMESG, 0o755)
    write(bin_dir / "dkms", hostscripts.DKMS, 0o755)
    # lab stand-ins: systemd's systemctl for the Fabric Manager unit, and the package manager
    # installing the container toolkit (gpuops_lab.systemctl, gpuops_lab.stack)
    write(bin_dir / "systemctl", stack.systemctl_program(), 0o755)
    write(sdir / "sbin" / "lab-install-container-toolkit", stack.toolkit_installer(), 0o755)
    for tool in ("update-initramfs", "dracut"):
        write(bin_dir / tool, hostscripts.INITRAMFS.format(name=tool), 0o755)
    for tool in ("shutdown", "reboot", "poweroff"):
        write(sdir / "sbin" / tool, hostscripts.SHUTDOWN, 0o755)
    # kernel headers of the running kernel (S-13); a host loses them with set_gpu_state
    write(sdir / "src" / f"linux-headers-{os.uname().release}" / "Makefile", "# lab headers\n")


def host_tree(hdir: Path, host: GpuHost) -> str:
    """The upper dirs of one host; written only while the host is not running. Returns the
    public half of its (fresh) host key, ``ssh-ed25519 AAAA... root@<host>``."""
    for sub in (*(f"work/{d}" for d in OVERLAYS), *OVERLAYS, "log", "etc/ssh"):
        (hdir / sub).mkdir(parents=True, exist_ok=True)
    etc = hdir / "etc"
    write(etc / "hostname", host.name + "\n")
    private, public = keypair(f"root@{host.name}")
    write(etc / "ssh" / "ssh_host_ed25519_key", private, 0o600)
    write(etc / "ssh" / "ssh_host_ed25519_key.pub", public)
    write(etc / "nvidia-lab" / "gpus.json", json.dumps(gpus.host_state(host), indent=1))
    write(etc / "nvidia-lab" / "loaded-modules", gpus.loaded_modules(host.driver))
    installed_stack(hdir, host)
    write(hdir / "log" / "lastlog", b"")  # sshd records logins there, as on a real node
    return public.strip()


def nvswitch(host: GpuHost) -> bool:
    """Whether the host's GPUs sit on an NVSwitch baseboard (HGX A100/H800: NVLink, SXM), so
    it runs NVIDIA Fabric Manager; PCIe cards (L40S) have none."""
    return gpus.MODELS[host.model].nvlinks > 0


def installed_stack(hdir: Path, host: GpuHost) -> None:
    """What a host runs beside its driver when the lab starts: Fabric Manager at the driver's
    version, its unit enabled (started at boot) on NVSwitch hosts, and the container toolkit."""
    if nvswitch(host) and host.driver:
        write(hdir / "bin" / "nv-fabricmanager", stack.fabricmanager_program(host.driver), 0o755)
        unit = hdir / "etc" / "systemd" / "system" / stack.FM_UNIT
        write(unit, stack.FM_SERVICE)
        wants = hdir / "etc" / "systemd" / "system" / "multi-user.target.wants"
        wants.mkdir(parents=True, exist_ok=True)
        (wants / stack.FM_UNIT).symlink_to(f"/etc/systemd/system/{stack.FM_UNIT}")
        write(hdir / "share" / "nvidia" / "nvswitch" / "fabricmanager.cfg", stack.FM_CFG)
    write(hdir / "bin" / "nvidia-ctk", stack.nvidia_ctk(stack.TOOLKIT_VERSION), 0o755)


def known_hosts(hosts: list[tuple[GpuHost, Link]], keys: dict[str, str]) -> str:
    """The lab's known_hosts: each host's key under its name and its address (ssh looks a
    key up by the address it connects to, ``ansible_host``)."""
    return "# generated by gpuops lab (fleet): the host keys of this lab's hosts\n" + "".join(
        f"{h.name},{link.ip} {keys[h.name]}\n" for h, link in hosts
    )


def proxy_command(ctl_ns: str) -> str:
    # ssh ends its ProxyCommand with SIGHUP; under a caller that ignores SIGHUP (nohup) nc
    # would outlive ssh, hanging in connect() to a dead host while it holds the caller's
    # stderr pipe open: the proxy gets SIGHUP's default back
    return (
        f"/usr/bin/env --default-signal=HUP /usr/bin/nsenter --net=/run/netns/{ctl_ns} "
        "/usr/bin/nc %h %p"
    )


def ssh_config(
    hosts: list[tuple[GpuHost, Link]], key: Path, ctl_ns: str, known_hosts_file: Path
) -> str:
    lines = [f"Host {h.name}\n  HostName {link.ip}\n" for h, link in hosts]
    lines.append(
        "Host *\n"
        "  User root\n"
        f"  IdentityFile {key}\n"
        "  IdentitiesOnly yes\n"
        f"  ProxyCommand {proxy_command(ctl_ns)}\n"
        "  StrictHostKeyChecking yes\n"
        f"  UserKnownHostsFile {known_hosts_file}\n"
        "  GlobalKnownHostsFile none\n"
        "  LogLevel ERROR\n"
        f"  KexAlgorithms {KEX}\n"
        "  ConnectTimeout 5\n"
        "  BatchMode yes\n"
    )
    return "".join(lines)


def inventory(
    hosts: list[tuple[GpuHost, Link]], key: Path, ctl_ns: str, repo_url: str, cp_dir: Path
) -> str:
    """S-6: ``gpu_nodes`` with a child group per GPU model; connection vars for all hosts.

    The wanted driver versions and thresholds are group variables of the shipped test
    inventory (copied beside this file by :func:`inventory_dir`); what the lab knows about a
    host (model, installed driver, rack) is a host variable."""
    groups: dict[str, dict[str, Any]] = {}
    for host, link in hosts:
        model = gpus.MODELS[host.model]
        groups.setdefault(host.group, {"hosts": {}})["hosts"][host.name] = {
            "ansible_host": link.ip,
            "rack": f"r{link.index // 4 + 1:02d}",
            "gpu_model": host.model,
            "gpu_name": model.name,
            "gpu_count": host.gpus,
            "gpu_memory_mib": model.memory_mib,
            "gpu_nvlinks": model.nvlinks,
            "lab_driver_version": host.driver,
            "lab_faulty_gpu": host.faulty,
        }
    # ControlPath here, before the one Ansible adds from its config (ssh takes the first): two
    # labs' hosts share addresses (each in its own namespaces), and %C does not tell their
    # ProxyCommands apart, so a shared ~/.ansible/cp would reach another lab's host
    common = (
        f"-o ProxyCommand='{proxy_command(ctl_ns)}' "
        f"-o KexAlgorithms={KEX} -o IdentitiesOnly=yes -o ControlPath={cp_dir}/%C "
        # the ProxyCommand's nc does not end when a host dies: keepalives notice it
        "-o ServerAliveInterval=5 -o ServerAliveCountMax=3"
    )
    doc = {
        "all": {
            "vars": {
                "ansible_user": "root",
                "ansible_ssh_private_key_file": str(key),
                "ansible_ssh_common_args": common,
                "ansible_python_interpreter": "/usr/bin/python3",
                "gpu_nodes_driver_repo_url": repo_url,
            },
            "children": {"gpu_nodes": {"children": dict(sorted(groups.items()))}},
        }
    }
    return "# generated by gpuops lab (fleet); one host per network namespace\n" + yaml.safe_dump(
        doc, sort_keys=False
    )


def inventory_dir(target: Path, hosts_yml: str) -> Path:
    """``target/hosts.yml`` plus the shipped test inventory's group_vars (S-27: the test
    inventory, never the production one); returns the hosts file."""
    source = content.ansible_dir() / "inventory" / "test" / "group_vars"
    for path in sorted(source.glob("*.yml")):
        write(target / "group_vars" / path.name, path.read_text())
    write(target / "hosts.yml", hosts_yml)
    return target / "hosts.yml"


def ansible_cfg(fleet_dir: Path, forks: int) -> str:
    """S-9 tuned: forks, pipelining, ControlPersist with %%C paths (LAB.md); host keys checked
    against the lab's known_hosts."""
    shipped = content.ansible_dir()
    ssh_args = (
        f"-o StrictHostKeyChecking=yes -o UserKnownHostsFile={fleet_dir / 'known_hosts'} "
        "-o GlobalKnownHostsFile=none -o ControlMaster=auto -o ControlPersist=60s "
        "-o ServerAliveInterval=5"
    )
    return f"""# generated by gpuops lab (fleet)
[defaults]
inventory = {fleet_dir / "inventory" / "hosts.yml"}
roles_path = {shipped / "roles"}
collections_path = {shipped / "collections"}
home = {fleet_dir / "ansible"}
local_tmp = {fleet_dir / "ansible" / "tmp"}
remote_tmp = ~/.ansible/tmp
host_key_checking = True
forks = {forks}
timeout = 20
interpreter_python = /usr/bin/python3
retry_files_enabled = False

[ssh_connection]
pipelining = True
ssh_args = {ssh_args}
control_path_dir = {fleet_dir / "cp"}
control_path = %(directory)s/%%C
"""


def driver_repo(repo: Path, versions: list[str]) -> list[str]:
    repo.mkdir(parents=True, exist_ok=True)
    names = []
    for version in versions:
        name = f"NVIDIA-Linux-x86_64-{version}.run"
        write(repo / name, installer.driver_run(version), 0o755)
        names.append(name)
        fm = stack.fabricmanager_file(version)
        write(repo / fm, stack.fabricmanager_archive(version))
        names.append(fm)
    return names
