"""Option spellings operators know from kubectl, helm and ansible-playbook, and the old names
options keep so that no script or Jenkins step breaks.

- :class:`Renamed` (through :func:`renamed`): an option whose name changed and that still
  answers to its old ones, on the command line (``--check`` for ``--dry-run``; an old flag can
  be hidden from help) and as a key of the JSON parameters (``check`` for ``dry_run``).
  ``gpuops describe`` lists those keys as the option's ``aliases``; the Jenkins library
  accepts them as step parameters too.
- :func:`global_options`: ``-o/--output`` and ``-v/--verbose`` accepted after a command as
  well as before it (``gpuops headroom check ... -o json``), as kubectl and helm accept them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import click

from gpuops.core.values import key_shown
from gpuops.errors import InvalidInput
from gpuops.logs import configure_logging

F = TypeVar("F", bound=Callable[..., Any])

#: The values of ``-o/--output``.
OUTPUTS = ("text", "json")


class Renamed(click.Option):
    """An option with old names: ``hidden_flags`` (among its flags, left out of help) and
    ``old_keys`` (JSON parameter keys that mean this option)."""

    def __init__(
        self,
        param_decls: Sequence[str] | None = None,
        *,
        hidden_flags: Sequence[str] = (),
        old_keys: Sequence[str] = (),
        **attrs: Any,
    ) -> None:
        super().__init__(param_decls, **attrs)
        self.hidden_flags = tuple(hidden_flags)
        self.old_keys = tuple(old_keys)

    def get_help_spec(self, ctx: click.Context) -> str:
        every = self.opts
        self.opts = [o for o in every if o not in self.hidden_flags]
        try:
            return super().get_help_spec(ctx)
        finally:
            self.opts = every

    def get_error_hint(self, ctx: click.Context | None) -> str:
        """How an error message names the option: its visible flags only (``'--last'``, not
        ``'--last' / '--limit'``), as help shows it."""
        shown = [o for o in self.opts if o not in self.hidden_flags]
        return " / ".join(f"'{o}'" for o in shown) if shown else super().get_error_hint(ctx)


def renamed(
    *param_decls: str, hidden: Sequence[str] = (), keys: Sequence[str] = (), **attrs: Any
) -> Callable[[F], F]:
    """``click.option`` for a :class:`Renamed` option: ``hidden`` flags work but are not shown,
    ``keys`` are its old JSON parameter keys."""
    return click.option(*param_decls, cls=Renamed, hidden_flags=hidden, old_keys=keys, **attrs)


def primary_flag(param: click.Option) -> str:
    """The flag an option is known by: its longest visible one (``--dry-run``, not ``-n``)."""
    hidden = getattr(param, "hidden_flags", ())
    return max((o for o in param.opts if o not in hidden), key=len)


def old_keys(param: click.Parameter) -> tuple[str, ...]:
    return tuple(getattr(param, "old_keys", ()))


def by_old_key(options: Mapping[str, click.Option], params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with each old key replaced by its option's name; both given is an input
    error (which one would win is no guess a Jenkinsfile should depend on)."""
    renames = {old: name for name, opt in options.items() for old in old_keys(opt)}
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = renames.get(key, key)
        if name in out or (name != key and name in params):
            raise InvalidInput(
                f"parameters {key_shown(key)} and {key_shown(name)} are the same option "
                f"({primary_flag(options[name])}): give only {key_shown(name)}",
                field=name,
            )
        out[name] = value
    return out


# -- the global options, after the command too -------------------------------------------------


def _output(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None and ctx.obj is not None:
        ctx.obj.output = value


def _verbose(ctx: click.Context, _param: click.Parameter, value: int) -> None:
    if value and ctx.obj is not None:
        ctx.obj.verbose += value
        configure_logging(ctx.obj.debug, ctx.obj.verbose)


#: Help of the global options, the same at the root and after a command.
OUTPUT_HELP = "json prints one stable JSON document on stdout (result) or stderr (error)."
VERBOSE_HELP = "Log more: -v info, -vv debug (--debug also shows tracebacks)."


def global_options() -> list[click.Option]:
    """``-o/--output`` and ``-v/--verbose`` for a command's own line. Eager: they take effect
    before any other option is checked, so an error about one is already in the form asked.
    The same two objects every time (click orders the processing by the objects it parsed)."""
    return _GLOBAL


_GLOBAL: list[click.Option] = [
    click.Option(
        ["-o", "--output"],
        type=click.Choice(OUTPUTS),
        default=None,
        expose_value=False,
        is_eager=True,
        callback=_output,
        help=OUTPUT_HELP + " Same as before the command.",
    ),
    click.Option(
        ["-v", "--verbose"],
        count=True,
        expose_value=False,
        is_eager=True,
        callback=_verbose,
        help=VERBOSE_HELP,
    ),
]
