"""Filters of the nvidia_driver role: read what ``files/driver-state.sh`` printed on a node and
decide what the role does there.

The reading and the decision are gpuops' own (``gpuops.core.driverstate``), so the role and
``gpuops nodes update``'s plan decide the same way from the same script: this content ships
inside the gpuops wheel, whose Python runs ansible-playbook.

``nvidia_driver_state(stdout, version, fabricmanager_version, container_toolkit_version)``:
the decision as a dict (``loaded``, ``installed``, ``needs_install``, ``pending``,
``fm_installed``, ``fm_needs_install``, ``fm_needs_start``, ``ctk_needs_install``,
``nouveau_loaded``) plus ``complete`` (the script's output was read to its end) and
``lsmod_message``. ``nvidia_driver_prereqs(stdout, host, headers_paths)``: the installer's
prerequisites (``release``, ``searched``, ``found``, ``missing_tools``, ``headers_message``,
``tools_message``: "" when nothing is missing).
"""

from __future__ import annotations

from typing import Any

from gpuops.core import driverstate


def nvidia_driver_state(
    stdout: Any, version: Any, fabricmanager: Any = "", container_toolkit: Any = "", host: Any = ""
) -> dict[str, Any]:
    reading = driverstate.parse(str(stdout))
    decided = driverstate.decide(
        reading, str(version), str(fabricmanager or ""), str(container_toolkit or "")
    )
    return {
        **decided.to_dict(),
        "complete": reading.complete,
        "lsmod_message": driverstate.lsmod_message(reading, str(host)),
    }


def nvidia_driver_prereqs(stdout: Any, host: Any, headers_paths: Any) -> dict[str, Any]:
    reading = driverstate.parse(str(stdout))
    paths = [str(p) for p in headers_paths or []]
    return driverstate.prereqs(reading, str(host), paths).to_dict()


class FilterModule:
    """nvidia_driver filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "nvidia_driver_state": nvidia_driver_state,
            "nvidia_driver_prereqs": nvidia_driver_prereqs,
        }
