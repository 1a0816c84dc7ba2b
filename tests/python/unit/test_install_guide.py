"""docs/JENKINS-INSTALL.md names a plugin for every pipeline step the library and the example
call. The steps are derived from the Groovy itself (vars/*.groovy, src/**/*.groovy,
Jenkinsfile.example): identifiers followed by `(`, by a block `{`, or by a string argument
(`sh 'make'`), minus Groovy's own names (a short explicit list) and names the library defines.
A planted step in a fixture proves the test fails on a step without a row.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
GUIDE = ROOT / "docs" / "JENKINS-INSTALL.md"
FIXTURES = Path(__file__).parent / "fixtures" / "install_guide"

#: Groovy keywords and built-in methods callable without a receiver: not pipeline steps.
GROOVY = frozenset(
    {
        *("if", "else", "for", "while", "switch", "case", "catch", "try", "finally", "return"),
        *("new", "throw", "assert", "synchronized", "this", "super", "in", "instanceof", "def"),
        *("println", "print", "sprintf"),
    }
)
#: In src/ classes the pipeline is reached through a parameter (script.sh(...), step.error(...)).
SCRIPT_RECEIVERS = ("script", "step")

_DEFINITION = re.compile(
    r"(?:\bdef|\bvoid|\bboolean|\bint|\blong|\b[A-Z]\w*(?:<[^<>()]*>)?)\s+([a-zA-Z_]\w*)\s*\("
)
_CLOSURE_PARAM = re.compile(r"\bClosure\s+([a-zA-Z_]\w*)")
_BARE = re.compile(r"(?<![.\w$@])([a-zA-Z_]\w*)(?:\s*[({]|[ \t]+(?=\"\"|true\b|false\b))")


def code_of(text: str) -> str:
    """Groovy source without comments, each string literal as "" (the code inside a GString's
    ${...} is kept, after the string)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            i = text.find("\n", i) if "\n" in text[i:] else n
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif text[i] in "'\"":
            quote = text[i] * 3 if text.startswith(text[i] * 3, i) else text[i]
            i += len(quote)
            inner: list[str] = []
            while i < n and not text.startswith(quote, i):
                if text[i] == "\\":
                    i += 2
                elif quote[0] == '"' and text.startswith("${", i):
                    depth, j = 1, i + 2
                    while j < n and depth:
                        depth += {"{": 1, "}": -1}.get(text[j], 0)
                        j += 1
                    inner.append(code_of(text[i + 2 : j - 1]))
                    i = j
                else:
                    i += 1
            i += len(quote)
            out.append('""' + "".join(f" ;{c};" for c in inner))
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def steps_called(
    vars_files: list[Path], src_files: list[Path], jenkinsfiles: list[Path]
) -> set[str]:
    """Names of pipeline steps (and Declarative sections) the files call."""
    library = {path.stem for path in vars_files}  # the library's own steps, global
    called: set[str] = set()
    for path in [*vars_files, *src_files, *jenkinsfiles]:
        code = code_of(path.read_text())
        # a method or closure parameter of this file is called bare only inside it
        local = set(_DEFINITION.findall(code)) | set(_CLOSURE_PARAM.findall(code))
        found = set(_BARE.findall(code)) - local
        if path in src_files:
            receivers = "|".join(SCRIPT_RECEIVERS)
            found.update(re.findall(rf"(?<![.\w])(?:{receivers})\.([a-zA-Z_]\w*)\s*[({{]", code))
        called |= found
    # a class's constructor or a cast (Foo(...)) is no step; neither is Groovy's own name
    return {name for name in called - library - GROOVY if not name[0].isupper()}


def library_steps(root: Path = ROOT) -> set[str]:
    return steps_called(
        sorted((root / "vars").glob("*.groovy")),
        sorted((root / "src").rglob("*.groovy")),
        [root / "Jenkinsfile.example"],
    )


def plugin_rows(guide: str) -> dict[str, set[str]]:
    """The guide's plugin table: plugin id -> the steps its row names (backticked)."""
    rows: dict[str, set[str]] = {}
    for line in guide.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and re.fullmatch(r"`[a-z0-9-]+`", cells[1]):
            rows[cells[1].strip("`")] = set(re.findall(r"`([A-Za-z_]\w*)`", cells[3]))
    return rows


def missing_rows(steps: set[str], guide: str) -> set[str]:
    covered = set().union(*plugin_rows(guide).values())
    return steps - covered


def check_rows(steps: set[str], guide: str) -> None:
    """AssertionError naming each step without a plugin row."""
    missing = missing_rows(steps, guide)
    assert not missing, (
        f"docs/JENKINS-INSTALL.md has no plugin row naming {sorted(missing)}: add the plugin "
        "that provides each (with its minimum version) to the table"
    )


def test_extraction_finds_steps_of_every_kind() -> None:
    steps = library_steps()
    # a bare call, a block, a string argument, a src/ call through the script object,
    # a Declarative section: each kind is seen (else the extraction has gone blind)
    assert {"withCredentials", "sh", "node", "junit", "lock", "stage", "steps", "post"} <= steps
    assert not steps & {"gpuopsExec", "bindings", "call", "body", "if", "println"}


def test_every_step_the_library_and_the_example_call_has_a_plugin_row() -> None:
    check_rows(library_steps(), GUIDE.read_text())


def test_plugin_rows_have_an_id_a_name_and_a_minimum_version() -> None:
    table = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in GUIDE.read_text().splitlines()
        if re.match(r"\|\s*[^|]+\|\s*`[a-z0-9-]+`\s*\|", line)
    ]
    assert len(table) >= 12
    for name, plugin, version, steps, *_ in table:
        assert name and steps, plugin
        # a minimum version, and whether it was checked here (no Jenkins runs here: it is not)
        assert re.search(r"\d+(\.\d+)*", version), f"{plugin}: no minimum version"
        assert "unverified here" in version, f"{plugin}: not marked unverified here"


PLANTED = {"plantedBareStep", "plantedBlockStep", "plantedSrcStep", "plantedDeclarative"}


def test_a_planted_step_without_a_row_fails() -> None:
    planted = steps_called(
        [FIXTURES / "vars" / "plantedStep.groovy"],
        [FIXTURES / "src" / "Planted.groovy"],
        [FIXTURES / "Jenkinsfile.planted"],
    )
    # each planted call is found, whatever its form (call, block, src/ through the script)
    assert planted >= PLANTED
    # what the fixtures only define, comment or quote is not
    assert not planted & {"plantedStep", "helper", "inComment", "inString", "body"}
    guide = GUIDE.read_text()
    with pytest.raises(AssertionError) as failed:
        check_rows(planted, guide)
    for name in PLANTED:
        assert name in str(failed.value)
    # a row naming them is what makes it pass
    names = ", ".join(f"`{s}`" for s in sorted(planted))
    check_rows(planted, f"{guide}\n| Planted | `planted` | 1.0 (unverified here) | {names} | x |\n")
