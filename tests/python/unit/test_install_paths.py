"""Supply chain: every way this repository tells someone to install the product is hash-checked
and names no public index.

A different project called ``gpuops`` is on the public package index, so the distribution is
``gpu-ops-cli`` (the command and the import package stay ``gpuops``) and no install line may
resolve a bare name against an index. The bootstrap's behaviour (a swapped wheel refused) is
run for real in tests/python/integration/test_agent_bootstrap.py; this checks the text of the
install commands the repository ships and documents.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BOOTSTRAP = ROOT / "resources" / "org" / "gpuops" / "agent" / "bootstrap-gpuops.sh"
#: The name on the public index that is not this project.
TAKEN = "gpuops"
#: The product's distribution name (checked absent from the public index when chosen).
DIST = "gpu-ops-cli"


def pip_installs(text: str) -> list[str]:
    """Each `pip install ...` command in a shell text, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [
        line.strip()
        for line in joined.splitlines()
        if re.search(r"\bpip3?\"?\s+install\b", line) and not line.lstrip().startswith("#")
    ]


def test_the_distribution_is_not_the_public_gpuops() -> None:
    product = tomllib.loads((ROOT / "python" / "pyproject.toml").read_text())["project"]
    lab = tomllib.loads((ROOT / "lab" / "pyproject.toml").read_text())["project"]
    assert product["name"] == DIST
    assert product["scripts"] == {"gpuops": "gpuops.cli.main:main"}
    assert lab["name"] != TAKEN
    assert DIST in lab["dependencies"]
    assert TAKEN not in [re.split(r"[<>=!~ ;\[]", d)[0] for d in lab["dependencies"]]


def test_the_bootstrap_installs_only_hash_checked_wheels_from_no_public_index() -> None:
    installs = pip_installs(BOOTSTRAP.read_text())
    assert len(installs) == 2, installs  # the wheelhouse, the internal index
    for command in installs:
        assert "--require-hashes" in command, command
        assert "--only-binary :all:" in command, command
        assert re.search(r' -r "\$requirements"', command), command
        # nothing named on the command line: what is installed is the hashed file's content
        assert not re.search(rf"\b({TAKEN}|{DIST})==", command), command
    (from_wheelhouse,) = [c for c in installs if "--find-links" in c]
    assert "--no-index" in from_wheelhouse


def test_no_install_line_in_the_library_or_docs_resolves_a_bare_name() -> None:
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    texts += [p for d in ("resources", "vars", "src", "scripts") for p in (ROOT / d).rglob("*")]
    checked = 0
    for path in texts:
        if not path.is_file() or path.suffix not in {".md", ".sh", ".groovy", ".txt", "", ".j2"}:
            continue
        for command in pip_installs(path.read_text(errors="replace")):
            if " -e " in f" {command} " or "requirements-dev.lock" in command:
                continue  # the development checkout (scripts/setup.sh): from the dev lock
            checked += 1
            where = f"{path.relative_to(ROOT)}: {command}"
            assert "--require-hashes" in command, where
            assert not re.search(rf"(?<![\w-])({TAKEN}|{DIST})(==\S*)?\s*$", command), where
            assert not re.search(r"pypi\.org|files\.pythonhosted", command), where
    assert checked >= 3  # the bootstrap's two, the README's air-gapped install
