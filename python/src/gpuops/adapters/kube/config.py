"""A kubeconfig read by gpuops itself before the Kubernetes client loads it.

The client's own errors (``ConfigException``) can quote a whole user entry: a token, an OIDC
``client-secret`` or ``refresh-token``, an exec plugin's output. So the defects a person can fix
are found here first and reported in our words, naming files, lines and entry names only,
never values; whatever the client still refuses afterwards is reported without its text.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from gpuops import fsio
from gpuops.adapters.kube.creds import MAX_BYTES
from gpuops.errors import InvalidInput, Unreachable
from gpuops.logs import remember_secret

_HINT = "fix the kubeconfig (kubectl config view shows it with secrets hidden), or pass another"


@dataclass(frozen=True)
class Source:
    """Where the credentials come from, checked: a kubeconfig (and the context asked for) or
    the in-cluster service account; ``user`` is the kubeconfig user the context names."""

    kubeconfig: str | None
    context: str | None
    path: str
    in_cluster: bool
    user: str | None = None

    @property
    def what(self) -> str:
        return "the in-cluster service account" if self.in_cluster else f"kubeconfig {self.path}"


def find_source(kubeconfig: str | None, context: str | None) -> Source:
    """``kubeconfig`` (else ``$KUBECONFIG``, ``~/.kube/config``, else the in-cluster service
    account), checked for what the client would choke on; its secrets are remembered so that
    nothing gpuops prints can show them. InvalidInput (exit 2) names file, line and entry."""
    path = kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube/config")
    in_cluster = (
        not kubeconfig
        and not os.environ.get("KUBECONFIG")
        and not _is_file(path)
        and "KUBERNETES_SERVICE_HOST" in os.environ
    )
    if in_cluster:
        return Source(kubeconfig, context, path, in_cluster=True)
    if kubeconfig and not any(_is_file(p) for p in kubeconfig.split(os.pathsep)):
        raise InvalidInput(
            f"kubeconfig {kubeconfig} does not exist",
            hint="pass --kubeconfig PATH or set KUBECONFIG",
        )
    return Source(kubeconfig, context, path, False, check_kubeconfig(path, context))


def load_credentials(cfg: Any, source: Source) -> None:
    """Fill the client ``Configuration`` ``cfg`` from ``source`` with the official client's
    loaders. Every failure is ours to word: InvalidInput (exit 2), or Unreachable (4) for an
    identity provider that does not answer."""
    import urllib3  # noqa: PLC0415 - heavy; only when connecting

    kconfig: Any = importlib.import_module("kubernetes.config")  # untyped module
    if source.in_cluster:
        load = partial(kconfig.load_incluster_config, client_configuration=cfg)
    else:
        load = partial(
            kconfig.load_kube_config,
            config_file=source.kubeconfig,
            context=source.context,
            client_configuration=cfg,
            persist_config=False,
        )
    try:
        load()
    except kconfig.ConfigException:
        # its text can hold a whole kubeconfig user entry (tokens, OIDC secrets, the output of
        # an exec plugin): never shown, only what we can say ourselves
        whose = f" of user {source.user!r}" if source.user else ""
        raise InvalidInput(
            f"cannot load {source.what}: the credentials{whose} are incomplete or malformed "
            "(the client library's details are withheld: they can contain secrets)",
            hint=_HINT,
        ) from None
    except urllib3.exceptions.HTTPError as exc:  # an OIDC token refresh that got no answer
        raise Unreachable(
            f"cannot load {source.what}: refreshing its credentials got no answer "
            f"({type(exc).__name__})",
            hint="is the identity provider (the kubeconfig's idp-issuer-url) reachable?",
        ) from None
    except Exception as exc:  # any error of the client library, told in our words
        raise InvalidInput(
            f"cannot load {source.what}: {type(exc).__name__} while loading its credentials",
            hint=_HINT,
        ) from None


def _is_file(path: str) -> bool:
    """Whether ``path`` names a file; a name no file can have (too long, an unknown ~user)
    is simply not one."""
    try:
        return Path(path).expanduser().is_file()
    except (OSError, RuntimeError, ValueError):
        return False


def check_kubeconfig(path: str, context: str | None) -> str | None:
    """Check the kubeconfig file(s) at ``path`` (``:``-separated, like ``$KUBECONFIG``) for
    what the client would choke on; the name of the user the chosen context uses."""
    import yaml  # noqa: PLC0415 - heavy for the CLI's start; needed only to connect

    docs: list[tuple[Path, Mapping[str, Any]]] = []
    for one in path.split(os.pathsep):
        if not one or not _is_file(one):
            continue  # like the client: files of a list that do not exist are skipped
        p = Path(one).expanduser()
        try:
            text = fsio.read_text(p, cap=MAX_BYTES, what="kubeconfig", option="kubeconfig")
        except InvalidInput as exc:
            exc.hint = _HINT
            raise
        try:
            doc = yaml.safe_load(text)
        except RecursionError:
            raise InvalidInput(f"kubeconfig {p} is nested too deeply", hint=_HINT) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise InvalidInput(f"kubeconfig {p} is not valid YAML{where}", hint=_HINT) from None
        if doc is None:
            raise InvalidInput(f"kubeconfig {p} is empty", hint=_HINT)
        if not isinstance(doc, dict):
            raise InvalidInput(f"kubeconfig {p} is not a YAML mapping (a Config)", hint=_HINT)
        docs.append((p, doc))
    if not docs:
        raise InvalidInput(
            f"no kubeconfig at {path}", hint="pass --kubeconfig PATH or set KUBECONFIG"
        )
    where = ", ".join(str(p) for p, _ in docs)
    current = context or next(
        (d["current-context"] for _, d in docs if isinstance(d.get("current-context"), str)
         and d["current-context"]), None,
    )  # fmt: skip
    if not current:
        raise InvalidInput(
            f"kubeconfig {where} names no current-context", hint="pass --context NAME"
        )
    entry = _named(docs, "contexts", current, "context", where)
    cluster_name, user_name = entry.get("cluster"), entry.get("user")
    if not isinstance(cluster_name, str) or not cluster_name:
        raise InvalidInput(f"kubeconfig {where}: context {current!r} names no cluster", hint=_HINT)
    cluster = _named(docs, "clusters", cluster_name, "cluster", where)
    if not isinstance(cluster.get("server"), str) or not cluster["server"]:
        raise InvalidInput(
            f"kubeconfig {where}: cluster {cluster_name!r} has no server", hint=_HINT
        )
    user = (
        _named(docs, "users", user_name, "user", where)
        if isinstance(user_name, str) and user_name
        else {}
    )
    _check_files(docs, [(cluster, "certificate-authority")] + [
        (user, k) for k in ("tokenFile", "client-certificate", "client-key")
    ])  # fmt: skip
    if isinstance(user_name, str) and user_name:
        # every value of the user entry (token, password, OIDC secrets, keys, exec env) is
        # redacted from whatever gpuops prints from now on, should any reach a message
        remember_secret(_user_secrets(_named(docs, "users", user_name, "user", where)))
        return user_name
    return None


def _check_files(
    docs: list[tuple[Path, Mapping[str, Any]]], fields: list[tuple[Mapping[str, Any], str]]
) -> None:
    """Files a kubeconfig names (a token, certificates, keys) must be regular files: the
    official client reads them whole, and ``/dev/zero`` or a FIFO there would never end."""
    for part, key in fields:
        name = part.get(key) if isinstance(part, Mapping) else None
        if not isinstance(name, str) or not name:
            continue  # the loaders name a bad value
        for folder in {p.parent for p, _ in docs}:
            candidate = folder / Path(name).expanduser()
            if os.path.lexists(candidate):
                fsio.check_regular(
                    candidate, cap=MAX_BYTES, what=f"kubeconfig {key}", option="kubeconfig"
                )


#: Fields of a kubeconfig user entry that hold secrets (auth-provider config: all of it).
_SECRET_FIELDS = ("token", "password", "client-key-data", "client-certificate-data")


def _user_secrets(user: Mapping[str, Any]) -> list[Any]:
    found: list[Any] = [user.get(k) for k in _SECRET_FIELDS]
    provider = user.get("auth-provider")
    if isinstance(provider, dict):
        found.append(provider.get("config"))
    plugin = user.get("exec")
    if isinstance(plugin, dict) and isinstance(plugin.get("env"), list):
        found += [e.get("value") for e in plugin["env"] if isinstance(e, dict)]
    return found


def _named(
    docs: list[tuple[Path, Mapping[str, Any]]], section: str, name: str, key: str, where: str
) -> Mapping[str, Any]:
    """The ``key`` mapping of the entry called ``name`` in ``section`` (first file wins)."""
    names: list[str] = []
    for path, doc in docs:
        entries = doc.get(section)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise InvalidInput(f"kubeconfig {path}: {section} is not a list", hint=_HINT)
        for i, item in enumerate(entries):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise InvalidInput(
                    f"kubeconfig {path}: {section}[{i}] is not an entry with a name", hint=_HINT
                )
            if item["name"] == name:
                body = item.get(key)
                if body is None:
                    return {}
                if not isinstance(body, dict):
                    raise InvalidInput(
                        f"kubeconfig {path}: the {key} of {section[:-1]} {name!r} is not a mapping",
                        hint=_HINT,
                    )
                return body
            names.append(item["name"])
    known = ", ".join(repr(n) for n in names[:10]) or "none"
    raise InvalidInput(
        f"kubeconfig {where} has no {section[:-1]} named {name!r} (it has: {known})",
        hint=_HINT,
    )
