"""The one writer (and the one reader of user files) of gpuops.

gpuops runs as root on Jenkins agents. Every file it writes goes through this module, so that
no planted link can redirect a write and no caller can skip redaction:

- An output folder is opened once as a directory handle (``O_DIRECTORY | O_NOFOLLOW``) and
  every file is created relative to that handle (``dir_fd``). The path the user gave may pass
  through links above its last component (that is the user's own choice); its last component
  must be a real directory, and every folder below it that gpuops creates is made by
  ``mkdir(dir_fd=...)`` and opened without following links. Once open, swapping the folder's
  path for a link changes nothing: writes go to the folder that was checked.
- A document is written to a unique temporary name (``O_CREAT | O_EXCL | O_NOFOLLOW``) and
  renamed over its name; a link planted at the name is replaced, never followed.
- A log is opened for append with ``O_NOFOLLOW``, must be a regular file with one link, and is
  written line by line.
- Every text, byte string and JSON document is redacted here (the values
  :func:`gpuops.logs.secret_values` knows, in every form :func:`gpuops.logs.forms` names).

Files gpuops reads from its user (parameters, environments files, report inputs, alert state)
are read by :func:`read_bytes` / :func:`read_text`: regular files only (a device or FIFO is
refused before it is read: ``st_size`` says nothing for them), with the size cap counted while
reading.

An output folder is checked when it is named (:class:`OutDir`) and created only when the first
file is written into it, so a command that refuses its input leaves nothing behind.

One module on purpose: it is the one writer, and the convention test
(``tests/python/unit/test_fsio.py``) allows writes in this module only.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from gpuops.core.values import shown
from gpuops.errors import InvalidInput, OperationFailed
from gpuops.logs import redact, redactor, secret_values

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_APPEND_FLAGS = (
    os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
)
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY

#: Largest document gpuops reads from its user (environments files, report inputs, records).
MAX_DOCUMENT_BYTES = 8 << 20

#: How much longer a document's temporary name is than its name (``.NAME.<12 hex>.tmp``).
TEMP_NAME_EXTRA = 18

#: Mode of reports, results and JUnit files: Jenkins and people read them.
PUBLIC = 0o644
#: Mode of files that may hold material only gpuops should read (learned keys, TLS keys).
PRIVATE = 0o600


# -- redaction --------------------------------------------------------------------------------


def redact_text(text: str) -> str:
    """``text`` with every secret gpuops knows, in every form it takes
    (:func:`gpuops.logs.forms`), replaced by ``****``."""
    return redact(text, secret_values())


def redact_doc(doc: Any, text: Callable[[str], str] | None = None) -> Any:
    """A copy of a JSON-like structure with every string (keys too) redacted (by ``text``,
    else with the secrets known now, worked out once for the whole structure)."""
    one = text or redactor(secret_values())
    if isinstance(doc, str):
        return one(doc)
    if isinstance(doc, dict):
        return {redact_doc(k, one): redact_doc(v, one) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [redact_doc(v, one) for v in doc]
    return doc


def dumps(doc: Any) -> str:
    """The JSON text gpuops writes for ``doc`` (sorted keys, indented, newline), redacted."""
    one = redactor(secret_values())
    text = json.dumps(redact_doc(doc, one), indent=2, sort_keys=True, default=str) + "\n"
    return one(text)  # values that ``default=str`` turned into text


# -- names --------------------------------------------------------------------------------------


def _name(name: str) -> str:
    """A single path component gpuops chose itself; anything else is a bug in gpuops."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"not a file name: {name!r}")
    return name


def _failed(what: str, path: Path | str, exc: OSError) -> OperationFailed:
    reason = exc.strerror or type(exc).__name__
    return OperationFailed(f"cannot write {what} {shown(str(path), 200)} ({reason})")


# -- output folders -----------------------------------------------------------------------------


class OutDir:
    """A folder gpuops writes into, named by the user (``--report-dir``, ``--artifacts-dir``) or
    made by gpuops below one.

    Naming it checks it: an existing path that is a link or not a directory is exit 2 naming
    ``option``. The folder (and any missing parents) is created on the first write; from then
    on every file is made relative to its open handle.
    """

    def __init__(self, path: str | os.PathLike[str], *, option: str) -> None:
        self.path = Path(path)
        self.option = option
        self._fd: int | None = None
        self._private = False
        if not str(path):
            raise InvalidInput(f"--{_flag(option)} must not be empty", field=option)
        self._check_existing()

    @classmethod
    def _opened(cls, path: Path, option: str, fd: int, *, private: bool = False) -> OutDir:
        self = cls.__new__(cls)
        self.path, self.option, self._fd, self._private = path, option, fd, private
        return self

    def __repr__(self) -> str:
        return f"OutDir({str(self.path)!r})"

    def __enter__(self) -> OutDir:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def _check_existing(self) -> None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._invalid(f"cannot be used ({exc.strerror or type(exc).__name__})") from None
        if stat.S_ISLNK(st.st_mode):
            raise self._invalid("is a symbolic link; name the folder itself")
        if not stat.S_ISDIR(st.st_mode):
            raise self._invalid("exists and is not a directory")

    def _invalid(self, why: str) -> InvalidInput:
        return InvalidInput(
            f"--{_flag(self.option)} {shown(str(self.path), 200)} {why}", field=self.option
        )

    @property
    def fd(self) -> int:
        """The folder's handle, opening (and creating) the folder on first use."""
        if self._fd is None:
            self._fd = self._open()
        return self._fd

    def _open(self) -> int:
        self._check_existing()
        path = self.path
        missing: list[str] = []
        while not os.path.lexists(path):  # the user's path up to the first folder that exists
            if path.name in ("", ".", ".."):
                break
            missing.append(path.name)
            path = path.parent
        try:
            # the user's own path, links above its last component allowed
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            if not missing:  # the named folder itself: never through a link at its end
                os.close(fd)
                fd = os.open(path, _DIR_FLAGS)
        except OSError as exc:
            raise self._refused(exc) from None
        for name in reversed(missing):
            try:
                fd = _mkdir_at(fd, name)
            except OSError as exc:
                raise self._refused(exc) from None
        return fd

    def _refused(self, exc: OSError) -> InvalidInput:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return self._invalid("is a symbolic link or not a directory")
        return self._invalid(f"cannot be created ({exc.strerror or type(exc).__name__})")

    def file(self, name: str) -> Path:
        """The path a file named ``name`` in this folder has (for messages and results)."""
        return self.path / _name(name)

    def subdir(self, name: str) -> OutDir:
        """The folder ``name`` in this one, created when missing, never through a link."""
        try:
            fd = _mkdir_at(os.dup(self.fd), _name(name))
        except OSError as exc:
            raise _failed("the folder", self.path / name, exc) from None
        return OutDir._opened(self.path / name, self.option, fd)

    def save_text(self, name: str, text: str, *, mode: int = PUBLIC) -> Path:
        """Write ``text`` (redacted) as the file ``name``, atomically."""
        return self._write(name, redact_text(text).encode("utf-8"), mode)

    def save_json(self, name: str, doc: Any, *, mode: int = PUBLIC) -> Path:
        return self._write(name, dumps(doc).encode("utf-8"), mode)

    def save_bytes(self, name: str, data: bytes, *, mode: int = PUBLIC) -> Path:
        """Write ``data`` (redacted where it is text) as the file ``name``, atomically."""
        return self._write(name, _redact_bytes(data), mode)

    def save_secret(self, name: str, data: bytes) -> Path:
        """Write secret material unredacted, readable by gpuops only: in a
        :func:`private_tempdir` only (a TLS key for the instant of loading it)."""
        if not self._private:
            raise ValueError("secret material is written into a private temporary folder only")
        return self._write(name, data, PRIVATE)

    def _write(self, name: str, data: bytes, mode: int) -> Path:
        """``data`` as the file ``name``: a unique temporary file in this folder, then a rename
        over ``name`` (a link there is replaced, not followed)."""
        target = _name(name)
        tmp = f".{target}.{os.urandom(6).hex()}.tmp"  # TEMP_NAME_EXTRA more than the name
        path = self.path / target
        try:
            fd = os.open(tmp, _NEW_FLAGS, mode, dir_fd=self.fd)
        except OSError as exc:
            raise _failed("the file", path, exc) from None
        try:
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), mode)  # the umask must not decide who may read it
                fh.write(data)
            os.rename(tmp, target, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
            raise _failed("the file", path, exc) from None
        return path

    def remove(self, name: str) -> None:
        """Remove the file ``name`` of this folder (a link there is removed, not followed)."""
        try:
            os.unlink(_name(name), dir_fd=self.fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise _failed("the file", self.path / name, exc) from None

    @contextlib.contextmanager
    def append(self, name: str, *, mode: int = PUBLIC) -> Iterator[AppendLog]:
        """A log file opened for append: a regular file with one link, never a link itself."""
        log = AppendLog.open(self, _name(name), mode)
        try:
            yield log
        finally:
            log.close()


def _flag(option: str) -> str:
    return option.replace("_", "-")


def _mkdir_at(parent_fd: int, name: str) -> int:
    """Open (creating it when missing) the folder ``name`` below ``parent_fd``; closes
    ``parent_fd``. Never follows a link."""
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o755, dir_fd=parent_fd)
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    finally:
        os.close(parent_fd)


def _redact_bytes(data: bytes) -> bytes:
    """``data`` redacted, UTF-8 or not: bytes that are no UTF-8 (a log in Latin-1, a binary)
    pass through unchanged as surrogates, a secret between them is still found."""
    text = data.decode("utf-8", errors="surrogateescape")
    return redact_text(text).encode("utf-8", errors="surrogateescape")


class AppendLog:
    """One log file, appended to line by line, each write redacted."""

    def __init__(self, fh: TextIO, path: Path) -> None:
        self._fh = fh
        self.path = path

    @classmethod
    def open(cls, folder: OutDir, name: str, mode: int) -> AppendLog:
        path = folder.path / name
        foreign = OperationFailed(
            f"cannot write the log {shown(str(path), 200)}: it is not a plain file of its own"
        )
        try:
            fd = os.open(name, _APPEND_FLAGS, mode, dir_fd=folder.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO):  # a link; a FIFO nobody reads
                raise foreign from None
            raise _failed("the log", path, exc) from None
        st = os.fstat(fd)
        # a plain file of its own, made by gpuops (a file someone else planted there and owns
        # is refused as a link would be)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.geteuid():
            os.close(fd)
            raise foreign
        if st.st_size == 0:
            os.fchmod(fd, mode)  # a new log: its mode is ours, not the umask's
        os.set_blocking(fd, True)
        return cls(os.fdopen(fd, "a", encoding="utf-8"), path)

    def write(self, text: str) -> None:
        try:
            self._fh.write(redact_text(text))
            self._fh.flush()
        except OSError as exc:
            raise _failed("the log", self.path, exc) from None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._fh.close()


# -- single documents at a path the user gave --------------------------------------------------


def write_file(
    path: str | os.PathLike[str],
    text: str,
    *,
    option: str,
    mode: int = PUBLIC,
    parents: bool = False,
) -> Path:
    """Write ``text`` (redacted) as the file ``path`` (``--result-file``, ``--alert-state``):
    its folder must exist (the user's path, links allowed) unless ``parents``, when the missing
    folders are made as :class:`OutDir` makes them; the file itself is replaced by a rename,
    never written through a link."""
    target = Path(path)
    name = target.name
    if name in ("", ".", ".."):
        raise InvalidInput(f"--{_flag(option)} {shown(str(path), 200)} names no file", field=option)
    parent = target.parent
    if parents and not os.path.lexists(parent):
        with OutDir(parent, option=option) as made:
            return made.save_text(name, text, mode=mode)
    try:
        fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise InvalidInput(
            f"--{_flag(option)} {shown(str(path), 200)}: its folder cannot be opened "
            f"({exc.strerror or type(exc).__name__})",
            field=option,
        ) from None
    folder = OutDir._opened(parent, option, fd)
    try:
        return folder.save_text(name, text, mode=mode)
    finally:
        folder.close()


def write_json_file(
    path: str | os.PathLike[str], doc: Any, *, option: str, parents: bool = False
) -> Path:
    return write_file(path, dumps(doc), option=option, parents=parents)


@contextlib.contextmanager
def private_tempdir(prefix: str) -> Iterator[OutDir]:
    """A fresh folder only gpuops can read (``mkdtemp``: 0700, unique), removed afterwards."""
    import shutil  # noqa: PLC0415 - with tempfile, not needed by most commands' start
    import tempfile  # noqa: PLC0415

    top = tempfile.mkdtemp(prefix=prefix)
    folder = OutDir._opened(Path(top), "tempdir", os.open(top, _DIR_FLAGS), private=True)
    try:
        yield folder
    finally:
        folder.close()
        shutil.rmtree(top, ignore_errors=True)


# -- files gpuops reads from its user --------------------------------------------------------


def read_bytes(
    path: str | os.PathLike[str], *, cap: int, what: str, option: str | None = None
) -> bytes:
    """The bytes of the regular file ``path``, at most ``cap`` of them (counted while reading).
    A missing file, a folder, a device, a FIFO or a socket is exit 2 naming ``what``."""
    shown_path = shown(str(path), 200)
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        raise InvalidInput(f"{what} {shown_path} does not exist", field=option) from None
    except OSError as exc:
        raise InvalidInput(
            f"cannot read {what} {shown_path} ({exc.strerror or type(exc).__name__})", field=option
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidInput(f"{what} {shown_path} is not a regular file", field=option)
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, min(1 << 16, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > cap:
                raise InvalidInput(
                    f"{what} {shown_path} is larger than {cap:,} bytes", field=option
                )
        return b"".join(chunks)
    except OSError as exc:
        raise InvalidInput(
            f"cannot read {what} {shown_path} ({exc.strerror or type(exc).__name__})", field=option
        ) from None
    finally:
        os.close(fd)


def read_text(
    path: str | os.PathLike[str], *, cap: int, what: str, option: str | None = None
) -> str:
    """:func:`read_bytes` decoded as UTF-8 (anything else is exit 2 naming ``what``)."""
    data = read_bytes(path, cap=cap, what=what, option=option)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"{what} {shown(str(path), 200)} is not UTF-8 text (byte {exc.start})", field=option
        ) from None


def check_readable_tree(
    path: str | os.PathLike[str], *, cap: int, what: str, option: str | None = None
) -> None:
    """For a file or folder another program reads (an Ansible inventory): every file in it is a
    regular file of at most ``cap`` bytes (a regular file's size is known before it is read).
    A device, FIFO or socket anywhere in it is exit 2 naming it: reading one would hang or
    never end."""
    top = Path(path)
    entries = [top]
    if top.is_dir():
        seen: set[tuple[int, int]] = set()
        for folder, dirs, files in os.walk(top, followlinks=True):  # as Ansible reads it
            st = Path(folder).stat()
            if (st.st_dev, st.st_ino) in seen:  # a link back up: its files are checked
                dirs[:] = []
                continue
            seen.add((st.st_dev, st.st_ino))
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            entries.extend(Path(folder, f) for f in files if not f.startswith("."))
    for entry in entries:
        if entry == top and top.is_dir():
            continue
        check_regular(entry, cap=cap, what=what, option=option)


def check_regular(
    path: str | os.PathLike[str], *, cap: int, what: str, option: str | None = None
) -> None:
    """``path`` (links followed) is a regular file of at most ``cap`` bytes, for a file another
    program reads whole (a kubeconfig's token file for the Kubernetes client)."""
    try:
        st = Path(path).stat()
    except OSError as exc:
        raise InvalidInput(
            f"{what} {shown(str(path), 200)} cannot be read ({exc.strerror or type(exc).__name__})",
            field=option,
        ) from None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidInput(f"{what} {shown(str(path), 200)} is not a regular file", field=option)
    if st.st_size > cap:
        raise InvalidInput(
            f"{what} {shown(str(path), 200)} is larger than {cap:,} bytes", field=option
        )
