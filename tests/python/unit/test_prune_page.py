"""The registry retention page (render/html/prune.py): every action badge is readable. A
manifest kept by the policy (one of the last N) had the badge class ``status-``, which the
stylesheet does not define: white text on no background, an invisible "keep" (seen in a
headless Chromium screenshot)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from importlib import resources

from gpuops.core.retention import Image, Policy, decide
from gpuops.render.html import prune as prunepage
from gpuops.usecases.retention.prune import PruneResult, RepositoryResult

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def _doc() -> dict[str, object]:
    images = [
        Image(f"sha256:{i:x}{'0' * 63}", (f"b{i}",), NOW - timedelta(days=9 - i)) for i in range(6)
    ]
    repo = RepositoryResult("r.example/ai/infer", ["prod"], tags=6)
    repo.protected = {images[0].digest: ["prod release #1 (succeeded)"]}
    repo.decisions = decide(images, Policy(keep_last=2), repo.protected, NOW)
    repo.deleted = [d.digest for d in repo.decisions if d.action == "delete"]
    return dict(PruneResult(False, "pruned", [repo], ["ns/lease"]).to_dict())


def test_every_action_badge_has_a_class_the_stylesheet_styles() -> None:
    css = resources.files("gpuops.render.html").joinpath("static", "report.css").read_text()
    styled = set(re.findall(r"\.status-([a-z]+)\s*\{", css))
    rows = [row for repo in prunepage.context(_doc())["repos"] for row in repo["rows"]]
    badges = {(row["action"], row["action_class"]) for row in rows}
    assert {action for action, _ in badges} == {"keep", "deleted"}, badges
    assert all(cls in styled for _, cls in badges), (badges, styled)
