"""``gpuops describe``: every command's options, types and defaults, and the JSON Schema of
its result document, as JSON.

The CLI is the single source of its parameters and of its outputs. The Jenkins library ships
this description (``resources/org/gpuops/cli-options.json``, written by
``scripts/step-docs.py``): its steps map their camelCase names onto these options generically,
each step's help page lists them, and a step reads only fields a result schema declares. A
test keeps the three identical.

A command's outputs are declared in :data:`RESULTS`: the typed result its use case returns,
whose schema :mod:`gpuops.schema` generates; every error document has the one schema of
:func:`gpuops.contract.error_document_schema`.
"""

from __future__ import annotations

from typing import Any

import click

from gpuops import __version__
from gpuops.cli.base import GpuOpsCommand, Shown
from gpuops.cli.options import old_keys, primary_flag
from gpuops.cli.types import GpuOpsType, option_kinds
from gpuops.contract import error_document_schema, result_document_schema

#: Each command's typed result ("module:Class", imported when described): every product
#: command declares its result field by field.
RESULTS: dict[str, str] = {
    "headroom check": "gpuops.usecases.headroom:CheckResult",
    "headroom explain": "gpuops.usecases.headroom:Explained",
    "image build": "gpuops.core.imagerecord:BuildRecord",
    "image clean": "gpuops.usecases.images.clean:CleanReport",
    "image compat": "gpuops.usecases.images.compat:CompatCheck",
    "image gc": "gpuops.usecases.retention.gc:GcResult",
    "image inspect": "gpuops.usecases.images.registryops:ImageInfo",
    "image prune": "gpuops.usecases.retention.prune:PruneResult",
    "image tag": "gpuops.usecases.images.registryops:TagMove",
    "jenkins apply": "gpuops.usecases.jenkinsjobs:ApplyResult",
    "nodes inspect": "gpuops.usecases.nodes.inspect:InspectResult",
    "nodes label": "gpuops.usecases.nodes.label:LabelResult",
    "nodes quarantine-reset": "gpuops.usecases.nodes.quarantine:ResetResult",
    "nodes history": "gpuops.usecases.nodes.history:NodeHistory",
    "nodes rollback": "gpuops.usecases.nodes.records:Rollout",
    "nodes update": "gpuops.usecases.nodes.records:Rollout",
    "release history": "gpuops.usecases.releases.status:HistoryOutcome",
    "release promote": "gpuops.usecases.releases.model:ReleaseOutcome",
    "release rollback": "gpuops.usecases.releases.model:ReleaseOutcome",
    "release resume": "gpuops.usecases.releases.model:ReleaseOutcome",
    "release status": "gpuops.usecases.releases.status:StatusOutcome",
    "report capacity": "gpuops.usecases.reports:ReportPage",
    "report fleet": "gpuops.usecases.reports:ReportPage",
    "report node-history": "gpuops.usecases.reports:ReportPage",
    "report prune": "gpuops.usecases.reports:ReportPage",
    "report node-update": "gpuops.usecases.reports:ReportPage",
    "report releases": "gpuops.usecases.reports:ReportPage",
}


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
        "flag": primary_flag(param),
        **kind,
        "required": bool(param.required),
        "multiple": bool(param.multiple),
        "default": None if callable(default) else default,
        "help": param.help or "",
    }
    if param.envvar:
        doc["envvar"] = param.envvar
    if old_keys(param):  # the keys it had before a rename, still taken (check for dry_run)
        doc["aliases"] = list(old_keys(param))
    return doc


def result_schema(path: str) -> dict[str, Any] | None:
    """The JSON Schema of ``gpuops PATH``'s result document (None: not a product command)."""
    if path not in RESULTS:
        return None
    import importlib  # noqa: PLC0415

    from gpuops.schema import document_schema  # noqa: PLC0415

    module, _, name = RESULTS[path].partition(":")
    result = document_schema(getattr(importlib.import_module(module), name))
    return result_document_schema(path, result)


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
        "result_schema": result_schema(path),
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
def describe(ctx: click.Context) -> Shown:
    """Every product command's options, types and defaults, and the JSON Schema of its result
    document (JSON with --output json)."""
    from gpuops.cli.main import COMMANDS  # noqa: PLC0415 - the root imports this module lazily

    root = ctx.find_root()
    assert isinstance(root.command, click.Group)  # noqa: S101 - the root is a group
    commands: dict[str, dict[str, Any]] = {}
    for name in sorted(COMMANDS):
        group = root.command.get_command(root, name)
        if isinstance(group, click.Group) and name != "describe":
            commands.update(walk(root, group, name))
    data = {"gpuops": __version__, "commands": commands, "error_schema": error_document_schema()}
    return Shown(data, _render(commands))


def _render(commands: dict[str, dict[str, Any]]) -> str:
    lines = []
    for path, doc in commands.items():
        lines.append(f"gpuops {path}: {doc['summary']}")
        for opt in doc["options"]:
            req = "required" if opt["required"] else f"default {opt['default']!r}"
            lines.append(f"  {opt['name']:<20} {opt['type']:<12} {req}")
    return "\n".join(lines)
