"""Filters of the nvidia_driver role: judge what ``dcgmi diag -r N -j`` printed on a node.

The parsing is gpuops' own (``gpuops.core.dcgmdiag``), so the role and gpuops read DCGM the
same way: this content ships inside the gpuops wheel, whose Python runs ansible-playbook.

``gpuops_dcgm_diag(stdout, rc, host, level, expected_gpus)`` returns the verdict as a dict
(``expected_gpus``: the host's GPU count, None or 0 when not known): ``passed``,
``dcgm_version``, ``layout``, ``level``, ``tests``, ``failures`` (test, entity, gpu, info) and
``message``. A failed verdict's message starts ``validation failed on <host>:`` and names
every failed test per GPU (the role's fail_msg); a passed one starts ``validation passed on
<host>:``. Unknown layouts, empty or invalid output and unreadable results fail.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from gpuops.core import dcgmdiag


def gpuops_dcgm_diag(
    stdout: Any, rc: Any, host: Any, level: Any = 1, expected_gpus: Any = None
) -> dict[str, Any]:
    try:
        lvl = int(level)
        code = int(rc)
        gpus = None if expected_gpus in (None, "") else int(expected_gpus)
    except (TypeError, ValueError):
        raise AnsibleFilterError(
            f"gpuops_dcgm_diag: rc {rc!r}, level {level!r} and expected_gpus"
            f" {expected_gpus!r} must be integers"
        ) from None
    if lvl not in dcgmdiag.LEVEL_TESTS:
        raise AnsibleFilterError(f"gpuops_dcgm_diag: level {lvl} is not 1, 2 or 3")
    if gpus is not None and gpus < 0:
        raise AnsibleFilterError(f"gpuops_dcgm_diag: expected_gpus {gpus} is negative")
    result = dcgmdiag.parse(
        str(stdout or ""), rc=code, level=lvl, expected_gpus=gpus or None
    ).to_dict()
    verdict = "passed" if result["passed"] else "failed"
    result["message"] = f"validation {verdict} on {host}: {result['message']}"
    return result


class FilterModule:
    """nvidia_driver filters."""

    def filters(self) -> dict[str, Any]:
        return {"gpuops_dcgm_diag": gpuops_dcgm_diag}
