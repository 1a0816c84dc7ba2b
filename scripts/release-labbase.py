"""The lab's STAND-IN base images for scripts/release.sh --lab-base. In the lab no base image
can be pulled, so:

  release-labbase.py
      prints the path of the agent image's stand-in base: an OCI archive of Debian bookworm +
      python3 (gpuops_lab.pythonbase) cached in $GPUOPS_CACHE/lab, not a Jenkins inbound-agent
      image. When not cached yet it is built once (debootstrap, root, ~2.5 min on 2 cores)
      through a throwaway Podman storage.
  release-labbase.py --builder-context DIR
      writes into DIR a build context for the builder image's stand-in base, not
      quay.io/podman/stable: FROM scratch, the static busybox (sh and the usual tools) and
      this host's podman, conmon, runc and their shared libraries.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gpuops.errors import GpuOpsError
from gpuops_lab import Lab, LabConfig, builder, default_cache_dir, podmanstandin, pythonbase

BUSYBOX = "/bin/busybox"


def agent_base() -> int:
    cache = default_cache_dir()
    archive = pythonbase.cache_file(cache)
    if not archive.is_file():
        work = Path(tempfile.mkdtemp(prefix="gpuops-labbase-"))
        try:
            lab = Lab(LabConfig(dir=work / "lab", cache=cache))
            # Podman's config only: no registry is used (127.0.0.1:9 listens nowhere)
            builder._write_config(lab, {"url": "127.0.0.1:9"})
            pythonbase.ensure_local(lab)
        except GpuOpsError as exc:
            print(f"release: the lab's stand-in base image: {exc}", file=sys.stderr)
            return 1
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(archive)
    return 0


def builder_context(dest: Path) -> int:
    missing = [b for b in (*podmanstandin.HOST_BINARIES, BUSYBOX) if not Path(b).is_file()]
    if missing:
        print(f"release: the builder's stand-in base needs {', '.join(missing)}", file=sys.stderr)
        return 1
    files = podmanstandin.host_files()
    rootfs = dest / "rootfs"
    for path in sorted({*files, BUSYBOX}):
        target = rootfs / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(path), target)  # the file a symlink names
    applets = subprocess.run(
        [BUSYBOX, "--list-full"], capture_output=True, text=True, check=True, timeout=30
    ).stdout.split()
    for applet in applets:
        link = rootfs / applet
        if "/" in applet and not (link.is_symlink() or link.exists()):
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(BUSYBOX)
    etc = rootfs / "etc"
    (etc / "containers").mkdir(parents=True, exist_ok=True)
    (etc / "containers" / "containers.conf").write_text(podmanstandin.CONTAINERS_CONF)
    (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (etc / "group").write_text("root:x:0:\n")
    for name, mode in (("tmp", 0o1777), ("root", 0o700), ("run", 0o755)):
        (rootfs / name).mkdir(exist_ok=True)
        (rootfs / name).chmod(mode)
    (dest / "Containerfile").write_text(
        "FROM scratch\n"
        "COPY rootfs/ /\n"
        'ENV PATH="/usr/sbin:/usr/bin:/sbin:/bin"\n'
        'LABEL org.opencontainers.image.title="LAB STAND-IN for quay.io/podman/stable"\n'
    )
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--builder-context"] and len(sys.argv) == 3:
        sys.exit(builder_context(Path(sys.argv[2])))
    if len(sys.argv) == 1:
        sys.exit(agent_base())
    sys.exit("usage: release-labbase.py [--builder-context DIR]")
