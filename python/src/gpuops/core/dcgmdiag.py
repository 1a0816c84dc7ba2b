"""Judge what ``dcgmi diag -r N -j`` printed: per test and per GPU, every failure named.

NVIDIA's user guide does not define the JSON; DCGM's sources do (``dcgmi/Diag.cpp``,
``nvvs/include/NvvsJsonStrings.h``, the test suite's ``testing/python3/DcgmiDiag.py`` and
``dcgm_diag_schema.json``; tags and paths in tests/python/unit/data/dcgm/SOURCES.md). Two
layouts exist, and gpuops supports exactly these DCGM versions:

- DCGM 3.3.x (:data:`LAYOUT_3`): the top key is ``"DCGM GPU Diagnostic"``; each result of a
  test names its GPU as ``"gpu_id"`` (a string, or a number in the Deployment tests) or, in
  the suite's own parser, ``"gpu_ids"``; the DCGM version is the top-level ``"version"``; the
  GPUs tested are the top-level ``"GPU Device IDs"`` (one per GPU, GPU 0 first).
- DCGM 4.0.x to 4.6.x (:data:`LAYOUT_4`): the top key is ``"DCGM Diagnostic"``; each result
  names its entity (``entity_group`` "GPU", ``entity_group_id``, ``entity_id``); each test has
  a ``test_summary``; the version is ``metadata.version``; the GPUs tested are the "GPU"
  group of ``entity_groups``. A test none of whose results ran is written as its name alone.

Anything else is a failed validation, never a pass: output that is empty or not JSON, a
layout or DCGM version not listed above, a result whose status or GPU cannot be read, a
``runtime_error`` (the diagnostic did not run), no test that passed, no GPU listed, another
number of GPUs than the host has (``expected_gpus``), a test the requested level runs that is
missing or did not pass on every GPU listed (a skip is not a pass), or a non-zero exit code
of ``dcgmi``. Pure: text in, verdict out.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

LAYOUT_3 = "dcgm-3"
LAYOUT_4 = "dcgm-4"
#: DCGM release series (major.minor) gpuops reads, per layout: those whose JSON writer
#: (dcgmi/Diag.cpp) was read at every tag NVIDIA/DCGM has (SOURCES.md); any other fails
SUPPORTED_VERSIONS: dict[str, tuple[str, ...]] = {
    LAYOUT_3: ("3.3",),
    LAYOUT_4: ("4.0", "4.1", "4.2", "4.3", "4.4", "4.5", "4.6"),
}
SUPPORTED_TEXT = "DCGM 3.3.x and 4.0.x to 4.6.x"
_VERSION = re.compile(r"(\d+\.\d+)\.\d+")

_TOP = {"DCGM GPU Diagnostic": LAYOUT_3, "DCGM Diagnostic": LAYOUT_4}
#: statuses dcgmi's JSON prints (Diag.cpp HelperDisplayDiagResult); "Warn" counts as failed
_STATUSES = {"Pass": "pass", "Skip": "skip", "Warn": "fail", "Fail": "fail"}

#: the tests each level runs (NvidiaValidationSuite.cpp FillTestVectors), by their 4.x plugin
#: names; the 3.x display name of each is in _NAMES_3. Level 1 runs the software tests only.
LEVEL_TESTS: dict[int, tuple[str, ...]] = {
    1: ("software",),
    2: ("software", "memory", "pcie"),
    3: (
        "software",
        "memory",
        "pcie",
        "diagnostic",
        "memory_bandwidth",
        "targeted_stress",
        "targeted_power",
    ),
}
_NAMES_3 = {
    "GPU Memory": "memory",
    "PCIe": "pcie",
    "Diagnostic": "diagnostic",
    "Targeted Stress": "targeted_stress",
    "Targeted Power": "targeted_power",
    "Memory Bandwidth": "memory_bandwidth",
}
#: 3.x writes the software test as these Deployment tests, one result each (Diag.cpp v3.3.9
#: levelOneTests; "CUDA Toolkit Library" is left out when it did not run, which is always)
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

#: dcgmi's exit status is its dcgmReturn_t as a byte (main returns it): the two a diagnostic
#: that ran and failed gives (dcgm_structs.h DCGM_ST_NVVS_ERROR -30, ..._ISOLATE_ERROR -51)
EXIT_CODES = {
    226: "DCGM_ST_NVVS_ERROR: the diagnostic reported an error",
    205: "DCGM_ST_NVVS_ISOLATE_ERROR: the diagnostic says the GPU must be drained",
}


@dataclass(frozen=True)
class DiagFailure:
    """One failed test on one entity: ``gpu`` is its index, None for the whole host."""

    test: str
    category: str
    entity: str  # "GPU 3", "CPU 0" or "host"
    gpu: int | None
    info: str
    error_ids: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["error_ids"] = list(self.error_ids)
        return d

    def text(self) -> str:
        where = f" on {self.entity}" if self.entity != "host" else ""
        return f"{self.test}{where}: {self.info}"


@dataclass(frozen=True)
class DiagTest:
    """One test's result: ``status`` pass/skip/fail, ``gpus`` the status per GPU index."""

    category: str
    name: str
    status: str
    gpus: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "gpus": dict(self.gpus)}


@dataclass(frozen=True)
class DiagResult:
    """The verdict on one ``dcgmi diag`` run of one host."""

    passed: bool
    dcgm_version: str | None
    layout: str | None
    level: int | None
    tests: tuple[DiagTest, ...]
    failures: tuple[DiagFailure, ...]
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "dcgm_version": self.dcgm_version,
            "layout": self.layout,
            "level": self.level,
            "tests": [t.to_dict() for t in self.tests],
            "failures": [f.to_dict() for f in self.failures],
            "message": self.message,
        }


class _Unreadable(ValueError):
    """The output is not a layout gpuops reads (the reason is the message)."""


def parse(
    stdout: str, *, rc: int | None = 0, level: int | None = None, expected_gpus: int | None = None
) -> DiagResult:
    """The verdict on ``dcgmi diag -r <level> -j``'s ``stdout`` and exit status ``rc``;
    ``expected_gpus``: how many GPUs the host has (None: not known, only the output's list)."""
    if expected_gpus is not None and (
        isinstance(expected_gpus, bool) or not isinstance(expected_gpus, int) or expected_gpus < 1
    ):
        raise ValueError(f"expected_gpus must be a positive integer or None, not {expected_gpus!r}")
    head = _head(level, None)
    text = (stdout or "").strip()
    if not text:
        return _failed(head + f"dcgmi printed nothing{_rc_text(rc)}", level)
    try:
        doc = json.loads(text)
    except ValueError:
        first = text.splitlines()[0][:120]
        return _failed(head + f"output is not JSON{_rc_text(rc)}: {first!r}", level)
    try:
        layout, version, tests, failures, listed = _read(doc)
    except _Unreadable as exc:
        return _failed(head + f"{exc}{_rc_text(rc)}", level)
    head = _head(level, version)
    problems = [f.text() for f in failures]
    if not failures:
        problems += _completeness(layout, tests, listed, level, expected_gpus)
    if not problems and rc not in (0, None):
        problems.append(f"dcgmi exited {rc} though no test failed{_rc_text(rc, bare=True)}")
    if problems:
        return DiagResult(
            False, version, layout, level, tuple(tests), tuple(failures), head + "; ".join(problems)
        )
    summary = f"passed: {len(tests)} test(s) on {len(listed)} GPU(s)"
    return DiagResult(True, version, layout, level, tuple(tests), (), head + summary)


def _head(level: int | None, version: str | None) -> str:
    run = f"dcgmi diag -r {level}" if level else "dcgmi diag"
    return f"{run} (DCGM {version}): " if version else f"{run}: "


def _rc_text(rc: int | None, *, bare: bool = False) -> str:
    if rc in (0, None):
        return ""
    known = EXIT_CODES.get(int(rc))
    if bare:
        return f" ({known})" if known else ""
    return f" (exit {rc}: {known})" if known else f" (exit {rc})"


def _failed(message: str, level: int | None) -> DiagResult:
    return DiagResult(False, None, None, level, (), (), message)


def _completeness(
    layout: str,
    tests: list[DiagTest],
    listed: list[int],
    level: int | None,
    expected_gpus: int | None,
) -> list[str]:
    """What keeps a run without failures from passing: every test the level runs must have
    passed on every GPU the output lists, and those must be the host's GPUs."""
    if not any(t.status == "pass" for t in tests):
        return ["no test passed"]
    if not listed:
        return ["the output lists no GPU"]
    problems: list[str] = []
    if expected_gpus is not None and len(listed) != expected_gpus:
        problems.append(f"DCGM tested {len(listed)} GPU(s), the host has {expected_gpus}")
    if level not in LEVEL_TESTS:
        return problems
    missing: list[str] = []
    for name in LEVEL_TESTS[level]:
        if layout == LAYOUT_3 and name == "software":
            found = [t for t in tests if t.category == "Deployment" and t.name in SOFTWARE_3]
            problems += _software_3(found) if found else []
        else:
            found = [t for t in tests if _plugin(layout, t.name) == name]
            problems += _on_every_gpu(name, found, listed) if found else []
        if not found:
            missing.append(name)
    if missing:
        problems.append(f"tests of level {level} missing from the output: {', '.join(missing)}")
    return problems


def _plugin(layout: str, name: str) -> str:
    """The 4.x plugin name of a test as the layout names it."""
    return _NAMES_3.get(name, "") if layout == LAYOUT_3 else name


def _software_3(found: list[DiagTest]) -> list[str]:
    """3.x: each software test is there and passed (they name no GPU when they pass)."""
    status = {t.name: t.status for t in found}
    problems = []
    for name in SOFTWARE_3:
        if name not in status:
            problems.append(f"software: {name} missing from the output")
        elif status[name] != "pass":
            problems.append(f"software: {name} did not pass ({status[name]})")
    return problems


def _on_every_gpu(name: str, found: list[DiagTest], listed: list[int]) -> list[str]:
    """The test passed on each GPU listed: a result for each, every one a pass."""
    gpus: dict[int, str] = {}
    for test in found:
        for gpu, status in test.gpus.items():
            if gpus.get(int(gpu), "pass") == "pass":  # a GPU's first result that did not pass
                gpus[int(gpu)] = status
    problems = []
    not_passed = [f"GPU {g} ({gpus[g]})" for g in listed if gpus.get(g, "pass") != "pass"]
    if not_passed:
        problems.append(f"{name} did not pass on {', '.join(not_passed)}")
    no_result = [f"GPU {g}" for g in listed if g not in gpus]
    if no_result:
        problems.append(f"{name} has no result for {', '.join(no_result)}")
    unlisted = [f"GPU {g}" for g in sorted(gpus) if g not in listed]
    if unlisted:
        problems.append(f"{name} has results for {', '.join(unlisted)}, not listed as tested")
    return problems


def _read(doc: Any) -> tuple[str, str, list[DiagTest], list[DiagFailure], list[int]]:
    if not isinstance(doc, dict):
        raise _Unreadable("unknown layout: the JSON is not an object")
    keys = [k for k in _TOP if k in doc]
    if len(keys) != 1:
        raise _Unreadable(
            f"unknown layout: top keys {sorted(doc)[:6]} (gpuops reads {SUPPORTED_TEXT})"
        )
    layout = _TOP[keys[0]]
    body = doc[keys[0]]
    if not isinstance(body, dict):
        raise _Unreadable(f"unknown layout: {keys[0]!r} is not an object")
    if layout == LAYOUT_3:
        version = doc.get("version", body.get("version"))
    else:
        meta = doc.get("metadata")
        version = meta.get("version") if isinstance(meta, dict) else body.get("version")
    if not isinstance(version, str) or not version:
        raise _Unreadable("the output names no DCGM version")
    series = _VERSION.fullmatch(version)
    if not series or series.group(1) not in SUPPORTED_VERSIONS[layout]:
        raise _Unreadable(
            f"DCGM {version} in the {layout} layout is not supported"
            f" (gpuops reads {SUPPORTED_TEXT})"
        )
    if "runtime_error" in body:
        raise _Unreadable(f"DCGM {version}: the diagnostic did not run: {body['runtime_error']}")
    categories = body.get("test_categories")
    if not isinstance(categories, list) or not categories:
        raise _Unreadable(f"DCGM {version}: no test_categories in the output")
    tests: list[DiagTest] = []
    failures: list[DiagFailure] = []
    for cat in categories:
        if not isinstance(cat, dict) or not isinstance(cat.get("category"), str):
            raise _Unreadable(f"DCGM {version}: a test category without a name")
        entries = cat.get("tests")
        if not isinstance(entries, list):
            raise _Unreadable(f"DCGM {version}: category {cat['category']!r} has no tests list")
        for entry in entries:
            test, failed = _test(layout, cat["category"], entry)
            tests.append(test)
            failures.extend(failed)
    return layout, version, tests, failures, _listed(layout, doc)


def _listed(layout: str, doc: dict[str, Any]) -> list[int]:
    """The GPUs the output says were tested: 4.x the "GPU" group of ``entity_groups``, 3.x
    one per ``"GPU Device IDs"`` entry (Diag.cpp v3.3.9 writes them GPU 0 first)."""
    if layout == LAYOUT_3:
        ids = doc.get("GPU Device IDs", [])
        if not isinstance(ids, list):
            raise _Unreadable("unreadable 'GPU Device IDs'")
        return list(range(len(ids)))
    groups = doc.get("entity_groups", [])
    gpus: list[int] = []
    for group in groups if isinstance(groups, list) else [None]:
        if not isinstance(group, dict) or not isinstance(group.get("entity_group"), str):
            raise _Unreadable("unreadable entity_groups")
        if group["entity_group"] != "GPU":
            continue
        entities = group.get("entities")
        if not isinstance(entities, list):
            raise _Unreadable("unreadable entity_groups")
        for ent in entities:
            if not isinstance(ent, dict) or not _is_index(ent.get("entity_id")):
                raise _Unreadable("unreadable entity_groups: a GPU without its entity_id")
            gpus.append(int(ent["entity_id"]))
    return sorted(set(gpus))


def _test(layout: str, category: str, entry: Any) -> tuple[DiagTest, list[DiagFailure]]:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise _Unreadable(f"a test in {category!r} has no name")
    name = entry["name"]
    results = entry.get("results", [])
    if not isinstance(results, list):
        raise _Unreadable(f"test {name!r}: results is not a list")
    if layout == LAYOUT_4 and not results and "test_summary" not in entry:
        return DiagTest(category, name, "skip"), []  # 4.x: no result of the test ran
    if not results and layout == LAYOUT_3:
        raise _Unreadable(f"test {name!r} has no results")
    gpus: dict[str, str] = {}
    failures: list[DiagFailure] = []
    statuses: list[str] = []
    for res in results:
        if not isinstance(res, dict):
            raise _Unreadable(f"test {name!r}: a result is not an object")
        status = _status(name, res.get("status"))
        statuses.append(status)
        for entity, gpu in _entities(layout, name, res):
            if gpu is not None:
                gpus[str(gpu)] = status
            if status == "fail":
                failures.append(DiagFailure(name, category, entity, gpu, *_info(res)))
    if layout == LAYOUT_4:
        summary = entry.get("test_summary")
        if not isinstance(summary, dict):
            raise _Unreadable(f"test {name!r} has no test_summary")
        overall = _status(name, summary.get("status"))
        if overall == "fail" and not failures:
            failures.append(DiagFailure(name, category, "host", None, *_info(summary)))
        statuses.append(overall)
    status = "fail" if "fail" in statuses else "pass" if "pass" in statuses else "skip"
    return DiagTest(category, name, status, gpus), failures


def _status(test: str, raw: Any) -> str:
    if raw not in _STATUSES:
        raise _Unreadable(f"test {test!r}: unreadable status {raw!r}")
    return _STATUSES[raw]


def _entities(layout: str, test: str, res: dict[str, Any]) -> list[tuple[str, int | None]]:
    """The entities a result is about: ("GPU 3", 3), ("CPU 0", None) or ("host", None)."""
    if layout == LAYOUT_4:
        if not {"entity_group", "entity_id"} <= set(res):
            if "gpu_id" in res or "gpu_ids" in res:
                raise _Unreadable(f"test {test!r}: a 3.x result in the 4.x layout")
            raise _Unreadable(f"test {test!r}: a result names no entity")
        group, eid = res["entity_group"], res["entity_id"]
        if not isinstance(group, str) or not _is_index(eid):
            raise _Unreadable(f"test {test!r}: unreadable entity {group!r} {eid!r}")
        gpu = int(eid) if group == "GPU" else None
        return [(f"{group} {int(eid)}", gpu)]
    if "entity_id" in res or "entity_group" in res:
        raise _Unreadable(f"test {test!r}: a 4.x result in the 3.x layout")
    raw = res.get("gpu_ids", res.get("gpu_id"))
    if raw is None:
        return [("host", None)]  # a Deployment test that passed names no GPU
    ids = raw.split(",") if isinstance(raw, str) else raw if isinstance(raw, list) else [raw]
    if not ids or not all(_is_index(i) for i in ids):
        raise _Unreadable(f"test {test!r}: unreadable GPU {raw!r}")
    return [(f"GPU {int(i)}", int(i)) for i in ids]


def _is_index(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 0
    return isinstance(value, str) and value.strip().isdigit()


def _info(res: dict[str, Any]) -> tuple[str, tuple[int, ...]]:
    """What a failed result says: its warnings (3.x Deployment tests carry the text under
    "warnings", the others under "warning"), else its info, else its status."""
    texts: list[str] = []
    ids: list[int] = []
    warnings = res.get("warnings")
    for w in warnings if isinstance(warnings, list) else []:
        if isinstance(w, dict):
            msg = w.get("warning", w.get("warnings"))
            if isinstance(msg, str) and msg.strip():
                texts.append(msg.strip())
            if isinstance(w.get("error_id"), int):
                ids.append(w["error_id"])
        elif isinstance(w, str) and w.strip():
            texts.append(w.strip())
    if not texts:
        info = res.get("info")
        lines = info if isinstance(info, list) else [info]
        texts = [i.strip() for i in lines if isinstance(i, str) and i.strip()]
    return (" / ".join(texts) or f"status {res.get('status')}", tuple(ids))
