"""The shape the product keeps: a cheap start, one declaration per parameter, strict types.

- ``gpuops --version``, ``--help`` and ``describe`` import no Kubernetes, Docker, Ansible,
  Jenkins or report library (the Groovy runner's version check runs before every step), nor
  does ``headroom check`` load what its start does not need (bench/headroom_bench.py times it);
- every option of every command (the lab's too) has a gpuops type (so the params file is checked
  against its JSON kinds), and the Jenkins library's copy of ``gpuops describe`` and the
  steps' help pages are what the CLI says (``scripts/step-docs.py --check``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import click
import pytest

from gpuops.cli.main import COMMANDS, cli, plugin_commands
from gpuops.cli.types import GpuOpsType

ROOT = Path(__file__).resolve().parents[3]
HEAVY = {
    "kubernetes",
    "docker",
    "ansible",
    "ansible_runner",
    "jenkins",
    "urllib3",
    "requests",
    "pygal",
    "jinja2",
    "yaml",
    "cryptography",
}


@pytest.mark.parametrize("argv", [["--version"], ["--output", "json", "--version"], ["--help"]])
def test_start_imports_no_heavy_library(argv: list[str]) -> None:
    code = (
        "import sys, io, contextlib\n"
        "from gpuops.cli.main import run\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = run({argv!r})\n"
        "print(rc, sorted({m.split('.')[0] for m in sys.modules}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split(" ", 1)
    assert out[0] == "0"
    loaded = set(json.loads(out[1].replace("'", '"')))
    assert not loaded & HEAVY, f"{argv} imported {sorted(loaded & HEAVY)}"


#: Not needed to start ``headroom check``: the entry-point scan (a product command is found
#: in COMMANDS), protobuf (loaded while the API server prepares the first LIST page),
#: urllib.request (only to post a webhook), secrets/tempfile (only to write files).
NOT_AT_CHECK_START = {
    "importlib.metadata",
    "google.protobuf",
    "urllib.request",
    "secrets",
    "tempfile",
}


def _loaded_by(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, set[str]]:
    """Exit code of ``gpuops ARGV`` in a fresh interpreter, and every module it loaded."""
    code = (
        "import sys, io, contextlib\n"
        "from gpuops.cli.main import run\n"
        "quiet = io.StringIO()\n"
        "with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):\n"
        f"    rc = run({argv!r})\n"
        "print(rc, ' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout.split(" ")
    return int(out[0]), set(out[1:])


def test_headroom_check_start_loads_only_what_it_needs(tmp_path: Path) -> None:
    """The command's own imports (``--help``) and a check that reaches for a cluster (none
    listens: exit 4) load no heavy library and nothing of :data:`NOT_AT_CHECK_START`."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nobody answers there
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t0ken-for-tests"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    check = ["headroom", "check", "--gpus-per-pod", "1"]
    for argv, expected in ((["headroom", "check", "--help"], 0), (check, 4)):
        rc, loaded = _loaded_by(argv, env)
        assert rc == expected, argv
        heavy = {m for m in loaded if m.split(".")[0] in HEAVY}
        if argv == check:
            heavy -= {m for m in loaded if m.split(".")[0] == "yaml"}  # the kubeconfig's
        assert not heavy, f"{argv} imported {sorted(heavy)}"
        needless = {m for m in loaded if m in NOT_AT_CHECK_START or m.startswith("google.")}
        assert not needless, f"{argv} imported {sorted(needless)}"


def test_a_protobuf_list_is_read_without_the_json_decoder() -> None:
    """The API server answers gpuops's LISTs in protobuf: msgspec (the JSON pages' decoder,
    with typing_extensions and more) is loaded only for a JSON answer."""
    code = (
        "import sys\n"
        "from gpuops.adapters.kube import client, pager, proto\n"
        "pods = proto.message_type('PodList')()\n"
        "pods.items.add().metadata.name = 'p'\n"
        "raw = proto.message_type('Unknown')(raw=pods.SerializeToString()).SerializeToString()\n"
        "reader = pager.pod_reader(None, pager.PROTOBUF_MEDIA)\n"
        "items = reader.feed(proto.MAGIC + raw) + reader.end()\n"
        "print(len(items), 'msgspec' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "False"]


def _leaf_commands() -> list[tuple[str, click.Command]]:
    """Every leaf command: the product's and those installed distributions add (``lab``)."""
    ctx = click.Context(cli)
    out = []
    for name in sorted({*COMMANDS, *plugin_commands()}):
        command = cli.get_command(ctx, name)
        if isinstance(command, click.Group):
            out += [(f"{name} {sub}", command.commands[sub]) for sub in command.commands]
        elif command is not None:
            out.append((name, command))
    return out


@pytest.mark.parametrize(("path", "command"), _leaf_commands())
def test_every_option_has_a_strict_type(path: str, command: click.Command) -> None:
    for param in command.params:
        if isinstance(param, click.Option) and param.name != "help":
            assert param.is_flag or isinstance(param.type, GpuOpsType), (
                f"gpuops {path} {param.opts[0]}: use a gpuops.cli.types type, not click's "
                f"{param.type.name}"
            )


def test_step_docs_and_the_library_resource_match_the_cli() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "step-docs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
