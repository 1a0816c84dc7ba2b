"""The one shape every use case returns: its data, its verdict and the files it wrote.

A use case decides whether the operation "ran and the answer is no"; the CLI only maps an
:class:`Outcome` to text or JSON and an exit code (``cli/`` constructs no verdict: a
convention test holds it to that). The verdict is one of four words:

- ``ok``: the operation did what was asked;
- ``refused``: a gate said no before anything changed (exit 3);
- ``failed``: the operation ran and did not succeed (exit 1, or 4 when it could not reach
  what it drives);
- ``partial``: the operation ran, part of it succeeded and part failed (exit 1): hosts
  changed beside hosts failed, a release applied but not rolled out everywhere.

A non-ok verdict carries the :class:`~gpuops.errors.GpuOpsError` that sets its category,
message, hint and exit code; the error document carries the outcome's data as its
``result``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

from gpuops.errors import ExitCode, GateRefused, GpuOpsError, OperationFailed


class Verdict(StrEnum):
    OK = "ok"
    REFUSED = "refused"
    FAILED = "failed"
    PARTIAL = "partial"


class Result(Protocol):
    """A use case's typed result: its JSON form is the ``result`` of the documents (a
    ``to_dict`` may return a ``TypedDict``: the document's declared shape, :mod:`gpuops.schema`)."""

    def to_dict(self) -> Mapping[str, Any]: ...


R = TypeVar("R", bound=Result)


@dataclass
class Outcome(Generic[R]):
    """What a use case returns.

    ``result``: the typed result; ``problem``: the error of a non-ok verdict (None when ok);
    ``partial``: the operation ran and part of it succeeded; ``files``: what the use case
    wrote, by role (``{"json": ".../update.json", "page": ".../node-update.html"}``)."""

    result: R
    problem: GpuOpsError | None = None
    partial: bool = False
    files: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.partial and self.problem is None:
            raise ValueError("a partial outcome needs the error that says what failed")

    @property
    def verdict(self) -> Verdict:
        if self.problem is None:
            return Verdict.OK
        if isinstance(self.problem, GateRefused):
            return Verdict.REFUSED
        return Verdict.PARTIAL if self.partial else Verdict.FAILED

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.problem is None else self.problem.exit_code

    def to_dict(self) -> dict[str, Any]:
        """The result document's ``result``: the typed result's JSON form."""
        return dict(self.result.to_dict())

    @classmethod
    def refused(cls, result: R, message: str, *, hint: str | None = None) -> Outcome[R]:
        return cls(result, GateRefused(message, hint=hint))

    @classmethod
    def failed(
        cls, result: R, message: str, *, hint: str | None = None, partial: bool = False
    ) -> Outcome[R]:
        return cls(result, OperationFailed(message, hint=hint), partial=partial)
