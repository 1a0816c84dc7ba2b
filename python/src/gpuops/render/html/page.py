"""Writing a report: a Jinja2 page, its stylesheet and the charts' CSS, side by side.

A report is a folder: ``<name>.html`` and ``report.css`` (the house stylesheet plus every
chart's CSS). Nothing inline, nothing from the network: the folder renders the same on an
air-gapped Jenkins under its default Content-Security-Policy as on a laptop.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from gpuops import __version__
from gpuops.fsio import OutDir
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
    out: OutDir | Path,
    name: str,
    template: str,
    context: Mapping[str, Any],
    charts: Iterable[Chart],
) -> Written:
    """Render ``template`` with ``context`` into ``out/<name>.html`` plus its stylesheet, both
    through the one writer (never through a link; redacted)."""
    if not isinstance(out, OutDir):  # a folder named by a caller of the renderers
        out = OutDir(out, option="out")
    chart_list = list(charts)
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
    page = out.save_text(f"{name}.html", html)
    css = out.save_text(STYLESHEET, _stylesheet(chart_list))
    return Written(page, (page, css))
