"""Push metrics to a Prometheus Pushgateway (stdlib HTTP, a deadline).

``PUT <url>/metrics/job/<job>/<label>/<value>...`` replaces every metric of that grouping key
(the Pushgateway API, as documented for prometheus/pushgateway 1.x): an inspection pushes the
whole picture of its fleet each time, so a host that left the inventory leaves the group too.
A grouping-key value is sent base64url-encoded (``<label>@base64/<value>``), which the
Pushgateway accepts for any value, slashes included. Basic auth comes from the environment
(:data:`USERNAME_ENV`, :data:`PASSWORD_ENV`: a Jenkins usernamePassword credential binds
them), else from a ``user:password@`` in the URL; either way the password is never shown.
"""

from __future__ import annotations

import base64
import http.client
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

from gpuops.core.urls import parse_http, without_userinfo
from gpuops.errors import InvalidInput, OperationFailed, Unreachable
from gpuops.logs import remember_secret

TIMEOUT_S = 10.0
USERNAME_ENV = "GPUOPS_PUSHGATEWAY_USERNAME"
PASSWORD_ENV = "GPUOPS_PUSHGATEWAY_PASSWORD"  # noqa: S105 - a variable's name, not a secret
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class Pushed:
    url: str  # without user:password
    status: int


def _segment(label: str, value: str) -> str:
    encoded = base64.urlsafe_b64encode(value.encode()).decode().rstrip("=") or "="
    return f"{label}@base64/{encoded}"


def group_url(url: str, job: str, grouping: Mapping[str, str]) -> str:
    path = "/".join([_segment("job", job), *(_segment(k, v) for k, v in grouping.items())])
    return f"{url.rstrip('/')}/metrics/{path}"


def env_auth(environ: Mapping[str, str], url: str = "") -> tuple[str, str] | None:
    """Basic auth from :data:`USERNAME_ENV` / :data:`PASSWORD_ENV` (None when neither is set);
    the password is remembered as a secret (redacted wherever it would be shown). Both or
    neither (InvalidInput otherwise), a user name without ':' or control characters (RFC 7617),
    and not beside a ``user:password@`` in ``url`` (which of the two would be meant?)."""
    user = environ.get(USERNAME_ENV) or ""
    password = environ.get(PASSWORD_ENV) or ""
    if password:
        remember_secret(password)
    if not user and not password:
        return None
    if not (user and password):
        given, missing = (USERNAME_ENV, PASSWORD_ENV) if user else (PASSWORD_ENV, USERNAME_ENV)
        raise InvalidInput(
            f"the Pushgateway's basic auth: {given} is set but {missing} is not",
            hint="set both (a Jenkins usernamePassword credential binds both), or neither",
        )
    if ":" in user or any(ord(c) < 0x20 or ord(c) == 0x7F for c in user + password):
        raise InvalidInput(
            f"{USERNAME_ENV} holds ':' or a control character (a basic-auth user name cannot; "
            "the password cannot hold control characters)"
        )
    if url and "@" in urllib.parse.urlsplit(url).netloc:
        raise InvalidInput(
            f"the Pushgateway URL {without_userinfo(url)} carries user:password@ and "
            f"{USERNAME_ENV} is set too: give the credentials once",
            hint=f"drop user:password@ from the URL and keep {USERNAME_ENV}/{PASSWORD_ENV}",
        )
    return user, password


def push(
    url: str,
    job: str,
    grouping: Mapping[str, str],
    text: str,
    auth: tuple[str, str] | None = None,
) -> Pushed:
    """PUT ``text`` (exposition format) as the group ``job`` + ``grouping``, with basic
    ``auth`` (user, password) if given, else the URL's ``user:password@`` if any; raises
    :class:`Unreachable` (no answer) or :class:`OperationFailed` (an HTTP error)."""
    parsed = parse_http(url, "pushgateway", userinfo=True)
    shown = without_userinfo(url)
    target = group_url(shown, job, grouping)  # its path holds '@': userinfo is dropped first
    request = urllib.request.Request(  # noqa: S310 - http(s) checked by parse_http
        target, data=text.encode(), method="PUT",
        headers={"Content-Type": CONTENT_TYPE},
    )  # fmt: skip
    user, password = auth or (parsed.username, parsed.password)
    if user:
        token = base64.b64encode(f"{user}:{password or ''}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as resp:  # noqa: S310
            return Pushed(shown, int(resp.status))
    except urllib.error.HTTPError as exc:
        body = exc.read(500).decode(errors="replace").strip()
        hint = "check the URL (the Pushgateway's base, without /metrics) and its logs"
        if exc.code in (401, 403):
            hint = (
                f"check the credentials in {USERNAME_ENV} / {PASSWORD_ENV} (the step's "
                "pushgatewayCredentialsId) and the Pushgateway's web config"
            )
        raise OperationFailed(
            f"the Pushgateway {shown} refused the metrics: HTTP {exc.code} {body}", hint=hint
        ) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise Unreachable(
            f"the Pushgateway {shown} did not answer: {reason}",
            hint="check --pushgateway and the network to it",
        ) from None
