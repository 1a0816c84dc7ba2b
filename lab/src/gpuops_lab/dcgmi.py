"""The lab's ``dcgmi``: a stand-in for NVIDIA DCGM's CLI that prints what the real one prints.

Test data, not a mock of our code: every lab host gets this file as ``/usr/bin/dcgmi`` (run by
the host's ``/usr/bin/python3``), so it imports nothing but the standard library. It reads
the host's ``/etc/nvidia-lab/gpus.json`` (the cards, the driver; its ``dcgm`` key: DCGM's
version and the tests that fail on which GPU, set by :func:`gpuops_lab.hoststate.set_dcgm`).

Modelled calls: ``dcgmi diag -r 1|2|3 [-j]`` (JSON and table, the DCGM 3.3 layout with
``gpu_id`` or the 4.x layout with ``entity_group``/``entity_id``, by the host's DCGM version),
``dcgmi --version`` and ``dcgmi -v``. Shapes, test names, error texts and exit codes follow
DCGM's sources (github NVIDIA/DCGM tags v3.3.9 and v4.1.1: dcgmi/Diag.cpp,
nvvs/include/NvvsJsonStrings.h, dcgmlib/dcgm_errors.h; see lab/src/gpuops_lab/DCGMI-SOURCES.md).
Default versions: the a100 hosts run DCGM 3.3.9, h800 and l40s hosts 4.1.1, so both layouts
run end to end. A host without DCGM has no ``/usr/bin/dcgmi`` at all (``set_dcgm(...,
installed=False)`` removes it from that host), as on a real node.

One module on purpose: its text is the host's whole ``dcgmi`` script.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

STATE_FILE = "/etc/nvidia-lab/gpus.json"
MODULES_FILE = "/etc/nvidia-lab/loaded-modules"
MODULE_VERSION_FILE = "/etc/nvidia-lab/module-version"

#: DCGM version per lab GPU model (model key prefix), when gpus.json does not say
DEFAULT_VERSIONS = {"a100": "3.3.9", "h800": "4.1.1", "l40s": "4.1.1"}
#: seconds a diag level takes here (real: level 1 seconds, 2 about 2 min, 3 about 30 min)
LEVEL_DELAY_S = {1: 0.0, 2: 0.05, 3: 0.1}

#: tests per level by 4.x plugin name (nvvs NvidiaValidationSuite.cpp FillTestVectors)
LEVEL_TESTS = {
    1: ("software",),
    2: ("software", "memory", "pcie"),
    3: (
        "software",
        "memory",
        "diagnostic",
        "pcie",
        "targeted_stress",
        "targeted_power",
        "memory_bandwidth",
    ),
}
#: 4.x plugin name -> (category, 3.x display name)
TESTS = {
    "software": ("Deployment", "Deployment"),
    "memory": ("Hardware", "GPU Memory"),
    "diagnostic": ("Hardware", "Diagnostic"),
    "pcie": ("Integration", "PCIe"),
    "targeted_stress": ("Stress", "Targeted Stress"),
    "targeted_power": ("Stress", "Targeted Power"),
    "memory_bandwidth": ("Stress", "Memory Bandwidth"),
}
#: 3.x Deployment tests (Diag.cpp levelOneTests; CUDA Toolkit Library is never run)
SOFTWARE_3 = (
    "Denylist",
    "NVML Library",
    "CUDA Main Library",
    "Permissions and OS Blocks",
    "Persistence Mode",
    "Environment Variables",
    "Page Retirement/Row Remap",
    "Graphics Processes",
    "Inforom",
)
#: the software sub-test a failing "software" test fails in
SOFTWARE_FAILS = "Page Retirement/Row Remap"

#: what a failing test reports: (error_id, error_category, error_severity, message) from
#: dcgm_errors.h (DCGM_FR_* codes and their _MSG formats; severity = the code's priority in
#: dcgm_errors.c: 2 ISOLATE, 4 TRIAGE, 6 RESET). The numbers filled in are the lab's.
FAILURES: dict[str, tuple[int, int, int, str]] = {
    "software": (85, 10, 6, "GPU {g} had memory errors and row remappings are pending"),
    "memory": (52, 10, 2, "Found 4 faulty memory elements on GPU {g}"),
    "pcie": (3, 13, 2, "Detected more than 8 PCIe replays per minute for GPU {g} : 14"),
    "diagnostic": (
        110,
        2,
        4,
        "Detected 9512.31 GFLOPs for GPU {g} which is below the threshold 14000.00",
    ),
    "targeted_stress": (
        50,
        1,
        4,
        "Max stress level of 6811.5 did not reach desired stress level of 9500.0 for GPU {g}",
    ),
    "targeted_power": (
        63,
        14,
        4,
        "Max power of 287.4 did not reach desired power minimum target_power of 380.0 for GPU {g}",
    ),
    "memory_bandwidth": (
        62,
        1,
        4,
        "GPU {g} only achieved a memory bandwidth of 1201.55 GB/s, failing to meet 1500.00 "
        "GB/s for test 0",
    ),
}
ISOLATE = 2

#: exit status = dcgmReturn_t & 0xff (main_dcgmi.cpp returns it; dcgm_structs.h)
EXIT_NVVS_ERROR = 256 - 30  # DCGM_ST_NVVS_ERROR
EXIT_ISOLATE = 256 - 51  # DCGM_ST_NVVS_ISOLATE_ERROR
EXIT_NVML_NOT_LOADED = 256 - 56  # DCGM_ST_NVML_NOT_LOADED
EXIT_PARSE = 1  # TCLAP's exit on a command line it cannot parse

NO_NVML = (
    "Error: Unable to start an embedded host engine. Cannot perform the requested operation "
    "because NVML doesn't exist on this system..\n"
)

LINE = "+---------------------------+------------------------------------------------+\n"
HEADER = (
    "Successfully ran diagnostic for group.\n"
    + LINE
    + "| Diagnostic                | Result                                         |\n"
    + "+===========================+================================================+\n"
)
_RULE = "+------------------------------------------------"


def _bar(title: str, edge: str) -> str:
    """A category row of the table: ``|-----  Deployment  --------+---...---|``."""
    head = f"{edge}-----  {title}  "
    return head + "-" * (28 - len(head)) + _RULE + edge + "\n"


BARS = {
    "Metadata": _bar("Metadata", "|"),
    "Deployment": _bar("Deployment", "|"),
    "Hardware": _bar("Hardware", "+"),
    "Integration": _bar("Integration", "+"),
    "Stress": _bar("Stress", "+"),
}
CATEGORY_ORDER_3 = ("Integration", "Hardware", "Stress")  # Diag.cpp HelperJsonBuildOutput
CATEGORY_ORDER_4 = ("Deployment", "Hardware", "Integration", "Stress")


def dcgm_config(state: dict[str, Any]) -> dict[str, Any]:
    """The host's DCGM: ``version`` and ``failing`` (GPU index as text -> test names)."""
    conf = dict(state.get("dcgm") or {})
    model = str(state.get("model") or "")
    default = next((v for k, v in DEFAULT_VERSIONS.items() if model.startswith(k)), "4.1.1")
    conf.setdefault("version", default)
    conf.setdefault("failing", {})
    return conf


def layout(version: str) -> int:
    """3 for the DCGM 3.x JSON layout, 4 for 4.x."""
    return 3 if version.startswith("3.") else 4


def run(argv: list[str], state: dict[str, Any]) -> tuple[str, int]:
    """(stdout, exit status) of ``dcgmi argv`` on a host in ``state``."""
    conf = dcgm_config(state)
    version = str(conf["version"])
    if argv == ["--version"]:
        # TCLAP's StdOutput::version: program name, two spaces, "version: "
        return f"\ndcgmi  version: {version}\n\n", 0
    if argv in (["-v"], ["--vv"]):
        return version_info(version), 0
    if not argv or argv[0] != "diag":
        return parse_error("only `dcgmi diag`, `dcgmi -v` and `dcgmi --version` are modelled"), 1
    level, as_json, error = _diag_args(argv[1:])
    if error:
        return parse_error(error), EXIT_PARSE
    if not state.get("driver") or state.get("loaded_driver"):
        return NO_NVML, EXIT_NVML_NOT_LOADED
    time.sleep(LEVEL_DELAY_S.get(level, 0.0))
    results = _results(state, conf, level)
    code = _exit_code(results)
    if layout(version) == 3:
        out = json3(state, version, results) if as_json else table3(state, version, results)
    else:
        out = json4(state, version, results) if as_json else table4(state, version, results)
    return out, code


def parse_error(why: str) -> str:
    return (
        f"PARSE ERROR: \n             {why}\n\n"
        "For complete USAGE and HELP type: \n   dcgmi --help\n\n"
    )


def version_info(version: str) -> str:
    """``dcgmi -v``'s first block (a public 3.3.5 sample: NVIDIA/dcgm-exporter#319)."""
    branch = "rel_dcgm_" + "_".join(version.split(".")[:2])
    return (
        f"Version : {version}\nBuild ID : 14\nBuild Date : 2024-02-24\nBuild Type : Release\n"
        f"Commit ID : 0000000000000000000000000000000000000000\nBranch Name : {branch}\n"
        "CPU Arch : x86_64\nBuild Platform : Linux 4.15.0-180-generic x86_64\n"
    )


def _diag_args(args: list[str]) -> tuple[int, bool, str]:
    level, as_json = 0, False
    names = {"short": 1, "quick": 1, "medium": 2, "long": 3}
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-j", "--json"):
            as_json = True
        elif a in ("-r", "--run") and i + 1 < len(args):
            i += 1
            value = args[i].lower()
            level = names.get(value, int(value) if value.isdigit() else 0)
            if level not in LEVEL_TESTS:
                return 0, False, f"the lab's dcgmi models levels 1-3, not {args[i]!r}"
        else:
            return 0, False, f"Argument {a!r} is not modelled by the lab's dcgmi"
        i += 1
    if not level:
        return 0, False, "One of the required arguments is missing: -r"
    return level, as_json, ""


Result = tuple[str, int, str]  # (test, gpu index, "Pass" | "Fail")


def _results(state: dict[str, Any], conf: dict[str, Any], level: int) -> list[Result]:
    failing = {int(k): set(v) for k, v in (conf.get("failing") or {}).items()}
    out: list[Result] = []
    for test in LEVEL_TESTS[level]:
        for card in state["gpus"]:
            i = int(card["index"])
            out.append((test, i, "Fail" if test in failing.get(i, set()) else "Pass"))
    return out


def _exit_code(results: list[Result]) -> int:
    failed = [FAILURES[t] for t, _g, s in results if s == "Fail"]
    if not failed:
        return 0
    return EXIT_ISOLATE if any(f[2] == ISOLATE for f in failed) else EXIT_NVVS_ERROR


def _device_id(card: dict[str, Any]) -> str:
    return str(card["pci_device_id"])[2:6].lower()  # 0x20B210DE -> 20b2


def _warning(test: str, gpu: int, key: str = "warning") -> dict[str, Any]:
    code, cat, sev, msg = FAILURES[test]
    return {"error_category": cat, "error_id": code, "error_severity": sev, key: msg.format(g=gpu)}


def _dump(doc: dict[str, Any]) -> str:
    # jsoncpp's toStyledString: sorted keys, tab indents, " : "
    return json.dumps(doc, indent="\t", sort_keys=True, separators=(",", " : ")) + "\n"


# -- DCGM 3.3 ---------------------------------------------------------------------------------
def json3(state: dict[str, Any], version: str, results: list[Result]) -> str:
    cards = state["gpus"]
    categories: list[dict[str, Any]] = [{"category": "Deployment", "tests": _software3(results)}]
    for cat in CATEGORY_ORDER_3:
        tests = []
        for test in TESTS:
            rows = [r for r in results if r[0] == test and TESTS[test][0] == cat]
            if not rows:
                continue
            entries = []
            for _t, gpu, status in rows:
                entry: dict[str, Any] = {"gpu_id": str(gpu), "status": status}
                if status == "Fail":
                    entry["warnings"] = [_warning(test, gpu)]
                entries.append(entry)
            tests.append({"name": TESTS[test][1], "results": entries})
        if tests:
            categories.append({"category": cat, "tests": tests})
    doc = {
        "DCGM GPU Diagnostic": {"test_categories": categories},
        "Driver Version Detected": state["driver"],
        "GPU Device IDs": [_device_id(c) for c in cards],
        "GPU Device Serials": {str(c["index"]): c["serial"] for c in cards},
        "version": version,
    }
    return _dump(doc)


def _software3(results: list[Result]) -> list[dict[str, Any]]:
    """The 3.x Deployment tests: one result each, without a GPU unless it failed (then the
    GPU of its last error, and the message under "warnings", as Diag.cpp writes them)."""
    bad = [g for t, g, s in results if t == "software" and s == "Fail"]
    tests = []
    for name in SOFTWARE_3:
        entry: dict[str, Any] = {"status": "Pass"}
        if name == SOFTWARE_FAILS and bad:
            entry = {
                "gpu_id": bad[-1],
                "status": "Fail",
                "warnings": [_warning("software", g, "warnings") for g in bad],
            }
        tests.append({"name": name, "results": [entry]})
    return tests


def _row(name: str, info: str) -> str:
    return f"| {name:<25} | {info:<46} |\n"


def _wrapped(name: str, text: str) -> str:
    """Diag.cpp DisplayVerboseInfo: 45 characters per row, the name on the first only."""
    return "".join(_row(name if i == 0 else "", text[i : i + 45]) for i in range(0, len(text), 45))


def _metadata(state: dict[str, Any], version: str) -> str:
    ids = ", ".join(_device_id(c) for c in state["gpus"])
    return (
        BARS["Metadata"]
        + _row("DCGM Version", version)
        + _row("Driver Version Detected", str(state["driver"]))
        + _wrapped("GPU Device IDs Detected", ids)
    )


def table3(state: dict[str, Any], version: str, results: list[Result]) -> str:
    out = [HEADER, _metadata(state, version), BARS["Deployment"]]
    bad = [g for t, g, s in results if t == "software" and s == "Fail"]
    for name in SOFTWARE_3:
        if name == SOFTWARE_FAILS and bad:
            out.append(_row(name, "Fail"))
            out += [_wrapped("Warning", FAILURES["software"][3].format(g=g)) for g in bad]
        else:
            out.append(_row(name, "Pass"))
    for cat in CATEGORY_ORDER_3:
        rows_of_cat = [r for r in results if TESTS[r[0]][0] == cat]
        if not rows_of_cat:
            continue
        out.append(BARS[cat])
        for test in TESTS:
            rows = [r for r in rows_of_cat if r[0] == test]
            if rows:
                out.append(_gpu_rows3(test, rows))
    out.append(LINE)
    return "".join(out)


def _gpu_rows3(test: str, rows: list[Result]) -> str:
    """Diag.cpp HelperDisplayGpuResults: "Pass - All", or "Pass - GPUs: 0, 1" and "Fail - GPU:
    3" rows, then each failure's warning."""
    name = TESTS[test][1]
    passed = [g for _t, g, s in rows if s == "Pass"]
    failed = [g for _t, g, s in rows if s == "Fail"]
    if not failed:
        return _row(name, "Pass - All")
    if not passed:
        out = _row(name, "Fail - All")
    else:
        out = _row(name, f"Pass - GPU{'s' if len(passed) > 1 else ''}: " + _ids(passed))
        out += _row("", f"Fail - GPU{'s' if len(failed) > 1 else ''}: " + _ids(failed))
    return out + "".join(_wrapped("Warning", FAILURES[test][3].format(g=g)) for g in failed)


def _ids(gpus: list[int]) -> str:
    return ", ".join(str(g) for g in gpus) + "   "


# -- DCGM 4.x ---------------------------------------------------------------------------------
def json4(state: dict[str, Any], version: str, results: list[Result]) -> str:
    categories = []
    for cat in CATEGORY_ORDER_4:
        tests = []
        for test in TESTS:
            rows = [r for r in results if r[0] == test and TESTS[test][0] == cat]
            if not rows:
                continue
            entries = []
            for _t, gpu, status in rows:
                entry: dict[str, Any] = {
                    "entity_group": "GPU",
                    "entity_group_id": 1,  # DCGM_FE_GPU
                    "entity_id": gpu,
                    "status": status,
                }
                if status == "Fail":
                    entry["warnings"] = [_warning(test, gpu)]
                entries.append(entry)
            overall = "Fail" if any(r[2] == "Fail" for r in rows) else "Pass"
            tests.append({"name": test, "results": entries, "test_summary": {"status": overall}})
        if tests:
            categories.append({"category": cat, "tests": tests})
    entities = [
        {"device_id": _device_id(c), "entity_id": int(c["index"]), "serial_num": c["serial"]}
        for c in state["gpus"]
    ]
    doc = {
        "DCGM Diagnostic": {"test_categories": categories},
        "entity_groups": [{"entities": entities, "entity_group": "GPU", "entity_group_id": 1}],
        "metadata": {"Driver Version Detected": state["driver"], "version": version},
    }
    return _dump(doc)


def table4(state: dict[str, Any], version: str, results: list[Result]) -> str:
    """Diag.cpp HelperDisplayAsCli: per test its overall result, then "GPU<i>: <result>"
    rows and "Warning: GPU<i>" rows (a public 4.2.3 sample: NVIDIA/DCGM#253)."""
    out = [HEADER, _metadata(state, version)]
    for cat in CATEGORY_ORDER_4:
        rows_of_cat = [r for r in results if TESTS[r[0]][0] == cat]
        if not rows_of_cat:
            continue
        out.append(BARS[cat])
        for test in TESTS:
            rows = [r for r in rows_of_cat if r[0] == test]
            if not rows:
                continue
            overall = "Fail" if any(r[2] == "Fail" for r in rows) else "Pass"
            out.append(_row(test, overall))
            for _t, gpu, status in rows:
                out.append(_row("", f"GPU{gpu}: {status}"))
                if status == "Fail":
                    out.append(_wrapped(f"Warning: GPU{gpu}", FAILURES[test][3].format(g=gpu)))
    out.append(LINE)
    return "".join(out)


def load_state(
    state_file: str = STATE_FILE,
    modules_file: str = MODULES_FILE,
    module_version_file: str = MODULE_VERSION_FILE,
) -> dict[str, Any]:
    """The host's state as nvidia-smi reads it: ``driver`` None when the nvidia module is
    not loaded, ``loaded_driver`` set while an upgrade waits for a reboot."""
    try:
        state: dict[str, Any] = json.loads(Path(state_file).read_text())
    except (OSError, ValueError):
        return {"driver": None, "gpus": []}
    try:
        modules = Path(modules_file).read_text().split()
    except OSError:
        modules = []
    if "nvidia" not in modules:
        state["driver"] = None
    try:
        state["loaded_driver"] = Path(module_version_file).read_text().strip() or None
    except OSError:
        state["loaded_driver"] = None
    return state


def main() -> int:
    out, code = run(sys.argv[1:], load_state())
    (sys.stderr if code == EXIT_PARSE else sys.stdout).write(out)  # TCLAP: errors to stderr
    return code


if __name__ == "__main__":
    sys.exit(main())
