"""Plumbing every gpuops command shares: JSON parameters in, one result or error out."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ParamSpec

import click

from gpuops.contract import load_params
from gpuops.errors import InvalidInput

P = ParamSpec("P")


@dataclass
class Outcome:
    """What a command returns: machine data (the JSON result) and its human rendering."""

    data: Mapping[str, Any]
    text: str = ""


@dataclass
class Runtime:
    """Global options, shared with every command through ``ctx.obj``."""

    output: str = "text"
    debug: bool = False
    params_file: str | None = None
    result_file: str | None = None
    error_file: str | None = None
    command: str = "gpuops"
    params_used: dict[str, Any] = field(default_factory=dict)


class GpuOpsCommand(click.Command):
    """A command whose option defaults may come from the JSON parameters file.

    Keys must name options of this command; an unknown key is an input error (a typo in a
    Jenkinsfile must not be silently ignored).
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        runtime = ctx.find_object(Runtime)
        if runtime is not None:
            runtime.command = ctx.command_path.removeprefix(ctx.find_root().info_name or "").strip()
            if runtime.params_file:
                params = load_params(runtime.params_file)
                known = {p.name for p in self.params if isinstance(p, click.Option) and p.name}
                unknown = sorted(set(params) - known)
                if unknown:
                    raise InvalidInput(
                        f"unknown parameter(s) {', '.join(unknown)} for 'gpuops {runtime.command}'",
                        hint=f"known parameters: {', '.join(sorted(known))}",
                    )
                ctx.default_map = {**(ctx.default_map or {}), **params}
                runtime.params_used = params
        return super().parse_args(ctx, args)


class GpuOpsGroup(click.Group):
    command_class = GpuOpsCommand
    group_class = type


def pass_runtime(f: Callable[..., Outcome]) -> Callable[..., Outcome]:
    """Give a command the :class:`Runtime` as its first argument."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Outcome:
        runtime = click.get_current_context().find_object(Runtime)
        assert runtime is not None  # noqa: S101 - set by the root group
        return f(runtime, *args, **kwargs)

    return wrapper
