"""A Jenkins abort (SIGTERM) after a playbook run: ansible-runner 2.4's ``run()`` replaces the
SIGTERM and SIGINT handlers with one that only sets a flag (``ansible_runner.utils.
signal_handler``) whenever no ``cancel_callback`` is given, and never puts them back: the abort
was swallowed and the rollout went on with its next batch. gpuops passes its own cancel
callback (:mod:`gpuops.adapters.aborts`), so the process keeps its handlers.

Real ansible-runner and ansible-playbook (a shipped playbook on a host pattern that matches
nothing: no host is reached), in a child process so the test's own handlers stay as they are.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    from pathlib import Path
    from gpuops.adapters.ansible import runner
    from gpuops.errors import GpuOpsError
    from gpuops.fsio import OutDir

    folder = Path(sys.argv[1])
    inventory = folder / "hosts.yml"
    inventory.write_text("all:\\n  hosts:\\n    real-host: {}\\n")
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        runner.run_playbook(
            "update_gpu_nodes", str(inventory), ["absent-host"],
            data_dir=OutDir(folder / "art", option="artifacts_dir"), ident="x",
        )
    except GpuOpsError as exc:  # no host matched: ansible-playbook exits 1, said so
        print("ran:", exc.message, flush=True)
    after = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    print("handlers kept" if after == before else f"handlers replaced: {after}", flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
    print("survived SIGTERM", flush=True)
    """
)


def test_a_sigterm_after_a_playbook_run_still_ends_the_process(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert "ran: ansible-playbook update_gpu_nodes did not run" in done.stdout, done.stderr
    assert "handlers kept" in done.stdout, done.stdout
    assert "survived" not in done.stdout
    assert done.returncode == -signal.SIGTERM, (done.returncode, done.stdout, done.stderr)
    assert list((tmp_path / "art" / "artifacts" / "x").glob("stdout"))  # the runner did run
