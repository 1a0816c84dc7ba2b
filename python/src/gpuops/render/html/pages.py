"""The report pages by kind, as the use cases reach them.

Use cases write the pages (``gpuops report KIND``, a command's ``--report-dir``) but may not
import the render layer, so the CLI hands them :data:`PAGES` (see
:func:`gpuops.usecases.reports.install_pages`). Each page's module is imported only when its
kind is written: Jinja2 and pygal load only when a page is asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuops.fsio import OutDir
from gpuops.render.html import inputs
from gpuops.render.html.page import Written

KINDS = ("capacity", "fleet", "node-history", "node-update", "prune", "releases")


class HtmlPages:
    """The pages of each report kind, their strict JSON decoding and their input checks."""

    kinds = KINDS

    def write(self, kind: str, result: Mapping[str, Any], out: OutDir) -> Written:
        """Write the ``kind`` page of ``result`` into ``out``."""
        if kind == "capacity":
            from gpuops.render.html import capacity  # noqa: PLC0415 - when used

            return capacity.write(result, out)
        if kind == "fleet":
            from gpuops.render.html import fleet  # noqa: PLC0415

            return fleet.write_fleet(result, out)
        if kind == "node-history":
            from gpuops.render.html import nodehistory  # noqa: PLC0415

            return nodehistory.write(result, out)
        if kind == "node-update":
            from gpuops.render.html import nodeupdate  # noqa: PLC0415

            return nodeupdate.write_rollout(result, out)
        if kind == "prune":
            from gpuops.render.html import prune  # noqa: PLC0415

            return prune.write(result, out)
        if kind == "releases":
            from gpuops.render.html import releases  # noqa: PLC0415

            return releases.write(result, out)
        raise ValueError(f"no page of kind {kind!r}")  # a bug: the kinds are the CLI's own

    def loads(self, text: str, source: str) -> Any:
        """A JSON document decoded strictly (NaN, a key twice, ... are exit 2)."""
        return inputs.loads(text, source)

    def check(self, kind: str, result: Mapping[str, Any], source: str) -> None:
        """What the ``kind`` page computes with, checked before it runs (exit 2)."""
        inputs.check(kind, result, source)


PAGES = HtmlPages()
