"""What another process (:mod:`.prefetch`) fetched or worked out ahead, and the pipe that
brings it: answers to GETs, each keyed by its request (:func:`request_key`), and results of
client calls, each keyed by its call (:func:`call_key`).

A taker gets a value only for its own key: the identical request (GET, target, every
header, the Authorization included, to the same server with the same TLS settings) or the
identical call (the same client method and arguments on a client of the same credentials
and paging). Every other request or call, and every one whose value did not come (the
fetching process gave it up, did not read the kubeconfig itself, or is gone), is made as
always. So what is taken from ahead can make the command faster, never different: it is the
same request, or the same code run on the same answers, earlier.

Standard library only.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import pickle
import queue
import select
import signal
import struct
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuops.adapters.kube.creds import Credentials

log = logging.getLogger(__name__)

#: Frames from the fetching process: the keys of what it will deliver (a line each), a
#: value (its key, then the value), a key it gave up. Each frame is its kind, the lengths of
#: its key part and its value, then those.
_WILL, _VALUE, _GAVE_UP = b"W", b"V", b"G"
_FRAME = struct.Struct("!cIQ")
#: Larger than any frame the fetching process writes (a key part is a few lines, a value at
#: most one LIST page).
_MAX_KEYS, _MAX_VALUE = 1 << 16, 1 << 30
#: How long a taker waits for the next frame before it does the work itself (the transport's
#: read timeout: the fetching process would have given up by then).
_QUIET_S = 60.0


def request_key(creds: Credentials, target: str, headers: Mapping[str, str]) -> str:
    """What makes two GETs the same request: the server and TLS settings of ``creds`` (every
    field but the token callback, whose value is in the headers), the target, the headers."""
    return call_key(_tls(creds), target, sorted(headers.items()))


def identity(creds: Credentials) -> tuple[Any, ...]:
    """The server, TLS settings and Authorization of ``creds`` (of a plain kubeconfig: its
    token callback only returns the token it read)."""
    return (*_tls(creds), creds.authorization() if creds.authorization else None)


def _tls(creds: Credentials) -> tuple[Any, ...]:
    return tuple(v for k, v in vars(creds).items() if k != "authorization")


def call_key(*parts: Any) -> str:
    """``parts`` as a key (sets in a stable order), hashed."""
    shown = [sorted(p) if isinstance(p, frozenset) else p for p in parts]
    return hashlib.sha256(repr(shown).encode()).hexdigest()


class Answer:
    """An answer as the transport reads it: HTTP status, media type, body."""

    __slots__ = ("body", "media", "status")

    def __init__(self, status: int, media: str, body: bytes | memoryview) -> None:
        self.status, self.media, self.body = status, media, body

    def to_value(self) -> list[bytes | memoryview]:
        return [f"{self.status}\n{self.media}\n".encode(), self.body]

    @classmethod
    def from_value(cls, value: bytearray) -> Answer:
        status_end = value.index(b"\n")
        media_end = value.index(b"\n", status_end + 1)
        media = value[status_end + 1 : media_end].decode()
        return cls(int(value[:status_end]), media, memoryview(value)[media_end + 1 :])

    def reader(self) -> Callable[[int], bytes]:
        """``read(n)``: the body's next bytes (at most ``n``; ``b""`` at its end)."""
        view, at = memoryview(self.body), 0

        def read(n: int) -> bytes:
            nonlocal at
            chunk = bytes(view[at : at + n])
            at += len(chunk)
            return chunk

        return read


# -- the taking side -----------------------------------------------------------------------
class Channel:
    """Values from the fetching process ``pid`` (0: none to stop) through the read end
    ``fd`` of its pipe, for any thread that asks."""

    def __init__(self, pid: int, fd: int) -> None:
        self._pid, self._fd = pid, fd
        self._cond = threading.Condition()
        self._reading = False  # a thread is reading the next frame
        self._first = False  # the first frame (what is delivered from the start) has arrived
        self._ended = False  # the pipe is closed: nothing more will come
        self._coming: set[str] = set()  # announced, neither delivered nor given up
        self._values: dict[str, bytearray] = {}

    def take(self, key: str) -> bytearray | None:
        """The value for ``key``, if it was delivered (waiting for it while it is on its
        way); else ``None``."""
        with self._cond:
            while True:
                if key in self._values:
                    return self._values.pop(key)
                if self._ended or (self._first and key not in self._coming):
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
        read, the fetching process is stopped: what has not come, the taker does itself."""
        if frame is None or not self._note(*frame):
            self._ended = True
            self.close()
        else:
            self._first = True

    def _note(self, kind: bytes, keys: str, value: bytearray) -> bool:
        if kind == _WILL:
            self._coming.update(keys.split())
        elif kind == _GAVE_UP:
            self._coming.discard(keys)
        elif kind == _VALUE:
            self._coming.discard(keys)
            self._values[keys] = value
        else:
            return False
        return True

    def _next_frame(self) -> tuple[bytes, str, bytearray] | None:
        """The next frame; ``None`` at the end of the pipe (or when nothing came for
        :data:`_QUIET_S`, or it is no frame)."""
        fixed = self._read(_FRAME.size)
        if fixed is None:
            return None
        kind, keys_size, value_size = _FRAME.unpack(fixed)
        if keys_size > _MAX_KEYS or value_size > _MAX_VALUE:  # not what the process writes
            return None
        keys, value = self._read(keys_size), self._read(value_size)
        if keys is None or value is None or not keys.isascii():
            return None
        return kind, keys.decode(), value

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


_channel: Channel | None = None


def expect(pid: int, fd: int) -> None:
    """Take values from the fetching process ``pid`` (our child; 0: this process's own
    threads) through ``fd``, the read end of its pipe; it is stopped and reaped when this
    process ends."""
    global _channel  # noqa: PLW0603 - one fetching process per command
    _channel = Channel(pid, fd)
    atexit.register(_channel.close)


def expecting() -> bool:
    return _channel is not None


def take_answer(creds: Credentials, target: str, headers: Mapping[str, str]) -> Answer | None:
    """The answer fetched ahead for exactly this GET, if one was."""
    if _channel is None:
        return None
    value = _channel.take(request_key(creds, target, headers))
    log.debug("GET %s: %s", target, "fetched ahead" if value is not None else "sent now")
    return Answer.from_value(value) if value is not None else None


def take_result(key: str) -> tuple[bool, Any]:
    """(True, the result) of the call ``key`` (:func:`call_key`) if it was made ahead, else
    (False, None)."""
    value = _channel.take(key) if _channel is not None else None
    # pickled by the fetching process: a fork of this one, through a pipe only the two hold
    return (True, pickle.loads(value)) if value is not None else (False, None)  # noqa: S301


# -- the delivering side -------------------------------------------------------------------
class Frames:
    """Frames to the pipe (its write end ``fd``), written by a thread of their own: fetching
    never waits for the taker to read (it reads only once it has loaded)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._queue: queue.SimpleQueue[tuple[bytes | memoryview, ...] | None] = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._write, name="gpuops-ahead-frames")
        self._writer.start()

    def will(self, keys: Sequence[str]) -> None:
        self._put(_WILL, " ".join(keys))

    def gave_up(self, key: str) -> None:
        self._put(_GAVE_UP, key)

    def answer(self, key: str, answer: Answer) -> None:
        self._put(_VALUE, key, *answer.to_value())

    def result(self, key: str, result: Any) -> None:
        self._put(_VALUE, key, pickle.dumps(result, pickle.HIGHEST_PROTOCOL))

    def _put(self, kind: bytes, keys: str, *value: bytes | memoryview) -> None:
        head = keys.encode()
        size = sum(len(part) for part in value)
        self._queue.put((_FRAME.pack(kind, len(head), size), head, *value))

    def _write(self) -> None:
        with contextlib.suppress(OSError):  # the taker has gone (or closed the pipe)
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
