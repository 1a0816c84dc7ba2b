"""``gpuops headroom check`` run as its executable, whose client calls a process forked before
the CLI loads makes ahead (gpuops.adapters.kube.prefetch), against the lab's real API server.

A plain check (and the Jenkins step's call, with a parameters file) takes every call's
result from that process, and the result is the one the same command computes in-process
(``run``, which makes its own calls). Where the fetching process cannot help (a namespace
that does not exist, a server that does not answer, a kubeconfig with an exec plugin, which
it does not read) the exit code and the document are the same as in-process. The process's
own two steps (GETs sent ahead, within a byte budget; the client's calls on their answers)
are run in this process too. Every executable run goes through a small subreaper
(``prctl(PR_SET_CHILD_SUBREAPER)``): a process the command left behind would become its
child, so "none left" proves the fetching process was stopped and reaped by the command.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.conftest_kube import KubeLab

from gpuops.adapters.kube import ahead, pager, paths, prefetch
from gpuops.adapters.kube.client import KubeClient
from gpuops.adapters.kube.creds import plain_kubeconfig
from gpuops.adapters.kube.transport import Transport
from gpuops.cli.main import run

pytestmark = pytest.mark.timeout(600)

GPUOPS = str(Path(sys.executable).parent / "gpuops")
#: Runs a command as its child, then says what is left of it: any process the command left
#: behind (running or not reaped) is re-parented to this subreaper.
SUBREAPER = """
import ctypes, json, os, subprocess, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
done = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=300)
try:
    left = os.waitpid(-1, os.WNOHANG)  # (0, 0): one still runs; (pid, status): not reaped
except ChildProcessError:
    left = None
print(json.dumps([done.returncode, done.stdout, done.stderr, left]))
"""
TAKEN = ": made ahead"
SENT = ": made now"
CALLS = ("ensure_namespace", "quota_limits", "list_nodes_and_bound_pods")


def executable(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``gpuops ARGS`` as the executable; asserts it left no process behind."""
    out = subprocess.run(
        [sys.executable, "-c", SUBREAPER, GPUOPS, *args],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", **(env or {})},
    )
    code, stdout, stderr, left = json.loads(out.stdout)
    assert left is None, f"the command left a process behind: {left}\n{stderr}"
    return code, stdout, stderr


def in_process(args: list[str]) -> tuple[int, str, str]:
    """``gpuops ARGS`` in this process: no process sends anything ahead."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(args)
    return code, out.getvalue(), err.getvalue()


def document(text: str) -> dict[str, Any]:
    """The result or error document ``text``, without the timings."""
    doc: dict[str, Any] = json.loads(text)
    (doc.get("result") or {}).pop("timings_s", None)
    return doc


def check(kubeconfig: Path, *more: str) -> list[str]:
    return ["--output", "json", "headroom", "check", "--gpus-per-pod", "1",
            "--kubeconfig", str(kubeconfig), *more]  # fmt: skip


def test_every_call_of_a_plain_check_is_made_ahead_and_the_result_is_the_same(
    kube_lab: KubeLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pages of 2: the fetching process walks the LISTs page by page as the pager does
    code, stdout, stderr = executable(
        ["-vv", *check(kube_lab.kubeconfig)], {"GPUOPS_KUBE_PAGE_SIZE": "2"}
    )
    assert code == 0, stderr
    assert [c for c in CALLS if f"{c}{TAKEN}" in stderr] == list(CALLS), stderr
    assert SENT not in stderr
    monkeypatch.setattr(pager, "PAGE_SIZE", 2)
    want_code, want_out, _ = in_process(check(kube_lab.kubeconfig))
    assert (code, document(stdout)) == (want_code, document(want_out))


def test_as_the_jenkins_step_calls_it_the_calls_are_made_ahead_too(
    kube_lab: KubeLab, tmp_path: Path
) -> None:
    """The options in a JSON parameters file, the kubeconfig in $KUBECONFIG (gpuopsExec)."""
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"gpus_per_pod": 1, "show_nodes": True}))
    env = {"GPUOPS_PARAMS_FILE": str(params), "KUBECONFIG": str(kube_lab.kubeconfig)}
    code, stdout, stderr = executable(["-vv", "--output", "json", "headroom", "check"], env)
    assert code == 0, stderr
    assert [c for c in CALLS if f"{c}{TAKEN}" in stderr] == list(CALLS), stderr
    args = ["--output", "json", "--params-file", str(params), "headroom", "check"]
    want_code, want_out, _ = in_process([*args, "--kubeconfig", str(kube_lab.kubeconfig)])
    assert (code, document(stdout)) == (want_code, document(want_out))


def test_the_calls_take_the_pages_fetched_ahead_and_past_the_budget_fetch_their_own(
    kube_lab: KubeLab, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The fetching process's two steps in this process (no fork): the GETs sent ahead (here
    with a budget of one byte: the first pages only), the client's calls on their answers."""
    monkeypatch.setattr(pager, "PAGE_SIZE", 2)
    monkeypatch.setattr(paths, "PAGE_SIZE", 2)  # as GPUOPS_KUBE_PAGE_SIZE=2 sets both
    monkeypatch.setattr(prefetch, "_BUDGET", 1)
    monkeypatch.setattr(ahead, "_channel", None)
    creds = plain_kubeconfig(str(kube_lab.kubeconfig), None)
    assert creds is not None
    answers_fd, fetched_fd = os.pipe()
    http = Transport(creds, ahead=False)
    fetching = threading.Thread(
        target=prefetch._fetch, args=(http, creds, ahead.Frames(fetched_fd), "default")
    )
    fetching.start()
    ahead.expect(0, answers_fd)
    kube = KubeClient(creds)
    with caplog.at_level(logging.DEBUG, logger="gpuops.adapters.kube.ahead"):
        nodes, pods, _ = kube.list_nodes_and_bound_pods(frozenset({"nvidia.com/gpu", "pods"}))
    fetching.join()
    kube.close()
    ahead._channel.close()
    pages = [r.getMessage() for r in caplog.records if "GET /api/v1/nodes?" in r.getMessage()]
    assert [p for p in pages if p.endswith(": fetched ahead")]  # the first ones
    assert [p for p in pages if p.endswith(": sent now")]  # the rest: the budget was spent
    monkeypatch.setattr(ahead, "_channel", None)
    plain = KubeClient(creds)
    want_nodes, want_pods, _ = plain.list_nodes_and_bound_pods(
        frozenset({"nvidia.com/gpu", "pods"})
    )
    plain.close()
    assert sorted(n.name for n in nodes) == sorted(n.name for n in want_nodes)
    assert (nodes, pods) == (want_nodes, want_pods)


def test_a_namespace_that_does_not_exist_is_the_same_error(kube_lab: KubeLab) -> None:
    args = check(kube_lab.kubeconfig, "-n", f"gpuops-none-{uuid.uuid4().hex[:6]}")
    code, _, stderr = executable(args)
    want_code, _, want_err = in_process(args)
    assert code == want_code == 2
    assert document(stderr) == document(want_err)


def test_a_kubeconfig_with_an_exec_plugin_is_read_by_the_command_alone(
    kube_lab: KubeLab, tmp_path: Path
) -> None:
    doc = yaml.safe_load(kube_lab.kubeconfig.read_text())
    token = doc["users"][0]["user"].pop("token")
    credential = {"apiVersion": "client.authentication.k8s.io/v1beta1",
                  "kind": "ExecCredential", "status": {"token": token}}  # fmt: skip
    doc["users"][0]["user"]["exec"] = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": sys.executable,
        "args": ["-c", f"print({json.dumps(json.dumps(credential))})"],
        "interactiveMode": "Never",
    }
    kubeconfig = tmp_path / "exec.yaml"
    kubeconfig.write_text(yaml.safe_dump(doc))
    code, stdout, stderr = executable(["-vv", *check(kubeconfig)])
    assert code == 0, stderr
    assert TAKEN not in stderr  # the calls are the command's own
    want_code, want_out, _ = in_process(check(kubeconfig))
    assert (code, document(stdout)) == (want_code, document(want_out))


def test_a_server_that_does_not_answer_is_the_same_error(kube_lab: KubeLab, tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nobody answers there
    doc = yaml.safe_load(kube_lab.kubeconfig.read_text())
    doc["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    kubeconfig = tmp_path / "closed.yaml"
    kubeconfig.write_text(yaml.safe_dump(doc))
    code, _, stderr = executable(check(kubeconfig))
    want_code, _, want_err = in_process(check(kubeconfig))
    assert code == want_code == 4
    assert document(stderr) == document(want_err)
