#!/usr/bin/env python3
"""Keep the Jenkins steps' parameters one declaration: the CLI's.

  scripts/step-docs.py --write   regenerate resources/org/gpuops/cli-options.json from
                                 `gpuops describe`, and the generated parameter list of each
                                 vars/<step>.txt from it
  scripts/step-docs.py --check   exit 1 (with a diff) when either is out of date

A step names its command in `@Field final List COMMAND = ['group', 'command']`; its .txt help
page holds, between the two marker lines, one line per CLI option in camelCase with its type
and default. Run with the project's virtualenv (it imports gpuops).
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESOURCE = ROOT / "resources/org/gpuops/cli-options.json"
VARS = ROOT / "vars"
BEGIN = (
    "--- CLI parameters: generated from `gpuops describe` by scripts/step-docs.py; do not edit ---"
)
END = "--- end of CLI parameters ---"
_COMMAND = re.compile(r"@Field final List COMMAND = \[([^\]]*)\]")
_GROOVY_TYPE = {
    "string": "String",
    "integer": "int",
    "boolean": "boolean",
    "object": "Map",
    "array": "List",
}


def describe() -> dict[str, Any]:
    from gpuops.cli.describe import describe as command  # noqa: PLC0415 - needs the venv
    from gpuops.cli.main import cli  # noqa: PLC0415

    ctx = cli.make_context("gpuops", [], resilient_parsing=True)
    with ctx:
        sub = command.make_context("describe", [], parent=ctx)
        with sub:
            outcome = command.invoke(sub)
    return dict(outcome.data)


def step_name(cli_name: str) -> str:
    head, *rest = cli_name.split("_")
    return head + "".join(p.capitalize() for p in rest)


def groovy_literal(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("'", "\\'") + "'"
    return json.dumps(value)


def type_text(option: dict[str, Any]) -> str:
    if option["type"] == "integer":
        low, high = option.get("minimum"), option.get("maximum")
        bounds = f" {low if low is not None else ''}..{high if high is not None else ''}"
        return "int" + (bounds if low is not None or high is not None else "")
    if option["type"] == "choice":
        return "String: " + " | ".join(option["choices"])
    kinds = [_GROOVY_TYPE[k] for k in option["json"]]
    text = " or ".join(dict.fromkeys(kinds))
    return f"List of {text}" if option.get("multiple") else text


def parameter_lines(command: dict[str, Any]) -> list[str]:
    lines = []
    for option in command["options"]:
        when = "required" if option["required"] else f"default {groovy_literal(option['default'])}"
        old = ", ".join(step_name(a) for a in option.get("aliases", []))
        lines.append(
            f"- {step_name(option['name'])} ({type_text(option)}, {when}): {option['help']}"
            f" [CLI {option['flag']}]" + (f" (old name, still taken: {old})" if old else "")
        )
    return lines


def step_commands() -> dict[Path, str]:
    out = {}
    for source in sorted(VARS.glob("*.groovy")):
        m = _COMMAND.search(source.read_text())
        if m:
            words = [w.strip().strip("'\"") for w in m.group(1).split(",") if w.strip()]
            out[source.with_suffix(".txt")] = " ".join(words)
    return out


def render_help(path: Path, command: dict[str, Any]) -> str:
    text = path.read_text() if path.exists() else ""
    block = "\n".join([BEGIN, *parameter_lines(command), END])
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        return head + block + tail
    return text.rstrip("\n") + "\n\n" + block + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    args = parser.parse_args()
    doc = describe()
    wanted: dict[Path, str] = {RESOURCE: json.dumps(doc, indent=2, sort_keys=True) + "\n"}
    for help_page, path in step_commands().items():
        if path not in doc["commands"]:
            print(
                f"{help_page.with_suffix('.groovy')}: no CLI command 'gpuops {path}'",
                file=sys.stderr,
            )
            return 1
        wanted[help_page] = render_help(help_page, doc["commands"][path])
    stale = 0
    for path, text in wanted.items():
        current = path.read_text() if path.exists() else ""
        if current == text:
            continue
        if args.write:
            path.write_text(text)
            print(f"step-docs: wrote {path.relative_to(ROOT)}")
            continue
        stale += 1
        rel = str(path.relative_to(ROOT))
        sys.stdout.writelines(
            difflib.unified_diff(
                current.splitlines(True),
                text.splitlines(True),
                f"{rel} (committed)",
                f"{rel} (CLI)",
            )
        )
    if stale:
        print(
            f"step-docs: {stale} file(s) out of date: run scripts/step-docs.py --write",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
