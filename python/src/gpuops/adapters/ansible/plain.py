"""Ansible's tagged values (ansible-core 2.19 tags strings and containers) as plain Python
values, for what gpuops reads from an inventory and what a task's diff says."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _plain(value: Any) -> Any:
    """Ansible's tagged values as plain Python values."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bool | None):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)
