"""An abort of the whole run: SIGTERM (what Jenkins sends when a build is aborted) or SIGINT
(Ctrl-C), turned into :class:`Aborted` so that a rollout ends cleanly, its records kept.

While :func:`handled` is active (``nodes update`` holds it for its whole run) the first signal
raises :class:`Aborted` in the main thread wherever it is (a gate's wait, a drain's wait, the
time between batches); a later one only notes itself, so the records of the aborted run are
written whatever comes. Inside :func:`deferred` (a playbook run, the records being written) a
signal is only noted: ansible-runner's cancel callback (:func:`requested`) stops the playbook,
and :func:`check` raises once it returned.

Without :func:`handled` (the other commands) the process keeps Python's own handlers: SIGTERM
ends it, SIGINT raises KeyboardInterrupt. Either way the handlers are put back as they were
when a block ends: ansible-runner, given no cancel callback, would replace them for good with
one that only sets a flag (``ansible_runner.utils.signal_handler``), swallowing the abort.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from gpuops.errors import OperationFailed

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Aborted(OperationFailed):
    """The run was aborted by a signal (exit 1); a rollout's record says where it stopped."""

    def __init__(self, signum: int) -> None:
        name = signal.Signals(signum).name
        super().__init__(
            f"aborted ({name})",
            hint="the node history record says which hosts are done and which are left: "
            "gpuops nodes update --resume continues with the hosts left",
        )
        self.signum = signum


class _State:
    def __init__(self) -> None:
        self.signum: int | None = None  # the first signal received while handled
        self.active = False  # inside handled()
        self.defer = 0  # nesting depth of deferred()


_STATE = _State()


def requested() -> bool:
    """Whether an abort was asked for (ansible-runner's ``cancel_callback``)."""
    return _STATE.signum is not None


def check() -> None:
    """Raise :class:`Aborted` when an abort was asked for while it was deferred."""
    if _STATE.signum is not None and _STATE.active and _STATE.defer == 0:
        raise Aborted(_STATE.signum)


def _handler(signum: int, frame: FrameType | None) -> None:
    if _STATE.signum is not None or not _STATE.active:
        return  # already aborting (the records are being written), or handled() is ending
    _STATE.signum = signum
    if _STATE.defer == 0:
        raise Aborted(signum)


def _main() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def kept() -> Iterator[None]:
    """The process's SIGTERM and SIGINT handlers as they were when the block began, put back
    when it ends (a library that replaces them is undone)."""
    if not _main():
        yield
        return
    saved: dict[int, Any] = {s: signal.getsignal(s) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in saved.items():
            if signal.getsignal(s) is not h and h is not None:
                signal.signal(s, h)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """SIGTERM and SIGINT abort the run (:class:`Aborted`) while the block runs (main thread
    only: elsewhere the block runs as it is)."""
    if not _main() or _STATE.active:
        yield
        return
    with kept():
        _STATE.signum, _STATE.active, _STATE.defer = None, True, 0
        for s in SIGNALS:
            signal.signal(s, _handler)
        try:
            yield
        finally:
            _STATE.active = False
            _STATE.signum = None


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A signal inside the block is only noted (see :func:`requested`, :func:`check`)."""
    _STATE.defer += 1
    try:
        yield
    finally:
        _STATE.defer -= 1
