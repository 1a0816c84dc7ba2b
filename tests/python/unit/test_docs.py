"""The pages say what the code does, and every reference in them resolves.

- every practice cited as S-NN anywhere in the repository (code, tests, Ansible, Groovy, pages;
  a range such as ``S-13 ... S-15`` counts each number in it) is listed in docs/PRACTICES.md;
- the README's exit-code table is the one errors.py declares (``gpuops --help`` prints that);
- the README's quick start is the two commands, and ``.ci/run`` runs the README's test command;
- every relative link in the README and docs/ names a file that exists, and a heading there.
"""

from __future__ import annotations

import re
from pathlib import Path

from gpuops import errors

ROOT = Path(__file__).resolve().parents[3]
PRACTICES = ROOT / "docs" / "PRACTICES.md"
#: Where the repository's own text lives (not the virtualenv, build outputs or node_modules).
SOURCES = [
    "README.md",
    "Jenkinsfile.example",
    "Makefile",
    "docs",
    "python/src",
    "lab/src",
    "lab/tests",
    "lab/kube",
    "ansible",
    "vars",
    "src",
    "resources",
    "tests/python",
    "tests/groovy",
    "scripts",
    "bench",
]
SUFFIXES = {".py", ".md", ".groovy", ".txt", ".yml", ".yaml", ".json", ".sh", ".j2", ".cfg", ""}
#: S-NN, not inside a longer word ("SYS-821GE" is a server model), optionally "... S-MM".
CITED = re.compile(r"(?<![\w-])S-(\d+)(?:\s*(?:\.\.\.|\.\.|…)\s*S-(\d+))?(?!\w)")


def repository_texts() -> list[Path]:
    files: list[Path] = []
    for name in SOURCES:
        top = ROOT / name
        found = [top] if top.is_file() else sorted(top.rglob("*"))
        files += [
            p
            for p in found
            if p.is_file()
            and p.suffix in SUFFIXES
            and not {"__pycache__", "node_modules"} & set(p.parts)
            and ".egg-info" not in str(p)
        ]
    return files


def cited_practices(text: str) -> set[int]:
    cited: set[int] = set()
    for first, last in CITED.findall(text):
        start = int(first)
        cited.update(range(start, int(last or start) + 1))
    return cited


def listed_practices() -> dict[int, str]:
    """``| S-NN | practice | in gpu-ops |`` rows of docs/PRACTICES.md."""
    rows = re.findall(r"^\| S-(\d+) \| ([^|]+) \|", PRACTICES.read_text(), re.MULTILINE)
    numbers = [int(n) for n, _ in rows]
    assert len(numbers) == len(set(numbers)), "a practice is listed twice"
    return {int(n): practice.strip() for n, practice in rows}


def test_citations_are_read_with_their_ranges() -> None:
    assert cited_practices("(S-3, S-13 ... S-15) S-19..S-21 S-11…S-15 S-26/S-27") == {
        3,
        11,
        12,
        13,
        14,
        15,
        19,
        20,
        21,
        26,
        27,
    }
    assert cited_practices("SYS-821GE-TNHR, TS-5, S-5x") == set()


def test_every_practice_cited_in_the_repository_is_listed_in_practices_md() -> None:
    listed = listed_practices()
    assert all(listed.values()), "a practice without its one line"
    where: dict[int, str] = {}
    for path in repository_texts():
        for number in cited_practices(path.read_text(errors="replace")):
            where.setdefault(number, str(path.relative_to(ROOT)))
    assert len(where) >= 20, f"the scan found too few citations: {sorted(where)}"
    missing = {f"S-{n}": f for n, f in sorted(where.items()) if n not in listed}
    assert not missing, f"cited but not in docs/PRACTICES.md: {missing}"


def _readme_table(header: str) -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    start = text.index(header)
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_readme_exit_code_table_is_the_one_errors_py_declares() -> None:
    categories = {errors.ExitCode.OK: "ok"} | {
        cls.exit_code: cls.category for cls in errors.GpuOpsError.__subclasses__()
    }
    categories.setdefault(errors.ExitCode.INTERNAL, errors.GpuOpsError.category)
    rows = _readme_table("| code | category | meaning |")
    assert [
        (int(code), category, meaning.replace("`", "")) for code, category, meaning in rows
    ] == [(int(code), categories[code], doc) for code, doc in errors.EXIT_CODE_DOC.items()]


def test_the_quick_start_is_two_commands_and_ci_runs_the_test_one() -> None:
    text = (ROOT / "README.md").read_text()
    quick = text.split("## Quick start", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    assert [line.split("#")[0].strip() for line in quick.splitlines()] == ["make demo", "make test"]
    ci = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line and not line.startswith(("#", "set ", "cd "))
    ]
    assert ci == ["make test"]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # an absolute URL
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}: {target}"
            assert linked.exists(), where
            if anchor:
                headings = re.findall(r"^#+ (.+)$", linked.read_text(), re.MULTILINE)
                assert anchor in {_anchor(h) for h in headings}, where
            checked += 1
    assert checked >= 20
