"""The release environments of an application: model and validation, pure.

An application's repository holds one YAML file (``gpuops-release.yaml`` by default) that says,
per environment, where the application runs and how it is released: the namespace, the
Deployment(s) and container whose image is set, the image repository, the node class the pods
run on (for the compat and headroom gates), whether a person must approve, how to reach the
cluster, which registry tag follows the environment, how the model version is mounted (S-22),
and the rollout's patience. The use case reads the file; this module turns the parsed document
into an :class:`Environment` or raises :class:`~gpuops.errors.InvalidInput` naming the file,
the environment and the key (``gpuops-release.yaml: environments.production.namespace: ...``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from gpuops.core.imageref import check_tag
from gpuops.core.kubeinput import dns_label, dns_subdomain, label_value, qualified_name
from gpuops.core.releasestrategy import Strategy, canary_name, parse_strategy
from gpuops.core.values import key_shown, shown
from gpuops.errors import InvalidInput

DEFAULT_FILE = "gpuops-release.yaml"
DEFAULT_GROUP_BY = "accelerator"
_REPOSITORY = re.compile(
    r"^(?P<host>[A-Za-z0-9.-]+(?::[0-9]{1,5})?)/(?P<path>[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)$"
)
_ENV_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_APPROVER = re.compile(r"^[A-Za-z0-9_.@-][A-Za-z0-9_.@ -]{0,99}$")
MODEL_KINDS = ("env", "annotation", "configmap")


@dataclass(frozen=True)
class Approval:
    """Whether a person must approve a release, who may, and how long the pipeline waits."""

    required: bool = False
    approvers: tuple[str, ...] = ()
    timeout_minutes: int = 60


@dataclass(frozen=True)
class ModelMount:
    """Where a Deployment reads its model version (S-22): an environment variable of the
    container, a pod-template annotation, or a key of a ConfigMap (then a pod-template
    annotation carries the same version, so that a change rolls the pods)."""

    kind: str  # env | annotation | configmap
    name: str  # variable name, annotation key, or ConfigMap name
    key: str = ""  # the ConfigMap's key (configmap only)

    def describe(self) -> str:
        if self.kind == "configmap":
            return f"ConfigMap {self.name} key {self.key}"
        return f"{'env var' if self.kind == 'env' else 'annotation'} {self.name}"


@dataclass(frozen=True)
class RolloutPolicy:
    """How long a rollout may show each kind of trouble before it counts as failed."""

    timeout_s: int = 900  # the whole rollout
    unschedulable_s: int = 10  # a new pod unschedulable, nothing progressing
    image_pull_s: int = 20  # ErrImagePull without back-off yet
    ready_s: int = 300  # a started pod never becoming Ready
    restarts: int = 3  # container restarts that count as a crash loop
    poll_s: float = 0.5
    unreachable_s: int = 30  # the API server not answering while watching


@dataclass(frozen=True)
class Environment:
    name: str
    source: str  # the file it came from, for messages
    namespace: str
    deployments: tuple[str, ...]
    container: str
    image: str  # registry/repository, no tag
    node_class: str | None = None
    group_by: str = DEFAULT_GROUP_BY
    approval: Approval = field(default_factory=Approval)
    context: str | None = None
    kubeconfig: str | None = None
    registry_tag: str | None = None
    registry_plain_http: bool = False  # the registry speaks HTTP (a lab, never production)
    registry_ca_file: str | None = None  # a private CA for the registry's TLS certificate
    model: ModelMount | None = None
    rollout: RolloutPolicy = field(default_factory=RolloutPolicy)
    reserve: int = 0
    reserve_per_class: Mapping[str, int] = field(default_factory=dict)
    lease_s: int = 60
    keep: int = 100
    strategy: Strategy | None = None  # None: all replicas at once behind a surge

    @property
    def history_name(self) -> str:
        """The ConfigMap that holds this environment's release history."""
        return f"gpuops-releases-{self.name}"

    @property
    def target(self) -> str:
        return f"{self.namespace}/{','.join(self.deployments)}"


@dataclass(frozen=True)
class ReleaseConfig:
    source: str
    environments: Mapping[str, Environment]

    def environment(self, name: str) -> Environment:
        if name not in self.environments:
            known = ", ".join(sorted(self.environments)) or "none"
            raise InvalidInput(
                f"{self.source}: no environment {shown(name)} (environments: {known})",
                hint=f"add environments.{name} to {self.source} or pick one of: {known}",
                field="environment",
            )
        return self.environments[name]


class _Reader:
    """Typed access to one mapping of the document; errors name file and key path."""

    def __init__(self, source: str, path: str, doc: Any, known: tuple[str, ...]) -> None:
        self.source, self.path = source, path
        if not isinstance(doc, Mapping):
            self.fail("", f"must be a mapping, not {_kind(doc)}")
        unknown = sorted(str(k) for k in doc if k not in known)
        if unknown:
            count = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
            self.fail(
                key_shown(unknown[0]),
                f"is not a known key{count} (known: {', '.join(known)})",
            )
        self.doc: Mapping[str, Any] = doc

    def fail(self, key: str, problem: str) -> NoReturn:
        where = f"{self.path}.{key}" if key and self.path else (key or self.path)
        raise InvalidInput(
            f"{self.source}: {where}: {problem}",
            hint=f"fix {where} in {self.source}",
            field="config",
        )

    def has(self, key: str) -> bool:
        return self.doc.get(key) is not None

    def raw(self, key: str, default: Any = None) -> Any:
        value = self.doc.get(key)
        return default if value is None else value

    def text(self, key: str, default: str | None = None, check: Any = None) -> Any:
        value = self.doc.get(key)
        if value is None:
            if default is None:
                self.fail(key, "is required")
            return default
        if not isinstance(value, str) or not value or any(ord(c) < 32 for c in value):
            self.fail(key, f"must be a non-empty string on one line, not {_kind(value)}")
        if check is not None:
            try:
                return check(value)
            except InvalidInput as exc:
                self.fail(key, exc.message)
        return value

    def number(self, key: str, default: int, low: int, high: int) -> int:
        value = self.doc.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.fail(key, f"must be a whole number from {low} to {high}, not {shown(value)}"[:200])
        return int(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.doc.get(key, default)
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false, not {shown(value)}"[:120])
        return bool(value)

    def sub(self, key: str, known: tuple[str, ...]) -> _Reader | None:
        if self.doc.get(key) is None:
            return None
        return _Reader(self.source, f"{self.path}.{key}", self.doc[key], known)


def _kind(value: Any) -> str:
    if value is None:
        return "empty"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


_TOP = ("image", "environments", "jenkins")  # jenkins: jobs as code (core/jenkinsjobs.py)
_ENV_KEYS = (
    "namespace",
    "deployments",
    "deployment",
    "container",
    "image",
    "node_class",
    "group_by",
    "approval",
    "cluster",
    "registry_tag",
    "registry",
    "model",
    "rollout",
    "headroom",
    "lock",
    "history",
    "strategy",
)


def parse(doc: Any, source: str) -> ReleaseConfig:
    """The whole file: ``image`` (a default repository) and ``environments``."""
    top = _Reader(source, "", doc if doc is not None else {}, _TOP)
    envs = top.raw("environments")
    if not isinstance(envs, Mapping) or not envs:
        top.fail("environments", "must map at least one environment name to its settings")
    default_image = top.text("image", "", parse_repository_text) or None
    out: dict[str, Environment] = {}
    for name, body in envs.items():
        if not isinstance(name, str) or key_shown(name) != name:
            top.fail("environments", f"{key_shown(name)} is not an environment name")
        try:
            dns_label(name, "environment name")
        except InvalidInput as exc:
            top.fail(f"environments.{name}", exc.message)
        out[name] = _environment(source, name, body, default_image)
    return ReleaseConfig(source, out)


def parse_repository_text(value: str) -> str:
    """An image repository with its registry host and no tag: ``registry[:port]/team/app``."""
    m = _REPOSITORY.fullmatch(value)
    host = m["host"] if m else ""
    if not m or not ("." in host or ":" in host or host == "localhost"):
        raise InvalidInput(
            f"image repository {shown(value)} is not registry[:port]/path without a tag, "
            "e.g. harbor.example.com/team/infer"
        )
    return value


def _environment(source: str, name: str, body: Any, default_image: str | None) -> Environment:
    r = _Reader(source, f"environments.{name}", body, _ENV_KEYS)
    namespace = r.text("namespace", check=lambda v: dns_label(v, "namespace"))
    deployments = _deployments(r)
    image = r.text("image", default_image or None, parse_repository_text)
    container = r.text("container", deployments[0], lambda v: dns_label(v, "container name"))
    group_by = r.text("group_by", DEFAULT_GROUP_BY, lambda v: qualified_name(v, "group_by"))
    node_class = r.text("node_class", "", lambda v: label_value(v, "node class")) or None
    registry_tag = r.text("registry_tag", "", check_tag) or None
    cluster = r.sub("cluster", ("context", "kubeconfig"))
    headroom = r.sub("headroom", ("reserve", "reserve_per_class"))
    lock = r.sub("lock", ("lease_seconds",))
    history = r.sub("history", ("keep",))
    registry = r.sub("registry", ("plain_http", "ca_file"))
    strategy = _strategy(r, deployments)
    return Environment(
        name=name,
        source=source,
        namespace=namespace,
        deployments=deployments,
        container=container,
        image=image,
        node_class=node_class,
        group_by=group_by,
        approval=_approval(r),
        context=(cluster.text("context", "") or None) if cluster else None,
        kubeconfig=(cluster.text("kubeconfig", "") or None) if cluster else None,
        registry_tag=registry_tag,
        registry_plain_http=registry.flag("plain_http", False) if registry else False,
        registry_ca_file=(registry.text("ca_file", "") or None) if registry else None,
        model=_model(r),
        rollout=_rollout(r),
        reserve=headroom.number("reserve", 0, 0, 10**6) if headroom else 0,
        reserve_per_class=_reserve_per_class(headroom),
        lease_s=lock.number("lease_seconds", 60, 5, 3600) if lock else 60,
        keep=history.number("keep", 100, 2, 1000) if history else 100,
        strategy=strategy,
    )


def _strategy(r: _Reader, deployments: tuple[str, ...]) -> Strategy | None:
    """``strategy`` (:mod:`gpuops.core.releasestrategy`); a canary's name must be a name."""
    if not r.has("strategy"):
        return None
    strategy = parse_strategy(r.doc["strategy"], r.source, f"{r.path}.strategy")
    if strategy.canary:
        for d in deployments:
            if len(canary_name(d)) > 63:
                r.fail(
                    "strategy",
                    f"the canary of Deployment {shown(d, 80)} would be {canary_name(d)!r}, "
                    f"{len(canary_name(d))} characters: at most 63 (a shorter Deployment name, "
                    "or no replicas steps)",
                )
    return strategy


def _deployments(r: _Reader) -> tuple[str, ...]:
    if r.has("deployment") and r.has("deployments"):
        r.fail("deployment", "give either deployment or deployments, not both")
    if r.has("deployment"):
        return (r.text("deployment", check=lambda v: dns_subdomain(v, "deployment name")),)
    items = r.raw("deployments")
    if not isinstance(items, list) or not items:
        r.fail("deployments", "must list at least one Deployment name")
    names: list[str] = []
    for i, item in enumerate(items):
        try:
            names.append(dns_subdomain(item, "deployment name"))
        except InvalidInput as exc:
            r.fail(f"deployments[{i}]", exc.message)
    if len(set(names)) != len(names):
        r.fail("deployments", "names a Deployment twice")
    return tuple(names)


def _approval(r: _Reader) -> Approval:
    a = r.sub("approval", ("required", "approvers", "timeout_minutes"))
    if a is None:
        return Approval()
    approvers = a.raw("approvers", [])
    if isinstance(approvers, str):
        # as written: spaces after the commas only; an empty name or other white space refused
        approvers = [p.strip(" ") for p in approvers.split(",")]
    if not isinstance(approvers, list) or not all(
        isinstance(x, str) and _APPROVER.fullmatch(x) for x in approvers
    ):
        a.fail("approvers", "must list user or group names (letters, digits, '_', '.', '@', '-')")
    required = a.flag("required", bool(approvers))
    return Approval(required, tuple(approvers), a.number("timeout_minutes", 60, 1, 60 * 24 * 14))


def _model(r: _Reader) -> ModelMount | None:
    m = r.sub("model", ("env", "annotation", "configmap", "key"))
    if m is None:
        return None
    given = [k for k in MODEL_KINDS if m.has(k)]
    if len(given) != 1:
        m.fail("", "must name exactly one of env, annotation or configmap")
    kind = given[0]
    if kind == "env":
        name = m.text("env", check=_env_var)
    elif kind == "annotation":
        name = m.text("annotation", check=lambda v: qualified_name(v, "annotation key"))
    else:
        name = m.text("configmap", check=lambda v: dns_subdomain(v, "ConfigMap name"))
    if kind == "configmap":
        key = m.text("key", check=_configmap_key)
    elif m.has("key"):
        m.fail("key", "is only for model.configmap")
    else:
        key = ""
    return ModelMount(kind, name, key)


def _env_var(value: str) -> str:
    if not _ENV_VAR.fullmatch(value):
        raise InvalidInput(f"{shown(value)} is not an environment variable name")
    return value


def _configmap_key(value: str) -> str:
    if not re.fullmatch(r"[-._a-zA-Z0-9]{1,253}", value):
        raise InvalidInput(
            f"{shown(value)} is not a ConfigMap key (letters, digits, '-', '_', '.')"
        )
    return value


def _rollout(r: _Reader) -> RolloutPolicy:
    keys = (
        "timeout_seconds",
        "unschedulable_seconds",
        "image_pull_seconds",
        "ready_seconds",
        "restarts",
        "unreachable_seconds",
    )
    p = r.sub("rollout", keys)
    if p is None:
        return RolloutPolicy()
    d = RolloutPolicy()
    return RolloutPolicy(
        timeout_s=p.number("timeout_seconds", d.timeout_s, 10, 24 * 3600),
        unschedulable_s=p.number("unschedulable_seconds", d.unschedulable_s, 1, 3600),
        image_pull_s=p.number("image_pull_seconds", d.image_pull_s, 1, 3600),
        ready_s=p.number("ready_seconds", d.ready_s, 1, 24 * 3600),
        restarts=p.number("restarts", d.restarts, 1, 1000),
        unreachable_s=p.number("unreachable_seconds", d.unreachable_s, 0, 3600),
    )


def _reserve_per_class(h: _Reader | None) -> dict[str, int]:
    if h is None:
        return {}
    raw = h.raw("reserve_per_class", {})
    if not isinstance(raw, Mapping):
        h.fail("reserve_per_class", "must map node classes to GPU counts")
    out: dict[str, int] = {}
    for cls, n in raw.items():
        if not isinstance(cls, str) or isinstance(n, bool) or not isinstance(n, int) or n < 0:
            h.fail(f"reserve_per_class.{cls}", "must be a whole number of GPUs >= 0")
        out[cls] = n
    return out


def check_model_version(value: str, what: str = "model version") -> str:
    """A model version as it goes into an env var, annotation and label-like places."""
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}", value):
        raise InvalidInput(
            f"{what} {shown(value)} is not valid: up to 128 letters, digits, '_', '.', '+' or '-', "
            "starting with a letter or digit"
        )
    return value
