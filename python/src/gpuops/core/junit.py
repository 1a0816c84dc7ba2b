"""JUnit XML for Jenkins' junit step: one test case per host.

The text in it comes from hosts (nvidia-smi's output, kernel lines, host names), so it can hold
any character. XML 1.0 cannot carry C0 controls other than tab, line feed and carriage return,
lone surrogates or U+FFFE/U+FFFF, not even as character references: Jenkins' parser refuses
the whole file. :func:`xml_text` shows each of them, and the C1 controls and DEL (legal but
invisible), as a visible escape like Python's: ``\\x07``, ``\\x85``, ``\\ud800``. A
backslash the host sent stays as it is (the file is for reading, not for decoding back).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

#: What :func:`xml_text` escapes: not an XML 1.0 Char, or a C1 control / DEL.
_NOT_XML = re.compile("[^\t\n\r\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def xml_text(text: str) -> str:
    """``text`` with every character XML 1.0 cannot carry, and the C1 controls, shown as a
    visible escape; the one escaping of every attribute and text of the JUnit file."""
    return _NOT_XML.sub(_escape, text)


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
    """A ``<testsuites>`` document with one ``<testsuite>`` holding ``cases``; every text
    through :func:`xml_text`."""
    x = xml_text
    root = ET.Element("testsuites")
    node = ET.SubElement(
        root,
        "testsuite",
        name=x(suite),
        tests=str(len(cases)),
        failures=str(sum(1 for c in cases if c.failure is not None)),
        errors=str(sum(1 for c in cases if c.error is not None)),
        skipped=str(sum(1 for c in cases if c.skipped is not None)),
        time=f"{sum(c.seconds for c in cases):.3f}",
    )
    for c in cases:
        case = ET.SubElement(
            node, "testcase", name=x(c.name), classname=x(c.classname), time=f"{c.seconds:.3f}"
        )
        if c.failure is not None:
            ET.SubElement(case, "failure", message=x(c.failure[:500])).text = x(c.failure)
        if c.error is not None:
            ET.SubElement(case, "error", message=x(c.error[:500])).text = x(c.error)
        if c.skipped is not None:
            ET.SubElement(case, "skipped", message=x(c.skipped[:500]))
        if c.output:
            ET.SubElement(case, "system-out").text = x(c.output)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
