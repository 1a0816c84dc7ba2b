"""The layers, enforced: the import contracts of python/pyproject.toml ([tool.importlinter])
hold on the source tree, ignore nothing, count imports under TYPE_CHECKING, and each of them
fails on a module that breaks it (planted in a copy of the package)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from importlinter import api

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "python/pyproject.toml"
SRC = ROOT / "python/src"
LINT = Path(sys.executable).parent / "lint-imports"
CONTRACTS = {c["id"]: c for c in api.read_configuration(str(CONFIG))["contracts_options"]}


@dataclass(frozen=True)
class Plant:
    """A module planted in a copy of the package (or a line appended to one), and for each
    contract it breaks, the import that contract's report must name."""

    path: str
    text: str
    breaks: dict[str, str] = field(default_factory=dict)
    append: bool = False


def only_for_the_type_checker(line: str) -> str:
    return f"from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    {line}\n"


#: Imports across the layers (each also makes the top level cyclic, so cycles are proven in
#: a copy of their own below).
ACROSS = [
    Plant(
        "core/_up.py",
        "from gpuops.usecases import outcome\n",
        {
            "layers": "gpuops.core._up -> gpuops.usecases.outcome",
            "core": "gpuops.core._up -> gpuops.usecases.outcome",
        },
    ),
    Plant(
        "core/_typing.py",
        only_for_the_type_checker("from gpuops.render import release"),
        {
            "layers": "gpuops.core._typing -> gpuops.render.release",
            "core": "gpuops.core._typing -> gpuops.render.release",
        },
    ),
    Plant(
        "core/_writes.py",
        "from gpuops import fsio\n",
        {"core": "gpuops.core._writes -> gpuops.fsio"},
    ),
    Plant(
        "render/_usecase.py",
        "from gpuops.usecases import outcome\n",
        {"render": "gpuops.render._usecase -> gpuops.usecases.outcome"},
    ),
    Plant(
        "render/_adapter.py",
        "from gpuops.adapters import webhook\n",
        {"render": "gpuops.render._adapter -> gpuops.adapters.webhook"},
    ),
    Plant(
        "usecases/_render.py",
        "from gpuops.render import release\n",
        {"layers": "gpuops.usecases._render -> gpuops.render.release"},
    ),
    Plant(
        "usecases/_cli.py",
        only_for_the_type_checker("from gpuops.cli import common"),
        {"layers": "gpuops.usecases._cli -> gpuops.cli.common"},
    ),
    Plant(
        "cli/_adapter.py",
        "from gpuops.adapters import webhook\n",
        {"cli": "gpuops.cli._adapter -> gpuops.adapters.webhook"},
    ),
    Plant(
        "fsio.py",
        "from gpuops.usecases import outcome\n",
        {"foundations": "gpuops.fsio -> gpuops.usecases.outcome"},
        append=True,
    ),
]
#: Cycles: two modules of one package importing each other (one of them only for the type
#: checker), and a foundation of the core importing the core.
CYCLES = [
    Plant("adapters/_cycle_a.py", "from gpuops.adapters import _cycle_b\n"),
    Plant(
        "adapters/_cycle_b.py",
        only_for_the_type_checker("from gpuops.adapters import _cycle_a"),
        {"acyclic": "No cycles are allowed in gpuops.adapters.\n"},
    ),
    Plant(
        "logs.py",
        "from gpuops.core import values\n",
        {"bottom": "gpuops.logs -> gpuops.core.values", "acyclic": "- .logs -> .core (1 import)"},
        append=True,
    ),
]
GROUPS = {"across": ACROSS, "cycles": CYCLES}


def lint(src: Path) -> tuple[int, str]:
    """lint-imports over the package ``gpuops`` found in ``src``: exit code and report."""
    env = {**os.environ, "PYTHONPATH": str(src), "COLUMNS": "400", "NO_COLOR": "1"}
    run = subprocess.run(
        [str(LINT), str(CONFIG), "--no-cache", "--no-logo"],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return run.returncode, run.stdout + run.stderr


def broken(report: str) -> dict[str, str]:
    """The report's broken contracts: contract id -> its section of the report."""
    lines = report.split("Broken contracts", 1)[-1].splitlines()
    ids = {c["name"]: key for key, c in CONTRACTS.items()}
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for line, under in zip(lines, [*lines[1:], ""], strict=True):
        if line in ids and under and set(under) == {"-"}:
            current = sections.setdefault(ids[line], [])
        current.append(line)
    return {key: "\n".join(text) for key, text in sections.items()}


@functools.cache
def planted(group: str) -> dict[str, str]:
    """The broken contracts of a copy of the package with the group's plants in it."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp)
        shutil.copytree(
            SRC / "gpuops",
            src / "gpuops",
            symlinks=True,
            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
        )
        for plant in GROUPS[group]:
            with (src / "gpuops" / plant.path).open("a" if plant.append else "x") as f:
                f.write(plant.text)
        rc, report = lint(src)
    assert rc == 1, report
    return broken(report)


def test_the_layers_hold() -> None:
    rc, report = lint(SRC)
    assert rc == 0, report.split("Broken contracts", 1)[-1]
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in report


def test_the_contracts_ignore_nothing_and_count_type_checking_imports() -> None:
    config = api.read_configuration(str(CONFIG))
    assert config["session_options"]["root_packages"] == ["gpuops"]
    assert "exclude_type_checking_imports" not in config["session_options"]
    for contract in config["contracts_options"]:
        assert "ignore_imports" not in contract, contract["name"]
    assert CONTRACTS["layers"]["layers"] == [
        "gpuops.cli",
        "gpuops.render",
        "gpuops.usecases",
        "gpuops.adapters",
        "gpuops.core",
    ]
    assert CONTRACTS["acyclic"]["ancestors"] == ["gpuops"]
    assert "skip_descendants" not in CONTRACTS["acyclic"]
    # the CLI may reach adapters through a use case; no other contract allows a detour
    indirect = [key for key, c in CONTRACTS.items() if c.get("allow_indirect_imports")]
    assert indirect == ["cli"]


@pytest.mark.parametrize(
    ("group", "plant"),
    [(group, plant) for group, plants in GROUPS.items() for plant in plants],
    ids=[plant.path for plants in GROUPS.values() for plant in plants],
)
def test_each_contract_fails_on_a_module_that_breaks_it(group: str, plant: Plant) -> None:
    report = planted(group)
    for contract, line in plant.breaks.items():
        section = report.get(contract, "")
        assert line in section, f"{contract} does not name {line!r} ({plant.path}):\n{section}"


def test_every_contract_is_proven_able_to_fail() -> None:
    proven = {key for plants in GROUPS.values() for plant in plants for key in plant.breaks}
    assert proven == set(CONTRACTS)
