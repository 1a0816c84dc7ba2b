"""gpuops.gpu.driver_checksum through the real ``ansible`` command on localhost: a file:// URL
whose sha256 matches passes and writes nothing, a mismatch fails naming the file and both
sums (never the URL, which can hold credentials), a malformed sha256 is refused; check mode
checks too (the update's plan relies on it)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def _ansible(args: dict[str, Any], tmp: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    tree = tmp / "tree"
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible" / "ansible.cfg"),
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.tree",
        "ANSIBLE_CALLBACK_TREE_DIR": str(tree),
        "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp"),
    }
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible"),
            "localhost",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "-m",
            "gpuops.gpu.driver_checksum",
            "-a",
            json.dumps(args),
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert (tree / "localhost").exists(), done.stdout + done.stderr
    doc: dict[str, Any] = json.loads((tree / "localhost").read_text())
    # the module's result never holds the URL (ansible's own echo of an ad-hoc task's
    # arguments is not the module's: in the role the task's source shows the template)
    assert "s3cret" not in json.dumps(doc)
    return done.returncode, doc


def test_a_matching_file_passes_and_a_changed_one_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "repo" / "NVIDIA-Linux-x86_64-550.90.07.run"
    run.parent.mkdir()
    run.write_bytes(b"#!/bin/sh\necho lab installer\n" * 1000)
    real = hashlib.sha256(run.read_bytes()).hexdigest()
    before = sorted(p.name for p in tmp_path.iterdir())
    for extra in ((), ("--check",)):
        rc, doc = _ansible({"url": run.as_uri(), "sha256": real}, tmp_path, *extra)
        assert rc == 0 and doc["sha256"] == real and doc["changed"] is False, doc
    wrong = "0" * 64
    rc, doc = _ansible({"url": run.as_uri(), "sha256": wrong}, tmp_path, "--check")
    assert rc == 2, doc
    assert doc["msg"].startswith(
        f"sha256 of NVIDIA-Linux-x86_64-550.90.07.run is {real}, the inventory wants {wrong}"
    )
    assert sorted(p.name for p in tmp_path.iterdir() if p.name not in ("tree", "ansible-tmp")) == [
        n for n in before if n not in ("tree", "ansible-tmp")
    ]


def test_a_url_that_cannot_be_read_is_named_by_its_file_only(tmp_path: Path) -> None:
    url = "http://user:s3cret@127.0.0.1:9/nvidia/NVIDIA-Linux-x86_64-570.133.20.run"
    rc, doc = _ansible({"url": url, "sha256": "a" * 64, "timeout": 5}, tmp_path)
    assert rc == 2 and doc["msg"].startswith(
        "NVIDIA-Linux-x86_64-570.133.20.run cannot be read from the driver repository"
    ), doc
    rc, doc = _ansible({"url": url, "sha256": "ABC"}, tmp_path)
    assert rc == 2 and "must be 64 lowercase hexadecimal digits" in doc["msg"], doc
