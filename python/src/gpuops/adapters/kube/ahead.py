"""Answers to GETs a command is about to send, fetched ahead by another process
(:mod:`.prefetch`), and the pipe that brings them.

The command's transport takes an answer from here (:func:`take`) only for the identical
request: GET, the same target, every header the same (the Authorization included), to the
same server with the same TLS settings (:func:`request_key`). Every other request, and every
request whose answer did not come (the fetching process gave it up on a transport failure,
did not read the kubeconfig itself, or is gone), goes out as always. So an answer fetched
ahead can make the command faster, never different: it is the same request, sent earlier.

Standard library only.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import queue
import select
import signal
import struct
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuops.adapters.kube.creds import Credentials

log = logging.getLogger(__name__)

#: Frames from the fetching process: what it will fetch (``target\taccept`` lines), an
#: answer (``target``, ``accept``, its request key, status and media type, a line each; then
#: its body), a request it gave up on. Each frame is its kind, the lengths of its head and
#: its body, then those.
_WILL, _ANSWER, _GAVE_UP = b"W", b"A", b"G"
_FRAME = struct.Struct("!cIQ")
#: How long the command waits for the next frame before it sends its requests itself
#: (the transport's read timeout: the fetching process would have given up by then).
_QUIET_S = 60.0
#: Larger than any frame the fetching process writes (a head is a few lines, a body one page).
_MAX_HEAD, _MAX_BODY = 1 << 16, 1 << 30


class Answer:
    """An answer as the transport reads it: HTTP status, media type, body."""

    __slots__ = ("body", "media", "status")

    def __init__(self, status: int, media: str, body: bytes | bytearray) -> None:
        self.status, self.media, self.body = status, media, body

    def reader(self) -> Callable[[int], bytes]:
        """``read(n)``: the body's next bytes (at most ``n``; ``b""`` at its end)."""
        view, at = memoryview(self.body), 0

        def read(n: int) -> bytes:
            nonlocal at
            chunk = bytes(view[at : at + n])
            at += len(chunk)
            return chunk

        return read


def request_key(creds: Credentials, target: str, headers: Mapping[str, str]) -> str:
    """What makes two GETs the same request: the server and TLS settings of ``creds`` (every
    field but the token callback, whose value is in the headers), the target, the headers."""
    tls = tuple(v for k, v in vars(creds).items() if k != "authorization")
    return hashlib.sha256(repr((tls, target, sorted(headers.items()))).encode()).hexdigest()


# -- the command's side --------------------------------------------------------------------
class _Ahead:
    """Answers from the fetching process ``pid`` through the read end ``fd`` of its pipe."""

    def __init__(self, pid: int, fd: int) -> None:
        self._pid, self._fd = pid, fd
        self._cond = threading.Condition()
        self._reading = False  # a thread is reading the next frame
        self._first = False  # the first frame (what is fetched from the start) has arrived
        self._ended = False  # the pipe is closed: nothing more will come
        self._coming: set[tuple[str, str]] = set()  # announced, neither answered nor given up
        self._answers: dict[tuple[str, str], tuple[str, Answer]] = {}

    def take(self, creds: Credentials, target: str, headers: Mapping[str, str]) -> Answer | None:
        """The answer to GET ``target`` with ``headers`` over ``creds``, if it was fetched
        for exactly that request (waiting for it while it is on its way); else ``None``."""
        asked = (target, headers.get("Accept", ""))
        with self._cond:
            while True:
                if asked in self._answers:
                    key, answer = self._answers.pop(asked)
                    if key != request_key(creds, target, headers):
                        log.debug("GET %s: fetched ahead for another request; sending it", target)
                        return None
                    log.debug("GET %s: answered by the request sent ahead", target)
                    return answer
                if self._ended or (self._first and asked not in self._coming):
                    log.debug("GET %s: not fetched ahead; sending it", target)
                    return None
                if self._reading:
                    self._cond.wait()
                    continue
                self._reading = True
                try:
                    self._cond.release()
                    try:
                        frame = self._next_frame()
                    finally:
                        self._cond.acquire()
                    self._file(frame)
                finally:
                    self._reading = False
                    self._cond.notify_all()

    def _file(self, frame: tuple[bytes, str, bytearray] | None) -> None:
        """Note what ``frame`` says. At the end of the pipe, or at a frame that cannot be
        read, the fetching process is stopped: what has not come, the command sends itself."""
        try:
            done = frame is None or not self._note(*frame)
        except ValueError:
            done = True
        if done:
            self._ended = True
            self.close()
        else:
            self._first = True

    def _note(self, kind: bytes, head: str, body: bytearray) -> bool:
        if kind == _WILL:
            self._coming.update(_asked(line) for line in head.splitlines())
        elif kind == _GAVE_UP:
            self._coming.discard(_asked(head))
        elif kind == _ANSWER:
            target, accept, key, status, media = head.split("\n")
            self._coming.discard((target, accept))
            self._answers[(target, accept)] = (key, Answer(int(status), media, body))
        else:
            return False
        return True

    def _next_frame(self) -> tuple[bytes, str, bytearray] | None:
        """The next frame; ``None`` at the end of the pipe (or when nothing came for
        :data:`_QUIET_S`, or it is no frame)."""
        fixed = self._read(_FRAME.size)
        if fixed is None:
            return None
        kind, head_size, body_size = _FRAME.unpack(fixed)
        if head_size > _MAX_HEAD or body_size > _MAX_BODY:  # not what the fetching process writes
            return None
        head, body = self._read(head_size), self._read(body_size)
        if head is None or body is None:
            return None
        try:
            return kind, head.decode(), body
        except UnicodeDecodeError:
            return None

    def _read(self, size: int) -> bytearray | None:
        """``size`` bytes of the pipe, read into one buffer; ``None`` if they do not come."""
        buf = bytearray(size)
        with memoryview(buf) as view:
            got = 0
            while got < size:
                try:
                    if self._fd < 0 or not select.select([self._fd], [], [], _QUIET_S)[0]:
                        return None
                    n = os.readv(self._fd, [view[got:]])
                except OSError:
                    return None
                if not n:
                    return None
                got += n
        return buf

    def close(self) -> None:
        """Stop the fetching process (if it still runs) and reap it; close the pipe."""
        if self._pid:
            with contextlib.suppress(ChildProcessError):
                # our own child, not yet reaped: its pid cannot belong to anyone else
                if os.waitpid(self._pid, os.WNOHANG) == (0, 0):
                    os.kill(self._pid, signal.SIGKILL)
                    os.waitpid(self._pid, 0)
            self._pid = 0
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _asked(line: str) -> tuple[str, str]:
    target, _, accept = line.partition("\t")
    return target, accept


_started: _Ahead | None = None


def expect(pid: int, fd: int) -> None:
    """Take answers from the fetching process ``pid`` (our child) through ``fd``, the read
    end of its pipe; it is stopped and reaped when this process ends."""
    global _started  # noqa: PLW0603 - one fetching process per command
    _started = _Ahead(pid, fd)
    atexit.register(_started.close)


def expecting() -> bool:
    return _started is not None


def take(creds: Credentials, target: str, headers: Mapping[str, str]) -> Answer | None:
    """The answer fetched ahead for exactly this GET (:meth:`_Ahead.take`), if one was."""
    return _started.take(creds, target, headers) if _started is not None else None


# -- the fetching process's side -----------------------------------------------------------
class Frames:
    """Frames to the pipe (its write end ``fd``), written by a thread of their own: fetching
    never waits for the command to read (it reads only once it has loaded)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._queue: queue.SimpleQueue[tuple[bytes, ...] | None] = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._write, name="gpuops-ahead-frames")
        self._writer.start()

    def will(self, asked: Sequence[tuple[str, str]]) -> None:
        self._put(_WILL, "".join(f"{t}\t{a}\n" for t, a in asked))

    def gave_up(self, target: str, accept: str) -> None:
        self._put(_GAVE_UP, f"{target}\t{accept}")

    def answer(self, target: str, accept: str, key: str, answer: Answer) -> None:
        self._put(
            _ANSWER, f"{target}\n{accept}\n{key}\n{answer.status}\n{answer.media}", answer.body
        )

    def _put(self, kind: bytes, head: str, body: bytes | bytearray = b"") -> None:
        data = head.encode()
        self._queue.put((_FRAME.pack(kind, len(data), len(body)), data, bytes(body)))

    def _write(self) -> None:
        with contextlib.suppress(OSError):  # the command has gone (or closed the pipe)
            while (frame := self._queue.get()) is not None:
                for part in frame:
                    with memoryview(part) as whole:
                        left = whole
                        while left:
                            left = left[os.write(self._fd, left) :]

    def close(self) -> None:
        """Write what is queued and close the pipe (once)."""
        if self._fd >= 0:
            self._queue.put(None)
            self._writer.join()
            os.close(self._fd)
            self._fd = -1
