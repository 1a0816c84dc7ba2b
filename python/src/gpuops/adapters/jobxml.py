"""Job config.xml: rendered from the library's template (Jinja2, XML-escaped), and compared
with what Jenkins holds after normalising what Jenkins adds on its own (plugin versions, the
XML declaration, indentation)."""

from __future__ import annotations

import difflib
import xml.etree.ElementTree as ET

from gpuops.content import jobs_dir
from gpuops.core.jenkinsjobs import Job, JobsConfig
from gpuops.errors import OperationFailed

TEMPLATE = "pipeline-job.xml.j2"


def render(job: Job, config: JobsConfig) -> str:
    import jinja2  # noqa: PLC0415 - only for gpuops jenkins

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(jobs_dir())),
        autoescape=True,  # every value is XML-escaped
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return env.get_template(TEMPLATE).render(job=job, config=config)


def normalized(config_xml: str, what: str) -> str:
    """The job's configuration as comparable text: no plugin attributes, no blank text,
    indented the same way."""
    try:
        root = ET.fromstring(config_xml.encode())  # noqa: S314 - Jenkins' or our own config.xml
    except ET.ParseError as exc:
        raise OperationFailed(f"{what}: config.xml is not well-formed XML ({exc})") from None
    for element in root.iter():
        element.attrib.pop("plugin", None)
        if element.text is not None and not element.text.strip():
            element.text = None
        element.tail = None
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


def diff(current: str | None, wanted: str, path: str) -> str:
    """A unified diff from what Jenkins holds (None: no job) to what is wanted."""
    old = normalized(current, path).splitlines() if current is not None else []
    new = normalized(wanted, path).splitlines()
    return "\n".join(
        difflib.unified_diff(old, new, f"{path} (Jenkins)", f"{path} (wanted)", lineterm="")
    )
