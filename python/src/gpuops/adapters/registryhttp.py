"""How gpu-ops talks HTTP to a registry: one keep-alive connection per registry host, TLS
with the system's CAs or a given CA file, and authentication by the registry's own challenge.

Authentication answers the registry's ``WWW-Authenticate`` challenge and is never sent first:
``Basic`` (htpasswd registries) or ``Bearer`` (Harbor and other token services: a token for the
operation's scope from the realm, with the credentials as basic auth). Credentials come from
environment variables only and are never logged or put into messages; every failure becomes a
gpu-ops error built from our own words (a registry's free-text messages are not repeated, only
its error codes). The registry operations themselves are in :mod:`gpuops.adapters.registry`.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import os
import re
import ssl
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Self
from urllib.parse import urlencode, urlsplit

from gpuops import __version__
from gpuops.errors import InvalidInput, OperationFailed, Unreachable
from gpuops.logs import remember_secret

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0
USER_AGENT = f"gpuops/{__version__}"
USERNAME_ENV = "GPUOPS_REGISTRY_USERNAME"
PASSWORD_ENV = "GPUOPS_REGISTRY_PASSWORD"  # noqa: S105 - the variable's name, not a secret


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)

    @classmethod
    def from_env(
        cls, username_env: str = USERNAME_ENV, password_env: str = PASSWORD_ENV
    ) -> Credentials | None:
        """Credentials from two environment variables; None when neither is set."""
        user, password = os.environ.get(username_env, ""), os.environ.get(password_env, "")
        if not user and not password:
            return None
        if not user or not password:
            missing = username_env if not user else password_env
            raise InvalidInput(
                f"registry credentials: ${missing} is empty but the other variable is set",
                hint=f"set both {username_env} and {password_env} (withCredentials "
                "usernamePassword), or neither",
            )
        remember_secret(password)  # whatever the variable's name, its value is never shown
        return cls(user, password)

    def basic(self) -> str:
        token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        return f"Basic {token}"


@dataclass(frozen=True)
class RegistryConfig:
    """How to reach registries: plain HTTP or TLS (system CAs, or ``ca_file``), credentials."""

    plain_http: bool = False
    ca_file: str | None = None
    credentials: Credentials | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S

    def ssl_context(self) -> ssl.SSLContext:
        if self.ca_file is not None and not os.path.isfile(self.ca_file):  # noqa: PTH113
            raise InvalidInput(
                f"registry CA file {self.ca_file} does not exist", field="registry_ca"
            )
        try:
            return ssl.create_default_context(cafile=self.ca_file)
        except (ssl.SSLError, OSError):
            raise InvalidInput(
                f"registry CA file {self.ca_file} holds no usable PEM certificate",
                field="registry_ca",
            ) from None


class RegistryRefused(OperationFailed):
    """401/403: the registry refused the credentials or the operation."""


@dataclass
class Response:
    status: int
    headers: http.client.HTTPMessage
    body: bytes


_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


def error_codes(body: bytes) -> str:
    try:
        doc = json.loads(body)
        codes = [str(e.get("code")) for e in doc.get("errors") or [] if isinstance(e, dict)]
    except (ValueError, UnicodeDecodeError, AttributeError, RecursionError):
        return ""
    return ", ".join(c for c in codes if re.fullmatch(r"[A-Z_]{1,64}", c))


class Connection:
    """One registry host: requests with authentication over one keep-alive connection."""

    def __init__(self, host: str, config: RegistryConfig | None = None) -> None:
        self.host = host
        self.config = config or RegistryConfig()
        self.scheme = "http" if self.config.plain_http else "https"
        self._ctx = None if self.config.plain_http else self.config.ssl_context()
        self._conn: http.client.HTTPConnection | None = None
        self._basic = False  # the registry asked for basic auth: send it from now on
        self._tokens: dict[str, str] = {}  # bearer tokens by scope
        self.requests: Counter[str] = Counter()  # "METHOD kind" -> count, e.g. "PUT manifest"

    # -- connection ---------------------------------------------------------------------------
    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            timeout = self.config.timeout_s
            if self._ctx is None:
                self._conn = http.client.HTTPConnection(self.host, timeout=timeout)
            else:
                self._conn = http.client.HTTPSConnection(
                    self.host, timeout=timeout, context=self._ctx
                )
        return self._conn

    def _unreachable(self, exc: BaseException, what: str) -> Unreachable:
        if isinstance(exc, ssl.SSLCertVerificationError):
            return Unreachable(
                f"the registry {self.host} ({what}): its TLS certificate is not trusted",
                hint="pass --registry-ca with the CA file that signed it",
            )
        if isinstance(exc, ssl.SSLError):
            return Unreachable(
                f"the registry {self.host} ({what}): the TLS handshake failed "
                f"({type(exc).__name__})",
                hint="use --plain-http if the registry speaks plain HTTP",
            )
        if isinstance(exc, http.client.BadStatusLine) and self._ctx is None:
            return Unreachable(
                f"the registry {self.host} ({what}) does not speak plain HTTP",
                hint="drop --plain-http: it expects TLS",
            )
        return Unreachable(
            f"cannot reach the registry {self.host} ({what}): {type(exc).__name__}",
            hint="is the registry up? check the host and port",
        )

    def _send(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes | None, what: str
    ) -> Response:
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request(method, path, body=body, headers={"User-Agent": USER_AGENT, **headers})
                resp = conn.getresponse()
                data = resp.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self.close()  # a kept-alive connection the server closed: once more, fresh
                if attempt == 2:
                    raise self._unreachable(exc, what) from None
                continue
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise self._unreachable(exc, what) from None
            if resp.will_close:
                self.close()
            return Response(resp.status, resp.headers, data)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- authentication ---------------------------------------------------------------------
    def _authorization(self, scope: str) -> dict[str, str]:
        if scope in self._tokens:
            return {"Authorization": f"Bearer {self._tokens[scope]}"}
        if self._basic and self.config.credentials is not None:
            return {"Authorization": self.config.credentials.basic()}
        return {}

    def _authenticate(self, resp: Response, scope: str, what: str) -> None:
        """Answer a 401 challenge; raises RegistryRefused when it cannot be answered."""
        challenge = resp.headers.get("WWW-Authenticate", "")
        scheme = challenge.split(" ", 1)[0].lower()
        creds = self.config.credentials
        if scheme == "basic":
            if creds is None:
                raise RegistryRefused(
                    f"the registry {self.host} needs credentials ({what})",
                    hint=f"set {USERNAME_ENV} and {PASSWORD_ENV} (or the variables named by "
                    "--registry-username-env/--registry-password-env)",
                )
            if self._basic:
                raise RegistryRefused(f"the registry {self.host} refused the credentials ({what})")
            self._basic = True
            return
        if scheme == "bearer":
            if scope in self._tokens:
                raise RegistryRefused(
                    f"the registry {self.host} refused the token for {scope} ({what})",
                    hint="check the account's permissions on the repository",
                )
            self._tokens[scope] = self._token(dict(_CHALLENGE.findall(challenge)), scope, what)
            return
        raise RegistryRefused(
            f"the registry {self.host} answered {what} with 401 and no usable challenge"
        )

    def _token(self, params: dict[str, str], scope: str, what: str) -> str:
        realm = params.get("realm", "")
        parts = urlsplit(realm)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise RegistryRefused(f"the registry {self.host} names no usable token realm")
        if parts.scheme == "http" and not self.config.plain_http:
            raise RegistryRefused(
                f"the registry {self.host} wants credentials sent to a plain-HTTP token realm",
                hint="refused: use a TLS realm, or --plain-http if this registry is on loopback",
            )
        query = [("service", params["service"])] if params.get("service") else []
        query += [("scope", s) for s in scope.split(" ")]
        path = (parts.path or "/") + "?" + urlencode(query)
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if self.config.credentials is not None:
            headers["Authorization"] = self.config.credentials.basic()
        host = parts.netloc
        timeout = self.config.timeout_s
        conn: http.client.HTTPConnection = (
            http.client.HTTPSConnection(
                host, timeout=timeout, context=self._ctx or self.config.ssl_context()
            )
            if parts.scheme == "https"
            else http.client.HTTPConnection(host, timeout=timeout)
        )
        try:
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
            status, body = resp.status, resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise self._unreachable(exc, f"token for {what}") from None
        finally:
            conn.close()
        self.requests["GET token"] += 1
        if status in (401, 403):
            raise RegistryRefused(
                f"the token service of {self.host} refused the credentials ({what})"
            )
        try:
            doc = json.loads(body)
            token = doc.get("token") or doc.get("access_token")
        except (ValueError, AttributeError, RecursionError):
            token = None
        if status != 200 or not isinstance(token, str) or not token:
            raise OperationFailed(
                f"the token service of {self.host} answered HTTP {status} without a token"
            )
        return token

    # -- requests -------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        what: str,
        kind: str,
        scope: str,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
    ) -> Response:
        """One API call with authentication; 5xx are Unreachable, 401/403 RegistryRefused;
        any other status is returned for the caller to judge."""
        for _ in range(3):
            started = time.perf_counter()
            resp = self._send(
                method, path, {**(headers or {}), **self._authorization(scope)}, body, what
            )
            self.requests[f"{method} {kind}"] += 1
            log.debug(
                "%s %s -> %s (%.1f ms)",
                method,
                path,
                resp.status,
                1e3 * (time.perf_counter() - started),
            )
            if resp.status == 401:
                self._authenticate(resp, scope, what)
                continue
            if resp.status == 403:
                raise RegistryRefused(
                    f"the registry {self.host} denied {what} (HTTP 403)",
                    hint="check the account's permissions on the repository",
                )
            if resp.status >= 500:
                raise Unreachable(
                    f"the registry {self.host} failed {what}: HTTP {resp.status} "
                    f"{error_codes(resp.body)}".rstrip()
                )
            return resp
        raise RegistryRefused(f"the registry {self.host} kept asking for credentials ({what})")
