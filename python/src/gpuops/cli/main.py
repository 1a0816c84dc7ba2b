"""``gpuops``: the root command, global options, output and exit-code mapping."""

from __future__ import annotations

import json
import logging
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import click

from gpuops import __version__
from gpuops.cli.base import GpuOpsGroup, Outcome, Runtime
from gpuops.contract import (
    ERROR_ENV,
    PARAMS_ENV,
    RESULT_ENV,
    error_document,
    result_document,
    write_document,
)
from gpuops.errors import ExitCode, GpuOpsError, InternalError, InvalidInput, error_categories
from gpuops.logs import configure_logging

log = logging.getLogger(__name__)


def _exit_code_help() -> str:
    rows = "\n".join(f"  {c.code:<3} {c.category:<14} {c.meaning}" for c in error_categories())
    return (
        "\b\nExit codes:\n" + rows + "\n\n\b\nParameters as JSON (for Jenkins and other callers):\n"
        f"  ${PARAMS_ENV}  a JSON object whose keys are the command's option names\n"
        f"  ${RESULT_ENV}  where the result document is written\n"
        f"  ${ERROR_ENV}   where the error document is written on failure"
    )


@click.group(
    cls=GpuOpsGroup,
    invoke_without_command=True,
    epilog=_exit_code_help(),
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    envvar="GPUOPS_OUTPUT",
    show_default=True,
    help="json prints one stable JSON document on stdout (result) or stderr (error).",
)
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
    debug: bool,
    version: bool,
    params_file: str | None,
    result_file: str | None,
    error_file: str | None,
) -> Outcome | None:
    """gpuops: one safe release path for GPU clusters.

    Drives Ansible against GPU nodes, the Kubernetes API, the image builder and the
    registry; the gpu-ops Jenkins library calls it with JSON parameters.
    """
    runtime = ctx.ensure_object(Runtime)
    runtime.output, runtime.debug = output, debug
    runtime.params_file, runtime.result_file, runtime.error_file = (
        params_file,
        result_file,
        error_file,
    )
    configure_logging(debug)
    if version:
        runtime.command = "version"
        return Outcome({"version": __version__}, f"gpuops {__version__}")
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(0)
    return None


def _register_commands() -> None:
    from gpuops.cli import headroom, lab  # noqa: PLC0415 - keeps start-up import cost per command

    cli.add_command(lab.lab)
    cli.add_command(headroom.headroom)


def _emit(runtime: Runtime, outcome: Outcome) -> None:
    if runtime.result_file:
        write_document(runtime.result_file, result_document(runtime.command, outcome.data))
    if runtime.output == "json":
        if runtime.command == "version":
            doc: Mapping[str, Any] = outcome.data
        else:
            doc = result_document(runtime.command, outcome.data)
        click.echo(json.dumps(doc, indent=2, sort_keys=True, default=str))
    elif outcome.text:
        click.echo(outcome.text)


def _fail(runtime: Runtime, error: GpuOpsError) -> int:
    details = error.details if isinstance(error.details, Mapping) else None
    doc = error_document(runtime.command, error, details)
    if runtime.error_file:
        try:
            write_document(runtime.error_file, doc)
        except OSError as exc:  # the error must still reach the user
            click.echo(f"gpuops: cannot write {runtime.error_file}: {exc}", err=True)
    if runtime.output == "json":
        click.echo(json.dumps(doc, indent=2, sort_keys=True, default=str), err=True)
    else:
        text = getattr(error, "text", None)
        if text:
            click.echo(text)
        click.echo(f"gpuops: error: {error.message}", err=True)
        if error.hint:
            click.echo(f"hint: {error.hint}", err=True)
    return int(error.exit_code)


def _presumed_runtime(argv: Sequence[str]) -> Runtime:
    """Global options as far as they can be known when parsing itself failed."""
    import os  # noqa: PLC0415

    runtime = Runtime(
        output=os.environ.get("GPUOPS_OUTPUT", "text"),
        result_file=os.environ.get(RESULT_ENV),
        error_file=os.environ.get(ERROR_ENV),
    )
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == "--output" and i + 1 < len(args):
            runtime.output = args[i + 1]
        elif arg.startswith("--output="):
            runtime.output = arg.partition("=")[2]
        elif arg == "--error-file" and i + 1 < len(args):
            runtime.error_file = args[i + 1]
        elif arg == "--debug":
            runtime.debug = True
    if runtime.output not in ("text", "json"):
        runtime.output = "text"
    return runtime


def run(argv: Sequence[str] | None = None) -> int:
    """Run gpuops with ``argv`` and return its exit code (no ``sys.exit``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    _register_commands()
    runtime = _presumed_runtime(args)
    try:
        outcome = cli.main(args=args, prog_name="gpuops", standalone_mode=False, obj=runtime)
    except GpuOpsError as error:
        return _fail(runtime, error)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.UsageError as exc:
        hint = None
        if exc.ctx is not None:
            hint = f"see '{exc.ctx.command_path} --help'"
        return _fail(runtime, InvalidInput(exc.format_message(), hint=hint))
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
                f"unexpected {type(exc).__name__}: {exc}",
                hint="rerun with --debug for the traceback and report it",
            ),
        )
    if isinstance(outcome, int):  # --help and friends under standalone_mode=False
        return outcome
    if isinstance(outcome, Outcome):
        _emit(runtime, outcome)
    return int(ExitCode.OK)


def main() -> NoReturn:
    sys.exit(run())
