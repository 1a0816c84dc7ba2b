"""A deadline for a whole HTTP exchange, not for each read.

A socket timeout bounds one ``recv``: a server (or a proxy, or a pod behind the API server's
proxy, which the API server treats as long-running and never times out) that sends its
answer a byte at a time, each within the timeout, holds the client for as long as it likes.
:class:`Deadline` runs a timer beside the exchange; when it fires before the exchange is over
it shuts the connection's socket down (``shutdown(2)``: the blocked read returns at once), and
:attr:`Deadline.expired` tells the caller that what it got, an error or a cut answer, is a
timeout.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from types import TracebackType

__all__ = ["Deadline", "shutdown"]


def shutdown(sock: socket.socket | None) -> Callable[[], None]:
    """What aborts an exchange on ``sock``: ``shutdown(SHUT_RDWR)`` of its file descriptor
    (the plain socket's method, also for a TLS socket: the TLS layer then reads an end of
    file, and its state is left for the reading thread to tear down)."""

    def abort() -> None:
        if sock is not None:
            with contextlib.suppress(OSError):  # not connected any more: nothing to abort
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    return abort


class Deadline:
    """``with Deadline(seconds) as d:`` then ``d.watch(abort)`` for the connection in use
    (again for a replacement); after the block, :attr:`expired` says whether it fired."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._over = False
        self._abort: Callable[[], None] | None = None
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._lock:
            self._over = True
        self._timer.cancel()

    def watch(self, abort: Callable[[], None]) -> None:
        """Abort with ``abort`` when the deadline passes (at once if it has)."""
        with self._lock:
            self._abort = abort
            if self.expired:
                abort()

    def _fire(self) -> None:
        with self._lock:
            if self._over:
                return
            self.expired = True
            if self._abort is not None:
                self._abort()
