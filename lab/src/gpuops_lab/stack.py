"""The lab's model of the GPU stack beside the driver: NVIDIA Fabric Manager and the NVIDIA
container toolkit (test data: stand-ins, not NVIDIA software).

Fabric Manager: :func:`fabricmanager_archive` makes the lab repository's
``fabricmanager-linux-x86_64-<v>-archive.tar.xz`` with the layout of NVIDIA's redistributable
archive (top folder ``fabricmanager-linux-x86_64-<v>-archive/`` with ``bin/nv-fabricmanager``,
``etc/fabricmanager.cfg``, ``systemd/nvidia-fabricmanager.service``; as Yocto's
meta-tegra-community / NVIDIA's yum-packaging-fabric-manager recipes unpack it). Its
``nv-fabricmanager`` is :mod:`gpuops_lab.fmstandin`; the real archive's libraries
(``lib/libnvfm.so.1``), ``nvswitch-audit`` and topology files are not modelled. The archive is
byte-for-byte reproducible, so its sha256 is fixed and the test inventory records it (a unit
test keeps the two equal).

Container toolkit: a real air-gapped node installs ``nvidia-container-toolkit``,
``nvidia-container-toolkit-base``, ``libnvidia-container-tools`` and ``libnvidia-container1``
at one version with its package manager from the local mirror (NVIDIA's install guide pins
them with ``NVIDIA_CONTAINER_TOOLKIT_VERSION``). Lab hosts share the machine's package
database, so the lab cannot run a package manager: :data:`TOOLKIT_INSTALLER` is a labelled
stand-in that writes an ``nvidia-ctk`` printing the real version text
(``NVIDIA Container Toolkit CLI version 1.17.8`` / ``commit: f202b80...``, public output).
"""

from __future__ import annotations

import hashlib
import io
import lzma
import tarfile
from pathlib import Path

from gpuops_lab import fmstandin, systemctl

#: Fabric Manager versions the lab repository serves (one per driver it serves)
FM_UNIT = "nvidia-fabricmanager.service"
FM_CONFIG = "/usr/share/nvidia/nvswitch/fabricmanager.cfg"

#: NVIDIA's unit (Fabric Manager user guide; ExecStart as in its 5xx archives' classic form),
#: with the lab's PID file under /run
FM_SERVICE = f"""[Unit]
Description=NVIDIA fabric manager service
After=network-online.target
Requires=network-online.target

[Service]
User=root
PrivateTmp=false
Type=forking
ExecStart=/usr/bin/nv-fabricmanager -c {FM_CONFIG}
PIDFile=/run/nvidia-fabricmanager/nv-fabricmanager.pid
LimitCORE=infinity

[Install]
WantedBy=multi-user.target
"""

FM_CFG = """# lab stand-in of fabricmanager.cfg (gpu-ops lab; the real file has many more keys)
LOG_LEVEL=4
LOG_FILE_NAME=/var/log/fabricmanager.log
FABRIC_MODE=0
"""

#: the container toolkit versions the lab models, with their release commit (nvidia-ctk prints
#: it; 1.17.8's from a public `nvidia-ctk --version` capture)
TOOLKIT_VERSIONS: dict[str, str] = {"1.17.8": "f202b80a9b9d0db00d9b1d73c0128c8962c55f4d"}
#: what every lab host runs at boot (the test inventory pins it)
TOOLKIT_VERSION = "1.17.8"
TOOLKIT_PACKAGES = (
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
)


def fabricmanager_file(version: str) -> str:
    return f"fabricmanager-linux-x86_64-{version}-archive.tar.xz"


def fabricmanager_program(version: str) -> str:
    """The text of the lab's ``nv-fabricmanager`` at ``version``."""
    source = Path(fmstandin.__file__).read_text()
    marker = 'VERSION = "0.0.0"'
    if marker not in source:
        raise RuntimeError("fmstandin.py lost its VERSION marker")
    return "#!/usr/bin/python3 -IS\n" + source.replace(marker, f"VERSION = {version!r}", 1)


def systemctl_program() -> str:
    return "#!/usr/bin/python3 -IS\n" + Path(systemctl.__file__).read_text()


def fabricmanager_archive(version: str) -> bytes:
    """The lab's Fabric Manager archive for ``version``: the same bytes every time."""
    top = f"fabricmanager-linux-x86_64-{version}-archive"
    files = {
        "LAB-STAND-IN.txt": (
            "gpu-ops lab stand-in for NVIDIA Fabric Manager: not NVIDIA software\n",
            0o644,
        ),
        "bin/nv-fabricmanager": (fabricmanager_program(version), 0o755),
        "etc/fabricmanager.cfg": (FM_CFG, 0o644),
        f"systemd/{FM_UNIT}": (FM_SERVICE, 0o644),
    }
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for folder in (top, f"{top}/bin", f"{top}/etc", f"{top}/systemd"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for name, (text, mode) in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return lzma.compress(raw.getvalue(), format=lzma.FORMAT_XZ, preset=6)


def fabricmanager_sha256(version: str) -> str:
    return hashlib.sha256(fabricmanager_archive(version)).hexdigest()


def nvidia_ctk(version: str) -> str:
    """The lab's ``nvidia-ctk`` at ``version``: ``--version`` as the real CLI prints it."""
    commit = TOOLKIT_VERSIONS[version]
    return (
        "#!/bin/sh\n"
        "# lab nvidia-ctk (gpu-ops lab stand-in): only --version is modelled\n"
        'case "${1:-}" in\n'
        "  --version|-v) printf 'NVIDIA Container Toolkit CLI version %s\\ncommit: %s\\n' "
        f"'{version}' '{commit}' ;;\n"
        '  *) echo "lab nvidia-ctk: only --version is modelled" >&2; exit 1 ;;\n'
        "esac\n"
    )


def toolkit_installer() -> str:
    """``/usr/sbin/lab-install-container-toolkit VERSION``: the lab's stand-in for the package
    manager installing the toolkit's packages at ``VERSION`` from the local mirror."""
    cases = "".join(
        f"  {v}) cat > /usr/bin/nvidia-ctk <<'LAB_CTK_EOF'\n{nvidia_ctk(v)}LAB_CTK_EOF\n"
        "    chmod 0755 /usr/bin/nvidia-ctk ;;\n"
        for v in sorted(TOOLKIT_VERSIONS)
    )
    return (
        "#!/bin/sh\n"
        "# lab stand-in for `apt-get install nvidia-container-toolkit=V-1 ...` (lab hosts share\n"
        "# the machine's package database, so no real package manager runs on them)\n"
        "set -eu\n"
        "v=${1:?usage: lab-install-container-toolkit VERSION}\n"
        'case "$v" in\n'
        f"{cases}"
        '  *) echo "lab-install-container-toolkit: version $v is not in the lab repository '
        f'(it serves {", ".join(sorted(TOOLKIT_VERSIONS))})" >&2; exit 100 ;;\n'
        "esac\n"
        "mkdir -p /etc/nvidia-lab\n"
        "printf '%s\\n' "
        + " ".join(f'"{p}=$v-1"' for p in TOOLKIT_PACKAGES)
        + " > /etc/nvidia-lab/container-toolkit-packages\n"
    )
