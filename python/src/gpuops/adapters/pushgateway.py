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
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

from gpuops.core.urls import parse_http, without_userinfo
from gpuops.errors import OperationFailed, Unreachable
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


def env_auth(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """Basic auth from :data:`USERNAME_ENV` / :data:`PASSWORD_ENV` (None without a user name);
    the password is remembered as a secret (redacted wherever it would be shown)."""
    user = environ.get(USERNAME_ENV) or ""
    if not user:
        return None
    password = environ.get(PASSWORD_ENV) or ""
    remember_secret(password)
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
        raise OperationFailed(
            f"the Pushgateway {shown} refused the metrics: HTTP {exc.code} {body}",
            hint="check the URL (the Pushgateway's base, without /metrics) and its logs",
        ) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise Unreachable(
            f"the Pushgateway {shown} did not answer: {reason}",
            hint="check --pushgateway and the network to it",
        ) from None
