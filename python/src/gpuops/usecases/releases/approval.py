"""Four eyes (S-27): whoever asked for a release cannot also approve it.

Jenkins compares user ids without regard to case by default (its ``IdStrategy``), so
``Alice`` and ``alice`` are one person here too. Without a requester (a build started by a
timer or an upstream job) there is nobody to compare with: the approval stands alone."""

from __future__ import annotations

from gpuops.errors import GateRefused
from gpuops.usecases.releases.model import Who


def same_person(a: str, b: str) -> bool:
    """Whether two Jenkins user ids name one user (case-insensitive, as Jenkins' default)."""
    return a.strip().casefold() == b.strip().casefold()


def four_eyes_refusal(env_name: str, who: Who) -> GateRefused | None:
    """The refusal when the approver is the requester; None when the approval may stand."""
    if who.approved_by and who.requested_by and same_person(who.approved_by, who.requested_by):
        return GateRefused(
            f"{env_name}: {who.approved_by} cannot approve a release that {who.requested_by} "
            "requested (four eyes: the requester never approves)",
            hint="someone else among the approvers must approve it",
            field="approved_by",
        )
    return None
