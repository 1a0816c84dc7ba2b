"""Filters of the gpu_inspect role: parse ``nvidia-smi --query-gpu`` CSV and judge it.

``gpu_inspect_parse_csv(stdout, fields)`` turns the output of
``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`` into one dict per GPU, keyed
by the field name with dots replaced by underscores (``temperature.gpu`` -> ``temperature_gpu``).
Numbers become int/float, ``Yes``/``No`` become booleans, ``[N/A]``, bare ``N/A``,
``[Not Supported]`` and ``[Requested functionality has been deprecated]`` become ``None``.

``gpu_inspect_findings(gpus, max_temperature_c, max_uncorrected_ecc)`` lists what is wrong:
over temperature, uncorrected ECC errors over the limit, remapped rows pending or failed.
"""

from __future__ import annotations

import csv
import re
from typing import Any

from ansible.errors import AnsibleFilterError

_MISSING = re.compile(r"^\[.*\]$|^N/A$")
_INT = re.compile(r"^-?\d+$")
_FLOAT = re.compile(r"^-?\d+\.\d+$")
_BOOL = {"Yes": True, "No": False}
# fields whose values are text even when they look like numbers
_TEXT_FIELDS = {"name", "uuid", "serial", "pci.bus_id", "driver_version", "vbios_version"}
_UNCORRECTED_ECC = (
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total",
)


def _key(field: str) -> str:
    return field.replace(".", "_")


def _value(field: str, raw: str) -> Any:
    if _MISSING.match(raw):
        return None
    if field in _TEXT_FIELDS:
        return raw
    if raw in _BOOL:
        return _BOOL[raw]
    if _INT.match(raw):
        return int(raw)
    if _FLOAT.match(raw):
        return float(raw)
    return raw


def gpu_inspect_parse_csv(stdout: str, fields: list[str]) -> list[dict[str, Any]]:
    """One dict per non-empty line; the columns must match ``fields`` one to one."""
    if isinstance(fields, str) or not fields:
        raise AnsibleFilterError(f"gpu_inspect_parse_csv: fields must be a list, got {fields!r}")
    gpus = []
    lines = [line for line in str(stdout).splitlines() if line.strip()]
    for number, row in enumerate(csv.reader(lines, skipinitialspace=True), start=1):
        if len(row) != len(fields):
            raise AnsibleFilterError(
                f"gpu_inspect_parse_csv: line {number} has {len(row)} columns, expected "
                f"{len(fields)} ({','.join(fields)}): {lines[number - 1]!r}"
            )
        gpus.append({_key(f): _value(f, raw.strip()) for f, raw in zip(fields, row, strict=True)})
    return gpus


def gpu_inspect_findings(
    gpus: list[dict[str, Any]], max_temperature_c: int, max_uncorrected_ecc: int
) -> list[dict[str, Any]]:
    """Findings per GPU; a check whose field was not queried or is ``[N/A]`` is skipped."""
    findings = []

    def add(gpu: dict[str, Any], check: str, value: Any, limit: Any, message: str) -> None:
        findings.append(
            {
                "gpu": gpu.get("index"),
                "uuid": gpu.get("uuid"),
                "check": check,
                "value": value,
                "limit": limit,
                "message": message,
            }
        )

    for gpu in gpus:
        temp = gpu.get("temperature_gpu")
        if isinstance(temp, (int, float)) and temp > int(max_temperature_c):
            add(
                gpu,
                "temperature",
                temp,
                int(max_temperature_c),
                f"GPU {gpu.get('index')} at {temp} C, over {max_temperature_c} C",
            )
        for field in _UNCORRECTED_ECC:
            count = gpu.get(_key(field))
            if isinstance(count, int) and count > int(max_uncorrected_ecc):
                add(
                    gpu,
                    "uncorrected_ecc",
                    count,
                    int(max_uncorrected_ecc),
                    f"GPU {gpu.get('index')} has {count} uncorrected ECC errors ({field})",
                )
                break
        for field, check in (
            ("remapped_rows.pending", "remapped_rows_pending"),
            ("remapped_rows.failure", "remapped_rows_failure"),
        ):
            if gpu.get(_key(field)) is True:
                add(
                    gpu,
                    check,
                    True,
                    False,
                    f"GPU {gpu.get('index')}: {field} is Yes (reset or drain the GPU)",
                )
    return findings


class FilterModule:
    """gpu_inspect filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "gpu_inspect_parse_csv": gpu_inspect_parse_csv,
            "gpu_inspect_findings": gpu_inspect_findings,
        }
