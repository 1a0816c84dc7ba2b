"""Credentials for the Kubernetes API: what the transport needs, from a kubeconfig or the
official client's loaded ``Configuration``.

Importing the official client's loader (``kubernetes.config``) costs more than most of a
``headroom check`` on a small cluster (it pulls in the client, requests, oauthlib, urllib3).
:func:`plain_kubeconfig` reads the kubeconfigs that name everything directly (a server, its
certificate authority, a bearer token or token file, a client certificate and key) the way
that loader does; for everything else (exec plugins, auth providers, basic auth, proxies,
several files in ``KUBECONFIG``, a file that does not parse, a missing name) it returns
``None`` and the caller uses the official loader, which also words the errors, and
:func:`from_configuration` on its result. Either way only :class:`Credentials` reach the
transport.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuops import fsio
from gpuops.errors import InvalidInput

#: Largest kubeconfig or token file read (configuration, not data).
MAX_BYTES = 4 << 20

#: The keys a plain kubeconfig's parts may have; any other key means "use the full loader".
_CLUSTER_KEYS = frozenset(
    {
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "tls-server-name",
    }
)
_USER_KEYS = frozenset(
    {
        "token",
        "tokenFile",
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
    }
)
_CONTEXT_KEYS = frozenset({"cluster", "user", "namespace"})


@dataclass(frozen=True)
class Credentials:
    """Where the API server is and how to prove who we are. Secrets stay out of ``repr``."""

    server: str
    verify: bool = True
    ca_file: str | None = None
    ca_pem: str | None = None
    tls_server_name: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    cert_pem: bytes | None = field(default=None, repr=False)
    key_pem: bytes | None = field(default=None, repr=False)
    #: the ``Authorization`` header's value, asked for on every request (exec plugins and
    #: service-account tokens are refreshed by the official client's hook behind it)
    authorization: Callable[[], str | None] | None = field(default=None, repr=False)
    #: an HTTP(S) proxy (kubeconfig ``proxy-url``), only through the official loader
    proxy: str | None = None


def from_configuration(cfg: Any) -> Credentials:
    """Credentials from an official-client ``Configuration`` that a loader has filled."""
    auth: Callable[[], str | None] | None = None
    if "BearerToken" in cfg.api_key or "authorization" in cfg.api_key:

        def auth() -> str | None:
            value: str | None = cfg.get_api_key_with_prefix("BearerToken", alias="authorization")
            return value

    return Credentials(
        server=str(cfg.host).rstrip("/"),
        verify=bool(cfg.verify_ssl),
        ca_file=cfg.ssl_ca_cert or None,
        ca_pem=_text(getattr(cfg, "ca_cert_data", None)),
        tls_server_name=cfg.tls_server_name or None,
        cert_file=cfg.cert_file or None,
        key_file=cfg.key_file or None,
        authorization=auth,
        proxy=cfg.proxy or None,
    )


def _text(data: Any) -> str | None:
    if isinstance(data, bytes):
        return data.decode()
    return data if isinstance(data, str) and data else None


def plain_kubeconfig(kubeconfig: str | None, context: str | None) -> Credentials | None:
    """Credentials from a plain kubeconfig (see the module's text), else ``None``.

    The file is the one the official loader would read: ``kubeconfig``, else
    ``$KUBECONFIG``, else ``~/.kube/config``. Never raises for a bad file: ``None`` hands it
    to the official loader, whose errors the caller already maps.
    """
    spec = kubeconfig if kubeconfig is not None else os.environ.get("KUBECONFIG", "~/.kube/config")
    if not spec or os.pathsep in spec:  # several files are merged: the official loader's job
        return None
    path = Path(spec).expanduser()
    try:
        text = fsio.read_text(path, cap=MAX_BYTES, what="kubeconfig", option="kubeconfig")
    except InvalidInput:
        return None  # the official loader's path names what is wrong with it
    try:
        return _from_doc(_yaml(text), context, path.absolute().parent)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, UnicodeError):
        return None
    except RecursionError:
        return None  # config.py's own check names it


def _yaml(text: str) -> Any:
    import yaml  # noqa: PLC0415 - only for a kubeconfig

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError:
        raise ValueError("not YAML") from None


def _named(doc: Mapping[str, Any], kind: str, name: Any) -> Mapping[str, Any]:
    """The one entry of ``doc[kind]`` called ``name``; KeyError unless exactly one."""
    found = [e for e in doc[kind] if isinstance(e, dict) and e.get("name") == name]
    if len(found) != 1 or len({str(e.get("name")) for e in doc[kind]}) != len(doc[kind]):
        raise KeyError(kind)
    return found[0]


def _only(part: Any, allowed: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(part, dict) or not set(part) <= allowed:
        raise KeyError("unknown keys")
    return part


def _from_doc(doc: Any, context: str | None, base: Path) -> Credentials | None:
    if not isinstance(doc, dict):
        return None
    name = context if context is not None else doc["current-context"]
    ctx = _only(_named(doc, "contexts", name)["context"], _CONTEXT_KEYS)
    cluster = _only(_named(doc, "clusters", ctx["cluster"])["cluster"], _CLUSTER_KEYS)
    user: Mapping[str, Any] = {}
    if ctx.get("user"):
        user = _only(_named(doc, "users", ctx["user"])["user"], _USER_KEYS)
    server = cluster["server"]
    if not isinstance(server, str) or not server.startswith("https://"):
        return None
    insecure = cluster.get("insecure-skip-tls-verify", False)
    tls_name = cluster.get("tls-server-name")
    if not isinstance(insecure, bool) or not isinstance(tls_name, str | None):
        return None
    ca_file, ca_data = _file_or_data(cluster, "certificate-authority", base)
    cert_file, cert_pem = _file_or_data(user, "client-certificate", base)
    key_file, key_pem = _file_or_data(user, "client-key", base)
    token = _token(user, base)
    return Credentials(
        server=server.rstrip("/"),
        verify=not insecure,
        ca_file=ca_file,
        ca_pem=ca_data.decode() if ca_data else None,
        tls_server_name=tls_name or None,
        cert_file=cert_file,
        key_file=key_file,
        cert_pem=cert_pem,
        key_pem=key_pem,
        authorization=(lambda: f"Bearer {token}") if token else None,
    )


def _file_or_data(part: Mapping[str, Any], key: str, base: Path) -> tuple[str | None, bytes | None]:
    """``key-data`` (base64) if the key is there, even empty; else the file ``key`` names."""
    if f"{key}-data" in part:
        return None, _b64(part[f"{key}-data"])
    return _file(part.get(key), base), None


def _b64(value: Any) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError("not base64 text")
    try:
        return base64.b64decode(value, validate=True) or None
    except binascii.Error:
        raise ValueError("not base64") from None


def _file(value: Any, base: Path) -> str | None:
    """A file named relative to the kubeconfig's folder; must exist (else the full loader)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise TypeError("not a file name")
    path = os.path.normpath(base / value)
    if not Path(path).is_file():
        raise ValueError("no such file")
    return path


def _token(user: Mapping[str, Any], base: Path) -> str | None:
    """``token``, else the content of ``tokenFile``; one that would not make a clean header
    (whitespace, control characters) goes to the full loader."""
    if "token" in user:
        token = user["token"]
    elif "tokenFile" in user:
        name = _file(user["tokenFile"], base)
        # a token file usually ends with a newline; kubectl trims it too
        token = (
            fsio.read_text(name, cap=MAX_BYTES, what="kubeconfig tokenFile").strip()
            if name
            else None
        )
    else:
        return None
    if not isinstance(token, str):
        raise TypeError("token is not text")
    if token and not (token.isascii() and token.isprintable() and " " not in token):
        raise ValueError("token is not a clean header value")
    return token or None
