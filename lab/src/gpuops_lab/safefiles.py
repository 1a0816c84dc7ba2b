"""Writing the lab's own files without following symlinks.

The lab runs as root: a symlink planted where it writes its state, pid or log files would make
it overwrite any file on the machine. Directories are checked with ``lstat`` (a real directory,
owned by us) and files are replaced by rename (which replaces a link, never its target) or
opened with ``O_NOFOLLOW``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from gpuops.errors import OperationFailed


def ensure_dir(path: Path, mode: int = 0o755) -> Path:
    """``path`` as a real directory owned by us (created if missing); never a symlink."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=mode, parents=True)
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        raise OperationFailed(
            f"lab directory {path} is a symlink: refusing to write through it",
            hint="remove it (and ask who put it there)",
        )
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise OperationFailed(f"lab directory {path} is not a directory of this user")
    return path


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace ``path`` with ``text``: a new file, renamed over it (a symlink there is
    replaced, its target untouched)."""
    ensure_dir(path.parent)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        tmp.chmod(mode)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
