"""GPU node health: thresholds per inventory group, findings per GPU and per host (S-16).

:func:`evaluate` turns one node's parsed inspection (:mod:`gpuops.core.gpuparse`) into a
:class:`HostHealth`: per GPU its readings (temperature, memory, utilisation, ECC, retired
pages or remapped rows, NVLink state and errors, fan, power, throttling, Xid events) and
findings; per host nvidia-smi's own failure (classified), a GPU missing from the list, NIC
error counters and disk free. Each finding has a severity, ``warning`` or ``critical``; a
host's status is its worst finding (``ok`` without any). Pure.

The rooms: :mod:`.model` (severities and their one ranking, thresholds, findings, a host's
health), :mod:`.gpu` (the GPU checks), :mod:`.host` (the host checks) and
:mod:`.evaluation` (one node through every check). Each check is a small function that
returns its findings; a new one is added to ``GPU_CHECKS`` or ``HOST_CHECKS``.
"""

from __future__ import annotations

from gpuops.core.gpuhealth.evaluation import evaluate, unreachable
from gpuops.core.gpuhealth.model import (
    CRITICAL,
    HOST_ONLY_CHECKS,
    OK,
    RANK,
    UNREACHABLE,
    WARNING,
    Finding,
    HostHealth,
    Thresholds,
    worst,
)

__all__ = [
    "CRITICAL",
    "HOST_ONLY_CHECKS",
    "OK",
    "RANK",
    "UNREACHABLE",
    "WARNING",
    "Finding",
    "HostHealth",
    "Thresholds",
    "evaluate",
    "unreachable",
    "worst",
]
