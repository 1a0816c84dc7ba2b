"""An OCI registry through the distribution HTTP API v2, spoken directly with the standard
library (``http.client`` on one keep-alive connection, ``ssl`` with an optional CA file).

Why not a client library: the operations gpu-ops needs are few (get, head and put a manifest;
read a config blob; mount a blob across repositories), each must send the exact ``Accept``
list so the registry never down-converts a manifest (which would change its digest), and
every failure must become a gpu-ops error built from our own words. The Python OCI clients
(``oras``) pull in ``requests`` and a JSON-schema stack for no gain here, and a CLI cannot
start quickly with them; the command-line tools (oras, skopeo, crane) would mean a second
binary on every agent. See the README.

Authentication follows the registry's ``WWW-Authenticate`` challenge, never sent first:
``Basic`` (htpasswd registries) or ``Bearer`` (Harbor and other token services: a token for
the operation's scope from the realm, with the credentials as basic auth). Credentials come
from environment variables only and are never logged or put into messages.
"""

from __future__ import annotations

import base64
import hashlib
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
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from gpuops import __version__
from gpuops.errors import InvalidInput, OperationFailed, Unreachable

log = logging.getLogger(__name__)

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MANIFEST_TYPES = (OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST)
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
#: Without this exact list distribution down-converts to schema1 (another digest).
ACCEPT = ", ".join(MANIFEST_TYPES)
MAX_MANIFEST_BYTES = 4 << 20  # distribution's own limit
MAX_CONFIG_BYTES = 16 << 20
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


@dataclass(frozen=True)
class Manifest:
    media_type: str
    digest: str
    body: bytes

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES

    def doc(self) -> dict[str, Any]:
        try:
            doc = json.loads(self.body)
        except (ValueError, UnicodeDecodeError):
            raise OperationFailed(f"manifest {self.digest} is not JSON") from None
        if not isinstance(doc, dict):
            raise OperationFailed(f"manifest {self.digest} is not a JSON object")
        return doc

    def blobs(self) -> list[dict[str, Any]]:
        """Config and layer descriptors of an image manifest (none for an index)."""
        if self.is_index:
            return []
        doc = self.doc()
        return [d for d in [doc.get("config"), *(doc.get("layers") or [])] if isinstance(d, dict)]

    def children(self) -> list[dict[str, Any]]:
        """The manifest descriptors of an index (none for an image manifest)."""
        if not self.is_index:
            return []
        return [d for d in self.doc().get("manifests") or [] if isinstance(d, dict)]


class ManifestUnknown(OperationFailed):
    """404 for a manifest: the tag or digest does not exist (callers name the input)."""


class RegistryRefused(OperationFailed):
    """401/403: the registry refused the credentials or the operation."""


class BlobsMissing(OperationFailed):
    """A manifest PUT named blobs the target repository does not have."""


@dataclass
class Response:
    status: int
    headers: http.client.HTTPMessage
    body: bytes


_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _error_codes(body: bytes) -> str:
    try:
        doc = json.loads(body)
        codes = [str(e.get("code")) for e in doc.get("errors") or [] if isinstance(e, dict)]
    except (ValueError, UnicodeDecodeError, AttributeError):
        return ""
    return ", ".join(c for c in codes if re.fullmatch(r"[A-Z_]{1,64}", c))


class Registry:
    """One registry host; requests go over one keep-alive connection."""

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

    def __enter__(self) -> Registry:
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
        except (ValueError, AttributeError):
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
                    f"{_error_codes(resp.body)}".rstrip()
                )
            return resp
        raise RegistryRefused(f"the registry {self.host} kept asking for credentials ({what})")

    def _fail(self, resp: Response, what: str) -> OperationFailed:
        codes = _error_codes(resp.body)
        return OperationFailed(
            f"the registry {self.host} answered {what} with HTTP {resp.status}"
            + (f" ({codes})" if codes else "")
        )

    # -- manifests ------------------------------------------------------------------------
    @staticmethod
    def _manifest_path(repo: str, reference: str) -> str:
        return f"/v2/{repo}/manifests/{quote(reference, safe=':')}"

    def get_manifest(self, repo: str, reference: str) -> Manifest:
        """The manifest as stored (never converted); its digest checked against its bytes."""
        what = f"get manifest {repo}:{reference}"
        resp = self.request(
            "GET",
            self._manifest_path(repo, reference),
            what=what,
            kind="manifest",
            scope=f"repository:{repo}:pull",
            headers={"Accept": ACCEPT},
        )
        if resp.status == 404:
            raise ManifestUnknown(f"{self.host}/{repo}: {reference} does not exist")
        if resp.status != 200:
            raise self._fail(resp, what)
        if len(resp.body) > MAX_MANIFEST_BYTES:
            raise OperationFailed(f"{what}: the manifest is larger than {MAX_MANIFEST_BYTES} bytes")
        digest = digest_of(resp.body)
        claimed = resp.headers.get("Docker-Content-Digest")
        if (claimed and claimed.startswith("sha256:") and claimed != digest) or (
            reference.startswith("sha256:") and reference != digest
        ):
            raise OperationFailed(f"{what}: the manifest's bytes do not match its digest")
        media_type = (resp.headers.get("Content-Type") or "").split(";")[0].strip()
        if media_type not in MANIFEST_TYPES:
            media_type = str(json.loads(resp.body).get("mediaType") or media_type)
        if media_type not in MANIFEST_TYPES:
            raise OperationFailed(f"{what}: unsupported manifest type {media_type!r}")
        return Manifest(media_type, digest, resp.body)

    def head_manifest(self, repo: str, reference: str) -> str | None:
        """The digest ``reference`` resolves to, or None when it does not exist."""
        what = f"resolve {repo}:{reference}"
        resp = self.request(
            "HEAD",
            self._manifest_path(repo, reference),
            what=what,
            kind="manifest",
            scope=f"repository:{repo}:pull",
            headers={"Accept": ACCEPT},
        )
        if resp.status == 404:
            return None
        if resp.status != 200:
            raise self._fail(resp, what)
        digest = resp.headers.get("Docker-Content-Digest")
        if not digest:  # a registry that does not say: read the manifest and hash it
            return self.get_manifest(repo, reference).digest
        return str(digest)

    def put_manifest(self, repo: str, reference: str, manifest: Manifest) -> str:
        """Store ``manifest`` under ``reference`` (a tag or its digest); the digest stored."""
        what = f"put manifest {repo}:{reference}"
        resp = self.request(
            "PUT",
            self._manifest_path(repo, reference),
            what=what,
            kind="manifest",
            scope=f"repository:{repo}:pull,push",
            headers={"Content-Type": manifest.media_type},
            body=manifest.body,
        )
        if resp.status == 400 and "BLOB_UNKNOWN" in _error_codes(resp.body):
            raise BlobsMissing(f"{what}: {self.host}/{repo} lacks blobs the manifest names")
        if resp.status not in (200, 201):
            raise self._fail(resp, what)
        return str(resp.headers.get("Docker-Content-Digest") or manifest.digest)

    # -- blobs ----------------------------------------------------------------------------
    def get_blob(self, repo: str, digest: str, max_bytes: int = MAX_CONFIG_BYTES) -> bytes:
        """A small blob (an image config), checked against its digest. Follows up to three
        redirects (object storage) without sending credentials to another host."""
        what = f"get blob {repo}@{digest[:19]}"
        resp = self.request(
            "GET",
            f"/v2/{repo}/blobs/{digest}",
            what=what,
            kind="blob",
            scope=f"repository:{repo}:pull",
        )
        for _ in range(3):
            if resp.status not in (301, 302, 303, 307, 308):
                break
            resp = self._follow(resp.headers.get("Location", ""), what)
        if resp.status == 404:
            raise OperationFailed(f"{what}: the blob does not exist")
        if resp.status != 200:
            raise self._fail(resp, what)
        if len(resp.body) > max_bytes:
            raise OperationFailed(f"{what}: larger than {max_bytes} bytes")
        if digest.startswith("sha256:") and digest_of(resp.body) != digest:
            raise OperationFailed(f"{what}: the blob's bytes do not match its digest")
        return resp.body

    def _follow(self, location: str, what: str) -> Response:
        parts = urlsplit(location)
        if not parts.scheme:  # relative: same registry, same connection
            return self.request("GET", location, what=what, kind="blob", scope="")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise OperationFailed(f"{what}: redirected to an unusable location")
        timeout = self.config.timeout_s
        conn: http.client.HTTPConnection = (
            http.client.HTTPSConnection(
                parts.netloc, timeout=timeout, context=self._ctx or ssl.create_default_context()
            )
            if parts.scheme == "https"
            else http.client.HTTPConnection(parts.netloc, timeout=timeout)
        )
        try:
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            conn.request("GET", path)
            resp = conn.getresponse()
            return Response(resp.status, resp.headers, resp.read())
        except (OSError, http.client.HTTPException) as exc:
            raise Unreachable(
                f"cannot fetch {what} from the storage the registry redirected to: "
                f"{type(exc).__name__}"
            ) from None
        finally:
            conn.close()
            self.requests["GET blob-redirect"] += 1

    def blob_exists(self, repo: str, digest: str) -> bool:
        what = f"check blob {repo}@{digest[:19]}"
        resp = self.request(
            "HEAD",
            f"/v2/{repo}/blobs/{digest}",
            what=what,
            kind="blob",
            scope=f"repository:{repo}:pull",
        )
        if resp.status in (200, 307):
            return True
        if resp.status == 404:
            return False
        raise self._fail(resp, what)

    def mount_blob(self, repo: str, digest: str, from_repo: str) -> bool:
        """Cross-repository mount (no data moves); False when the registry would not mount
        (its upload session is then cancelled)."""
        what = f"mount blob {digest[:19]} from {from_repo} into {repo}"
        query = urlencode({"mount": digest, "from": from_repo})
        resp = self.request(
            "POST",
            f"/v2/{repo}/blobs/uploads/?{query}",
            what=what,
            kind="blob-mount",
            scope=f"repository:{repo}:pull,push repository:{from_repo}:pull",
            headers={"Content-Length": "0"},
            body=b"",
        )
        if resp.status == 201:
            return True
        if resp.status == 202:  # an upload session instead of a mount: cancel it
            location = resp.headers.get("Location", "")
            path = urlsplit(location).path or location
            if path.startswith("/v2/"):
                self.request(
                    "DELETE",
                    path,
                    what=f"cancel upload for {what}",
                    kind="blob-upload",
                    scope=f"repository:{repo}:pull,push",
                )
            return False
        raise self._fail(resp, what)
