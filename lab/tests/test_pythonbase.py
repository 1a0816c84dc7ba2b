"""Pure parts of gpuops_lab.pythonbase: which Debian mirror it uses, and the cache key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuops_lab import pythonbase

DEB822 = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""


def apt_dir(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "sources.list.d").mkdir()
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.fixture(autouse=True)
def _no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUOPS_DEBIAN_MIRROR", raising=False)


def test_mirror_from_deb822_sources_skips_other_suites(tmp_path: Path) -> None:
    apt = apt_dir(
        tmp_path,
        {
            "sources.list.d/a-security.sources": DEB822.split("\n\n")[1],
            "sources.list.d/debian.sources": DEB822,
        },
    )
    assert pythonbase.debian_mirror(apt) == "http://mirror.example/debian"


def test_disabled_stanza_and_other_file_suffixes_are_ignored(tmp_path: Path) -> None:
    apt = apt_dir(
        tmp_path,
        {
            "sources.list.d/a.sources": "Enabled: no\n" + DEB822,
            "sources.list.d/b.list.disabled-by-farm": "deb http://wrong.example/d bookworm main\n",
        },
    )
    assert pythonbase.debian_mirror(apt) == pythonbase.DEFAULT_MIRROR


def test_mirror_from_one_line_sources_list(tmp_path: Path) -> None:
    apt = apt_dir(
        tmp_path,
        {
            "sources.list": (
                "# deb http://commented.example/debian bookworm main\n"
                "deb-src http://src.example/debian bookworm main\n"
                "deb [arch=amd64 signed-by=/k.gpg] http://one.example/debian bookworm main\n"
            )
        },
    )
    assert pythonbase.debian_mirror(apt) == "http://one.example/debian"


def test_environment_overrides_and_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = apt_dir(tmp_path, {})
    assert pythonbase.debian_mirror(empty) == "http://deb.debian.org/debian"
    monkeypatch.setenv("GPUOPS_DEBIAN_MIRROR", "http://127.0.0.1:3142/debian")
    assert pythonbase.debian_mirror(empty) == "http://127.0.0.1:3142/debian"


def test_cache_key_follows_the_recipe(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    before = pythonbase.cache_file(tmp_path)
    assert before.parent == tmp_path / "lab"
    assert pythonbase.recipe_key() in pythonbase.local_name()
    monkeypatch.setitem(pythonbase.RECIPE, "include", ["python3", "python3-venv", "git"])
    assert pythonbase.cache_file(tmp_path) != before
