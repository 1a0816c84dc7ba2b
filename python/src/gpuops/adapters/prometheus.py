"""A Prometheus server's instant query (``/api/v1/query``): stdlib HTTP, TLS with the system's
CAs or a given CA file, an optional bearer token.

The query travels in a POST form body (Prometheus' documented alternative to GET for long
queries; it also keeps the query out of proxies' access logs). The answer's ``vector`` or
``scalar`` becomes a list of (labels, value); a ``matrix`` or ``string`` is refused (an
analysis judges one number per series). ``NaN``, ``+Inf`` and ``-Inf`` are returned as the
floats they are; judging them is the caller's. The token is remembered for redaction and is
never in a message; every failure becomes a gpuops error in our words: the server's
``errorType`` (``bad_data``, ``timeout``, ...) and never its free-text ``error``, which a
proxy in front of it could fill with anything (it goes to the debug log, redacted).
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import re
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from gpuops import __version__
from gpuops.adapters.deadline import Deadline, shutdown
from gpuops.core.releasestrategy import prometheus_url
from gpuops.core.urls import without_userinfo
from gpuops.errors import InvalidInput, OperationFailed, Unreachable
from gpuops.logs import remember_secret

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0
MAX_ANSWER = 8 * 1024 * 1024  # bytes: a query naming every series of a cluster is a mistake
USER_AGENT = f"gpuops/{__version__}"
#: errorTypes that say the server could not answer now (the measurement is inconclusive)
_TRANSIENT = frozenset({"timeout", "canceled", "unavailable", "internal"})

Sample = tuple[dict[str, str], float]
#: a sample's value as Prometheus writes it (ASCII digits only: re's \d is any script's)
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|NaN|[+-]Inf")
#: a bearer token as an Authorization header carries it: visible ASCII, no blank
_TOKEN = re.compile(r"[\x21-\x7e]+")


class PrometheusRefused(OperationFailed):
    """401/403: the server (or a proxy in front of it) refused the credentials."""


class PartialAnswer(Unreachable):
    """The server answered with ``warnings``: a part of the data did not answer (a store, a
    remote read) or PromQL dropped samples; the measurement is inconclusive."""


class QueryRejected(OperationFailed):
    """The server refused the query itself (``bad_data``, ``execution``, a range vector):
    asking again gives the same answer."""


@dataclass(frozen=True)
class _Target:
    tls: bool
    host: str
    port: int
    path: str  # the API's path, e.g. /prometheus/api/v1/query behind a path prefix


class Prometheus:
    """One Prometheus server: ``url`` (http(s), no userinfo; a path prefix is kept),
    ``token`` (a bearer token, or None), ``ca_file`` (a PEM CA for its TLS certificate),
    ``timeout`` (seconds for connecting, for the answer, and the server's own evaluation)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        ca_file: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        parts = prometheus_url(url)
        self.url = without_userinfo(url)
        tls = parts.scheme == "https"
        self._target = _Target(
            tls,
            parts.hostname or "",
            parts.port or (443 if tls else 80),
            parts.path.rstrip("/") + "/api/v1/query",
        )
        if token is not None:
            remember_secret(token)
            if not _TOKEN.fullmatch(token):
                raise InvalidInput(
                    f"the bearer token for Prometheus {self.url} is empty or holds a blank, "
                    "a line break, a control character or a character that is not ASCII",
                    hint="check the variable token_env names",
                )
        self._token = token
        if ca_file is not None and not tls:
            raise InvalidInput(f"a CA file for Prometheus {self.url}, which speaks plain HTTP")
        self._ctx = tls_context(ca_file, f"Prometheus {self.url}") if tls else None
        self.timeout = timeout

    def __repr__(self) -> str:  # no token in a traceback's locals
        return f"Prometheus({self.url!r})"

    def query(self, promql: str, at: float | None = None) -> list[Sample]:
        """The instant query ``promql`` (at ``at``, epoch seconds; now when None): one
        (labels, value) per series of a vector, one ({}, value) for a scalar."""
        form: dict[str, str] = {"query": promql, "timeout": f"{self.timeout:g}s"}
        if at is not None:
            form["time"] = f"{at:.3f}"
        status, body = self._post(urlencode(form).encode())
        return _samples(self.url, status, body)

    def _post(self, body: bytes) -> tuple[int, bytes]:
        t = self._target
        headers = {
            "Accept": "application/json",
            "Content-Type": "application/x-www-form-urlencoded",
            "User-Agent": USER_AGENT,
        }
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        conn: http.client.HTTPConnection = (
            http.client.HTTPSConnection(t.host, t.port, timeout=self.timeout, context=self._ctx)
            if t.tls
            else http.client.HTTPConnection(t.host, t.port, timeout=self.timeout)
        )
        started = time.perf_counter()
        try:
            with Deadline(self.timeout) as deadline:  # the whole exchange, not each read
                try:
                    conn.connect()
                    deadline.watch(shutdown(conn.sock))
                    conn.request("POST", t.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read(MAX_ANSWER + 1)
                except (OSError, http.client.HTTPException) as exc:
                    raise self._unreachable(TimeoutError() if deadline.expired else exc) from None
            if deadline.expired:  # an answer without a length, cut by the deadline
                raise self._unreachable(TimeoutError())
        finally:
            conn.close()
        elapsed_ms = 1e3 * (time.perf_counter() - started)
        log.debug("POST %s -> %s (%.1f ms)", t.path, resp.status, elapsed_ms)
        if len(data) > MAX_ANSWER:
            raise QueryRejected(
                f"Prometheus {self.url} answered with more than {MAX_ANSWER // 2**20} MiB",
                hint="aggregate the query (sum, max, topk) to the few series the analysis judges",
            )
        return resp.status, data

    def _unreachable(self, exc: BaseException) -> Unreachable:
        if isinstance(exc, ssl.SSLCertVerificationError):
            return Unreachable(
                f"Prometheus {self.url}: its TLS certificate is not trusted",
                hint="give the CA that signed it as the analysis' prometheus.ca_file",
            )
        if isinstance(exc, ssl.SSLError):
            return Unreachable(
                f"Prometheus {self.url}: the TLS handshake failed ({type(exc).__name__})",
                hint="does the server speak https? (http:// in the url otherwise)",
            )
        if isinstance(exc, TimeoutError):
            return Unreachable(
                f"Prometheus {self.url} did not answer within {self.timeout:g} s",
                hint="is it overloaded? a query over fewer series answers sooner",
            )
        if isinstance(exc, http.client.BadStatusLine) and not self._target.tls:
            return Unreachable(
                f"Prometheus {self.url} does not speak plain HTTP",
                hint="use https:// in the url",
            )
        return Unreachable(
            f"cannot reach Prometheus {self.url}: {type(exc).__name__}",
            hint="is it up? check the analysis' prometheus.url",
        )


def tls_context(ca_file: str | None, server: str) -> ssl.SSLContext:
    """The TLS context for an https API (``server``: its name and URL, as messages say it),
    from the system's CAs or ``ca_file``; a CA file that is missing or holds no usable PEM
    certificate is exit 2. Alertmanager's adapter uses it too."""
    if ca_file is not None and not os.path.isfile(ca_file):  # noqa: PTH113
        raise InvalidInput(f"the CA file {ca_file!r} for {server} does not exist")
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (ssl.SSLError, OSError):
        raise InvalidInput(
            f"the CA file {ca_file!r} for {server} holds no usable PEM certificate"
        ) from None


def _samples(url: str, status: int, body: bytes) -> list[Sample]:
    """An answer of ``/api/v1/query`` as samples, or the error it means."""
    if status in (401, 403):
        raise PrometheusRefused(
            f"Prometheus {url} refused the query: HTTP {status}",
            hint="check the bearer token the analysis' prometheus.token_env names",
        )
    doc = _json(body)
    if not isinstance(doc, dict) or doc.get("status") not in ("success", "error"):
        if status >= 500 or status in (408, 429):
            raise Unreachable(f"Prometheus {url} failed the query: HTTP {status}")
        raise OperationFailed(
            f"Prometheus {url} answered HTTP {status} with no Prometheus API answer",
            hint="is the url a Prometheus server (or a proxy's path to one)?",
        )
    if doc["status"] == "error" or status != 200:
        return _error(url, status, doc)
    data = doc.get("data")
    kind = data.get("resultType") if isinstance(data, dict) else None
    result = data.get("result") if isinstance(data, dict) else None
    warnings = doc.get("warnings")
    if warnings:
        log.debug("Prometheus %s warned: %s", url, str(warnings)[:500])
        raise PartialAnswer(
            f"Prometheus {url} gave a partial answer ({_count(warnings)} warning(s)): series "
            "may be missing, so it is not judged",
            hint="-v shows the server's warnings (a store or remote read that did not answer, "
            "samples PromQL dropped)",
        )
    if kind == "scalar":
        return [({}, _value(url, result))]
    if kind == "vector" and isinstance(result, list):
        return [(_labels(url, s), _value(url, s.get("value"))) for s in result if _is_map(url, s)]
    if kind in ("matrix", "string"):
        raise QueryRejected(
            f"Prometheus {url} answered the query with a {kind}, not a vector or scalar",
            hint="an analysis judges an instant vector or scalar: drop the range selector "
            "([1m]) outside a function such as rate()",
        )
    raise OperationFailed(f"Prometheus {url} answered the query with a malformed result")


def _error(url: str, status: int, doc: dict[str, Any]) -> list[Sample]:
    kind = doc.get("errorType")
    kind = kind if isinstance(kind, str) and kind.isidentifier() and len(kind) <= 40 else "unknown"
    log.debug("Prometheus %s: HTTP %s %s: %s", url, status, kind, str(doc.get("error"))[:500])
    if kind in _TRANSIENT or status >= 500 or status in (408, 429):
        raise Unreachable(f"Prometheus {url} could not answer the query: {kind} (HTTP {status})")
    raise QueryRejected(
        f"Prometheus {url} refused the query: {kind} (HTTP {status})",
        hint="try the query in Prometheus' own UI; -v shows the server's words",
    )


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _is_map(url: str, sample: Any) -> bool:
    if not isinstance(sample, dict):
        raise OperationFailed(f"Prometheus {url} answered the query with a malformed sample")
    return True


def _labels(url: str, sample: dict[str, Any]) -> dict[str, str]:
    metric = sample.get("metric", {})
    if not isinstance(metric, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metric.items()
    ):
        raise OperationFailed(f"Prometheus {url} answered the query with malformed labels")
    return dict(metric)


def _count(warnings: Any) -> int:
    return len(warnings) if isinstance(warnings, list) else 1


def _value(url: str, pair: Any) -> float:
    """``[<time>, "<value>"]``: the value, NaN and ±Inf included, in the text Go's strconv
    writes (Python's float() also reads blanks, '_', 'infinity' and any script's digits)."""
    if (
        isinstance(pair, list)
        and len(pair) == 2
        and isinstance(pair[1], str)
        and _NUMBER.fullmatch(pair[1])
    ):
        return float(pair[1])
    raise OperationFailed(f"Prometheus {url} answered the query with a malformed value")
