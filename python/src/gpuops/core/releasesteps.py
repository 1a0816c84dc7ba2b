"""The steps of a progressive release (S-22) as types, pure: what an environment's
``strategy`` says once :mod:`gpuops.core.releasestrategy` has parsed and checked it.

A :class:`Strategy` is steps that run in order before "all" (the stable Deployment takes the
new release): :class:`CanaryReplicas` (the canary Deployment's pods), :class:`Pause`,
:class:`AnalysisStep` (measurements of one provider, counted by
:mod:`gpuops.core.analysis`), :class:`ApprovalStep`; and :class:`InPlace`, whether pods may
be replaced in place when no surge pod fits. :func:`substitute` fills a Prometheus query's
placeholders.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

INCONCLUSIVE_POLICIES = ("fail", "pass", "ignore")
PROVIDERS = ("prometheus", "http", "job", "gpu")
#: The placeholders of a Prometheus query, in the order the docs list them.
PLACEHOLDERS = ("namespace", "deployment", "canary", "release")
CANARY_SUFFIX = "-canary"
_PLACEHOLDER = re.compile(r"\$(" + "|".join(PLACEHOLDERS) + r")(?![A-Za-z0-9_])")


@dataclass(frozen=True)
class CanaryReplicas:
    """A step ``replicas``: the canary runs ``count`` pods, or ``percent`` % of the
    environment's replicas."""

    count: int | None = None
    percent: int | None = None

    def resolve(self, total: int) -> int:
        """The canary's pods for an environment of ``total`` replicas: ``count``, or
        ``ceil(total * percent / 100)``; at least 1, at most ``total`` (a canary of a
        Deployment scaled to 0 still gets its one pod)."""
        wanted = (
            self.count if self.count is not None else math.ceil(total * (self.percent or 0) / 100)
        )
        return max(1, min(wanted, max(total, 1)))

    def describe(self) -> str:
        return f"{self.percent}%" if self.percent is not None else str(self.count)


@dataclass(frozen=True)
class Pause:
    """A step ``pause_seconds``: wait that long."""

    seconds: int


@dataclass(frozen=True)
class ApprovalStep:
    """A step ``approval``: a person among ``approvers`` approves within ``timeout_minutes``."""

    approvers: tuple[str, ...]
    timeout_minutes: int = 60


@dataclass(frozen=True)
class PrometheusCheck:
    """An instant PromQL query (placeholders: :data:`PLACEHOLDERS`); passes when its value is
    within ``min``..``max`` (either may be absent, not both)."""

    url: str
    query: str
    min: float | None = None
    max: float | None = None
    token_env: str | None = None  # the environment variable holding a bearer token
    ca_file: str | None = None  # a private CA for the server's TLS certificate


@dataclass(frozen=True)
class HttpCheck:
    """A GET of each canary pod's ``port`` and ``path`` through the API server's pod proxy:
    its status, its latency, optionally a field of its JSON body."""

    port: int
    path: str
    status: int = 200
    max_latency_ms: int | None = None
    json_field: str | None = None  # a dotted path into the JSON body
    json_equals: Any = None  # the value ``json_field`` must hold (a JSON scalar)


@dataclass(frozen=True)
class JobCheck:
    """A smoke-test Job in the new image running ``command``; its exit code decides."""

    command: tuple[str, ...]
    timeout_s: int = 300


@dataclass(frozen=True)
class GpuCheck:
    """The inspection core on the nodes of the canary pods, the hosts of ``inventory``: Xid
    events and ECC errors since the step began fail it."""

    inventory: str


Check = PrometheusCheck | HttpCheck | JobCheck | GpuCheck


@dataclass(frozen=True)
class AnalysisStep:
    """A step ``analysis``: ``count`` measurements ``interval_s`` apart; more than
    ``failure_limit`` failed ones fail the step; ``inconclusive`` (fail | pass | ignore) says
    what an empty, NaN or unreachable answer counts as."""

    name: str
    check: Check
    interval_s: int = 10
    count: int = 1
    failure_limit: int = 0
    inconclusive: str = "fail"

    @property
    def kind(self) -> str:
        """The provider: ``prometheus``, ``http``, ``job`` or ``gpu``."""
        return _PROVIDER_OF[type(self.check)]


_PROVIDER_OF: dict[type, str] = {
    PrometheusCheck: "prometheus",
    HttpCheck: "http",
    JobCheck: "job",
    GpuCheck: "gpu",
}

Step = CanaryReplicas | Pause | AnalysisStep | ApprovalStep


def step_kind(step: Step) -> str:
    """The kind a release record names a step by: replicas | pause | analysis | approval."""
    if isinstance(step, CanaryReplicas):
        return "replicas"
    if isinstance(step, Pause):
        return "pause"
    if isinstance(step, AnalysisStep):
        return "analysis"
    return "approval"


@dataclass(frozen=True)
class InPlace:
    """Replacement in place when no surge pod fits: never more than ``max_unavailable``
    replicas down at once (the canary's first pod included)."""

    max_unavailable: int = 1


@dataclass(frozen=True)
class Strategy:
    """The steps before "all", and whether pods may be replaced in place."""

    steps: tuple[Step, ...] = ()
    in_place: InPlace | None = None

    @property
    def canary(self) -> bool:
        """Whether the release runs a canary Deployment (any replicas step)."""
        return any(isinstance(s, CanaryReplicas) for s in self.steps)


def canary_name(deployment: str) -> str:
    """The canary Deployment of ``deployment``."""
    return deployment + CANARY_SUFFIX


def substitute(query: str, **values: str) -> str:
    """``query`` with ``$namespace``, ``$deployment``, ``$canary`` and ``$release`` replaced
    by ``values`` (a placeholder followed by a letter, digit or ``_`` is another word and left
    as is, so is a ``$`` followed by anything else). A placeholder not in ``values`` is left as
    is; a value not named in :data:`PLACEHOLDERS` is a programming error."""
    unknown = sorted(set(values) - set(PLACEHOLDERS))
    if unknown:
        raise ValueError(f"no placeholder {unknown[0]!r} (placeholders: {', '.join(PLACEHOLDERS)})")
    return _PLACEHOLDER.sub(lambda m: str(values.get(m[1], m[0])), query)
