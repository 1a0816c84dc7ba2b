#!/usr/bin/python
# Copyright: gpu-ops authors; Apache-2.0
"""gpuops.gpu.driver_checksum: the sha256 of a file in the driver repository, read on the node
and compared with the inventory's, writing nothing."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: driver_checksum
short_description: Check the sha256 of a driver installer in the local repository
description:
  - Reads O(url) on the node (streamed, nothing is written) and fails unless its sha256 is
    O(sha256). The nvidia_driver role runs it before it changes anything, also in check mode,
    so a host whose repository serves another file is refused before it is drained.
  - The URL can carry credentials. It is not logged, and messages name only the file.
version_added: "0.2.0"
author: gpu-ops team
options:
  url:
    description: The file, V(http://), V(https://) or V(file://).
    type: str
    required: true
  sha256:
    description: The sha256 the file must have, 64 lowercase hexadecimal digits.
    type: str
    required: true
  timeout:
    description: Seconds for the connection and each read.
    type: int
    default: 60
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Check the driver before anything changes
  gpuops.gpu.driver_checksum:
    url: http://mirror.example.internal/nvidia/NVIDIA-Linux-x86_64-550.90.07.run
    sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
"""

RETURN = r"""
sha256:
  description: The sha256 of the file read.
  returned: success
  type: str
size:
  description: Bytes read.
  returned: success
  type: int
"""

import hashlib
import re
from typing import Any
from urllib.parse import urlsplit

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _name(url: str) -> str:
    """The file's name (the URL's last path segment): never its credentials."""
    try:
        path = urlsplit(url).path
    except ValueError:
        return "the driver file"
    return (path.rstrip("/").rsplit("/", 1)[-1] or "the driver file")[:200]


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True, "no_log": True},
            "sha256": {"type": "str", "required": True},
            "timeout": {"type": "int", "default": 60},
        },
        supports_check_mode=True,
    )
    p: dict[str, Any] = module.params
    name = _name(p["url"])
    if not _SHA256.match(p["sha256"]):
        module.fail_json(msg=f"sha256 for {name} must be 64 lowercase hexadecimal digits")
    digest = hashlib.sha256()
    size = 0
    try:
        with open_url(p["url"], timeout=p["timeout"], follow_redirects="safe") as resp:
            while chunk := resp.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
    except Exception as exc:  # the URL's words (they can hold credentials) are not shown
        module.fail_json(
            msg=f"{name} cannot be read from the driver repository ({type(exc).__name__})"
        )
    got = digest.hexdigest()
    if got != p["sha256"]:
        module.fail_json(
            msg=f"sha256 of {name} is {got}, the inventory wants {p['sha256']}: the repository "
            "serves another file than the one reviewed; nothing was changed",
            sha256=got,
            size=size,
        )
    module.exit_json(changed=False, sha256=got, size=size)


if __name__ == "__main__":
    main()
