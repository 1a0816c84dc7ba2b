"""The DCGM diag parser (gpuops.core.dcgmdiag) and the nvidia_driver role's filter over it.

The samples in data/dcgm/ are DCGM's two JSON layouts (3.3: ``gpu_id``; 4.x: ``entity_*``),
excerpts of public posts and composed ones, each labelled in data/dcgm/SOURCES.md. Anything
gpuops cannot read must come out as a failed validation, never a pass.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gpuops.core import dcgmdiag

DATA = Path(__file__).parent / "data" / "dcgm"
PLUGIN = (
    Path(__file__).resolve().parents[3] / "ansible/roles/nvidia_driver/filter_plugins/dcgm_diag.py"
)


def sample(name: str) -> str:
    return (DATA / name).read_text()


# -- DCGM 3.3 ---------------------------------------------------------------------------------
def test_a_3x_level_1_run_that_passed_is_a_pass() -> None:
    r = dcgmdiag.parse(sample("dcgm3-r1-pass.json"), rc=0, level=1)
    assert r.passed, r.message
    assert (r.layout, r.dcgm_version, r.level) == (dcgmdiag.LAYOUT_3, "3.3.1", 1)
    assert [t.name for t in r.tests][:2] == ["Denylist", "NVML Library"]
    assert {t.status for t in r.tests} == {"pass"}
    assert r.failures == ()
    assert r.message == "dcgmi diag -r 1 (DCGM 3.3.1): passed: 9 test(s) on 2 GPU(s)"


def test_a_3x_failure_names_each_test_with_its_gpu_and_text() -> None:
    r = dcgmdiag.parse(sample("dcgm3-r2-fail.json"), rc=205, level=2)
    assert not r.passed
    assert [(f.test, f.gpu, f.info, f.error_ids) for f in r.failures] == [
        (
            "Page Retirement/Row Remap",
            1,
            "GPU 1 had memory errors and row remappings are pending",
            (85,),
        ),
        ("GPU Memory", 1, "Found 4 faulty memory elements on GPU 1", (52,)),
    ]
    assert r.message == (
        "dcgmi diag -r 2 (DCGM 3.3.1): Page Retirement/Row Remap on GPU 1: GPU 1 had memory "
        "errors and row remappings are pending; GPU Memory on GPU 1: Found 4 faulty memory "
        "elements on GPU 1"
    )
    memory = next(t for t in r.tests if t.name == "GPU Memory")
    assert (memory.category, memory.status, memory.gpus) == (
        "Hardware",
        "fail",
        {"0": "pass", "1": "fail"},
    )


def test_gpu_ids_as_the_suites_parser_reads_them_name_every_gpu() -> None:
    doc = json.loads(sample("dcgm3-r2-fail.json"))
    memory = doc["DCGM GPU Diagnostic"]["test_categories"][2]["tests"][0]["results"][1]
    memory["gpu_ids"] = "1,3"
    del memory["gpu_id"]
    r = dcgmdiag.parse(json.dumps(doc), rc=205, level=2)
    assert [(f.test, f.gpu) for f in r.failures][1:] == [("GPU Memory", 1), ("GPU Memory", 3)]


def test_a_run_where_every_test_was_skipped_is_not_a_pass() -> None:
    """NVIDIA/DCGM#139: a 3.x -r 3 where every per-GPU test skipped."""
    r = dcgmdiag.parse(sample("dcgm3-r3-allskip-issue139.json"), rc=0, level=3)
    assert not r.passed
    assert r.message == "dcgmi diag -r 3 (DCGM 3.3.1): no test passed"
    assert {t.status for t in r.tests} == {"skip"}


# -- DCGM 4.x ---------------------------------------------------------------------------------
def test_a_4x_level_1_run_that_passed_is_a_pass() -> None:
    r = dcgmdiag.parse(sample("dcgm4-r1-pass.json"), rc=0, level=1)
    assert r.passed, r.message
    assert (r.layout, r.dcgm_version) == (dcgmdiag.LAYOUT_4, "4.2.3")
    assert [(t.category, t.name, t.gpus) for t in r.tests] == [
        ("Deployment", "software", {"0": "pass", "1": "pass", "2": "pass", "3": "pass"})
    ]
    assert r.message == "dcgmi diag -r 1 (DCGM 4.2.3): passed: 1 test(s) on 4 GPU(s)"


def test_a_4x_failure_names_the_test_the_gpu_and_its_warning() -> None:
    r = dcgmdiag.parse(sample("dcgm4-r2-fail.json"), rc=205, level=2)
    assert not r.passed
    assert [f.to_dict() for f in r.failures] == [
        {
            "test": "memory",
            "category": "Hardware",
            "entity": "GPU 1",
            "gpu": 1,
            "info": "Found 4 faulty memory elements on GPU 1",
            "error_ids": [52],
        }
    ]
    assert r.message == (
        "dcgmi diag -r 2 (DCGM 4.1.1): memory on GPU 1: Found 4 faulty memory elements on GPU 1"
    )
    assert [t.status for t in r.tests] == ["pass", "fail", "pass"]


def test_a_4x_summary_that_failed_without_a_failed_gpu_fails_the_host() -> None:
    doc = json.loads(sample("dcgm4-r1-pass.json"))
    test = doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]
    test["test_summary"] = {"status": "Fail", "warnings": [{"warning": "Fabric Manager down"}]}
    r = dcgmdiag.parse(json.dumps(doc), rc=226, level=1)
    assert not r.passed
    assert [(f.entity, f.gpu, f.info) for f in r.failures] == [
        ("host", None, "Fabric Manager down")
    ]
    assert r.message.endswith(": software: Fabric Manager down")


def test_a_failure_without_a_warning_says_its_info_or_status() -> None:
    doc = json.loads(sample("dcgm4-r2-fail.json"))
    res = doc["DCGM Diagnostic"]["test_categories"][1]["tests"][0]["results"][1]
    del res["warnings"]
    assert dcgmdiag.parse(json.dumps(doc), level=2).failures[0].info == (
        "Allocated 83618558100 bytes (98.4%)"
    )
    del res["info"]
    assert dcgmdiag.parse(json.dumps(doc), level=2).failures[0].info == "status Fail"


def test_warn_counts_as_a_failure() -> None:
    doc = json.loads(sample("dcgm4-r1-pass.json"))
    doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][2]["status"] = "Warn"
    r = dcgmdiag.parse(json.dumps(doc), rc=0, level=1)
    assert not r.passed
    assert [f.gpu for f in r.failures] == [2]


# -- what gpuops cannot read is a failure -------------------------------------------------------
@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        ("", "dcgmi diag -r 1: dcgmi printed nothing"),
        ("   \n", "dcgmi diag -r 1: dcgmi printed nothing"),
        ("{not json", "dcgmi diag -r 1: output is not JSON: '{not json'"),
        ("[]", "dcgmi diag -r 1: unknown layout: the JSON is not an object"),
        ('{"other": 1}', "dcgmi diag -r 1: unknown layout: top keys ['other']"),
    ],
)
def test_empty_invalid_or_unknown_output_fails(stdout: str, expected: str) -> None:
    r = dcgmdiag.parse(stdout, rc=0, level=1)
    assert not r.passed
    assert r.message.startswith(expected)
    assert (r.layout, r.dcgm_version, r.tests) == (None, None, ())


def test_the_iterations_layout_is_unknown() -> None:
    r = dcgmdiag.parse(sample("unknown-iterations.json"), rc=0, level=1)
    assert not r.passed
    assert "unknown layout: top keys ['Overall Result', 'iterations']" in r.message


def test_a_dcgm_version_outside_the_pinned_ones_fails() -> None:
    r = dcgmdiag.parse(sample("unknown-version5.json"), rc=0, level=1)
    assert not r.passed
    assert r.message == (
        "dcgmi diag -r 1: DCGM 5.0.0 in the dcgm-4 layout is not supported "
        "(gpuops reads DCGM 3.3.x and 4.0.x to 4.6.x)"
    )
    for version in ("4.7.0", "4.10.1", "4", "4.6", "3.3.0.1x", "3.4.0"):
        doc4 = json.loads(sample("dcgm4-r1-pass.json"))
        doc4["metadata"]["version"] = version
        r4 = dcgmdiag.parse(json.dumps(doc4), level=1)
        assert not r4.passed, version
        assert r4.message.startswith(f"dcgmi diag -r 1: DCGM {version} in the dcgm-4 layout")
    for version in ("4.0.0", "4.1.1", "4.6.0", "4.6.12"):
        doc4["metadata"]["version"] = version
        assert dcgmdiag.parse(json.dumps(doc4), level=1).passed, version
    doc3 = json.loads(sample("dcgm3-r1-pass.json"))
    doc3["version"] = "4.1.1"
    assert "DCGM 4.1.1 in the dcgm-3 layout is not supported" in (
        dcgmdiag.parse(json.dumps(doc3), level=1).message
    )
    doc = json.loads(sample("dcgm3-r1-pass.json"))
    doc["version"] = "3.2.6"
    assert "DCGM 3.2.6 in the dcgm-3 layout is not supported" in (
        dcgmdiag.parse(json.dumps(doc), level=1).message
    )
    del doc["version"]
    assert "names no DCGM version" in dcgmdiag.parse(json.dumps(doc), level=1).message


def test_the_table_is_not_read_only_the_json() -> None:
    for name in ("dcgm3-r2-text-issue52.txt", "dcgm4-r2-text-issue253.txt"):
        r = dcgmdiag.parse(sample(name), rc=0, level=2)
        assert not r.passed
        assert "output is not JSON: 'Successfully ran diagnostic for group.'" in r.message


def test_a_runtime_error_fails_with_its_text() -> None:
    r = dcgmdiag.parse(sample("dcgm4-runtime-error.json"), rc=226, level=1)
    assert not r.passed
    assert r.message == (
        "dcgmi diag -r 1: DCGM 4.1.1: the diagnostic did not run: Error: Diagnostic could "
        "not be run while DCGM is paused. (exit 226: DCGM_ST_NVVS_ERROR: the diagnostic "
        "reported an error)"
    )


def _mutated(name: str, change: Any) -> str:
    doc = json.loads(sample(name))
    change(doc)
    return json.dumps(doc)


def _r4(doc: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][0]
    return result


@pytest.mark.parametrize(
    ("name", "change", "why"),
    [
        ("dcgm4-r1-pass.json", lambda d: _r4(d).update(status="Passed"), "unreadable status"),
        ("dcgm4-r1-pass.json", lambda d: _r4(d).pop("status"), "unreadable status None"),
        ("dcgm4-r1-pass.json", lambda d: _r4(d).pop("entity_id"), "names no entity"),
        ("dcgm4-r1-pass.json", lambda d: _r4(d).update(entity_id=-1), "unreadable entity"),
        (
            "dcgm4-r1-pass.json",
            lambda d: (
                [_r4(d).pop(k) for k in ("entity_id", "entity_group")] and _r4(d).update(gpu_id="0")
            ),
            "a 3.x result in the 4.x layout",
        ),
        (
            "dcgm4-r1-pass.json",
            lambda d: d["DCGM Diagnostic"]["test_categories"][0]["tests"][0].pop("test_summary"),
            "has no test_summary",
        ),
        (
            "dcgm4-r1-pass.json",
            lambda d: d["DCGM Diagnostic"]["test_categories"][0]["tests"][0].update(results={}),
            "results is not a list",
        ),
        (
            "dcgm4-r1-pass.json",
            lambda d: d["DCGM Diagnostic"].update(test_categories=[]),
            "no test_categories",
        ),
        (
            "dcgm3-r2-fail.json",
            lambda d: d["DCGM GPU Diagnostic"]["test_categories"][1]["tests"][0]["results"][
                0
            ].update(gpu_id="zero"),
            "unreadable GPU 'zero'",
        ),
        (
            "dcgm3-r2-fail.json",
            lambda d: d["DCGM GPU Diagnostic"]["test_categories"][1]["tests"][0]["results"][
                0
            ].update(entity_id=0),
            "a 4.x result in the 3.x layout",
        ),
        (
            "dcgm3-r1-pass.json",
            lambda d: d.update({"DCGM Diagnostic": d["DCGM GPU Diagnostic"]}),
            "unknown layout",
        ),
    ],
)
def test_a_result_gpuops_cannot_read_fails(name: str, change: Any, why: str) -> None:
    r = dcgmdiag.parse(_mutated(name, change), rc=0, level=None)
    assert not r.passed
    assert why in r.message


def test_a_non_zero_exit_fails_even_when_every_test_passed() -> None:
    r = dcgmdiag.parse(sample("dcgm4-r1-pass.json"), rc=226, level=1)
    assert not r.passed
    assert r.message == (
        "dcgmi diag -r 1 (DCGM 4.2.3): dcgmi exited 226 though no test failed "
        "(DCGM_ST_NVVS_ERROR: the diagnostic reported an error)"
    )


def test_a_level_whose_tests_are_missing_fails() -> None:
    r = dcgmdiag.parse(sample("dcgm4-r1-pass.json"), rc=0, level=2)
    assert not r.passed
    assert r.message.endswith("tests of level 2 missing from the output: memory, pcie")
    r3 = dcgmdiag.parse(sample("dcgm4-r2-fail.json").replace('"Fail"', '"Pass"'), level=3)
    assert r3.message.endswith(
        "missing from the output: diagnostic, memory_bandwidth, targeted_stress, targeted_power"
    )


# -- every test the level requires passed on every GPU the output lists ---------------------
def _body(doc: dict[str, Any]) -> dict[str, Any]:
    key = "DCGM Diagnostic" if "DCGM Diagnostic" in doc else "DCGM GPU Diagnostic"
    body: dict[str, Any] = doc[key]
    return body


def _entry(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for c in _body(doc)["test_categories"] for t in c["tests"] if t["name"] == name)


def _r2_passed() -> dict[str, Any]:
    """dcgm4-r2-fail.json with its failure turned into a pass: software, memory, pcie on 0, 1."""
    doc: dict[str, Any] = json.loads(sample("dcgm4-r2-fail.json").replace('"Fail"', '"Pass"'))
    assert dcgmdiag.parse(json.dumps(doc), level=2, expected_gpus=2).passed
    return doc


def test_a_level_whose_tests_were_all_skipped_fails_though_software_passed() -> None:
    doc = _r2_passed()
    for name in ("memory", "pcie"):
        for res in [*_entry(doc, name)["results"], _entry(doc, name)["test_summary"]]:
            res["status"] = "Skip"
            res.pop("warnings", None)
    r = dcgmdiag.parse(json.dumps(doc), rc=0, level=2)
    assert not r.passed
    assert r.message == (
        "dcgmi diag -r 2 (DCGM 4.1.1): memory did not pass on GPU 0 (skip), GPU 1 (skip); "
        "pcie did not pass on GPU 0 (skip), GPU 1 (skip)"
    )


def test_a_3x_run_with_deployment_passed_and_the_rest_skipped_fails() -> None:
    """NVIDIA/DCGM#139's skipped tests with the Deployment category and GPU list it elided."""
    doc = json.loads(sample("dcgm3-r3-allskip-issue139.json"))
    passed = json.loads(sample("dcgm3-r1-pass.json"))
    _body(doc)["test_categories"].insert(0, _body(passed)["test_categories"][0])
    doc["GPU Device IDs"] = ["1fb2"]
    r = dcgmdiag.parse(json.dumps(doc), rc=0, level=2)
    assert not r.passed
    assert r.message == (
        "dcgmi diag -r 2 (DCGM 3.3.1): memory did not pass on GPU 0 (skip); "
        "pcie did not pass on GPU 0 (skip)"
    )


def test_a_gpu_the_output_lists_without_a_result_fails() -> None:
    doc = _r2_passed()
    _entry(doc, "memory")["results"].pop(1)
    r = dcgmdiag.parse(json.dumps(doc), rc=0, level=2)
    assert not r.passed
    assert r.message == "dcgmi diag -r 2 (DCGM 4.1.1): memory has no result for GPU 1"
    _entry(doc, "memory")["results"].append({**_entry(doc, "pcie")["results"][1], "entity_id": 5})
    assert dcgmdiag.parse(json.dumps(doc), level=2).message == (
        "dcgmi diag -r 2 (DCGM 4.1.1): memory has no result for GPU 1; "
        "memory has results for GPU 5, not listed as tested"
    )
    doc3 = json.loads(sample("dcgm3-r2-fail.json").replace('"Fail"', '"Pass"'))
    assert dcgmdiag.parse(json.dumps(doc3), level=2, expected_gpus=2).passed
    _entry(doc3, "GPU Memory")["results"].pop(1)
    assert dcgmdiag.parse(json.dumps(doc3), level=2).message == (
        "dcgmi diag -r 2 (DCGM 3.3.1): memory has no result for GPU 1"
    )


def test_a_software_test_of_cpus_only_is_no_gpu_tested() -> None:
    doc = json.loads(sample("dcgm4-r1-pass.json"))
    for res in _entry(doc, "software")["results"]:
        res.update(entity_group="CPU", entity_group_id=7)
    r = dcgmdiag.parse(json.dumps(doc), rc=0, level=1)
    assert not r.passed
    assert r.message == (
        "dcgmi diag -r 1 (DCGM 4.2.3): software has no result for GPU 0, GPU 1, GPU 2, GPU 3"
    )
    doc["entity_groups"][0].update(entity_group="CPU", entity_group_id=7)
    assert dcgmdiag.parse(json.dumps(doc), level=1).message == (
        "dcgmi diag -r 1 (DCGM 4.2.3): the output lists no GPU"
    )


def test_an_output_without_its_gpu_list_fails() -> None:
    doc = json.loads(sample("dcgm4-r1-pass.json"))
    del doc["entity_groups"]
    assert dcgmdiag.parse(json.dumps(doc), level=1).message == (
        "dcgmi diag -r 1 (DCGM 4.2.3): the output lists no GPU"
    )
    doc3 = json.loads(sample("dcgm3-r1-pass.json"))
    del doc3["GPU Device IDs"]
    assert dcgmdiag.parse(json.dumps(doc3), level=1).message == (
        "dcgmi diag -r 1 (DCGM 3.3.1): the output lists no GPU"
    )
    doc["entity_groups"] = [{"entity_group": "GPU", "entities": [{"entity_id": "x"}]}]
    assert "unreadable entity_groups" in dcgmdiag.parse(json.dumps(doc), level=1).message


def test_the_gpu_count_must_be_the_expected_one() -> None:
    four = sample("dcgm4-r1-pass.json")
    assert dcgmdiag.parse(four, level=1, expected_gpus=4).passed
    r = dcgmdiag.parse(four, level=1, expected_gpus=8)
    assert not r.passed
    assert r.message == "dcgmi diag -r 1 (DCGM 4.2.3): DCGM tested 4 GPU(s), the host has 8"
    two = sample("dcgm3-r1-pass.json")
    assert dcgmdiag.parse(two, level=1, expected_gpus=2).passed
    assert dcgmdiag.parse(two, level=1, expected_gpus=1).message == (
        "dcgmi diag -r 1 (DCGM 3.3.1): DCGM tested 2 GPU(s), the host has 1"
    )
    with pytest.raises(ValueError, match="expected_gpus"):
        dcgmdiag.parse(four, level=1, expected_gpus=0)


def test_software_means_the_software_tests_not_any_deployment_test() -> None:
    doc = json.loads(sample("dcgm4-r1-pass.json"))
    _entry(doc, "software")["name"] = "not_software"
    r = dcgmdiag.parse(json.dumps(doc), level=1)
    assert not r.passed
    assert r.message.endswith("tests of level 1 missing from the output: software")
    doc3 = json.loads(sample("dcgm3-r1-pass.json"))
    for test in _body(doc3)["test_categories"][0]["tests"]:
        test["name"] = "Something " + test["name"]
    r3 = dcgmdiag.parse(json.dumps(doc3), level=1)
    assert not r3.passed
    assert r3.message.endswith("tests of level 1 missing from the output: software")
    doc3 = json.loads(sample("dcgm3-r1-pass.json"))
    _body(doc3)["test_categories"][0]["tests"].pop(0)
    assert dcgmdiag.parse(json.dumps(doc3), level=1).message.endswith(
        "software: Denylist missing from the output"
    )
    _entry(doc3, "Inforom")["results"][0]["status"] = "Skip"
    assert dcgmdiag.parse(json.dumps(doc3), level=1).message.endswith(
        "software: Denylist missing from the output; software: Inforom did not pass (skip)"
    )


def test_a_4x_test_that_did_not_run_fails_only_when_the_level_requires_it() -> None:
    """Diag.cpp (v4.1.1 HelperJsonBuildOutput) writes a test none of whose results ran as
    its name alone: no results, no test_summary."""
    doc = json.loads(sample("dcgm4-r1-pass.json"))
    _body(doc)["test_categories"].append({"category": "Hardware", "tests": [{"name": "memory"}]})
    r = dcgmdiag.parse(json.dumps(doc), rc=0, level=1)
    assert r.passed, r.message
    r2 = dcgmdiag.parse(json.dumps(doc), rc=0, level=2)
    assert not r2.passed
    assert r2.message == (
        "dcgmi diag -r 2 (DCGM 4.2.3): memory has no result for GPU 0, GPU 1, GPU 2, GPU 3; "
        "tests of level 2 missing from the output: pcie"
    )


def test_to_dict_is_plain_json() -> None:
    d = dcgmdiag.parse(sample("dcgm3-r2-fail.json"), rc=205, level=2).to_dict()
    assert json.loads(json.dumps(d)) == d
    assert sorted(d) == [
        "dcgm_version",
        "failures",
        "layout",
        "level",
        "message",
        "passed",
        "tests",
    ]


# -- the role's filter ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def plugin() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dcgm_diag_filters", PLUGIN)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_filter_is_registered_under_its_name(plugin: ModuleType) -> None:
    assert plugin.FilterModule().filters() == {"gpuops_dcgm_diag": plugin.gpuops_dcgm_diag}


def test_the_filter_message_starts_as_the_role_fail_msg_does(plugin: ModuleType) -> None:
    failed = plugin.gpuops_dcgm_diag(sample("dcgm4-r2-fail.json"), "205", "gpu-h800-01", "2")
    assert failed["passed"] is False
    assert failed["message"] == (
        "validation failed on gpu-h800-01: dcgmi diag -r 2 (DCGM 4.1.1): memory on GPU 1: "
        "Found 4 faulty memory elements on GPU 1"
    )
    assert failed["failures"][0]["gpu"] == 1
    passed = plugin.gpuops_dcgm_diag(sample("dcgm3-r1-pass.json"), 0, "gpu-a100-01", 1)
    assert passed["passed"] is True
    assert passed["message"].startswith("validation passed on gpu-a100-01: dcgmi diag -r 1")
    empty = plugin.gpuops_dcgm_diag("", 127, "gpu-a100-02", 1)
    assert (
        empty["message"]
        == "validation failed on gpu-a100-02: dcgmi diag -r 1: dcgmi printed nothing (exit 127)"
    )


def test_the_filter_refuses_a_bad_level_or_rc(plugin: ModuleType) -> None:
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match="level 4 is not 1, 2 or 3"):
        plugin.gpuops_dcgm_diag("{}", 0, "h", 4)
    with pytest.raises(AnsibleFilterError, match="must be integers"):
        plugin.gpuops_dcgm_diag("{}", "x", "h", 1)


def test_the_filter_checks_the_gpu_count_the_role_passes(plugin: ModuleType) -> None:
    from ansible.errors import AnsibleFilterError

    four = sample("dcgm4-r1-pass.json")
    assert plugin.gpuops_dcgm_diag(four, 0, "h", 1, 4)["passed"] is True
    assert plugin.gpuops_dcgm_diag(four, 0, "h", 1, None)["passed"] is True  # not known
    assert plugin.gpuops_dcgm_diag(four, 0, "h", 1, "0")["passed"] is True  # role default
    assert plugin.gpuops_dcgm_diag(four, 0, "h", 1, "8")["message"] == (
        "validation failed on h: dcgmi diag -r 1 (DCGM 4.2.3): DCGM tested 4 GPU(s), the host has 8"
    )
    with pytest.raises(AnsibleFilterError, match="must be integers"):
        plugin.gpuops_dcgm_diag(four, 0, "h", 1, "eight")
    with pytest.raises(AnsibleFilterError, match="expected_gpus -1 is negative"):
        plugin.gpuops_dcgm_diag(four, 0, "h", 1, -1)
