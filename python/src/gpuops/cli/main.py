"""``gpuops``: the root command, global options, output and exit-code mapping.

Command groups are imported only when invoked (``gpuops --version`` and ``--help`` import no
Kubernetes, Docker or Ansible library): the product's groups are listed in
:data:`COMMANDS`, other distributions add theirs through the ``gpuops.commands`` entry point
group (the lab package adds ``gpuops lab``).
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import click
from click.core import ParameterSource

from gpuops import __version__, fsio
from gpuops.cli.base import GpuOpsGroup, Runtime, Shown
from gpuops.cli.options import OUTPUT_HELP, OUTPUTS, VERBOSE_HELP
from gpuops.contract import (
    ERROR_ENV,
    PARAMS_ENV,
    RESULT_ENV,
    error_document,
    result_document,
    write_document,
)
from gpuops.errors import (
    ExitCode,
    GpuOpsError,
    InternalError,
    InvalidInput,
    OperationFailed,
    error_categories,
)
from gpuops.logs import configure_logging, redact, secret_values, without_userinfo
from gpuops.usecases import reports

log = logging.getLogger(__name__)

#: The product's command groups: name -> "module:attribute", imported on first use.
COMMANDS: dict[str, str] = {
    "describe": "gpuops.cli.describe:describe",
    "headroom": "gpuops.cli.headroom:headroom",
    "nodes": "gpuops.cli.nodes:nodes",
    "report": "gpuops.cli.report:report",
    "image": "gpuops.cli.image:image",
    "release": "gpuops.cli.release:release",
    "jenkins": "gpuops.cli.jenkins:jenkins",
}
#: Entry point group through which other distributions add command groups.
PLUGIN_GROUP = "gpuops.commands"


def _exit_code_help() -> str:
    rows = "\n".join(f"  {c.code:<3} {c.category:<14} {c.meaning}" for c in error_categories())
    return (
        "\b\nExit codes:\n" + rows + "\n\n\b\nParameters as JSON (for Jenkins and other callers):\n"
        f"  ${PARAMS_ENV}  a JSON object whose keys are the command's option names\n"
        f"  ${RESULT_ENV}  where the result document is written\n"
        f"  ${ERROR_ENV}   where the error document is written on failure"
    )


@functools.cache
def plugin_commands() -> dict[str, str]:
    """Command groups other installed distributions add: name -> "module:attribute".

    Scanning the installed distributions' entry points takes tens of milliseconds, so it is
    done only for a name that is not a product command (and ``--help``), once per process."""
    from importlib.metadata import entry_points  # noqa: PLC0415 - only when listing commands

    return {ep.name: ep.value for ep in entry_points(group=PLUGIN_GROUP) if ep.name not in COMMANDS}


def _load(name: str, target: str) -> click.Command:
    """Import the command group ``name`` from ``target``. A group that cannot be imported is
    a broken installation (exit 1, naming it), not a bug of the command that was asked for."""
    module, _, attr = target.partition(":")
    where = "gpuops" if name in COMMANDS else f"the distribution that adds it ({PLUGIN_GROUP})"
    try:
        command = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, SyntaxError) as exc:
        raise OperationFailed(
            f"the command group '{name}' cannot be loaded from {target}: {type(exc).__name__}",
            hint=f"the installation is incomplete or broken: reinstall {where}",
        ) from None
    if not isinstance(command, click.Command):
        raise OperationFailed(
            f"the command group '{name}' from {target} is not a click command",
            hint=f"reinstall {where}",
        )
    return command


class RootGroup(GpuOpsGroup):
    """The root group: product commands from :data:`COMMANDS`, plugins from entry points."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *plugin_commands(), *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        target = COMMANDS.get(cmd_name) or plugin_commands().get(cmd_name)
        if target is None:
            return None
        command = _load(cmd_name, target)
        self.commands[cmd_name] = command
        return command


@click.group(
    cls=RootGroup,
    invoke_without_command=True,
    epilog=_exit_code_help(),
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(OUTPUTS),
    default="text",
    envvar="GPUOPS_OUTPUT",
    show_default=True,
    help=OUTPUT_HELP + " Also after the command: gpuops headroom check ... -o json.",
)
@click.option("-v", "--verbose", count=True, help=VERBOSE_HELP + " Also after the command.")
@click.option("--debug", is_flag=True, help="Log debug messages and show tracebacks.")
@click.option("--version", is_flag=True, help="Print the version and exit.")
@click.option(
    "--params-file",
    envvar=PARAMS_ENV,
    type=click.Path(dir_okay=False),
    help=f"JSON object of option values for the command [env: {PARAMS_ENV}].",
)
@click.option(
    "--result-file",
    envvar=RESULT_ENV,
    type=click.Path(dir_okay=False),
    help=f"Write the result document here [env: {RESULT_ENV}].",
)
@click.option(
    "--error-file",
    envvar=ERROR_ENV,
    type=click.Path(dir_okay=False),
    help=f"Write the error document here on failure [env: {ERROR_ENV}].",
)
@click.pass_context
def cli(
    ctx: click.Context,
    output: str,
    verbose: int,
    debug: bool,
    version: bool,
    params_file: str | None,
    result_file: str | None,
    error_file: str | None,
) -> Shown | None:
    """gpuops: one safe release path for GPU clusters.

    Drives Ansible against GPU nodes, the Kubernetes API, the image builder and the
    registry; the gpu-ops Jenkins library calls it with JSON parameters.
    """
    presumed = isinstance(ctx.obj, Runtime)  # run() read the argv: -o after the command too
    runtime = ctx.ensure_object(Runtime)
    if not presumed or ctx.get_parameter_source("output") is ParameterSource.COMMANDLINE:
        runtime.output = output
    runtime.debug, runtime.verbose = debug, verbose
    runtime.params_file = params_file or None
    runtime.result_file, runtime.error_file = result_file or None, error_file or None
    configure_logging(debug, verbose)
    if version:
        runtime.command = "version"
        return Shown({"version": __version__}, f"gpuops {__version__}")
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(0)
    for what, path in (("result", runtime.result_file), ("error", runtime.error_file)):
        _check_writable(what, path)
    return None


def _check_writable(what: str, path: str | None) -> None:
    """Refuse, before anything runs, a result/error file that could not be written."""
    if not path:
        return
    parent = Path(path).parent
    try:
        usable = parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)
        # the temporary file beside it has a longer name: keep room for it
        extra = fsio.TEMP_NAME_EXTRA
        usable = usable and len(Path(path).name.encode()) + extra <= os.pathconf(
            parent, "PC_NAME_MAX"
        )
    except (OSError, ValueError):  # a name no directory can have (too long, ...)
        usable = False
    if not usable:
        env = RESULT_ENV if what == "result" else ERROR_ENV
        raise InvalidInput(
            f"the {what} file {path} cannot be written: {parent} is not a writable directory "
            "or the name is too long",
            hint=f"point --{what}-file / ${env} into an existing, writable directory",
            field=f"{what}_file",
        )


def _emit(runtime: Runtime, outcome: Shown) -> None:
    if runtime.result_file:
        try:
            write_document(
                runtime.result_file,
                result_document(runtime.command, outcome.data),
                option="result_file",
            )
        except GpuOpsError as exc:
            raise OperationFailed(
                f"the result file could not be written: {exc.message}",
                hint="the operation itself completed; check the path and free space",
            ) from None
    if runtime.output == "json":
        if runtime.command == "version":
            doc: Mapping[str, Any] = outcome.data
        else:
            doc = result_document(runtime.command, outcome.data)
        click.echo(_redacted_json(doc))
    elif outcome.text:
        click.echo(_redacted(outcome.text))


def _redacted_json(doc: Mapping[str, Any]) -> str:
    """``doc`` as gpuops prints it: the JSON of the files, redacted the same way."""
    from gpuops.fsio import dumps  # noqa: PLC0415 - stdlib only; the one redaction

    return dumps(doc).rstrip("\n")


def _redacted(text: str) -> str:
    from gpuops.fsio import redact_text  # noqa: PLC0415

    return redact_text(text)


def _fail(runtime: Runtime, error: GpuOpsError, outcome: Shown | None = None) -> int:
    """Report ``error``: the error document (with the operation's ``result`` when it ran,
    e.g. a refused gate's numbers) to the error file and, as asked, stderr."""
    secrets = secret_values()
    # no URL in a message keeps its user:password@, whoever built the message
    error.message = redact(without_userinfo(error.message), secrets)
    error.hint = redact(without_userinfo(error.hint), secrets) if error.hint else error.hint
    doc = error_document(
        runtime.command,
        error,
        outcome.data if outcome else None,
        outcome.verdict if outcome and outcome.error is error else None,
    )
    if runtime.error_file:
        try:
            write_document(runtime.error_file, doc, option="error_file")
        except GpuOpsError as exc:  # the error must still reach the user
            click.echo(f"gpuops: the error file could not be written: {exc.message}", err=True)
    if runtime.output == "json":
        click.echo(_redacted_json(doc), err=True)
    else:
        if outcome is not None and outcome.text:
            click.echo(_redacted(outcome.text))
        click.echo(f"gpuops: error: {error.message}", err=True)
        if error.hint:
            click.echo(f"hint: {error.hint}", err=True)
    return int(error.exit_code)


def _presumed_runtime(argv: Sequence[str]) -> Runtime:
    """Global options as far as they can be known when parsing itself failed."""
    runtime = Runtime(
        output=os.environ.get("GPUOPS_OUTPUT", "text"),
        result_file=os.environ.get(RESULT_ENV) or None,
        error_file=os.environ.get(ERROR_ENV) or None,
    )
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == "--":  # what follows is arguments, no options
            break
        if arg in ("--output", "-o"):  # before or after the command
            if i + 1 < len(args):  # a trailing one without its value changes nothing
                runtime.output = args[i + 1]
        elif arg.startswith("--output="):
            runtime.output = arg.partition("=")[2]
        elif arg.startswith("-o") and not arg.startswith("--"):  # -ojson
            runtime.output = arg[2:]
        elif arg == "--error-file" and i + 1 < len(args):
            runtime.error_file = args[i + 1]
        elif arg.startswith("--error-file="):
            runtime.error_file = arg.partition("=")[2]
        elif arg == "--debug":
            runtime.debug = True
        elif arg == "--verbose":
            runtime.verbose += 1
        elif len(arg) > 1 and arg[0] == "-" and set(arg[1:]) == {"v"}:  # -v, -vv
            runtime.verbose += len(arg) - 1
    if runtime.output not in OUTPUTS:
        runtime.output = "text"
    return runtime


def _usage_error(exc: click.UsageError) -> InvalidInput:
    hint = f"see '{exc.ctx.command_path} --help'" if exc.ctx is not None else None
    field = None
    if isinstance(exc, click.BadParameter | click.MissingParameter) and exc.param is not None:
        field = exc.param.name
    return InvalidInput(exc.format_message(), hint=hint, field=field)


def _html_pages() -> reports.Pages:
    from gpuops.render.html.pages import PAGES  # noqa: PLC0415 - when a page is written

    return PAGES


def run(argv: Sequence[str] | None = None) -> int:
    """Run gpuops with ``argv`` and return its exit code (no ``sys.exit``)."""
    reports.install_pages(_html_pages)  # the use cases write the pages; the CLI has them
    args = list(sys.argv[1:] if argv is None else argv)
    runtime = _presumed_runtime(args)
    outcome: Shown | None = None
    try:
        result = cli.main(args=args, prog_name="gpuops", standalone_mode=False, obj=runtime)
        if isinstance(result, int):  # --help and friends under standalone_mode=False
            return result
        if isinstance(result, Shown):  # the verdict is the use case's (cli.base.show)
            outcome = result
            if outcome.error is not None:
                return _fail(runtime, outcome.error, outcome)
            _emit(runtime, outcome)
    except GpuOpsError as error:
        return _fail(runtime, error, outcome)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.UsageError as exc:
        return _fail(runtime, _usage_error(exc))
    except click.Abort:
        return _fail(runtime, InvalidInput("aborted"))
    except click.ClickException as exc:
        return _fail(runtime, InvalidInput(exc.format_message()))
    except Exception as exc:  # the last line of defence: a bug, reported as one
        if runtime.debug:
            traceback.print_exc()
        return _fail(
            runtime,
            InternalError(
                f"unexpected {type(exc).__name__} in 'gpuops {runtime.command}'",
                hint="rerun with --debug for the traceback and report it",
            ),
        )
    return int(ExitCode.OK)


def main() -> NoReturn:
    sys.exit(run())
