"""An OCI registry through the distribution HTTP API v2, spoken directly with the standard
library (transport and authentication: :mod:`gpuops.adapters.registryhttp`).

Why not a client library: the operations gpu-ops needs are few (get, head and put a manifest;
read a config blob; mount a blob across repositories), each must send the exact ``Accept``
list so the registry never down-converts a manifest (which would change its digest), and
every failure must become a gpu-ops error built from our own words. The Python OCI clients
(``oras``) pull in ``requests`` and a JSON-schema stack for no gain here, and a CLI cannot
start quickly with them; the command-line tools (oras, skopeo, crane) would mean a second
binary on every agent. See docs/IMAGES.md.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from gpuops.adapters.registryhttp import (
    PASSWORD_ENV,
    USERNAME_ENV,
    Connection,
    Credentials,
    RegistryConfig,
    RegistryRefused,
    Response,
    error_codes,
)
from gpuops.errors import OperationFailed, Unreachable

__all__ = [
    "PASSWORD_ENV",
    "USERNAME_ENV",
    "BlobsMissing",
    "Credentials",
    "DeletesRefused",
    "Manifest",
    "ManifestUnknown",
    "Registry",
    "RegistryConfig",
    "RegistryRefused",
    "digest_of",
]

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
        except (ValueError, UnicodeDecodeError, RecursionError):
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


class BlobsMissing(OperationFailed):
    """A manifest PUT named blobs the target repository does not have."""


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Registry(Connection):
    """The registry operations gpu-ops uses, on one :class:`Connection`."""

    def _fail(self, resp: Response, what: str) -> OperationFailed:
        codes = error_codes(resp.body)
        return OperationFailed(
            f"the registry {self.host} answered {what} with HTTP {resp.status}"
            + (f" ({codes})" if codes else "")
        )

    # -- manifests ------------------------------------------------------------------------
    @staticmethod
    def _manifest_path(repo: str, reference: str) -> str:
        return f"/v2/{repo}/manifests/{quote(reference, safe=':')}"

    def _read_manifest(self, method: str, repo: str, reference: str, what: str) -> Response:
        """GET or HEAD a manifest, accepting every manifest type we copy (pull scope)."""
        return self.request(
            method,
            self._manifest_path(repo, reference),
            what=what,
            kind="manifest",
            scope=f"repository:{repo}:pull",
            headers={"Accept": ACCEPT},
        )

    def get_manifest(self, repo: str, reference: str) -> Manifest:
        """The manifest as stored (never converted); its digest checked against its bytes."""
        what = f"get manifest {repo}:{reference}"
        resp = self._read_manifest("GET", repo, reference, what)
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
            try:
                doc = json.loads(resp.body)
            except (ValueError, UnicodeDecodeError, RecursionError):
                raise OperationFailed(f"{what}: the manifest is not JSON") from None
            declared = doc.get("mediaType") if isinstance(doc, dict) else None
            media_type = str(declared or media_type)
        if media_type not in MANIFEST_TYPES:
            raise OperationFailed(f"{what}: unsupported manifest type {media_type!r}")
        return Manifest(media_type, digest, resp.body)

    def head_manifest(self, repo: str, reference: str) -> str | None:
        """The digest ``reference`` resolves to, or None when it does not exist."""
        what = f"resolve {repo}:{reference}"
        resp = self._read_manifest("HEAD", repo, reference, what)
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
        if resp.status == 400 and "BLOB_UNKNOWN" in error_codes(resp.body):
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

    # -- listing and deleting (image prune) -----------------------------------------------
    def list_tags(self, repo: str, page: int = 1000) -> list[str]:
        """Every tag of ``repo``, following the registry's ``Link`` pages; [] when the
        repository does not exist."""
        tags: list[str] = []
        path: str | None = f"/v2/{repo}/tags/list?{urlencode({'n': page})}"
        seen: set[str] = set()
        while path is not None:
            if path in seen:
                raise OperationFailed(
                    f"the registry {self.host} pages the tags of {repo} in a loop"
                )
            seen.add(path)
            what = f"list the tags of {repo}"
            resp = self.request(
                "GET",
                path,
                what=what,
                kind="tags",
                scope=f"repository:{repo}:pull",
                headers={"Accept": "application/json"},
            )
            if resp.status == 404:
                return tags
            if resp.status != 200:
                raise self._fail(resp, what)
            try:
                doc = json.loads(resp.body)
                items = doc.get("tags") or []
            except (ValueError, UnicodeDecodeError, AttributeError, RecursionError):
                raise OperationFailed(f"{what}: the registry's answer is not a tag list") from None
            if not isinstance(items, list) or not all(isinstance(t, str) for t in items):
                raise OperationFailed(f"{what}: the registry's answer is not a tag list")
            tags.extend(items)
            path = _next_page(resp.headers.get("Link", ""))
        return tags

    def delete_manifest(self, repo: str, digest: str) -> bool:
        """Delete a manifest by digest (and with it every tag that names it); False when it
        was not there. A registry without deletes raises :class:`DeletesRefused`."""
        what = f"delete {repo}@{digest}"
        resp = self.request(
            "DELETE",
            self._manifest_path(repo, digest),
            what=what,
            kind="manifest",
            scope=f"repository:{repo}:delete",
        )
        if resp.status in (200, 202):
            return True
        if resp.status == 404:
            return False
        if resp.status == 405:
            raise DeletesRefused(f"the registry {self.host} does not allow deletes ({what})")
        raise self._fail(resp, what)

    def deletes_enabled(self, repo: str) -> bool:
        """Ask without deleting anything: a DELETE of a digest no manifest can have (the
        SHA-256 of an empty body) is 404 where deletes are on, 405 (UNSUPPORTED) where
        they are off or the registry is read-only (distribution 2.8 checks that first)."""
        try:
            self.delete_manifest(repo, digest_of(b""))
        except DeletesRefused:
            return False
        return True


class DeletesRefused(OperationFailed):
    """405 on a manifest DELETE: deletes are off (or the registry is read-only)."""


_LINK_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


def _next_page(link: str) -> str | None:
    """The path of the ``rel="next"`` page of an RFC 5988 ``Link`` header (same registry)."""
    match = _LINK_NEXT.search(link)
    if match is None:
        return None
    parts = urlsplit(match.group(1))
    if not parts.path.startswith("/v2/"):
        return None
    return parts.path + (f"?{parts.query}" if parts.query else "")
