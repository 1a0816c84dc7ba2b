"""``gpuops headroom check`` run as its executable, whose GETs a process forked before the CLI
loads sends ahead (gpuops.adapters.kube.prefetch), against the lab's real API server.

A plain check takes every answer from that process (its own transport sends nothing) and
its result is the one the same command computes in-process (``run``, which sends its own
requests). Where the fetching process cannot help (a namespace that does not exist, a server
that does not answer, a kubeconfig with an exec plugin, which it does not read) the exit code
and the document are the same as in-process. Every run goes through a small subreaper
(``prctl(PR_SET_CHILD_SUBREAPER)``): a process the command left behind would become its
child, so "none left" proves the fetching process was stopped and reaped by the command.
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.conftest_kube import KubeLab

from gpuops.adapters.kube import pager
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
TAKEN = "answered by the request sent ahead"
SENT = "; sending it"


def executable(
    args: list[str], env: dict[str, str] | None = None, entry: list[str] | None = None
) -> tuple[int, str, str]:
    """``gpuops ARGS`` as the executable (or ``entry``); asserts it left no process behind."""
    out = subprocess.run(
        [sys.executable, "-c", SUBREAPER, *(entry or [GPUOPS]), *args],
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


def test_every_get_of_a_plain_check_is_answered_ahead_and_the_result_is_the_same(
    kube_lab: KubeLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pages of 2: the fetching process walks the LISTs page by page as the pager does
    code, stdout, stderr = executable(
        ["-vv", *check(kube_lab.kubeconfig)], {"GPUOPS_KUBE_PAGE_SIZE": "2"}
    )
    assert code == 0, stderr
    taken = [line for line in stderr.splitlines() if TAKEN in line]
    assert not [line for line in stderr.splitlines() if SENT in line], stderr
    nodes = len(kube_lab.core.list_node().items)
    assert len([line for line in taken if "/api/v1/nodes?" in line]) == -(-nodes // 2)
    assert [line for line in taken if "/resourcequotas" in line]
    assert [line for line in taken if "/api/v1/pods?" in line]
    monkeypatch.setattr(pager, "PAGE_SIZE", 2)
    want_code, want_out, _ = in_process(check(kube_lab.kubeconfig))
    assert (code, document(stdout)) == (want_code, document(want_out))


def test_as_the_jenkins_step_calls_it_the_gets_are_sent_ahead_too(
    kube_lab: KubeLab, tmp_path: Path
) -> None:
    """The options in a JSON parameters file, the kubeconfig in $KUBECONFIG (gpuopsExec)."""
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"gpus_per_pod": 1, "show_nodes": True}))
    env = {"GPUOPS_PARAMS_FILE": str(params), "KUBECONFIG": str(kube_lab.kubeconfig)}
    code, stdout, stderr = executable(["-vv", "--output", "json", "headroom", "check"], env)
    assert code == 0, stderr
    assert [line for line in stderr.splitlines() if TAKEN in line]
    assert SENT not in stderr
    args = ["--output", "json", "--params-file", str(params), "headroom", "check"]
    want_code, want_out, _ = in_process([*args, "--kubeconfig", str(kube_lab.kubeconfig)])
    assert (code, document(stdout)) == (want_code, document(want_out))


#: ``gpuops ARGS`` as the executable runs it, with the fetching process's byte budget at one
#: byte: it stops asking for pages after the first ones (the command asks for the rest).
SMALL_BUDGET = """
import sys
from gpuops.adapters.kube import prefetch
prefetch._BUDGET = 1
sys.argv = ["gpuops", *sys.argv[1:]]
from gpuops.cli.start import main
main()
"""


def test_past_its_budget_the_pages_are_asked_for_by_the_command(
    kube_lab: KubeLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, stdout, stderr = executable(
        ["-vv", *check(kube_lab.kubeconfig)],
        {"GPUOPS_KUBE_PAGE_SIZE": "2"},
        entry=[sys.executable, "-c", SMALL_BUDGET],
    )
    assert code == 0, stderr
    pages = [line for line in stderr.splitlines() if "GET /api/v1/nodes?" in line]
    assert [line for line in pages if TAKEN in line]  # the first ones
    assert [line for line in pages if "not fetched ahead; sending it" in line]  # the rest
    monkeypatch.setattr(pager, "PAGE_SIZE", 2)
    want_code, want_out, _ = in_process(check(kube_lab.kubeconfig))
    assert (code, document(stdout)) == (want_code, document(want_out))


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
    assert TAKEN not in stderr
    assert "/api/v1/nodes?limit=1000: not fetched ahead; sending it" in stderr
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
