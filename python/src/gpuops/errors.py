"""The one exception hierarchy of gpuops and the exit codes it maps to.

Every failure a user can meet is a :class:`GpuOpsError` subclass. Its class fixes the
category (a stable word for machines) and the process exit code; its message says what
failed and which input caused it; its hint says what to do next.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar


class ExitCode(IntEnum):
    """Documented exit codes of the ``gpuops`` command (README, ``gpuops --help``)."""

    OK = 0
    FAILED = 1
    INVALID_INPUT = 2
    GATE_REFUSED = 3
    UNREACHABLE = 4
    INTERNAL = 5
    HOST_BROKEN = 6


#: One line per exit code, shown in ``gpuops --help`` and the README.
EXIT_CODE_DOC: dict[ExitCode, str] = {
    ExitCode.OK: "success",
    ExitCode.FAILED: "the operation was attempted and failed (a host, a rollout, a push)",
    ExitCode.INVALID_INPUT: "invalid input or usage: nothing was changed",
    ExitCode.GATE_REFUSED: "a gate refused: not enough GPUs, approval missing, incompatible driver",
    ExitCode.UNREACHABLE: "infrastructure unreachable: Kubernetes API, registry, SSH, Jenkins",
    ExitCode.INTERNAL: "internal error: a bug in gpuops (rerun with --debug and report it)",
    ExitCode.HOST_BROKEN: "a change failed and could not be undone: a host is left broken "
    "(cordoned, tainted) for a person to repair",
}


class GpuOpsError(Exception):
    """Base of every error gpuops reports to its user.

    ``message`` and ``hint`` are built from gpuops' own words and safe fields only (names,
    counts, the input that was wrong): never from a third-party exception's text, which can
    carry credentials. ``field`` names the parameter an invalid value came in.
    """

    exit_code: ClassVar[ExitCode] = ExitCode.INTERNAL
    category: ClassVar[str] = "internal"

    def __init__(self, message: str, *, hint: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.field = field

    def to_dict(self) -> dict[str, Any]:
        """The ``error`` object of the error document."""
        doc: dict[str, Any] = {
            "message": self.message,
            "category": self.category,
            "hint": self.hint,
            "exit_code": int(self.exit_code),
        }
        if self.field is not None:
            doc["field"] = self.field
        return doc


class OperationFailed(GpuOpsError):
    """The operation ran and did not succeed."""

    exit_code = ExitCode.FAILED
    category = "failed"


class InvalidInput(GpuOpsError):
    """A user-supplied value is malformed or inconsistent; nothing was changed."""

    exit_code = ExitCode.INVALID_INPUT
    category = "invalid-input"


class GateRefused(GpuOpsError):
    """A release gate said no (capacity, approval, compatibility)."""

    exit_code = ExitCode.GATE_REFUSED
    category = "gate-refused"


class Unreachable(GpuOpsError):
    """A piece of infrastructure could not be reached or did not answer."""

    exit_code = ExitCode.UNREACHABLE
    category = "unreachable"


class HostBroken(GpuOpsError):
    """A change failed and so did its undoing (``rollback-failed``): a host is left broken,
    cordoned and tainted. Exit 1 (:class:`OperationFailed`) is not "safe": its failed hosts
    are rolled back, or (``--no-rollback``, or a failure before the change began) left where
    they failed, cordoned, and tainted where their driver is not known."""

    exit_code = ExitCode.HOST_BROKEN
    category = "host-broken"


class InternalError(GpuOpsError):
    """An unexpected exception: a bug in gpuops."""


@dataclass(frozen=True)
class ErrorCategory:
    code: ExitCode
    category: str
    meaning: str


def error_categories() -> list[ErrorCategory]:
    """The categories in exit-code order, for help texts and docs."""
    by_code = {
        cls.exit_code: cls.category
        for cls in (
            OperationFailed,
            InvalidInput,
            GateRefused,
            Unreachable,
            InternalError,
            HostBroken,
        )
    }
    by_code[ExitCode.OK] = "ok"
    return [ErrorCategory(code, by_code[code], EXIT_CODE_DOC[code]) for code in ExitCode]
