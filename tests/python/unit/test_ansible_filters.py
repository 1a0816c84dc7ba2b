"""The gpu_inspect role's filter plugin on real-shaped nvidia-smi CSV (shared/docs/NVIDIA_SMI.md).

The plugin is a file inside the role, not part of the gpuops package: imported by path.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from ansible.errors import AnsibleFilterError

PLUGIN = Path(__file__).resolve().parents[3] / "ansible/roles/gpu_inspect/filter_plugins/nvsmi.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_inspect_nvsmi", PLUGIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


nvsmi = _load()

FIELDS = [
    "index",
    "name",
    "uuid",
    "driver_version",
    "temperature.gpu",
    "temperature.memory",
    "fan.speed",
    "power.draw",
    "memory.total",
    "ecc.errors.uncorrected.volatile.total",
    "retired_pages.pending",
    "remapped_rows.pending",
]
#: --format=csv,noheader,nounits: ", " separated, [N/A] on SXM fans and H100 retired pages,
#: bare N/A for temperature.memory on L40S
H100_OK = (
    "0, NVIDIA H100 80GB HBM3, GPU-513536b6-7d19-9063-b049-1e69664bb298, 550.90.07, 31, 40, "
    "[N/A], 69.85, 81559, 0, [N/A], No"
)
L40S_HOT = (
    "3, NVIDIA L40S, GPU-d8594bd4-0fc3-8595-e355-7c98138f3b95, 550.90.07, 91, N/A, 30, "
    "120.50, 46068, 2, [N/A], Yes"
)


def test_parse_types_values_and_maps_missing_to_none() -> None:
    gpus = nvsmi.gpu_inspect_parse_csv(H100_OK + "\n" + L40S_HOT + "\n", FIELDS)
    assert gpus[0] == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-513536b6-7d19-9063-b049-1e69664bb298",
        "driver_version": "550.90.07",
        "temperature_gpu": 31,
        "temperature_memory": 40,
        "fan_speed": None,
        "power_draw": 69.85,
        "memory_total": 81559,
        "ecc_errors_uncorrected_volatile_total": 0,
        "retired_pages_pending": None,
        "remapped_rows_pending": False,
    }
    assert gpus[1]["temperature_memory"] is None
    assert gpus[1]["remapped_rows_pending"] is True
    assert gpus[1]["power_draw"] == 120.5


def test_deprecated_and_unsupported_values_are_none() -> None:
    line = "0, [Requested functionality has been deprecated], [Not Supported]"
    gpus = nvsmi.gpu_inspect_parse_csv(line, ["index", "fan.speed", "power.draw"])
    assert gpus == [{"index": 0, "fan_speed": None, "power_draw": None}]


def test_blank_output_means_no_gpus() -> None:
    assert nvsmi.gpu_inspect_parse_csv("\n", FIELDS) == []


def test_column_count_mismatch_names_the_line_and_fields() -> None:
    with pytest.raises(AnsibleFilterError, match=r"line 2 has 3 columns, expected 12"):
        nvsmi.gpu_inspect_parse_csv(H100_OK + "\n0, 1, 2\n", FIELDS)
    with pytest.raises(AnsibleFilterError, match="fields must be a list"):
        nvsmi.gpu_inspect_parse_csv(H100_OK, "index,name")


def test_findings_over_limits_only() -> None:
    gpus = nvsmi.gpu_inspect_parse_csv(H100_OK + "\n" + L40S_HOT, FIELDS)
    findings = nvsmi.gpu_inspect_findings(gpus, 85, 0)
    assert [(f["gpu"], f["check"], f["value"]) for f in findings] == [
        (3, "temperature", 91),
        (3, "uncorrected_ecc", 2),
        (3, "remapped_rows_pending", True),
    ]
    assert findings[0]["limit"] == 85
    assert findings[0]["uuid"] == "GPU-d8594bd4-0fc3-8595-e355-7c98138f3b95"
    # the limits are the role's thresholds, not constants
    assert nvsmi.gpu_inspect_findings(gpus[1:], 95, 5)[0]["check"] == "remapped_rows_pending"
    assert len(nvsmi.gpu_inspect_findings(gpus[1:], 95, 5)) == 1


def test_findings_skip_missing_values() -> None:
    gpus = nvsmi.gpu_inspect_parse_csv(
        "0, [N/A], [N/A]", ["index", "temperature.gpu", "ecc.errors.uncorrected.volatile.total"]
    )
    assert nvsmi.gpu_inspect_findings(gpus, 85, 0) == []


def test_plugin_exposes_both_filters() -> None:
    assert set(nvsmi.FilterModule().filters()) == {"gpu_inspect_parse_csv", "gpu_inspect_findings"}
