"""Writing a report: a Jinja2 page, its stylesheet and the charts' CSS, side by side.

A report is a folder: ``<name>.html`` and ``report.css`` (the house stylesheet plus every
chart's CSS). Nothing inline, nothing from the network: the folder renders the same on an
air-gapped Jenkins under its default Content-Security-Policy as on a laptop.
"""

from __future__ import annotations

import datetime
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from gpuops import __version__
from gpuops.errors import InvalidInput, OperationFailed
from gpuops.render.html.charts import Chart

STYLESHEET = "report.css"


@dataclass(frozen=True)
class Written:
    """The files a report consists of."""

    page: Path
    files: tuple[Path, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"page": str(self.page), "files": [str(f) for f in self.files]}


def _environment() -> Any:
    import jinja2  # noqa: PLC0415 - reports only

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gpuops.render.html", "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "j2"), default=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = lambda v: f"{v:,}" if isinstance(v, int) else v
    return env


def _stylesheet(charts: Iterable[Chart]) -> str:
    house = resources.files("gpuops.render.html").joinpath("static", STYLESHEET).read_text()
    return house + "".join(f"\n/* {c.id} (pygal) */\n{c.css}\n" for c in charts)


def write(
    out_dir: Path, name: str, template: str, context: Mapping[str, Any], charts: Iterable[Chart]
) -> Written:
    """Render ``template`` with ``context`` into ``out_dir/<name>.html`` plus its stylesheet."""
    chart_list = list(charts)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInput(
            f"report folder {out} cannot be created ({exc.strerror or type(exc).__name__})",
            field="out",
        ) from None
    if not out.is_dir() or out.is_symlink():
        raise InvalidInput(f"report folder {out} is not a directory", field="out")
    html = (
        _environment()
        .get_template(template)
        .render(
            **context,
            charts={c.id: c for c in chart_list},
            stylesheet=STYLESHEET,
            generated=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            version=__version__,
        )
    )
    page = out / f"{name}.html"
    css = out / STYLESHEET
    _write(page, html)
    _write(css, _stylesheet(chart_list))
    return Written(page, (page, css))


def _write(path: Path, text: str) -> None:
    """Atomically, and never through a symlink someone planted at ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        Path(tmp).chmod(0o644)  # a report is for reading: Jenkins and people serve it
        Path(tmp).replace(path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OperationFailed(
            f"cannot write the report file {path} ({exc.strerror or type(exc).__name__})"
        ) from None
