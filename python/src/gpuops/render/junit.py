"""JUnit XML for Jenkins' junit step: one test case per host."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    name: str
    classname: str
    seconds: float = 0.0
    failure: str | None = None  # message of a failure (the check said no)
    error: str | None = None  # message of an error (the check could not run)
    skipped: str | None = None
    output: str = ""


def junit_xml(suite: str, cases: Sequence[Case]) -> str:
    """A ``<testsuites>`` document with one ``<testsuite>`` holding ``cases``."""
    root = ET.Element("testsuites")
    node = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(cases)),
        failures=str(sum(1 for c in cases if c.failure is not None)),
        errors=str(sum(1 for c in cases if c.error is not None)),
        skipped=str(sum(1 for c in cases if c.skipped is not None)),
        time=f"{sum(c.seconds for c in cases):.3f}",
    )
    for c in cases:
        case = ET.SubElement(
            node, "testcase", name=c.name, classname=c.classname, time=f"{c.seconds:.3f}"
        )
        if c.failure is not None:
            ET.SubElement(case, "failure", message=c.failure[:500]).text = c.failure
        if c.error is not None:
            ET.SubElement(case, "error", message=c.error[:500]).text = c.error
        if c.skipped is not None:
            ET.SubElement(case, "skipped", message=c.skipped[:500])
        if c.output:
            ET.SubElement(case, "system-out").text = c.output
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
