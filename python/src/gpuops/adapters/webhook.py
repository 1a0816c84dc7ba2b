"""Post a JSON notification to a webhook whose URL is a secret held in an environment variable.

The URL never appears in a message, a log line or an exception: errors name the variable.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from gpuops.errors import InvalidInput

log = logging.getLogger(__name__)

DEFAULT_ENV = "GPUOPS_WEBHOOK_URL"
TIMEOUT_S = 10.0


def webhook_url(env_name: str) -> str | None:
    """The URL in ``$env_name``, None when unset or empty; InvalidInput if not http(s)."""
    url = os.environ.get(env_name, "").strip()
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(
            f"${env_name} does not hold an http(s) URL (value not shown: it is a secret)",
            hint=f"set {env_name} to the webhook's https://... address or unset it",
        )
    return url


def post(env_name: str, payload: Mapping[str, Any]) -> str:
    """POST ``payload`` as JSON to the URL in ``$env_name``; return what happened, never raise
    for delivery failures (a failed notification must not hide the verdict)."""
    url = webhook_url(env_name)
    if url is None:
        return "not configured"
    body = json.dumps(payload, sort_keys=True, default=str).encode()
    req = urllib.request.Request(  # noqa: S310 - scheme checked in webhook_url
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:  # noqa: S310
            status = resp.status
    except urllib.error.HTTPError as exc:
        log.warning("webhook from $%s answered HTTP %s", env_name, exc.code)
        return f"failed: HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        log.warning("webhook from $%s unreachable: %s", env_name, type(reason).__name__)
        return f"failed: {type(reason).__name__}"
    log.info("webhook from $%s notified (HTTP %s)", env_name, status)
    return f"sent (HTTP {status})"
