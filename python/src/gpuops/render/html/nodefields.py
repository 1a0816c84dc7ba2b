"""What the two GPU node pages share (:mod:`.fleet`, :mod:`.nodeupdate`): checking that the
input is the result of the command the page is for, and reading its fields whatever a
hand-made input holds there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuops.errors import InvalidInput

#: Hosts listed by name at most (the rest are counted; the JSON has them all).
HOSTS_LISTED = 200


def require_result(result: Mapping[str, Any], keys: Sequence[str], command: str) -> None:
    missing = [k for k in keys if k not in result]
    if missing or not isinstance(result.get("hosts"), list):
        raise InvalidInput(
            f"not a 'gpuops {command}' result: missing {', '.join(missing) or 'hosts'}",
            hint=f"pass the result (or error) document of 'gpuops {command}'",
            field="input",
        )
    bad = [h for h in result["hosts"] if not isinstance(h, Mapping) or "host" not in h]
    if bad:
        raise InvalidInput(
            f"not a 'gpuops {command}' result: {len(bad)} host entr(y/ies) without a name",
            field="input",
        )


def text(value: Any) -> str:
    return "" if value is None else str(value)


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    """A list from the result, or none (a hand-made input may hold anything there)."""
    return value if isinstance(value, list) else []
