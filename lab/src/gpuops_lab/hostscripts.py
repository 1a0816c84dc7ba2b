"""Shell scripts of the lab fleet's hosts: power (boot and reboot), boot, and the few system
tools whose real versions would reach the machine instead of the host (``shutdown``, ``dmesg``).

A lab host is a set of namespaces around ``sshd``. What a real GPU node's boot does to the
state the lab models happens in :data:`BOOT_SH`: a fresh ``/proc``, ``/run`` and ``/tmp``;
nouveau stays away once blacklisted with a rebuilt initramfs; the nvidia kernel module loaded
is the installed driver's (so a pending "version mismatch" clears); a new kernel ring buffer
(``/run/lab-kmsg``, what the lab's ``dmesg`` prints) and boot id; kernel parameters back at
their defaults, then ``/etc/sysctl.d`` applied as systemd-sysctl does. Kernel parameters are
files in a tmpfs over the host's ``/proc/sys`` (:data:`SYSCTL_DEFAULTS`): real ``vm.*`` and
most ``net.core.*`` parameters are machine-wide or absent in a network namespace, and a lab
host must never change the machine's.
"""

from __future__ import annotations

#: Kernel parameters a lab host has (Linux defaults), as paths under /proc/sys.
SYSCTL_DEFAULTS: dict[str, str] = {
    "kernel/pid_max": "4194304",
    "kernel/panic": "0",
    "vm/max_map_count": "65530",
    "vm/swappiness": "60",
    "vm/overcommit_memory": "0",
    "net/core/rmem_max": "212992",
    "net/core/wmem_max": "212992",
    "net/core/rmem_default": "212992",
    "net/core/wmem_default": "212992",
    "net/core/somaxconn": "4096",
    "net/core/netdev_max_backlog": "1000",
    "net/ipv4/tcp_rmem": "4096\t131072\t6291456",
    "net/ipv4/tcp_wmem": "4096\t16384\t4194304",
    "net/ipv4/ip_forward": "0",
    "net/netfilter/nf_conntrack_max": "262144",
    "fs/inotify/max_user_watches": "8192",
}

#: seconds a rebooting lab host stays down (firmware and kernel) before sshd starts again
REBOOT_DOWN_S = "0.5"


def sysctl_defaults_sh() -> str:
    """Shell lines that write :data:`SYSCTL_DEFAULTS` under /proc/sys (a fresh tmpfs)."""
    lines = []
    for path, value in SYSCTL_DEFAULTS.items():
        parent = path.rsplit("/", 1)[0]
        lines.append(f"mkdir -p /proc/sys/{parent}; printf '%s\\n' '{value}' > /proc/sys/{path}")
    return "\n".join(lines)


HOST_SH = (
    r"""#!/bin/sh
# The power of one lab GPU host (runs in the root namespace): boots the host (boot.sh as PID 1
# of fresh mount, UTS and PID namespaces inside its network namespace) and, when the host
# asked for a reboot (its shutdown/reboot left /var/log/lab-reboot), boots it again after a
# moment down. Any other end of the host (sshd stopped, SIGTERM here) ends this script too.
# Usage: host.sh FLEET_DIR NETNS HOSTNAME ADDRESS/PREFIX
F=$1 NS=$2 NAME=$3 ADDR=$4
H=$F/hosts/$NAME
while :; do
  rm -f "$H/log/lab-reboot"
  /usr/bin/nsenter --net="/run/netns/$NS" -- /usr/bin/unshare --mount --uts --pid --fork \
    --kill-child -- /bin/sh "$F/boot.sh" "$F/shared" "$H" "$NAME" "$ADDR"
  [ -f "$H/log/lab-reboot" ] || exit 0
  sleep """
    + REBOOT_DOWN_S
    + """
done
"""
)

BOOT_SH = (
    r"""#!/bin/sh
# One lab GPU host: runs as PID 1 of fresh mount, UTS and PID namespaces inside the host's
# network namespace. Usage: boot.sh SHARED_DIR HOST_DIR HOSTNAME ADDRESS/PREFIX
set -eu
# never touch the caller's mounts: only PID 1 of a fresh PID (and mount) namespace goes on
[ "$$" -eq 1 ] || { echo "boot.sh: not PID 1 of a new PID namespace; refusing" >&2; exit 1; }
S=$1 H=$2 NAME=$3 ADDR=$4
printf 'link set lo up\naddr replace %s dev eth0\nlink set eth0 up\n' "$ADDR" | ip -b -
hostname "$NAME"
BOOT_ID=$(cat /proc/sys/kernel/random/uuid)
mount -t proc proc /proc
ovl() { mount -t overlay overlay -o "lowerdir=$1,upperdir=$H/$2,workdir=$H/work/$2" "$3"; }
ovl "$S/root" root /root
mount --bind "$H/log" /var/log
ovl "$S/etc:/etc" etc /etc
ovl "$S/bin:/usr/bin" bin /usr/bin
ovl "$S/sbin:/usr/sbin" sbin /usr/sbin
ovl "$S/src:/usr/src" src /usr/src
ovl "$S/share:/usr/share" share /usr/share
ovl /home home /home
mount -t tmpfs -o mode=0755,size=16m tmpfs /run
mkdir /run/sshd
mount -t tmpfs -o mode=1777,size=256m tmpfs /tmp
# "Boot": nouveau stays unloaded once blacklisted in /etc/modprobe.d and the initramfs was
# rebuilt after that (update-initramfs/dracut touch /etc/nvidia-lab/initramfs-rebuilt).
L=/etc/nvidia-lab
M=$L/loaded-modules
R=$L/initramfs-rebuilt
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
# the nvidia module loaded now is the installed driver's: a pending version mismatch clears
rm -f "$L/module-version"
# a new kernel ring buffer (the lab's dmesg prints it)
up() { awk '{printf "[%12.6f]", $1}' /proc/uptime; }
{
  echo "$(up) Linux version $(uname -r) (gpuops-lab) #1 SMP"
  if grep -qx nvidia "$M" 2>/dev/null; then
    v=$(sed -n 's/^ *"driver": "\([0-9.]*\)",*$/\1/p' "$L/gpus.json")
    echo "$(up) NVRM: loading NVIDIA UNIX x86_64 Kernel Module  $v  Release Build  (gpuops-lab)"
  fi
} > /run/lab-kmsg
# kernel parameters: defaults, then /etc/sysctl.d and /etc/sysctl.conf (systemd-sysctl)
mount -t tmpfs -o mode=0555,size=1m tmpfs /proc/sys
mkdir -p /proc/sys/kernel/random
echo "$BOOT_ID" > /proc/sys/kernel/random/boot_id
"""
    + sysctl_defaults_sh()
    + r"""
for f in /etc/sysctl.d/*.conf /etc/sysctl.conf; do
  [ -f "$f" ] && /usr/sbin/sysctl -q -e -p "$f" >/dev/null 2>&1 || true
done
# enabled units start at boot (the lab's systemctl stand-in; Fabric Manager refuses a driver
# at another version, as the real one does)
if [ -L /etc/systemd/system/multi-user.target.wants/nvidia-fabricmanager.service ]; then
  /usr/bin/systemctl start nvidia-fabricmanager >/dev/null 2>&1 || true
fi
exec /usr/sbin/sshd -D -e
"""
)

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

SHUTDOWN = r"""#!/bin/sh
# lab shutdown/reboot/poweroff: a lab host goes down by ending its init (sshd, PID 1 of its
# PID namespace); a reboot leaves /var/log/lab-reboot so the lab's host.sh boots it again.
# Any delay ("now", "0", "+5") means now; "-c" has nothing to cancel. Not systemd.
mode=halt
case ${0##*/} in reboot) mode=reboot ;; esac
for a in "$@"; do
  case $a in
    -r|--reboot) mode=reboot ;;
    -h|-P|-H|--halt|--poweroff) mode=halt ;;
    -c) exit 0 ;;
  esac
done
[ "$mode" = reboot ] && : > /var/log/lab-reboot
# -f: fork first, so the ssh session ending cannot take the timer with it; SIGHUP ignored
# before the fork (inherited), so a hangup between the fork and setsid() cannot either. TERM
# is sent again until init is gone (its PID namespace then takes this loop): a TERM that
# reaches sshd between two polls of its loop can go unnoticed (seen: 2 of 10 hosts rebooted
# at once stayed up, ansible's reboot waited 600 s).
trap '' HUP
setsid -f /bin/sh -c 'sleep 0.3; while kill -TERM 1; do sleep 1; done' </dev/null >/dev/null 2>&1
exit 0
"""

DMESG = r"""#!/bin/sh
# lab dmesg: this host's kernel ring buffer (/run/lab-kmsg: written at boot, by the lab's
# driver modules and by fault injection; a reboot starts it afresh)
for a in "$@"; do
  case $a in
    --nopager|-k|--kernel) ;;
    *) echo "dmesg: unrecognized option '$a'" >&2; exit 1 ;;
  esac
done
exec cat /run/lab-kmsg
"""

DKMS = r"""#!/bin/sh
# lab dkms: what `dkms status` prints for the installed driver (installed --dkms)
[ "${1:-}" = status ] || { echo "Error! Unknown action: ${1:-}" >&2; exit 2; }
v=$(sed -n 's/^ *"driver": "\([0-9.]*\)",*$/\1/p' /etc/nvidia-lab/gpus.json)
[ -n "$v" ] && echo "nvidia/$v, $(uname -r), x86_64: installed"
exit 0
"""
