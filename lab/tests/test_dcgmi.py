"""The lab's dcgmi (a stand-in for DCGM's, labelled so in docs/VALIDATION.md) read by
gpuops' own parser: both JSON layouts, failing GPUs named with DCGM's texts, exit codes.

Expected shapes come from DCGM's sources (lab/src/gpuops_lab/DCGMI-SOURCES.md); the public
table rows below are from NVIDIA/DCGM#253 (4.2.3) and NVIDIA/go-dcgm#52 (3.3.1).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from gpuops.core import dcgmdiag
from gpuops_lab import dcgmi, fleetfiles, gpus
from gpuops_lab.spec import GpuHost

A100 = GpuHost(name="gpu-a100-01", model="a100-80g", driver="535.161.08", group="gpu_a100")
H800 = GpuHost(name="gpu-h800-01", model="h800", driver="550.90.07", group="gpu_h800")
L40S = GpuHost(name="gpu-l40s-01", model="l40s", driver="550.90.07", group="gpu_l40s")


def state(host: GpuHost, **dcgm: Any) -> dict[str, Any]:
    s = gpus.host_state(host)
    if dcgm:
        s["dcgm"] = dcgm
    return s


def diag(st: dict[str, Any], level: int, *, as_json: bool = True) -> tuple[str, int]:
    return dcgmi.run(["diag", "-r", str(level), *(["-j"] if as_json else [])], st)


def test_the_default_split_runs_both_layouts() -> None:
    assert dcgmi.dcgm_config(state(A100))["version"] == "3.3.9"
    assert dcgmi.dcgm_config(state(H800))["version"] == "4.1.1"
    assert dcgmi.dcgm_config(state(L40S))["version"] == "4.1.1"


@pytest.mark.parametrize(
    ("host", "layout", "version"),
    [(A100, dcgmdiag.LAYOUT_3, "3.3.9"), (H800, dcgmdiag.LAYOUT_4, "4.1.1")],
)
@pytest.mark.parametrize("level", [1, 2, 3])
def test_a_healthy_host_passes_at_every_level(
    host: GpuHost, layout: str, version: str, level: int
) -> None:
    out, code = diag(state(host), level)
    r = dcgmdiag.parse(out, rc=code, level=level)
    assert code == 0
    assert r.passed, r.message
    assert (r.layout, r.dcgm_version) == (layout, version)
    per_gpu = [t for t in r.tests if t.gpus]
    assert all(sorted(t.gpus, key=int) == [str(i) for i in range(8)] for t in per_gpu)
    assert r.message.endswith(" on 8 GPU(s)")
    assert dcgmdiag.parse(out, rc=code, level=level, expected_gpus=8).passed
    assert not dcgmdiag.parse(out, rc=code, level=level, expected_gpus=7).passed
    if level == 1:
        assert r.message.startswith(f"dcgmi diag -r 1 (DCGM {version}): passed")


def test_a_failing_gpu_is_named_in_the_3x_layout() -> None:
    st = state(A100, failing={"3": ["memory"], "5": ["pcie"]})
    out, code = diag(st, 2)
    doc = json.loads(out)
    assert "DCGM GPU Diagnostic" in doc and doc["version"] == "3.3.9"
    memory = doc["DCGM GPU Diagnostic"]["test_categories"][2]["tests"][0]
    assert memory["name"] == "GPU Memory"
    assert memory["results"][3] == {
        "gpu_id": "3",
        "status": "Fail",
        "warnings": [
            {
                "error_category": 10,
                "error_id": 52,
                "error_severity": 2,
                "warning": "Found 4 faulty memory elements on GPU 3",
            }
        ],
    }
    assert code == dcgmi.EXIT_ISOLATE == 205
    r = dcgmdiag.parse(out, rc=code, level=2)
    assert not r.passed
    assert [(f.test, f.gpu) for f in r.failures] == [("PCIe", 5), ("GPU Memory", 3)]
    assert r.message == (
        "dcgmi diag -r 2 (DCGM 3.3.9): PCIe on GPU 5: Detected more than 8 PCIe replays per "
        "minute for GPU 5 : 14; GPU Memory on GPU 3: Found 4 faulty memory elements on GPU 3"
    )


def test_a_failing_gpu_is_named_in_the_4x_layout() -> None:
    st = state(H800, failing={"3": ["memory", "targeted_power"]})
    out, code = diag(st, 3)
    doc = json.loads(out)
    assert doc["metadata"] == {"Driver Version Detected": "550.90.07", "version": "4.1.1"}
    hardware = doc["DCGM Diagnostic"]["test_categories"][1]
    assert hardware["category"] == "Hardware"
    memory = hardware["tests"][0]
    assert memory["test_summary"] == {"status": "Fail"}
    assert memory["results"][3]["entity_group"] == "GPU"
    assert memory["results"][3]["entity_id"] == 3
    assert memory["results"][2]["status"] == "Pass"
    r = dcgmdiag.parse(out, rc=code, level=3)
    assert not r.passed
    assert [f.text() for f in r.failures] == [
        "memory on GPU 3: Found 4 faulty memory elements on GPU 3",
        "targeted_power on GPU 3: Max power of 287.4 did not reach desired power minimum "
        "target_power of 380.0 for GPU 3",
    ]


def test_a_failing_software_test_is_a_deployment_failure_in_3x() -> None:
    out, code = diag(state(L40S, version="3.3.9", failing={"2": ["software"]}), 1)
    assert code == dcgmi.EXIT_NVVS_ERROR == 226  # its priority is RESET, not ISOLATE
    r = dcgmdiag.parse(out, rc=code, level=1)
    assert [(f.category, f.test, f.gpu, f.info) for f in r.failures] == [
        (
            "Deployment",
            "Page Retirement/Row Remap",
            2,
            "GPU 2 had memory errors and row remappings are pending",
        )
    ]


def test_a_test_the_level_does_not_run_cannot_fail() -> None:
    out, code = diag(state(H800, failing={"3": ["memory"]}), 1)
    assert code == 0
    assert dcgmdiag.parse(out, rc=code, level=1).passed


def test_the_4x_table_rows_are_those_of_a_public_sample() -> None:
    """Rows of NVIDIA/DCGM#253 (4.2.3), ours with the lab's version and driver."""
    out, code = diag(state(L40S), 1, as_json=False)
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == "Successfully ran diagnostic for group."
    assert "| DCGM Version              | 4.1.1                                          |" in lines
    assert "|-----  Deployment  --------+------------------------------------------------|" in lines
    assert "| software                  | Pass                                           |" in lines
    assert "|                           | GPU0: Pass                                     |" in lines
    assert all(len(line) == 78 for line in lines[1:])
    failing, _ = diag(state(L40S, failing={"1": ["software"]}), 1, as_json=False)
    assert "|                           | GPU1: Fail                                     |" in (
        failing.splitlines()
    )
    assert "| Warning: GPU1             | GPU 1 had memory errors and row remappings ar  |" in (
        failing.splitlines()
    )


def test_the_3x_table_rows_are_those_of_a_public_sample() -> None:
    """Rows of NVIDIA/go-dcgm#52 (3.3.1)."""
    out, _ = diag(state(A100, failing={"3": ["memory"]}), 2, as_json=False)
    lines = out.splitlines()
    assert "| Permissions and OS Blocks | Pass                                           |" in lines
    assert "| Page Retirement/Row Remap | Pass                                           |" in lines
    assert "| PCIe                      | Pass - All                                     |" in lines
    assert "| GPU Memory                | Pass - GPUs: 0, 1, 2, 4, 5, 6, 7               |" in lines
    assert "|                           | Fail - GPU: 3                                  |" in lines
    assert "| Warning                   | Found 4 faulty memory elements on GPU 3        |" in lines


def test_version_and_errors() -> None:
    assert dcgmi.run(["--version"], state(A100)) == ("\ndcgmi  version: 3.3.9\n\n", 0)
    assert dcgmi.run(["-v"], state(H800))[0].startswith("Version : 4.1.1\nBuild ID : ")
    no_driver = {**state(H800), "driver": None}
    out, code = diag(no_driver, 1)
    assert (out, code) == (dcgmi.NO_NVML, 200)
    assert "not JSON" in dcgmdiag.parse(out, rc=code, level=1).message
    pending = {**state(H800), "loaded_driver": "535.161.08"}
    assert diag(pending, 1)[1] == 200
    assert dcgmi.run(["diag", "-r", "4"], state(H800))[1] == dcgmi.EXIT_PARSE
    assert dcgmi.run(["diag", "-j"], state(H800))[1] == dcgmi.EXIT_PARSE
    assert dcgmi.run(["discovery", "-l"], state(H800))[1] == dcgmi.EXIT_PARSE


def test_the_host_script_runs_on_the_standard_library_alone(tmp_path: Any) -> None:
    script = tmp_path / "dcgmi"
    script.write_text(fleetfiles.dcgmi_script())
    done = subprocess.run(
        [sys.executable, "-IS", str(script), "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "\ndcgmi  version: 4.1.1\n\n")
    bad = subprocess.run(
        [sys.executable, "-IS", str(script), "diag"], capture_output=True, text=True, check=False
    )
    assert (bad.returncode, bad.stdout) == (1, "")
    assert "PARSE ERROR" in bad.stderr
