"""Plumbing every gpuops command shares: JSON parameters in, one result or error out."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from gpuops.cli.options import by_old_key, global_options, old_keys
from gpuops.cli.types import check_param_value
from gpuops.contract import load_params
from gpuops.core.values import key_shown
from gpuops.errors import GpuOpsError, InvalidInput

if TYPE_CHECKING:
    from gpuops.usecases.outcome import Outcome as UseCaseOutcome


@dataclass
class Shown:
    """What a command returns: machine data (the JSON result), its human rendering, and,
    when the operation ran but the answer is no (a refused gate, failed hosts), the error
    that sets the exit code. ``data`` is the ``result`` of the result or error document.
    A command builds it with :func:`show` from its use case's outcome: the verdict (the
    ``error``) is the use case's, never the CLI's."""

    data: Mapping[str, Any]
    text: str = ""
    error: GpuOpsError | None = None
    verdict: str | None = None  # the use case's verdict word, for the error document


def show(outcome: UseCaseOutcome[Any], text: str, data: Mapping[str, Any] | None = None) -> Shown:
    """Map a use case's outcome and its rendered ``text`` to what the command returns: ok is
    exit 0 with the result document; refused (3), failed (1, or the error's own code) and
    partial (1) are the error document, its ``result`` the same data. ``data`` defaults to
    the outcome's JSON form (files the use case wrote are in it, e.g. its ``report``)."""
    return Shown(
        outcome.to_dict() if data is None else data, text, outcome.problem, outcome.verdict.value
    )


@dataclass
class Runtime:
    """Global options, shared with every command through ``ctx.obj``."""

    output: str = "text"
    debug: bool = False
    verbose: int = 0
    params_file: str | None = None
    result_file: str | None = None
    error_file: str | None = None
    command: str = "gpuops"
    params_used: dict[str, Any] = field(default_factory=dict)


def _options(command: click.Command) -> dict[str, click.Option]:
    return {p.name: p for p in command.params if isinstance(p, click.Option) and p.name}


class GpuOpsCommand(click.Command):
    """A command whose option defaults may come from the JSON parameters file.

    Keys must name options of this command; an unknown key is an input error (a typo in a
    Jenkinsfile must not be silently ignored). Each value is checked against its option's
    JSON kinds and converted once here, so a bad value is reported naming its key.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        runtime = ctx.find_object(Runtime)
        if runtime is not None:
            runtime.command = ctx.command_path.removeprefix(ctx.find_root().info_name or "").strip()
            if runtime.params_file:
                params = load_params(runtime.params_file)
                options = _options(self)
                # a renamed option still takes its old key (check for dry_run)
                known = {**{k: o for o in options.values() for k in old_keys(o)}, **options}
                unknown = sorted(set(params) - set(known))
                if unknown:
                    raise InvalidInput(
                        f"unknown parameter(s) {', '.join(key_shown(k) for k in unknown[:5])}"
                        f"{' ...' if len(unknown) > 5 else ''} for 'gpuops {runtime.command}'",
                        hint=f"known parameters: {', '.join(sorted(options))}",
                    )
                for key, value in params.items():
                    _check_param(ctx, known[key], key, value)
                params = by_old_key(options, params)
                ctx.default_map = {**(ctx.default_map or {}), **params}
                runtime.params_used = params
        return super().parse_args(ctx, args)

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        """The command's options, then ``-o/--output`` and ``-v/--verbose``: accepted after
        the command as before it. They are no options of the command itself (not in
        ``describe``, no JSON parameter keys)."""
        return _with_global_options(self, ctx, super().get_params(ctx))


def _with_global_options(
    command: click.Command, ctx: click.Context, own: list[click.Parameter]
) -> list[click.Parameter]:
    """``own`` and the global options it does not already have (the root has its own),
    ``--help`` kept last."""
    taken = {opt for p in own for opt in p.opts}
    extra = [g for g in global_options() if not taken & set(g.opts)]
    help_option = command.get_help_option(ctx)
    if help_option is not None and own[-1:] == [help_option]:  # --help stays last
        return [*own[:-1], *extra, help_option]
    return own + extra


def _check_param(ctx: click.Context, option: click.Option, key: str, value: Any) -> None:
    flag = option.opts[0] if option.opts else key
    try:
        check_param_value(option, value)
        option.type_cast_value(ctx, value)
    except InvalidInput as exc:
        raise InvalidInput(f"parameter {key} ({flag}): {exc.message}", field=key) from None
    except click.BadParameter as exc:
        raise InvalidInput(f"parameter {key} ({flag}): {exc.message}", field=key) from None


class GpuOpsGroup(click.Group):
    """A group of gpuops commands. Takes ``-o/--output`` and ``-v/--verbose`` between itself
    and its command too (``gpuops headroom -o json check ...``, as kubectl and helm do), the
    same way a command does."""

    command_class = GpuOpsCommand
    group_class = type

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return _with_global_options(self, ctx, super().get_params(ctx))


def pass_runtime(f: Callable[..., Shown]) -> Callable[..., Shown]:
    """Give a command the :class:`Runtime` as its first argument."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Shown:
        runtime = click.get_current_context().find_object(Runtime)
        assert runtime is not None  # noqa: S101 - set by the root group
        return f(runtime, *args, **kwargs)

    return wrapper
