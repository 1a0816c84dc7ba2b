"""Filters of the gpu_inspect role: judge what ``files/gpu-inspect.sh`` printed on a node.

The parsing and the thresholds are gpuops' own (``gpuops.core.gpuparse`` and
``gpuops.core.gpuhealth``), so the role and ``gpuops nodes inspect`` give the same verdicts:
this content ships inside the gpuops wheel, whose Python runs ansible-playbook.

``gpu_inspect_health(stdout, host, expected_gpus, thresholds)`` returns the host's health as
``gpuops nodes inspect`` reports it (status, per-GPU readings, findings, Xid events).
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from gpuops.core import gpuhealth, gpuparse
from gpuops.errors import InvalidInput


def gpu_inspect_health(
    stdout: str, host: str, expected_gpus: Any = 0, thresholds: Any = None
) -> dict[str, Any]:
    try:
        limits = gpuhealth.Thresholds.from_mapping(
            dict(thresholds) if thresholds else None, f"host {host}"
        )
    except InvalidInput as exc:
        raise AnsibleFilterError(f"gpu_inspect_health: {exc.message}") from None
    expected = int(expected_gpus or 0)
    try:
        raw = gpuparse.split_sections(str(stdout))
    except gpuparse.ParseError as exc:
        health = gpuhealth.unreachable(str(host), str(exc), expected, limits)
        health.status = gpuhealth.CRITICAL
        health.findings[0].check = "inspection-failed"
        return health.to_dict()
    return gpuhealth.evaluate(str(host), raw, expected, limits).to_dict()


class FilterModule:
    """gpu_inspect filters."""

    def filters(self) -> dict[str, Any]:
        return {"gpu_inspect_health": gpu_inspect_health}
