"""Charts for the HTML reports: pygal SVG, made fit for Jenkins' default CSP.

Jenkins serves archived files with ``sandbox; default-src 'none'; img-src 'self';
style-src 'self';``: no script runs, no inline ``<style>`` or ``style=""`` applies. pygal
writes both into its SVG, so each chart is rendered, its ``<style>`` moved into the report's
stylesheet (scoped by the chart's id, which is made stable), its scripts dropped and its
style attributes turned into classes; the SVG is then inlined in the page, where the page's
stylesheet reaches it. No JavaScript, no network at view time.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
ET.register_namespace("", SVG_NS)
ET.register_namespace("xlink", XLINK_NS)

#: Series colours, in order; the report's stylesheet uses the same for its legend chips.
COLOURS = ("#3b6fb6", "#59a14f", "#c9c9c9", "#e15759", "#f28e2b", "#9c755f", "#76b7b2")
_SLUG = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class Chart:
    """One chart: inline SVG markup and the CSS it needs (for the page's stylesheet)."""

    id: str
    svg: str
    css: str


def style(colors: tuple[str, ...] = COLOURS) -> Any:
    from pygal.style import Style  # noqa: PLC0415 - reports only

    return Style(
        background="transparent",
        plot_background="transparent",
        foreground="#222",
        foreground_strong="#111",
        foreground_subtle="#777",
        font_family="DejaVu Sans, Arial, sans-serif",
        colors=colors,
        title_font_size=14,
        label_font_size=11,
        major_label_font_size=11,
        legend_font_size=12,
        value_font_size=11,
    )


def config(**options: Any) -> dict[str, Any]:
    """pygal options shared by every chart: no JavaScript, no XML prolog, our style."""
    base: dict[str, Any] = {
        "js": [],
        "disable_xml_declaration": True,
        "style": style(),
        "explicit_size": True,
        "legend_at_bottom": True,
        "legend_at_bottom_columns": 4,
        "print_values": True,
        "print_zeroes": False,
        "truncate_label": 40,
        "truncate_legend": 40,
    }
    base.update(options)
    return base


def finish(chart: Any, name: str) -> Chart:
    """Render a pygal chart and make it CSP-clean (see the module doc)."""
    chart_id = "chart-" + _SLUG.sub("-", name.lower()).strip("-")
    # pygal's own output (labels it escaped), never outside input: no XML attack surface
    root = ET.fromstring(chart.render(is_unicode=True))  # noqa: S314
    old_id = root.get("id", "")
    css: list[str] = []
    for parent in list(root.iter()):
        for child in list(parent):
            tag = child.tag.rsplit("}", 1)[-1]
            if tag == "style":
                css.append(child.text or "")
                parent.remove(child)
            elif tag == "script":
                parent.remove(child)
    for element in root.iter():
        inline = element.attrib.pop("style", None)
        if inline is not None and inline.replace(" ", "") == "opacity:0":
            element.set("class", (element.get("class", "") + " pg-hidden").strip())
    root.set("id", chart_id)
    root.set("role", "img")
    text = "\n".join(css).replace(old_id, chart_id) if old_id else "\n".join(css)
    return Chart(chart_id, ET.tostring(root, encoding="unicode"), text)
