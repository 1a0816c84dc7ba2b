"""Post a JSON notification to a webhook whose URL is a secret held in an environment variable.

The URL never appears in a message, a log line or an exception: errors name the variable.
A notification that cannot be delivered is reported as a :class:`Delivery`, never raised:
a failed notification must not hide or change the verdict it announces.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gpuops.errors import InvalidInput
from gpuops.logs import remember_secret

log = logging.getLogger(__name__)

DEFAULT_ENV = "GPUOPS_WEBHOOK_URL"
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Delivery:
    """What became of a notification: ``sent``, ``failed`` or ``not-configured``."""

    status: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "sent"

    def to_dict(self) -> dict[str, str]:
        return {"status": self.status, "detail": self.detail}

    def __str__(self) -> str:
        return f"{self.status} ({self.detail})" if self.detail else self.status


def webhook_url(env_name: str) -> str | None:
    """The URL in ``$env_name``, None when unset or empty; InvalidInput if not http(s)."""
    raw = os.environ.get(env_name, "")
    remember_secret(raw)  # whatever the variable's name, its value is never shown
    url = raw.strip()
    if not url:
        return None
    try:
        parts = urlsplit(url)
        scheme, host = parts.scheme, parts.hostname
        _ = parts.port  # a malformed port raises here, not at delivery
    except ValueError:
        scheme, host = "", None
    if scheme not in ("http", "https") or not host or any(c.isspace() for c in url):
        raise InvalidInput(
            f"${env_name} does not hold an http(s) URL (value not shown: it is a secret)",
            hint=f"set {env_name} to the webhook's https://... address or unset it",
        )
    return url


def post(env_name: str, payload: Mapping[str, Any]) -> Delivery:
    """POST ``payload`` as JSON to the URL in ``$env_name``; never raises for delivery
    failures, and never says more about them than the kind of failure."""
    try:
        url = webhook_url(env_name)
    except InvalidInput:
        return Delivery("failed", f"${env_name} is not an http(s) URL")
    if url is None:
        return Delivery("not-configured", f"${env_name} is not set")
    import urllib.error  # noqa: PLC0415 - urllib.request is heavy: only when posting
    import urllib.request  # noqa: PLC0415

    body = json.dumps(payload, sort_keys=True, default=str).encode()
    req = urllib.request.Request(  # noqa: S310 - scheme checked in webhook_url
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:  # noqa: S310
            status = int(resp.status)
    except urllib.error.HTTPError as exc:
        log.warning("webhook from $%s answered HTTP %s", env_name, exc.code)
        return Delivery("failed", f"HTTP {exc.code}")
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
        # the reason's class only: its text can carry the URL, and the URL is a secret
        reason = getattr(exc, "reason", exc)
        kind = type(reason).__name__ if isinstance(reason, BaseException) else type(exc).__name__
        log.warning("webhook from $%s not delivered: %s", env_name, kind)
        return Delivery("failed", kind)
    log.info("webhook from $%s notified (HTTP %s)", env_name, status)
    return Delivery("sent", f"HTTP {status}")
