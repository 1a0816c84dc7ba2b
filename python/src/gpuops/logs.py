"""Logging set-up for the CLI, and the redaction that keeps secrets out of every log line
(a secret's value, a URL's ``user:password@``). A foundation: it imports nothing of ours, so
every layer, the core included, may use it."""

from __future__ import annotations

import html
import json
import logging
import os
import re
import time
from collections.abc import Callable

#: A blank: where a URL in a text ends.
_BLANK = re.compile(r"\s")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def _scheme_start(text: str, colon: int, floor: int) -> int | None:
    """Where the scheme ending at ``text[colon:colon + 3] == "://"`` begins (a letter at a
    word boundary, then letters, digits, ``+ . -``), not before ``floor``; None if none."""
    first = colon
    while first > floor and text[first - 1] in _SCHEME_CHARS:
        first -= 1
    for k in range(first, colon):
        before = text[k - 1] if k > 0 else " "
        if text[k].isascii() and text[k].isalpha() and not (before.isalnum() or before == "_"):
            return k
    return None


def userinfo_spans(text: str) -> list[tuple[int, int, int]]:
    """Each URL's userinfo in ``text``: (scheme start, userinfo start, index of its ``@``).

    The one userinfo rule of gpuops (:mod:`gpuops.core.urls` finds a URL's password with it
    too): the userinfo is everything between ``scheme://`` and the LAST ``@`` before a blank.
    A password may hold an unencoded ``/``, ``?``, ``#`` or ``@`` (``https://u:pa/ss@h/``);
    for a message hiding too much (a path with an ``@`` in it) is the right error. Linear in
    the length of ``text`` (an input can be a megabyte)."""
    spans: list[tuple[int, int, int]] = []
    pos = 0
    while (colon := text.find("://", pos)) >= 0:
        scheme = _scheme_start(text, colon, pos)
        if scheme is None:
            pos = colon + 3
            continue
        begin = colon + 3
        blank = _BLANK.search(text, begin)
        end = blank.start() if blank else len(text)
        at = text.rfind("@", begin, end)
        if at < 0:
            pos = end  # no "@" in the rest of this word: no later URL in it has userinfo
            continue
        spans.append((scheme, begin, at))
        pos = at + 1
    return spans


def without_userinfo(text: str) -> str:
    """``text`` with the ``user:password@`` of every URL in it removed."""
    if "@" not in text:
        return text
    pieces, pos = [], 0
    for _scheme, begin, at in userinfo_spans(text):
        pieces.append(text[pos:begin])
        pos = at + 1
    return "".join(pieces) + text[pos:]


#: Environment variables whose values are secrets wherever they appear.
SECRET_ENV = re.compile(r"(PASSWORD|PASSWD|TOKEN|SECRET|_KEY$|APIKEY|WEBHOOK_URL)", re.IGNORECASE)
_MIN_SECRET_LEN = 4


#: Secrets met while running that no variable name announces: the value of the variable a
#: ``--webhook-url-env`` names, the credentials of the kubeconfig user in use.
_KNOWN: set[str] = set()


def remember_secret(value: object) -> None:
    """Redact ``value`` (and, for a structure, every string in it) from every message and log
    line of this process from now on."""
    if isinstance(value, str):
        if len(value) >= _MIN_SECRET_LEN:
            _KNOWN.add(value)
    elif isinstance(value, dict):
        for item in value.values():
            remember_secret(item)
    elif isinstance(value, list):
        for item in value:
            remember_secret(item)


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if SECRET_ENV.search(k) and len(v) >= _MIN_SECRET_LEN}
    return sorted(values | _KNOWN, key=len, reverse=True)


def _xml(value: str, table: dict[str, str]) -> str:
    for char, entity in table.items():  # "&" first
        value = value.replace(char, entity)
    return value


#: ElementTree's escaping of text (``& < >``) and of attributes (also ``"`` and blanks).
_XML_TEXT = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_XML_ATTRIBUTE = {**_XML_TEXT, '"': "&quot;", "\r": "&#13;", "\n": "&#10;", "\t": "&#09;"}


def forms(value: str) -> set[str]:
    """Every way ``value`` can appear in what gpuops prints or writes: plain, inside a JSON
    string (ASCII or not), ``html.escape`` with and without quotes, Jinja2's (markupsafe:
    ``"`` as ``&#34;``, ``'`` as ``&#39;``), ElementTree's text and attribute escaping."""
    found = {
        value,
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        html.escape(value, quote=True),
        html.escape(value, quote=False),
        html.escape(value, quote=True).replace("&quot;", "&#34;").replace("&#x27;", "&#39;"),
        _xml(value, _XML_TEXT),
        _xml(value, _XML_ATTRIBUTE),
    }
    return {f for f in found if f}


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with every secret of ``secrets``, in every :func:`forms` it takes, replaced by
    ``****`` (the longest first: a secret inside another goes with it)."""
    return redactor(secrets)(text)


def redactor(secrets: list[str]) -> Callable[[str], str]:
    """:func:`redact` with ``secrets`` for many texts: their forms are worked out once (a
    result document has hundreds of strings)."""
    every = {form for value in secrets if value for form in forms(value)}
    ordered = sorted(every, key=len, reverse=True)  # the longest first

    def one(text: str) -> str:
        for form in ordered:
            if form in text:
                text = text.replace(form, "****")
        return text

    return one


def redacted(line: str) -> str:
    """A line for stderr, redacted with the secrets known NOW (a password read after a
    command began counts too) and every URL without its ``user:password@``."""
    return redact(without_userinfo(line), secret_values())


def progress_line(line: str) -> str:
    """A progress line as gpuops prints it to stderr during a long operation: the UTC time
    (RFC 3339 to the second, as ``kubectl logs --timestamps`` and the lines of progress.log
    have it), a space, then the line, :func:`redacted`."""
    return f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {redacted(line)}"


class RedactingFilter(logging.Filter):
    """Replace the value of every secret-bearing environment variable (and every secret
    :func:`remember_secret` was given) by ``****``; drop every URL's ``user:password@``."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = sorted({*self.secrets, *_KNOWN}, key=len, reverse=True)
        message = record.getMessage()
        if secrets or "@" in message:  # and no URL keeps its user:password@
            record.msg = redact(without_userinfo(message), secrets)
            record.args = None
        return True


def log_level(debug: bool, verbose: int = 0) -> int:
    """The level of gpuops' log lines: warnings; ``-v`` info; ``-vv`` or ``--debug`` debug."""
    if debug or verbose >= 2:  # -vv
        return logging.DEBUG
    return logging.INFO if verbose else logging.WARNING


def configure_logging(debug: bool, verbose: int = 0) -> None:
    """gpuops' own log lines go to stderr, redacted, at :func:`log_level`. Libraries that log
    through the root logger (the Kubernetes client logs a failing kubeconfig exec plugin's
    error text with ``logging.error``) are not shown: without a handler there, Python would
    print them."""
    top = logging.getLogger()
    if not top.handlers:
        top.addHandler(logging.NullHandler())
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter(secret_values()))
    root = logging.getLogger("gpuops")
    root.handlers[:] = [handler]
    root.setLevel(log_level(debug, verbose))
    root.propagate = False
