"""The git commit a folder is at (the inventory's revision in the node history)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

_COMMIT = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def revision(folder: Path, timeout_s: float = 10.0) -> str | None:
    """``git rev-parse --verify HEAD`` in ``folder``: the commit of the work tree it is in,
    None when it is in none (or git is missing, or the tree has no commit yet)."""
    git = shutil.which("git")
    if git is None or not folder.is_dir():
        return None
    try:
        done = subprocess.run(
            [git, "-C", str(folder), "rev-parse", "--verify", "--quiet", "HEAD"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and _COMMIT.fullmatch(out) else None


def dirty(folder: Path, timeout_s: float = 10.0) -> bool | None:
    """Whether the work tree ``folder`` is in has changes not committed (tracked files changed
    or staged, or files git does not ignore and does not track); None when not known (no work
    tree, git missing or failing)."""
    git = shutil.which("git")
    if git is None or not folder.is_dir():
        return None
    try:
        done = subprocess.run(
            [
                git,
                "--no-optional-locks",
                "-C",
                str(folder),
                "status",
                "--porcelain",
                "--untracked-files=normal",
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return bool(done.stdout.strip()) if done.returncode == 0 else None
