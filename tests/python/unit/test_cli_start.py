"""The executable's entry (gpuops.cli.start): which command lines have ``headroom check``'s
GETs sent ahead, for what kubeconfig, context and namespace; anything unusual sends nothing
ahead. The options it knows are checked against the real commands, so that an option added
there and not here makes a command line unusual (nothing sent ahead), never misread.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from gpuops import contract
from gpuops.cli import start
from gpuops.cli.headroom import check

CHECK = ["headroom", "check", "--gpus-per-pod", "4"]


def ahead(*argv: str, **env: str) -> tuple[str | None, str | None, str] | None:
    return start.headroom_check_cluster(list(argv), env)


def test_a_plain_headroom_check_has_its_gets_sent_ahead_for_its_cluster() -> None:
    assert ahead(*CHECK) == (None, None, "default")
    assert ahead(*CHECK, KUBECONFIG="/k/env") == ("/k/env", None, "default")
    assert ahead(*CHECK, KUBECONFIG="") == (None, None, "default")  # click: empty is unset
    got = ahead("-o", "json", "-vv", "--debug", "--result-file", "r.json", *CHECK, "--pods", "2",
                "--kubeconfig", "/k/a", "--context=c1", "--resource", "nvidia.com/mig-1g",
                "-n", "team", "--show-nodes", "--kubeconfig=/k/b", "-o", "text", "-v",
                "--namespace=infer", KUBECONFIG="/k/env")  # fmt: skip
    assert got == ("/k/b", "c1", "infer")  # the last one given wins, as in click


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["headroom", "check", "--help"], {}),
        (["--help", *CHECK], {}),
        (["--version", *CHECK], {}),
        ([*CHECK, "-h"], {}),
        (["headroom", "explain", "pod/x"], {}),
        (["nodes", "inspect"], {}),
        ([], {}),
        (["headroom", "check", "--pods", "2"], {}),  # --gpus-per-pod is required
        ([*CHECK, "--no-such-option"], {}),
        ([*CHECK, "extra"], {}),
        ([*CHECK, "--"], {}),
        ([*CHECK, "--kubeconfig"], {}),  # its value missing
        ([*CHECK, "--kubeconfig="], {}),  # empty: click refuses it
        ([*CHECK, "--kubeconfig", "/k/a\n"], {}),  # a control character: click refuses it
        ([*CHECK, "--context", "x" * 4097], {}),  # too long for click
        (CHECK, {"KUBECONFIG": "/k/\x1b"}),
        ([*CHECK, "-o", "yaml"], {}),
        ([*CHECK, "--show-nodes=1"], {}),
        ([*CHECK, "-n=team"], {}),
        ([*CHECK, "-n", "Team"], {}),  # not a namespace's name: click refuses it
        ([*CHECK, "-n", "a/b"], {}),
        ([*CHECK, "--namespace", "-x"], {}),
        ([*CHECK, "--debug"], {}),  # a root option only
        ([*CHECK, "-e", "staging"], {}),  # the cluster and namespace come from a file
        ([*CHECK, "--environment=staging"], {}),
        ([*CHECK, "--release-config", "r.yaml"], {}),
        (["--params-file", "/no/such/p.json", *CHECK], {}),  # click refuses it
        (CHECK, {"GPUOPS_PARAMS_FILE": "/no/such/p.json"}),
        (CHECK, {"GPUOPS_OUTPUT": "yaml"}),
    ],
)
def test_anything_unusual_sends_nothing_ahead(argv: list[str], env: dict[str, str]) -> None:
    assert ahead(*argv, **env) is None


def params(tmp_path: Path, doc: object) -> str:
    path = tmp_path / "params.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_parameters_file_says_where_as_click_reads_it(tmp_path: Path) -> None:
    """As the Jenkins step calls it: the options in the JSON parameters file, which an option
    on the command line (and $KUBECONFIG, for the kubeconfig) outweighs."""
    doc = {"gpus_per_pod": 4, "kubeconfig": "/k/p", "context": "c", "namespace": "team",
           "show_nodes": True, "reserve_per_class": {"a": 1}}  # fmt: skip
    env = {"GPUOPS_PARAMS_FILE": params(tmp_path, doc)}
    assert ahead("headroom", "check", **env) == ("/k/p", "c", "team")
    assert ahead("headroom", "check", KUBECONFIG="/k/env", **env) == ("/k/env", "c", "team")
    assert ahead("headroom", "check", "-n", "infer", "--kubeconfig", "/k/a", **env) == (
        "/k/a", "c", "infer"
    )  # fmt: skip
    file = params(tmp_path, {"gpus_per_pod": 1})
    assert ahead("--params-file", file, "headroom", "check") == (None, None, "default")


@pytest.mark.parametrize(
    "doc",
    [
        {"kubeconfig": "/k/p"},  # no gpus_per_pod: click refuses it
        {"gpus_per_pod": 4, "environment": "staging"},  # the cluster comes from a file
        {"gpus_per_pod": 4, "release_config": "r.yaml"},
        {"gpus_per_pod": 4, "no_such_option": 1},
        {"gpus_per_pod": 4, "namespace": 7},
        {"gpus_per_pod": 4, "kubeconfig": ""},
        {"gpus_per_pod": 4, "namespace": "Not-A-Namespace"},
        [1, 2],
        "not an object",
    ],
)
def test_a_parameters_file_click_refuses_sends_nothing_ahead(tmp_path: Path, doc: object) -> None:
    assert ahead("headroom", "check", GPUOPS_PARAMS_FILE=params(tmp_path, doc)) is None


def test_a_parameters_file_that_is_no_regular_file_of_json_sends_nothing_ahead(
    tmp_path: Path,
) -> None:
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"gpus_per_pod": 4, "link": "x" * (1 << 20)}))
    broken = tmp_path / "broken.json"
    broken.write_text('{"gpus_per_pod": 4,')
    link = tmp_path / "link.json"
    link.symlink_to(params(tmp_path, {"gpus_per_pod": 4}))
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    for path in (big, broken, link, fifo, tmp_path):
        assert ahead("headroom", "check", GPUOPS_PARAMS_FILE=str(path)) is None, path


def test_the_options_known_are_those_of_headroom_check_and_of_the_root() -> None:
    from gpuops.cli.main import cli

    def kinds(command: click.Command) -> dict[str, bool]:
        """Each option name of ``command`` (with -o/-v after it): whether it is a flag."""
        params = command.get_params(click.Context(command))
        return {o: bool(p.is_flag or p.count) for p in params
                if isinstance(p, click.Option) for o in p.opts}  # fmt: skip

    for known, command in [
        ((start._CHECK_VALUE, start._CHECK_FLAG), check),
        ((start._GLOBAL_VALUE, start._GLOBAL_FLAG), cli),
    ]:
        real = kinds(command)
        values, flags = known
        mine = dict.fromkeys(values, False) | dict.fromkeys(flags, True)
        assert mine == {o: real.get(o) for o in mine}
    # every option of the check is known but those naming a file the cluster would come from
    unknown = set(kinds(check)) - start._CHECK_VALUE - start._CHECK_FLAG - {"-h", "--help"}
    assert unknown == {"-e", "--environment", "--release-config"}
    keys = {p.name for p in check.params if isinstance(p, click.Option)} - {"help"}
    assert keys - start._CHECK_KEYS == {"environment", "release_config"}
    assert not start._CHECK_KEYS - keys
    assert start._PARAMS_MAX == contract.MAX_PARAMS_BYTES
    assert start._PARAMS_ENV == contract.PARAMS_ENV


def test_the_entry_module_loads_nothing_but_gc_os_stat_and_sys() -> None:
    code = (
        "import sys; before = set(sys.modules); import gpuops.cli.start;"
        "print(sorted(set(sys.modules) - before))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['__future__', 'gc', 'gpuops', 'gpuops.cli', 'gpuops.cli.start']"
