#!/usr/bin/python
# Copyright: gpu-ops authors; Apache-2.0
"""gpuops.gpu.sysctl: one kernel parameter, persistent in a sysctl.d file and live."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sysctl
short_description: Set a kernel parameter in a sysctl.d file and, optionally, live
description:
  - Keeps exactly one C(name = value) line for the parameter in O(sysctl_file) (other lines
    and comments are kept) and, with O(reload), writes the value under C(/proc/sys) when the
    running kernel has another one. Values are compared with whitespace normalised, so
    C(4096 87380 134217728) equals the kernel's tab-separated form.
  - The gpu-ops node_init role sets the training parameters of SEED S-12 with it. ansible-core
    has no sysctl module and gpu-ops cannot fetch collections from Galaxy.
version_added: "0.1.0"
author: gpu-ops team
options:
  name:
    description: Dotted parameter name, for example C(vm.max_map_count).
    type: str
    required: true
  value:
    description: The value; required with O(state=present).
    type: str
  state:
    description: V(present) keeps the line, V(absent) removes it (the live value is left).
    type: str
    choices: [present, absent]
    default: present
  sysctl_file:
    description: The file under /etc/sysctl.d that holds the line.
    type: path
    default: /etc/sysctl.d/90-gpuops.conf
  reload:
    description: Also set the live value when it differs.
    type: bool
    default: true
  ignoreerrors:
    description: A parameter the running kernel does not have is a warning, not a failure.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Larger memory map count for training jobs
  gpuops.gpu.sysctl:
    name: vm.max_map_count
    value: "6553000"
    sysctl_file: /etc/sysctl.d/90-gpuops-training.conf
"""

RETURN = r"""
live_before:
  description: The running kernel's value before the change (normalised); null when absent.
  returned: always
  type: str
live_after:
  description: The running kernel's value after the change (normalised).
  returned: always
  type: str
"""

import re
from pathlib import Path
from typing import Any

from ansible.module_utils.basic import AnsibleModule

_NAME = re.compile(r"^[a-z0-9_]+(\.[a-zA-Z0-9_-]+)+$")
_HEADER = "# Managed by gpuops.gpu.sysctl (gpu-ops); edit the inventory, not this file.\n"


def normalise(value: object) -> str:
    """A value as the kernel compares it: fields separated by single spaces."""
    return " ".join(str(value).split())


def proc_path(name: str, root: str = "/proc/sys") -> str:
    return str(Path(root).joinpath(*name.split(".")))


def _key_of(line: str) -> str | None:
    stripped = line.strip()
    if not stripped or stripped[0] in "#;" or "=" not in stripped:
        return None
    return stripped.split("=", 1)[0].strip().lstrip("-")


def edit(text: str, name: str, value: str | None, state: str) -> str:
    """The file text with exactly one line for ``name`` (present) or none (absent)."""
    lines = text.splitlines(True) if text else []
    out = []
    written = False
    for line in lines:
        if _key_of(line) != name:
            out.append(line if line.endswith("\n") else line + "\n")
            continue
        if state == "present" and not written:
            out.append(f"{name} = {value}\n")
            written = True
    if state == "present" and not written:
        if not out:
            out.append(_HEADER)
        out.append(f"{name} = {value}\n")
    return "".join(out)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _write_file(module: AnsibleModule, path: str, text: str) -> None:
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(f"{path}.gpuops-tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.chmod(0o644)
    except OSError as exc:
        module.fail_json(msg=f"cannot write {path}: {exc.strerror}")
    module.atomic_move(str(tmp), path)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "value": {"type": "str"},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "sysctl_file": {"type": "path", "default": "/etc/sysctl.d/90-gpuops.conf"},
            "reload": {"type": "bool", "default": True},
            "ignoreerrors": {"type": "bool", "default": False},
        },
        required_if=[("state", "present", ("value",))],
        supports_check_mode=True,
    )
    p = module.params
    name, state = p["name"], p["state"]
    if not _NAME.match(name):
        module.fail_json(msg=f"{name!r} is not a kernel parameter like vm.max_map_count")
    value = normalise(p["value"]) if p["value"] is not None else ""
    if state == "present" and not value:
        module.fail_json(msg=f"{name}: value must not be empty")
    result: dict[str, Any] = {
        "changed": False,
        "name": name,
        "live_before": None,
        "live_after": None,
    }

    try:
        before = _read(p["sysctl_file"])
    except OSError as exc:
        module.fail_json(msg=f"cannot read {p['sysctl_file']}: {exc.strerror}")
    after = edit(before or "", name, value, state)
    if after != (before or "") and not (before is None and state == "absent"):
        result["changed"] = True
        result["diff"] = {
            "before": before or "",
            "after": after,
            "before_header": p["sysctl_file"],
            "after_header": p["sysctl_file"],
        }
        if not module.check_mode:
            _write_file(module, p["sysctl_file"], after)

    if state == "present" and p["reload"]:
        path = proc_path(name)
        live = _read(path)
        if live is None:
            message = f"{name}: the running kernel has no such parameter ({path} is missing)"
            if not p["ignoreerrors"]:
                module.fail_json(msg=message, **result)
            module.warn(message)
        else:
            result["live_before"] = result["live_after"] = normalise(live)
            if normalise(live) != value:
                result["changed"] = True
                result["live_after"] = value
                if not module.check_mode:
                    try:
                        Path(path).write_text(f"{value}\n", encoding="utf-8")
                    except OSError as exc:
                        module.fail_json(msg=f"{name}: cannot set {value!r}: {exc}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
