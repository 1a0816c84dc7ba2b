"""The ``gpuops`` executable's entry: for ``headroom check``, its requests go out first.

Loading click and the CLI takes ~0.15 s of CPU before a command asks its cluster anything;
at 500 nodes the API server's LISTs take as long again (issue 17, "The start"). For a command
line that is plainly ``gpuops [globals] headroom check [its options]``, :func:`main` first has
a process forked that sends the check's GETs (:func:`gpuops.usecases.ahead.headroom_check`),
then loads the CLI and runs the command as always; the command's client takes an answer
fetched ahead only for the identical request. Anything unusual in the command line (another
command, an option this module does not know, ``--help``, ``--environment``, a parameters
file) starts nothing. This module loads nothing but ``os`` and ``sys``.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without loading typing
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import NoReturn

#: gpuops.contract.PARAMS_ENV (not imported: it loads more than this module may)
_PARAMS_ENV = "GPUOPS_PARAMS_FILE"
#: The root's options before the command (with a value, or flags).
_GLOBAL_VALUE = frozenset({"-o", "--output", "--result-file", "--error-file"})
_GLOBAL_FLAG = frozenset({"-v", "--verbose", "--debug"})
#: The options of ``headroom check`` (with a value, or flags) but ``--environment`` and
#: ``--release-config``: the cluster and namespace would come from a file.
_CHECK_VALUE = frozenset(
    {
        "--gpus-per-pod", "--pods", "--node-selector", "--node-affinity", "--tolerations",
        "-n", "--namespace", "--resource", "--reserve", "--reserve-per-class", "--group-by",
        "--kubeconfig", "--context", "--webhook-url-env", "--link", "--report-dir",
        "-o", "--output",
    }
)  # fmt: skip
_CHECK_FLAG = frozenset({"--show-nodes", "-v", "--verbose"})
_OUTPUTS = ("text", "json")


def main() -> NoReturn:
    cluster = headroom_check_cluster(sys.argv[1:], os.environ)
    if cluster is not None:
        from gpuops.usecases import ahead  # noqa: PLC0415 - only for headroom check

        ahead.headroom_check(*cluster)
    from gpuops.cli.main import main as run  # noqa: PLC0415 - after the requests went out

    run()


def headroom_check_cluster(
    argv: Sequence[str], environ: Mapping[str, str]
) -> tuple[str | None, str | None, str] | None:
    """(kubeconfig, context, namespace) of a plain ``headroom check`` command line, as click
    will read them (the last one given wins; ``--kubeconfig`` else ``$KUBECONFIG``; the
    namespace ``default`` unless given); ``None`` for anything else."""
    if environ.get(_PARAMS_ENV) or environ.get("GPUOPS_OUTPUT", "") not in ("", *_OUTPUTS):
        return None
    args = list(argv)
    if "headroom" not in args:
        return None
    at = args.index("headroom")
    if args[at + 1 : at + 2] != ["check"]:
        return None
    given = _options(args[at + 2 :], _CHECK_VALUE, _CHECK_FLAG)
    if _options(args[:at], _GLOBAL_VALUE, _GLOBAL_FLAG) is None or given is None:
        return None
    if "--gpus-per-pod" not in given:
        return None  # click refuses the command line
    if "--kubeconfig" in given:
        kubeconfig: str | None = given["--kubeconfig"]
    else:
        kubeconfig = environ.get("KUBECONFIG") or None  # as click: an empty variable is none
    context, namespace = given.get("--context"), given.get("--namespace", "default")
    if any(v is not None and not _text(v) for v in (kubeconfig, context)):
        return None  # click refuses it (exit 2): no request may go out for it
    if not _dns_label(namespace):
        return None
    return kubeconfig, context, namespace


def _options(
    args: list[str], with_value: frozenset[str], flags: frozenset[str]
) -> dict[str, str] | None:
    """The option values in ``args`` (``-n v``, ``--name v``, ``--name=v``; flags and
    ``-vv`` as ""), or ``None`` if anything else is there (a positional, ``--``, ``-h``, an
    unknown option)."""
    found: dict[str, str] = {}
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        more_v = len(name) > 2 and name[0] == "-" and set(name[1:]) == {"v"}  # -vv
        if name in flags or (more_v and "-v" in flags):
            if eq:
                return None
            i += 1
            continue
        if name not in with_value or (eq and not name.startswith("--")):
            return None
        if not eq:
            if i + 1 >= len(args):
                return None
            value = args[i + 1]
            i += 1
        if name in ("-o", "--output") and value not in _OUTPUTS:
            return None
        found["--namespace" if name == "-n" else name] = value
        i += 1
    return found


def _text(value: str) -> bool:
    """What click's ``Text`` type accepts for a path or a name (stricter is fine: no
    control characters, 1 to 4096 characters)."""
    return 0 < len(value) <= 4096 and value.isprintable()


def _dns_label(value: str) -> bool:
    """A namespace's name (RFC 1123 label), as ``--namespace`` accepts it."""
    return (
        0 < len(value) <= 63
        and value.isascii()
        and value.replace("-", "").isalnum()
        and value == value.lower()
        and value[0] != "-"
        and value[-1] != "-"
    )
