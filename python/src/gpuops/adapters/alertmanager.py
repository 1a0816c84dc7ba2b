"""An Alertmanager's firing alerts (API v2, ``GET /api/v2/alerts``): stdlib HTTP with a
deadline for the whole exchange, TLS with the system's CAs or a given CA file, an optional
bearer token (an auth proxy in front of it).

The request asks for ``active=true&silenced=false&inhibited=false`` and one ``filter`` per
matcher (:mod:`gpuops.core.alertmatchers`, checked before): the alerts that fire, that no
silence mutes and no inhibition rule hides, and that match every matcher. Alerts not yet
processed by Alertmanager's dispatcher (``unprocessed``: just received) are counted: they
fire. Every failure becomes a gpuops error in our words; the token is remembered for redaction
and is never in a message.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from gpuops import __version__
from gpuops.adapters.deadline import Deadline, shutdown
from gpuops.adapters.prometheus import tls_context
from gpuops.core.alertmatchers import Matcher
from gpuops.core.urls import parse_http, without_userinfo
from gpuops.errors import InvalidInput, OperationFailed, Unreachable
from gpuops.logs import remember_secret

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0
MAX_ANSWER = 8 * 1024 * 1024
USER_AGENT = f"gpuops/{__version__}"
_TOKEN = re.compile(r"[\x21-\x7e]+")


@dataclass(frozen=True)
class Alert:
    """One firing alert: its labels (``alertname`` among them), since when, its fingerprint."""

    labels: dict[str, str]
    starts_at: str = ""
    fingerprint: str = ""
    state: str = "active"
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "alertname": self.name,
            "labels": dict(self.labels),
            "starts_at": self.starts_at,
            "fingerprint": self.fingerprint,
            "state": self.state,
        }


class AlertmanagerRefused(OperationFailed):
    """401/403: the server (or a proxy in front of it) refused the credentials."""


class Alertmanager:
    """One Alertmanager: ``url`` (http(s); a path prefix such as ``/alertmanager`` is kept;
    no userinfo, query or fragment), ``token`` (bearer, or None), ``ca_file`` (PEM)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        ca_file: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        parts = alertmanager_url(url)
        self.url = url.rstrip("/")
        self._tls = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._tls else 80)
        self._path = parts.path.rstrip("/") + "/api/v2/alerts"
        if token is not None:
            remember_secret(token)
            if not _TOKEN.fullmatch(token):
                raise InvalidInput(
                    f"the bearer token for Alertmanager {self.url} is empty or holds a blank, "
                    "a control character or a character that is not ASCII"
                )
        self._token = token
        if ca_file is not None and not self._tls:
            raise InvalidInput(f"a CA file for Alertmanager {self.url}, which speaks plain HTTP")
        self._ctx = tls_context(ca_file, f"Alertmanager {self.url}") if self._tls else None
        self.timeout = timeout

    def __repr__(self) -> str:  # no token in a traceback's locals
        return f"Alertmanager({self.url!r})"

    def firing(self, matchers: Sequence[Matcher]) -> list[Alert]:
        """The active, unsilenced, uninhibited alerts matching every matcher."""
        query = [("active", "true"), ("silenced", "false"), ("inhibited", "false")]
        query += [("filter", m.text()) for m in matchers]
        status, body = self._get(f"{self._path}?{urlencode(query)}")
        return _alerts(self.url, status, body)

    def _get(self, path: str) -> tuple[int, bytes]:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        conn: http.client.HTTPConnection = (
            http.client.HTTPSConnection(
                self._host, self._port, timeout=self.timeout, context=self._ctx
            )
            if self._tls
            else http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
        )
        started = time.perf_counter()
        try:
            with Deadline(self.timeout) as deadline:  # the whole exchange, not each read
                try:
                    conn.connect()
                    deadline.watch(shutdown(conn.sock))
                    conn.request("GET", path, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read(MAX_ANSWER + 1)
                except (OSError, http.client.HTTPException) as exc:
                    raise self._unreachable(TimeoutError() if deadline.expired else exc) from None
            if deadline.expired:
                raise self._unreachable(TimeoutError())
        finally:
            conn.close()
        log.debug(
            "GET %s -> %s (%.1f ms)", self._path, resp.status, 1e3 * (time.perf_counter() - started)
        )
        if len(data) > MAX_ANSWER:
            raise OperationFailed(
                f"Alertmanager {self.url} answered with more than {MAX_ANSWER // 2**20} MiB",
                hint="narrow --alerts-selector",
            )
        return resp.status, data

    def _unreachable(self, exc: BaseException) -> Unreachable:
        if isinstance(exc, ssl.SSLCertVerificationError):
            return Unreachable(
                f"Alertmanager {self.url}: its TLS certificate is not trusted",
                hint="give the CA that signed it (--alerts-ca-file)",
            )
        if isinstance(exc, ssl.SSLError):
            return Unreachable(
                f"Alertmanager {self.url}: the TLS handshake failed ({type(exc).__name__})"
            )
        if isinstance(exc, TimeoutError):
            return Unreachable(f"Alertmanager {self.url} did not answer within {self.timeout:g} s")
        return Unreachable(f"cannot reach Alertmanager {self.url}: {type(exc).__name__}")


def alertmanager_url(url: str) -> Any:
    """``url`` as an Alertmanager's base URL (http(s), a host, no userinfo, no query or
    fragment: the API's path is appended to its path), or InvalidInput."""
    parts = parse_http(url, "--alerts-url")
    bad = f"--alerts-url {without_userinfo(url)!r}"
    if parts.port == 0:
        raise InvalidInput(f"{bad}: port 0 is no port")
    if parts.query or parts.fragment or url.rstrip().endswith(("?", "#")):
        raise InvalidInput(
            f"{bad}: a query (?) or fragment (#) would be dropped (the API's path is appended)"
        )
    return parts


def _alerts(url: str, status: int, body: bytes) -> list[Alert]:
    if status in (401, 403):
        raise AlertmanagerRefused(
            f"Alertmanager {url} refused the request: HTTP {status}",
            hint="check the bearer token (GPUOPS_ALERTS_TOKEN)",
        )
    if status >= 500 or status in (408, 429):
        raise Unreachable(f"Alertmanager {url} could not answer: HTTP {status}")
    if status == 400:
        log.debug("Alertmanager %s: HTTP 400: %s", url, body[:500])
        raise OperationFailed(
            f"Alertmanager {url} refused the filter: HTTP 400",
            hint="check --alerts-selector against Alertmanager's matcher syntax",
        )
    if status != 200:
        raise OperationFailed(f"Alertmanager {url} answered HTTP {status}")
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        doc = None
    if not isinstance(doc, list):
        raise OperationFailed(
            f"Alertmanager {url} answered with no API v2 alert list",
            hint="is the url an Alertmanager (or a proxy's path to one)?",
        )
    return [_alert(url, a) for a in doc]


def _alert(url: str, item: Any) -> Alert:
    labels = item.get("labels") if isinstance(item, dict) else None
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise OperationFailed(f"Alertmanager {url} answered with a malformed alert")
    status = item.get("status")
    state = status.get("state") if isinstance(status, dict) else None
    notes = item.get("annotations")
    return Alert(
        labels=dict(labels),
        starts_at=str(item.get("startsAt") or ""),
        fingerprint=str(item.get("fingerprint") or ""),
        state=state if isinstance(state, str) else "active",
        annotations={
            k: v for k, v in (notes or {}).items() if isinstance(k, str) and isinstance(v, str)
        }
        if isinstance(notes, dict)
        else {},
    )
