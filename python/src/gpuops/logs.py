"""Logging set-up for the CLI, and the redaction that keeps secrets out of every log line."""

from __future__ import annotations

import html
import json
import logging
import os
import re

from gpuops.core.values import without_userinfo

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
    every = {form for value in secrets if value for form in forms(value)}
    for form in sorted(every, key=len, reverse=True):
        if form in text:
            text = text.replace(form, "****")
    return text


def redacted(line: str) -> str:
    """A line for stderr, redacted with the secrets known NOW (a password read after a
    command began counts too) and every URL without its ``user:password@``."""
    return redact(without_userinfo(line), secret_values())


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


def configure_logging(debug: bool) -> None:
    """gpuops' own log lines go to stderr, redacted. Libraries that log through the root
    logger (the Kubernetes client logs a failing kubeconfig exec plugin's error text with
    ``logging.error``) are not shown: without a handler there, Python would print them."""
    top = logging.getLogger()
    if not top.handlers:
        top.addHandler(logging.NullHandler())
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter(secret_values()))
    root = logging.getLogger("gpuops")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    root.propagate = False
