"""The GPU stack beside the driver as its tools print it: NVIDIA Fabric Manager's
``nv-fabricmanager --version`` and the container toolkit's ``nvidia-ctk --version``.

Pure parsers, for whoever reads a host (the pre-flight's :class:`~gpuops.core.nodestate.HostBefore`,
tests). The texts are the real tools': ``Fabric Manager version is : 535.161.08`` (as
leptonai/gpud's parser test records it) and ``NVIDIA Container Toolkit CLI version 1.17.8`` then
``commit: <sha>`` (public captures of 1.17.x).
"""

from __future__ import annotations

import re

_FM = re.compile(r"^\s*Fabric Manager version is\s*:\s*(\d+\.\d+(?:\.\d+)?)\s*$", re.MULTILINE)
_CTK = re.compile(r"^NVIDIA Container Toolkit CLI version (\d+\.\d+\.\d+)\s*$", re.MULTILINE)


def fabricmanager_version(text: str) -> str | None:
    """The version ``nv-fabricmanager --version`` printed, or None when it printed none."""
    found = _FM.search(text)
    return found.group(1) if found else None


def container_toolkit_version(text: str) -> str | None:
    """The version ``nvidia-ctk --version`` printed, or None when it printed none."""
    found = _CTK.search(text)
    return found.group(1) if found else None
