"""Files of the lab fleet: keys, per-host root trees, ssh/Ansible configuration, driver repo.

Layout under ``<lab dir>/fleet``::

    keys/id_ed25519[.pub]       the client key pair Ansible uses (S-8)
    ssh_config  hosts.yml  ansible.cfg
    boot.sh                     what each host runs inside its namespaces
    shared/{etc,bin,root}/      lower layers shared by all hosts (sshd_config, /etc/hosts,
                                nvidia-smi, lsmod, a clean root profile, authorized_keys)
    hosts/<name>/etc/           upper dir of the host's /etc overlay (hostname, host key,
                                GPU state); likewise bin/ (/usr/bin) and root/ (/root)
    hosts/<name>/log/           its /var/log
    hosts/<name>/work/          overlay work dirs
    repo/                       the driver repository (NVIDIA-Linux-x86_64-<v>.run)
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

from gpuops_lab import gpus, installer, nvsmi
from gpuops_lab.netns import Link
from gpuops_lab.spec import GpuHost

KEX = "curve25519-sha256"

BOOT_SH = r"""#!/bin/sh
# One lab GPU host: runs as PID 1 of fresh mount, UTS and PID namespaces inside the host's
# network namespace. Usage: boot.sh SHARED_DIR HOST_DIR HOSTNAME ADDRESS/PREFIX
set -eu
# never touch the caller's mounts: only PID 1 of a fresh PID (and mount) namespace goes on
[ "$$" -eq 1 ] || { echo "boot.sh: not PID 1 of a new PID namespace; refusing" >&2; exit 1; }
S=$1 H=$2 NAME=$3 ADDR=$4
printf 'link set lo up\naddr replace %s dev eth0\nlink set eth0 up\n' "$ADDR" | ip -b -
hostname "$NAME"
mount -t proc proc /proc
mount -t overlay overlay -o "lowerdir=$S/root,upperdir=$H/root,workdir=$H/work/root" /root
mount --bind "$H/log" /var/log
mount -t overlay overlay -o "lowerdir=$S/etc:/etc,upperdir=$H/etc,workdir=$H/work/etc" /etc
mount -t overlay overlay -o "lowerdir=$S/bin:/usr/bin,upperdir=$H/bin,workdir=$H/work/bin" /usr/bin
mount -t tmpfs -o mode=0755,size=16m tmpfs /run
mkdir /run/sshd
mount -t tmpfs -o mode=1777,size=256m tmpfs /tmp
# "Boot": nouveau stays unloaded once blacklisted in /etc/modprobe.d and the initramfs was
# rebuilt after that (update-initramfs/dracut touch /etc/nvidia-lab/initramfs-rebuilt).
M=/etc/nvidia-lab/loaded-modules
R=/etc/nvidia-lab/initramfs-rebuilt
nouveau=no
if [ -f "$M" ]; then
  while read -r m; do [ "$m" = nouveau ] && nouveau=yes; done < "$M"
fi
if [ $nouveau = yes ]; then
  for f in /etc/modprobe.d/*.conf; do
    if grep -Eq '^[[:space:]]*blacklist[[:space:]]+nouveau' "$f" 2>/dev/null \
        && [ "$R" -nt "$f" ]; then
      grep -v '^nouveau$' "$M" > "$M.new" || true
      mv "$M.new" "$M"
      break
    fi
  done
fi
exec /usr/sbin/sshd -D -e
"""

LSMOD = """#!/bin/sh
# lab lsmod: the modules in /etc/nvidia-lab/loaded-modules (the lab's /proc/modules)
echo "Module                  Size  Used by"
while read -r m; do [ -n "$m" ] && printf '%-19s %8s  0\\n' "$m" 65536; done \\
  < /etc/nvidia-lab/loaded-modules
"""

INITRAMFS = """#!/bin/sh
# lab {name}: records that the initramfs was rebuilt (no real initramfs in the lab)
mkdir -p /etc/nvidia-lab && touch /etc/nvidia-lab/initramfs-rebuilt
"""

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
    write(bin_dir / "nvidia-smi", nvidia_smi_script(), 0o755)
    write(bin_dir / "lsmod", LSMOD, 0o755)
    for tool in ("update-initramfs", "dracut"):
        write(bin_dir / tool, INITRAMFS.format(name=tool), 0o755)


def host_tree(hdir: Path, host: GpuHost) -> None:
    """The upper dirs of one host; written only while the host is not running."""
    for sub in ("work/etc", "work/bin", "work/root", "log", "root", "bin", "etc/ssh"):
        (hdir / sub).mkdir(parents=True, exist_ok=True)
    etc = hdir / "etc"
    write(etc / "hostname", host.name + "\n")
    private, _ = keypair(f"root@{host.name}")
    write(etc / "ssh" / "ssh_host_ed25519_key", private, 0o600)
    write(etc / "nvidia-lab" / "gpus.json", json.dumps(gpus.host_state(host), indent=1))
    write(etc / "nvidia-lab" / "loaded-modules", gpus.loaded_modules(host.driver))


def proxy_command(ctl_ns: str) -> str:
    return f"/usr/bin/nsenter --net=/run/netns/{ctl_ns} /usr/bin/nc %h %p"


def ssh_config(hosts: list[tuple[GpuHost, Link]], key: Path, ctl_ns: str) -> str:
    lines = [f"Host {h.name}\n  HostName {link.ip}\n" for h, link in hosts]
    lines.append(
        "Host *\n"
        "  User root\n"
        f"  IdentityFile {key}\n"
        "  IdentitiesOnly yes\n"
        f"  ProxyCommand {proxy_command(ctl_ns)}\n"
        "  StrictHostKeyChecking no\n"
        "  UserKnownHostsFile /dev/null\n"
        "  LogLevel ERROR\n"
        f"  KexAlgorithms {KEX}\n"
        "  ConnectTimeout 5\n"
        "  BatchMode yes\n"
    )
    return "".join(lines)


def inventory(hosts: list[tuple[GpuHost, Link]], key: Path, ctl_ns: str) -> str:
    """S-6: ``gpu_nodes`` with a child group per GPU model; connection vars for all hosts."""
    groups: dict[str, dict[str, Any]] = {}
    for host, link in hosts:
        model = gpus.MODELS[host.model]
        groups.setdefault(host.group, {"hosts": {}})["hosts"][host.name] = {
            "ansible_host": link.ip,
            "gpu_model": host.model,
            "gpu_name": model.name,
            "gpu_count": host.gpus,
            "gpu_memory_mib": model.memory_mib,
            "gpu_nvlinks": model.nvlinks,
            "lab_driver_version": host.driver,
            "lab_faulty_gpu": host.faulty,
        }
    common = (
        f"-o ProxyCommand='{proxy_command(ctl_ns)}' -o UserKnownHostsFile=/dev/null "
        f"-o KexAlgorithms={KEX} -o IdentitiesOnly=yes"
    )
    doc = {
        "all": {
            "vars": {
                "ansible_user": "root",
                "ansible_ssh_private_key_file": str(key),
                "ansible_ssh_common_args": common,
                "ansible_python_interpreter": "/usr/bin/python3",
            },
            "children": {"gpu_nodes": {"children": dict(sorted(groups.items()))}},
        }
    }
    return "# generated by gpuops lab (fleet); one host per network namespace\n" + yaml.safe_dump(
        doc, sort_keys=False
    )


def ansible_cfg(fleet_dir: Path, forks: int) -> str:
    """S-9 tuned: forks, pipelining, ControlPersist with %%C paths (LAB.md), no host keys."""
    return f"""# generated by gpuops lab (fleet)
[defaults]
inventory = {fleet_dir / "hosts.yml"}
home = {fleet_dir / "ansible"}
local_tmp = {fleet_dir / "ansible" / "tmp"}
remote_tmp = ~/.ansible/tmp
host_key_checking = False
forks = {forks}
timeout = 20
interpreter_python = /usr/bin/python3
retry_files_enabled = False

[ssh_connection]
pipelining = True
ssh_args = -o ControlMaster=auto -o ControlPersist=60s -o ServerAliveInterval=5
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
    return names
