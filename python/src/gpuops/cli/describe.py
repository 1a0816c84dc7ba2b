"""``gpuops describe``: every command's options, types and defaults as JSON.

The CLI is the single source of its parameters. The Jenkins library ships this description
(``resources/org/gpuops/cli-options.json``, written by ``scripts/step-docs.py``): its steps map
their camelCase names onto these options generically, and each step's help page lists them.
A test keeps the three identical.
"""

from __future__ import annotations

from typing import Any

import click

from gpuops import __version__
from gpuops.cli.base import GpuOpsCommand, Outcome
from gpuops.cli.types import GpuOpsType, option_kinds


def describe_option(param: click.Option) -> dict[str, Any]:
    kind: dict[str, Any]
    if param.is_flag:
        kind = {"type": "boolean", "json": ["boolean"]}
    elif isinstance(param.type, GpuOpsType):
        kind = param.type.describe()
    else:  # pragma: no cover - a test holds every option to a gpuops type
        kind = {"type": param.type.name, "json": list(option_kinds(param))}
    default = param.to_info_dict().get("default")
    doc: dict[str, Any] = {
        "name": param.name,
        "flag": max(param.opts, key=len),
        **kind,
        "required": bool(param.required),
        "multiple": bool(param.multiple),
        "default": None if callable(default) else default,
        "help": param.help or "",
    }
    if param.envvar:
        doc["envvar"] = param.envvar
    return doc


def describe_command(path: str, command: click.Command) -> dict[str, Any]:
    return {
        "command": path,
        "summary": command.get_short_help_str(limit=200),
        "options": [
            describe_option(p)
            for p in command.params
            if isinstance(p, click.Option) and p.name and not p.hidden and p.name != "help"
        ],
        "arguments": [p.name for p in command.params if isinstance(p, click.Argument)],
    }


def walk(ctx: click.Context, group: click.Group, prefix: str) -> dict[str, dict[str, Any]]:
    """Every leaf command under ``group``, by its path (``headroom check``)."""
    out: dict[str, dict[str, Any]] = {}
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        path = f"{prefix} {name}".strip()
        if isinstance(command, click.Group):
            out.update(walk(ctx, command, path))
        else:
            out[path] = describe_command(path, command)
    return out


@click.command(cls=GpuOpsCommand)
@click.pass_context
def describe(ctx: click.Context) -> Outcome:
    """Every product command's options, types and defaults (JSON with --output json)."""
    from gpuops.cli.main import COMMANDS  # noqa: PLC0415 - the root imports this module lazily

    root = ctx.find_root()
    assert isinstance(root.command, click.Group)  # noqa: S101 - the root is a group
    commands: dict[str, dict[str, Any]] = {}
    for name in sorted(COMMANDS):
        group = root.command.get_command(root, name)
        if isinstance(group, click.Group) and name != "describe":
            commands.update(walk(root, group, name))
    data = {"gpuops": __version__, "commands": commands}
    return Outcome(data, _render(commands))


def _render(commands: dict[str, dict[str, Any]]) -> str:
    lines = []
    for path, doc in commands.items():
        lines.append(f"gpuops {path}: {doc['summary']}")
        for opt in doc["options"]:
            req = "required" if opt["required"] else f"default {opt['default']!r}"
            lines.append(f"  {opt['name']:<20} {opt['type']:<12} {req}")
    return "\n".join(lines)
