"""The ``gpuops`` executable's entry: for ``headroom check``, its requests go out first.

Loading click and the CLI takes ~0.1 s of CPU before a command asks its cluster anything;
at 500 nodes the API server's LISTs take ~0.3 s (issue 17, "The start"). For a command line
that is plainly ``gpuops [globals] headroom check [its options]`` (its options on the line or
in the JSON parameters file, as the Jenkins step gives them), :func:`main` first has a
process forked that sends the check's GETs (:func:`gpuops.usecases.ahead.headroom_check`),
then loads the CLI and runs the command as always; the command's transport takes an answer
fetched ahead only for the identical request. Anything unusual (another command, an option
or parameter this module does not know, ``--help``, ``--environment``, a parameters file
click would refuse) sends nothing ahead. This module loads nothing but ``gc``, ``os``,
``stat`` and ``sys`` (and ``json`` and the reader of :mod:`gpuops.fsio` for a parameters
file: the transport loads that module on this path anyway).
"""

from __future__ import annotations

import gc
import os
import stat
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without loading typing
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import NoReturn

#: gpuops.contract.PARAMS_ENV (not imported: it loads more than this module may)
_PARAMS_ENV = "GPUOPS_PARAMS_FILE"
#: The root's options before the command (with a value, or flags).
_GLOBAL_VALUE = frozenset({"-o", "--output", "--result-file", "--error-file", "--params-file"})
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
#: The keys of a parameters file the command takes (its options', ``-o``/``-v`` are not).
_CHECK_KEYS = frozenset(
    o[2:].replace("-", "_") for o in _CHECK_VALUE | _CHECK_FLAG if o[:2] == "--"
) - {"output", "verbose"}
#: gpuops.contract.MAX_PARAMS_BYTES
_PARAMS_MAX = 1 << 20


def main() -> NoReturn:
    cluster = headroom_check_cluster(sys.argv[1:], os.environ)
    if cluster is None:
        from gpuops.cli.main import main as run  # noqa: PLC0415

        run()
    # The modules the check loads make some hundred thousand objects and no garbage: the
    # cyclic collector would walk them some hundred times for nothing (3 % of the command's
    # CPU, measured with callgrind). It runs again once they are loaded.
    gc.disable()
    from gpuops.usecases import ahead  # noqa: PLC0415 - only for headroom check

    ahead.headroom_check(*cluster)
    from gpuops.cli import headroom  # noqa: F401, PLC0415 - the command, loaded here
    from gpuops.cli.main import main as run  # noqa: PLC0415

    gc.enable()
    run()


def headroom_check_cluster(
    argv: Sequence[str], environ: Mapping[str, str]
) -> tuple[str | None, str | None, str] | None:
    """(kubeconfig, context, namespace) of a plain ``headroom check`` command line, as click
    will read them: the last option given wins, then ``$KUBECONFIG`` (for the kubeconfig),
    then the parameters file (``--params-file``, ``$GPUOPS_PARAMS_FILE``: how the Jenkins
    step calls it), then the default; ``None`` for anything else."""
    if environ.get("GPUOPS_OUTPUT", "") not in ("", *_OUTPUTS):
        return None
    args = list(argv)
    if "headroom" not in args:
        return None
    at = args.index("headroom")
    if args[at + 1 : at + 2] != ["check"]:
        return None
    given = _options(args[at + 2 :], _CHECK_VALUE, _CHECK_FLAG)
    root = _options(args[:at], _GLOBAL_VALUE, _GLOBAL_FLAG)
    if root is None or given is None:
        return None
    params_file = root.get("--params-file") or environ.get(_PARAMS_ENV)
    params = _params(params_file) if params_file else {}
    if params is None or ("--gpus-per-pod" not in given and "gpus_per_pod" not in params):
        return None  # click refuses the command line

    def value(option: str, env: str = "") -> str | None:
        if option in given:
            return given[option]
        if env and environ.get(env):  # as click: an empty variable is none
            return environ[env]
        found = params.get(option[2:])
        return found if isinstance(found, str) else None

    kubeconfig, context = value("--kubeconfig", "KUBECONFIG"), value("--context")
    namespace = value("--namespace")
    namespace = "default" if namespace is None else namespace
    if any(v is not None and not _text(v) for v in (kubeconfig, context)):
        return None  # click refuses it (exit 2): no request may go out for it
    if not _dns_label(namespace):
        return None
    return kubeconfig, context, namespace


def _params(path: str) -> dict[str, object] | None:
    """The parameters file, if it is one click will take for ``headroom check`` (a regular
    file of at most 1 MiB, a JSON object of the check's option names but ``environment`` and
    ``release_config``, the kubeconfig, context and namespace strings); else ``None``."""
    import json  # noqa: PLC0415 - only with a parameters file

    from gpuops import fsio  # noqa: PLC0415 - loaded by the transport on this path anyway
    from gpuops.errors import InvalidInput  # noqa: PLC0415

    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return None  # a link: the command follows it; nothing is sent ahead for it
        doc = json.loads(fsio.read_text(path, cap=_PARAMS_MAX, what="parameters file"))
    except (OSError, ValueError, RecursionError, InvalidInput):
        return None
    if not isinstance(doc, dict) or not set(doc) <= _CHECK_KEYS:
        return None
    where = [doc[k] for k in ("kubeconfig", "context", "namespace") if k in doc]
    return doc if all(isinstance(v, str) and v for v in where) else None


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
