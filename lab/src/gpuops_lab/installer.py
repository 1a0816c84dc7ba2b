"""The lab NVIDIA driver ``.run`` installer fixture (S-13, S-14).

``driver_run(version)`` makes the text of ``NVIDIA-Linux-x86_64-<version>.run``: a POSIX sh
script (so ``sh NVIDIA-...run --silent --dkms`` and ``./NVIDIA-...run`` both work) that runs
this module's :func:`main` with the host's ``/usr/bin/python3``. It does what the real
installer does to the parts of a host that the lab models:

- refuses unless run as root;
- refuses while nouveau is loaded (``nouveau`` listed in ``/etc/nvidia-lab/loaded-modules``,
  the lab's ``/proc/modules``) with the real message, after writing the real
  ``/etc/modprobe.d/nvidia-installer-disable-nouveau.conf`` as the real one does in silent mode;
  nouveau goes away only when the host restarts with a blacklist in ``/etc/modprobe.d`` and an
  initramfs rebuilt after it (see ``fleet`` boot script);
- fails when the running kernel's headers are missing (none of :data:`HEADERS` exists) unless
  ``--kernel-source-path`` names an existing directory;
- on success sets the driver version in ``/etc/nvidia-lab/gpus.json`` and records ``--silent``
  and ``--dkms`` (``install`` in ``gpus.json`` and ``/var/log/nvidia-installer.log``). With no
  nvidia module loaded it loads the new one (``nvidia-smi`` shows the new Driver and CUDA
  versions); over a loaded older driver the old module stays loaded until the host reboots
  (``/etc/nvidia-lab/module-version``), and ``nvidia-smi`` meanwhile fails with "Driver/library
  version mismatch" (exit 18), as on a real node.

Faults for tests (``gpus.json``): ``install_error: "module-load"`` fails the install with the
real "Unable to load the kernel module" message; ``install_delay_s`` makes it take longer (the
log's first line is written before the wait, so a test can act mid-install).

Message texts are the real installer's (public installer logs); the lab does not model the
interactive UI: without ``--silent`` it installs the same way and records ``silent: false``.
Only the standard library may be imported here: the module runs on lab hosts.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

STATE = Path("/etc/nvidia-lab/gpus.json")
MODULES = Path("/etc/nvidia-lab/loaded-modules")
MODULE_VERSION = Path("/etc/nvidia-lab/module-version")
#: where the running kernel's headers are looked for (Debian/Ubuntu, then RHEL)
HEADERS = (
    "/lib/modules/{release}/build",
    "/usr/src/linux-headers-{release}",
    "/usr/src/kernels/{release}",
)
LOG = Path("/var/log/nvidia-installer.log")
NOUVEAU_CONF = Path("/etc/modprobe.d/nvidia-installer-disable-nouveau.conf")

NOUVEAU_ERROR = (
    "ERROR: The Nouveau kernel driver is currently in use by your system.  This driver is "
    "incompatible with the NVIDIA driver, and must be disabled before proceeding.  Please "
    "consult the NVIDIA driver README and your Linux distribution's documentation for details "
    "on how to correctly disable the Nouveau kernel driver."
)
NOUVEAU_WRITTEN = (
    "WARNING: One or more modprobe configuration files to disable Nouveau have been written.  "
    "For some distributions, this may be sufficient to disable Nouveau; other distributions "
    "may require modification of the initial ramdisk.  Please reboot your system and attempt "
    "NVIDIA driver installation again.  Note if you later wish to re-enable Nouveau, you will "
    f"need to delete these files: {NOUVEAU_CONF}"
)
HEADERS_ERROR = (
    "ERROR: Unable to find the kernel source tree for the currently running kernel.  Please "
    "make sure you have installed the kernel source files for your kernel and that they are "
    "properly configured; on Red Hat Linux systems, for example, be sure you have the "
    "'kernel-source' or 'kernel-devel' RPM installed.  If you know the correct kernel source "
    "files are installed, you may specify the kernel source path with the "
    "'--kernel-source-path' command line option."
)
FAILED = (
    "ERROR: Installation has failed.  Please see the file '/var/log/nvidia-installer.log' for "
    "details.  You may find suggestions on fixing installation problems in the README "
    "available on the Linux driver download page at www.nvidia.com."
)
NOT_ROOT = "ERROR: nvidia-installer must be run as root"
MODULE_LOAD_ERROR = (
    "ERROR: Unable to load the kernel module 'nvidia.ko'.  This happens most frequently when "
    "this kernel module was built against the wrong or improperly configured kernel sources, "
    "with a version of gcc that differs from the one used to build the target kernel, or if "
    "another driver, such as nouveau, is present and prevents the NVIDIA kernel module from "
    "obtaining ownership of the NVIDIA device(s), or no NVIDIA device installed in this system "
    "is supported by this NVIDIA Linux graphics driver release."
)

FLAGS = {
    "--silent": "silent",
    "-s": "silent",
    "--dkms": "dkms",
    "--no-questions": "",
    "-q": "",
    "--accept-license": "",
    "-a": "",
    "--ui=none": "",
    "--no-drm": "",
    "--disable-nouveau": "",
    "--no-cc-version-check": "",
    "--no-x-check": "",
    "--install-libglvnd": "",
    "--no-opengl-files": "",
}


def _log(lines: list[str]) -> None:
    try:
        LOG.parent.mkdir(parents=True, exist_ok=True)
        with LOG.open("a") as f:
            f.write("".join(line + "\n" for line in lines))
    except OSError:
        pass


def _fail(message: str, log: list[str]) -> int:
    print(message, file=sys.stderr)
    print(FAILED, file=sys.stderr)
    _log([*log, message, FAILED])
    return 1


def install(version: str, args: list[str]) -> int:
    opts: dict[str, bool] = {"silent": False, "dkms": False}
    source_path = ""
    for arg in args:
        if arg.startswith("--kernel-source-path="):
            source_path = arg.split("=", 1)[1]
        elif arg in ("-v", "--version"):
            print(f"nvidia-installer:  version {version}")
            return 0
        elif arg in FLAGS:
            if FLAGS[arg]:
                opts[FLAGS[arg]] = True
        else:
            print(f"ERROR: Unrecognized option: '{arg}'", file=sys.stderr)
            return 1
    print("Verifying archive integrity... OK")
    print(f"Uncompressing NVIDIA Accelerated Graphics Driver for Linux-x86_64 {version}" + "." * 40)
    log = [
        f"nvidia-installer log file '{LOG}'",
        f"creation time: {time.ctime()}",
        "",
        "nvidia-installer command line:",
        "    ./nvidia-installer",
        *[f"    {a}" for a in args],
        "",
        f"-> Installing NVIDIA driver version {version}.",
    ]
    if os.geteuid() != 0:
        return _fail(NOT_ROOT, log)
    state = json.loads(STATE.read_text())
    delay = float(state.get("install_delay_s") or 0)
    if delay:
        _log(log)  # the start is visible while the install runs
        log = []
        time.sleep(delay)
    modules = MODULES.read_text().split() if MODULES.exists() else []
    if "nouveau" in modules:
        print(NOUVEAU_ERROR, file=sys.stderr)
        log.append(NOUVEAU_ERROR)
        NOUVEAU_CONF.parent.mkdir(parents=True, exist_ok=True)
        NOUVEAU_CONF.write_text(
            "# generated by nvidia-installer\nblacklist nouveau\noptions nouveau modeset=0\n"
        )
        return _fail(NOUVEAU_WRITTEN, log)
    release = os.uname().release
    headers = any(Path(p.format(release=release)).is_dir() for p in HEADERS)
    if not headers and not (source_path and Path(source_path).is_dir()):
        return _fail(HEADERS_ERROR, log)
    if state.get("install_error") == "module-load":
        return _fail(MODULE_LOAD_ERROR, log)
    previous = state.get("driver")
    state["driver"] = version
    state["install"] = {
        "version": version,
        "previous": previous,
        "args": args,
        "time": int(time.time()),
        **opts,
    }
    tmp = STATE.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(STATE)
    log.append(_load_module(modules, previous, version))
    if opts["dkms"]:
        log.append(f"-> Installing DKMS kernel module: nvidia/{version}")
    log.append(
        "-> Installation of the kernel module for the NVIDIA Accelerated Graphics Driver "
        "for Linux-x86_64 (version " + version + ") is now complete."
    )
    _log(log)
    if not opts["silent"]:
        print(log[-1])
    return 0


def _load_module(modules: list[str], previous: str | None, version: str) -> str:
    """Load the new module when none is loaded; an old one in use stays until a reboot (a
    pending mismatch keeps the version of the module loaded first). Returns a log line."""
    loaded = MODULE_VERSION.read_text().strip() if MODULE_VERSION.exists() else previous
    if "nvidia" in modules and loaded == version:  # back to the loaded module's version
        MODULE_VERSION.unlink(missing_ok=True)
    elif "nvidia" in modules and loaded and loaded != version:
        MODULE_VERSION.write_text(loaded + "\n")
        return (
            "WARNING: An NVIDIA kernel module 'nvidia' appears to be already loaded in your "
            "kernel; the new module will be used after a reboot."
        )
    elif "nvidia" not in modules:
        MODULE_VERSION.unlink(missing_ok=True)
        kept = [m for m in modules if not m.startswith("nvidia")]
        now = [*kept, "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia"]
        MODULES.write_text("".join(m + "\n" for m in now))
    return f"-> Kernel module nvidia {version} loaded."


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: NVIDIA-Linux-x86_64-<version>.run [options]", file=sys.stderr)
        return 1
    return install(args[0], args[1:])


def driver_run(version: str) -> str:
    """The text of the lab's ``NVIDIA-Linux-x86_64-<version>.run`` for ``version``."""
    source = Path(__file__).read_text()
    marker = "NVIDIA_LAB_INSTALLER_EOF"
    return (
        "#!/bin/sh\n"
        f"# NVIDIA-Linux-x86_64-{version}.run: gpu-ops lab driver installer fixture.\n"
        "# Not NVIDIA software: it changes only the lab host's /etc/nvidia-lab state.\n"
        f"exec /usr/bin/python3 -IS - {version} \"$@\" <<'{marker}'\n"
        f"{source}{marker}\n"
    )


if __name__ == "__main__":
    sys.exit(main())
