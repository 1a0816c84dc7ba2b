"""The gpu_inspect role's filter plugin: the role judges a node exactly as
`gpuops nodes inspect` does (the same core), from the same script's output.

The plugin is a file inside the role, not a module of the gpuops package: imported by path.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from ansible.errors import AnsibleFilterError
from test_gpuhealth import output

from gpuops.core import gpuhealth, gpuparse
from gpuops_lab import gpus
from gpuops_lab.spec import GpuHost

PLUGIN = (
    Path(__file__).resolve().parents[3] / "ansible/roles/gpu_inspect/filter_plugins/gpu_inspect.py"
)
FAULTY = GpuHost("gpu-a100-03", "a100-80g", "535.161.08", "gpu_a100", faulty=True)


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_inspect_filters", PLUGIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


plugin = _load()


def test_the_role_and_the_cli_give_the_same_verdict() -> None:
    text = output(gpus.host_state(FAULTY))
    role = plugin.gpu_inspect_health(text, "gpu-a100-03", 8, {})
    cli = gpuhealth.evaluate(
        "gpu-a100-03", gpuparse.split_sections(text), 8, gpuhealth.Thresholds()
    ).to_dict()
    assert role == cli
    assert role["status"] == "critical" and role["gpu_count"] == 8
    assert plugin.FilterModule().filters() == {"gpu_inspect_health": plugin.gpu_inspect_health}


def test_group_thresholds_apply_and_bad_ones_fail_the_task() -> None:
    text = output(gpus.host_state(FAULTY))
    calm = plugin.gpu_inspect_health(
        text, "h", "8", {"temperature_warning_c": 95, "temperature_critical_c": 99}
    )
    assert "temperature" not in {f["check"] for f in calm["findings"]}
    with pytest.raises(AnsibleFilterError, match="unknown threshold"):
        plugin.gpu_inspect_health(text, "h", 8, {"temp": 1})


def test_incomplete_output_is_a_critical_inspection_failure() -> None:
    doc = plugin.gpu_inspect_health("@@gpuops gpus rc=0\n", "h", 8, None)
    assert doc["status"] == "critical"
    assert doc["findings"][0]["check"] == "inspection-failed"
