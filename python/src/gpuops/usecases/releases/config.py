"""Reading an application's release environments file (YAML) into the core's model."""

from __future__ import annotations

from pathlib import Path

from gpuops.core import releaseconfig
from gpuops.core.releaseconfig import ReleaseConfig
from gpuops.errors import InvalidInput

#: Largest environments file accepted: it is configuration, not data.
MAX_BYTES = 1 << 20


def load(path: str) -> ReleaseConfig:
    """The environments of ``path``; every defect is an input error naming the file (and,
    from the core, the environment and key)."""
    import yaml  # noqa: PLC0415 - only when a release command runs

    p = Path(path)
    try:
        if p.stat().st_size > MAX_BYTES:
            raise InvalidInput(f"{path} is larger than {MAX_BYTES} bytes", field="config")
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(
            f"release environments file {path} does not exist",
            hint=f"pass --config PATH (default {releaseconfig.DEFAULT_FILE} in the current "
            "directory: the application's repository)",
            field="config",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            f"cannot read release environments file {path}: {type(exc).__name__}", field="config"
        ) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise InvalidInput(f"{path}: not valid YAML{where}: {problem}", field="config") from None
    return releaseconfig.parse(doc, path)
