"""Four eyes (S-27): whoever asked for a release cannot also approve it.

Jenkins compares user ids without regard to case by default (its ``IdStrategy``), so
``Alice`` and ``alice`` are one person here too. ``requested_by`` may name several users
("alice, carol": a build's user causes and its upstream builds'); the approver may be none of
them. The CLI refuses an approval without a requester."""

from __future__ import annotations

from gpuops.errors import GateRefused
from gpuops.usecases.releases.model import Who


def same_person(a: str, b: str) -> bool:
    """Whether two Jenkins user ids name one user (case-insensitive, as Jenkins' default)."""
    return a.strip().casefold() == b.strip().casefold()


def four_eyes_refusal(env_name: str, who: Who) -> GateRefused | None:
    """The refusal when the approver is the requester; None when the approval may stand."""
    requesters = [r for r in (who.requested_by or "").split(",") if r.strip()]
    same = [r.strip() for r in requesters if who.approved_by and same_person(who.approved_by, r)]
    if same:
        return GateRefused(
            f"{env_name}: {who.approved_by} cannot approve a release that {same[0]} "
            "requested (four eyes: the requester never approves)",
            hint="someone else among the approvers must approve it",
            field="approved_by",
        )
    return None
