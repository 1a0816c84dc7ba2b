"""adapters/aborts.py with real signals sent to this process: SIGTERM raises Aborted inside
handled(), is only noted inside deferred() (then check() raises it), a second signal while
aborting is only noted, and the process's own handlers are back afterwards."""

from __future__ import annotations

import os
import signal
import time

import pytest

from gpuops.adapters import aborts


def test_sigterm_aborts_where_the_run_is_and_the_handlers_come_back() -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with pytest.raises(aborts.Aborted, match=r"aborted \(SIGTERM\)") as caught, aborts.handled():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)  # the handler runs at once; this is only a bound
        pytest.fail("the signal did not abort")
    assert caught.value.exit_code == 1 and "--resume" in (caught.value.hint or "")
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_signal_during_a_deferred_block_is_raised_by_check_afterwards() -> None:
    with aborts.handled():
        with aborts.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGTERM)  # a second one: only noted
            assert aborts.requested()
            aborts.check()  # still deferred: nothing raised
        with pytest.raises(aborts.Aborted, match=r"aborted \(SIGINT\)"):
            aborts.check()
    assert not aborts.requested()


def test_without_handled_the_process_keeps_its_handlers_and_nothing_is_requested() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with aborts.kept():
        signal.signal(signal.SIGTERM, lambda *_: None)  # a library replacing it
    assert signal.getsignal(signal.SIGTERM) == before
    assert not aborts.requested()
    aborts.check()
