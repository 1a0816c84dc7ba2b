"""The lab's STAND-IN for a Podman image (production: ``quay.io/podman/stable``): no base image
can be pulled here, so an image that runs Podman takes this host's ``podman``, ``conmon`` and
``runc`` with their shared libraries, and the lab's Podman settings (docs/LAB.md). Used by the
builder image's test (tests/python/integration/test_agent_pod.py) and by
``scripts/release.sh --lab-base`` (scripts/release-labbase.py)."""

from __future__ import annotations

import re
import subprocess

#: What the stand-in takes from this machine (Debian's podman 4.3, conmon, runc).
HOST_BINARIES = ("/usr/bin/podman", "/usr/bin/conmon", "/usr/sbin/runc")

#: The lab's Podman engine settings: runc (crun fails on this cgroup setup), cgroupfs, host
#: network, no rlimit raise (not permitted here). The lab's own builder adds its private paths.
CONTAINERS_CONF = (
    "[containers]\n"
    'netns = "host"\n'
    'default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n'
    "[engine]\n"
    'runtime = "runc"\n'
    'cgroup_manager = "cgroupfs"\n'
    'events_logger = "file"\n'
)


def shared_libraries(binary: str) -> set[str]:
    """The shared libraries ``binary`` loads, the dynamic loader included (from ``ldd``)."""
    out = subprocess.run(
        ["ldd", binary], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    libs = set(re.findall(r"=> (/\S+)", out))
    libs.update(re.findall(r"^\s*(/lib\S*ld-linux\S*)", out, re.MULTILINE))
    return libs


def host_files() -> set[str]:
    """Every file the stand-in copies from this host: the binaries and their libraries."""
    files = set(HOST_BINARIES)
    for binary in HOST_BINARIES:
        files |= shared_libraries(binary)
    return files
