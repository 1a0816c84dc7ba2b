"""Use case of ``gpuops report``: HTML pages from the JSON results the commands produce,
and the page another use case writes beside its result (``--report-dir``).

Input is a result document (``{"ok": true, "result": …}``), an error document whose
``result`` holds what the operation found (a refused gate), or a bare result object.

The pages themselves are the render layer's, which a use case may not import: the CLI installs
them (:func:`install_pages`, from :mod:`gpuops.render.html.pages`) and the use cases reach them
through the :class:`Pages` protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gpuops import fsio
from gpuops.core.values import shown
from gpuops.errors import GpuOpsError, InternalError, InvalidInput
from gpuops.usecases.outcome import Outcome
from gpuops.usecases.reportdoc import PageDocument, ReportDocument

#: Largest input accepted: a 5,000-node ``--show-nodes`` result is ~2.5 MB.
MAX_INPUT_BYTES = 64 << 20


class Page(Protocol):
    """A page written: the page and every file it consists of (its stylesheet)."""

    @property
    def page(self) -> Path: ...

    @property
    def files(self) -> tuple[Path, ...]: ...

    def to_dict(self) -> dict[str, Any]: ...


class Pages(Protocol):
    """The report pages (:class:`gpuops.render.html.pages.HtmlPages`)."""

    def write(self, kind: str, result: Mapping[str, Any], out: fsio.OutDir) -> Page: ...

    def loads(self, text: str, source: str) -> Any: ...

    def check(self, kind: str, result: Mapping[str, Any], source: str) -> None: ...


_INSTALLED: dict[str, Callable[[], Pages]] = {}


def install_pages(load: Callable[[], Pages]) -> None:
    """Give the use cases the report pages; ``load()`` is called when a page is first asked
    for (so Jinja2 and pygal load only then). The CLI does this as it starts."""
    _INSTALLED["pages"] = load


def _pages() -> Pages:
    load = _INSTALLED.get("pages")
    if load is None:  # a bug, not a user's error: every entry point installs them
        # a GpuOpsError, so that a page beside a result is said not written (the work done
        # stays done, its verdict unchanged) and `gpuops report` is exit 5, a bug
        raise InternalError(
            "no report pages installed (gpuops.cli.main.run installs them)",
            hint="call gpuops.usecases.reports.install_pages first",
        )
    return load()


@dataclass(frozen=True)
class ReportRequest:
    kind: str
    input: Path
    out: Path
    option: str = "out"  # the option that named ``out``, for its errors


@dataclass(frozen=True)
class ReportPage:
    """A page written: its kind and its files."""

    kind: str
    written: Page

    def to_dict(self) -> PageDocument:
        written = self.written.to_dict()  # {"page", "files"}
        return {"kind": self.kind, "page": written["page"], "files": written["files"]}


@dataclass(frozen=True)
class BesideReport:
    """The page a command wrote beside its result, or why it could not: the result
    document's ``report``. A page that cannot be written never changes the verdict."""

    kind: str
    page: ReportPage | None
    detail: str = ""  # why it was not written

    def to_dict(self) -> ReportDocument:
        if self.page is None:
            return {"status": "failed", "detail": self.detail}
        page = self.page.to_dict()
        return {
            "status": "written",
            "kind": page["kind"],
            "page": page["page"],
            "files": page["files"],
        }

    @property
    def files(self) -> dict[str, str]:
        """For :attr:`Outcome.files`: the page, when written."""
        return {"page": str(self.page.written.page)} if self.page else {}


def load_result(path: Path) -> Mapping[str, Any]:
    """The ``result`` object of a result/error document, or a bare result object."""
    text = fsio.read_text(path, cap=MAX_INPUT_BYTES, what="input", option="input")
    doc = _pages().loads(text, shown(str(path), 200))  # strictly: NaN, a key twice, ... exit 2
    if isinstance(doc, dict) and "ok" in doc and "command" in doc:
        doc = doc.get("result")
    if not isinstance(doc, dict):
        raise InvalidInput(
            f"input {path} holds no result object (an error document of a command that "
            "did not run?)",
            field="input",
        )
    return doc


def write_beside(kind: str, out: Path, full: Callable[[], Mapping[str, Any]]) -> BesideReport:
    """Write the ``kind`` page of ``full()`` into the folder ``out`` (a ``--report-dir``).
    Whatever stops it (the folder, the page's own checks) is said in the result, never
    raised: the command's verdict and exit code stay what the operation decided."""
    try:
        out_dir = fsio.OutDir(out, option="report_dir")
        page = ReportPage(kind, _pages().write(kind, full(), out_dir))
    except GpuOpsError as exc:
        return BesideReport(kind, None, exc.message)
    return BesideReport(kind, page)


def render(request: ReportRequest) -> Outcome[ReportPage]:
    """``gpuops report KIND``: write the ``kind`` page of the result in ``request.input``."""
    out = fsio.OutDir(request.out, option=request.option)  # checked now, made when written
    pages = _pages()
    source = shown(str(request.input), 200)
    data = load_result(request.input)
    pages.check(request.kind, data, source)  # what the page computes with, before it runs
    try:
        written = pages.write(request.kind, data, out)
    except InvalidInput as exc:  # the page's own checks: name the file they are about
        if exc.field not in (None, "input"):  # the out folder's own errors
            raise
        raise InvalidInput(f"input {source}: {exc.message}", hint=exc.hint, field="input") from None
    return Outcome(ReportPage(request.kind, written), files={"page": str(written.page)})
