"""The JSON shapes of report pages in result documents (``TypedDict``s, :mod:`gpuops.schema`).

Apart from :mod:`gpuops.usecases.reports`, which loads the pages, so that a use case can
declare its ``report`` without importing them.
"""

from __future__ import annotations

from typing import Annotated, NotRequired, TypedDict


class PageDocument(TypedDict):
    """A page written: the ``result`` of ``gpuops report KIND``."""

    kind: str  # capacity, fleet, node-update, releases
    page: str  # the HTML file
    files: list[str]  # every file of the page (the page and its stylesheet)


class ReportDocument(TypedDict):
    """A page asked for with --report-dir: written (its files) or not (why)."""

    status: Annotated[str, {"enum": ["written", "failed"]}]
    detail: NotRequired[str]
    kind: NotRequired[str]
    page: NotRequired[str]
    files: NotRequired[list[str]]
