"""URLs from outside: parsed before any connection, shown without their user and password.

Every URL gpuops names in a message, a result or a page goes through :func:`shown_url` or
:func:`without_userinfo` (the Jenkins controller, the registry, a webhook, the driver
repository, the Kubernetes server): a ``user:password@`` part never reaches an output. A URL
that carries a password has it remembered for redaction (:func:`remember_userinfo`), should it
appear anywhere else.
"""

from __future__ import annotations

from urllib.parse import SplitResult, unquote, urlsplit

from gpuops.core.values import shown
from gpuops.errors import InvalidInput
from gpuops.logs import remember_secret, userinfo_spans, without_userinfo

__all__ = [
    "parse_http",
    "password_of",
    "remember_userinfo",
    "shown_url",
    "split_url",
    "userinfo_of",
    "without_userinfo",
]


def shown_url(url: str, limit: int = 120) -> str:
    """``url`` for a message: without userinfo, quoted and escaped, cut to ``limit``."""
    return shown(without_userinfo(url), limit)


def userinfo_of(url: str) -> str | None:
    """``url``'s ``user:password`` part by the one rule of :func:`gpuops.logs.userinfo_spans`
    (everything between ``scheme://`` and the last ``@`` before a blank), or None."""
    text = url.strip()
    spans = userinfo_spans(text) if "@" in text else []
    if not spans or spans[0][0] != 0:
        return None
    _scheme, begin, at = spans[0]
    return text[begin:at]


def password_of(url: str) -> str | None:
    """The password of ``url``'s userinfo (after its first ``:``), or None when it has none."""
    _user, colon, password = (userinfo_of(url) or "").partition(":")
    return password if colon and password else None


def remember_userinfo(url: str) -> None:
    """Redact the password (raw and percent-decoded) of ``url``'s userinfo from every output
    of this process from now on."""
    password = password_of(url)
    if password:
        remember_secret(password)
        remember_secret(unquote(password))
        remember_secret(userinfo_of(url))


def split_url(value: str, bad: str) -> SplitResult:
    """``value`` split into its parts, or InvalidInput starting with ``bad`` when it holds a
    blank or a control character or its host or port cannot be parsed."""
    if any(c.isspace() or ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in value):
        raise InvalidInput(f"{bad}: it holds a space or a control character")
    try:
        parts = urlsplit(value)
        _host, _port = parts.hostname, parts.port
    except ValueError:
        raise InvalidInput(f"{bad}: its host or port cannot be parsed") from None
    return parts


def parse_http(value: str, what: str = "", *, userinfo: bool = False) -> SplitResult:
    """``value`` as an http(s) URL with a host and a valid port, or InvalidInput (the URL
    shown without its userinfo). ``userinfo``: whether ``user:password@`` is accepted (its
    password is then remembered as a secret)."""
    remember_userinfo(value)
    bad = f"{what} {shown_url(value)}".strip() + " is not an http(s) URL"
    parts = split_url(value, bad)
    host = parts.hostname
    if parts.scheme not in ("http", "https"):
        raise InvalidInput(f"{bad}: the scheme must be http or https")
    if not host:
        raise InvalidInput(f"{bad}: it names no host")
    if "@" in parts.netloc and not userinfo:
        raise InvalidInput(
            f"{bad}: it carries a user name or password (user:password@), which would be "
            "shown to everyone who reads it"
        )
    return parts
