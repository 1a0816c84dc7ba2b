"""A progressive release's strategy (S-22): its steps and its in-place replacement, pure.

An environment of ``gpuops-release.yaml`` may carry ``strategy``: steps that run in order
before "all" (the stable Deployment takes the new release), each with exactly one key:

- ``replicas: 1`` / ``replicas: 50%``: the canary Deployment runs that many pods (a
  percentage of the environment's replicas, rounded up, at least 1, at most all of them);
- ``pause_seconds: 120``: wait;
- ``analysis: {...}``: measure the canary with one provider (``prometheus``, ``http``,
  ``job``, ``gpu``) ``count`` times ``interval_seconds`` apart; ``failure_limit`` failed
  measurements are allowed, one more fails the step (:mod:`gpuops.core.analysis` counts);
- ``approval: {approvers: [...], timeout_minutes: 60}``: a person approves before going on.

``in_place: {max_unavailable: 1}`` allows replacing pods in place when the headroom gate finds
no room for surge pods. This module turns the parsed document into a :class:`Strategy` or
raises :class:`~gpuops.errors.InvalidInput` naming the file and the key
(``gpuops-release.yaml: environments.production.strategy.steps[2].analysis.prometheus.url:
...``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from gpuops.core.releasesteps import (
    CANARY_SUFFIX,
    INCONCLUSIVE_POLICIES,
    PLACEHOLDERS,
    PROVIDERS,
    AnalysisStep,
    ApprovalStep,
    CanaryReplicas,
    Check,
    GpuCheck,
    HttpCheck,
    InPlace,
    JobCheck,
    Pause,
    PrometheusCheck,
    Step,
    Strategy,
    canary_name,
    step_kind,
    substitute,
)
from gpuops.core.urls import parse_http
from gpuops.core.values import json_kind, key_shown, shown
from gpuops.errors import InvalidInput

__all__ = [
    "CANARY_SUFFIX",
    "INCONCLUSIVE_POLICIES",
    "PLACEHOLDERS",
    "PROVIDERS",
    "AnalysisStep",
    "ApprovalStep",
    "CanaryReplicas",
    "Check",
    "GpuCheck",
    "HttpCheck",
    "InPlace",
    "JobCheck",
    "Pause",
    "PrometheusCheck",
    "Step",
    "Strategy",
    "canary_name",
    "parse_strategy",
    "step_kind",
    "substitute",
]

MAX_QUERY = 2000  # characters of a PromQL query (a sanity bound: it travels in a POST body)
MAX_REPLICAS = 10**6
MAX_STEPS = 100
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ENV_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_APPROVER = re.compile(r"^[A-Za-z0-9_.@-][A-Za-z0-9_.@ -]{0,99}$")
_PERCENT = re.compile(r"^([0-9]{1,3})%$")
#: An HTTP path as the pod proxy passes it on: RFC 3986 path characters, an optional query.
_HTTP_PATH = re.compile(r"^/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*(\?[A-Za-z0-9._~!$&'()*+,;=:@%/?-]*)?$")
_PCT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_FIELD = re.compile(r"^[A-Za-z0-9_-]{1,63}(\.[A-Za-z0-9_-]{1,63}){0,15}$")


class _Reader:
    """Typed access to one mapping of the document; errors name file and key path."""

    def __init__(self, source: str, path: str, doc: Any, known: tuple[str, ...]) -> None:
        self.source, self.path = source, path
        if not isinstance(doc, Mapping):
            self.fail("", f"must be a mapping, not {_kind(doc)}")
        unknown = sorted(str(k) for k in doc if k not in known)
        if unknown:
            more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
            self.fail(
                key_shown(unknown[0]), f"is not a known key{more} (known: {', '.join(known)})"
            )
        self.doc: Mapping[str, Any] = doc

    def fail(self, key: str, problem: str) -> NoReturn:
        _fail(self.source, f"{self.path}.{key}" if key else self.path, problem)

    def has(self, key: str) -> bool:
        return self.doc.get(key) is not None

    def text(
        self, key: str, default: str | None = None, *, lines: bool = False, limit: int = 1024
    ) -> str:
        value = self.doc.get(key)
        if value is None:
            if default is None:
                self.fail(key, "is required")
            return default
        allowed = "\n\t" if lines else ""
        if not isinstance(value, str) or not value.strip():
            self.fail(key, f"must be a non-empty string, not {_kind(value)}")
        if any((ord(c) < 32 and c not in allowed) or 0x7F <= ord(c) <= 0x9F for c in value):
            self.fail(key, "holds a control character" + ("" if lines else " or a line break"))
        if len(value) > limit:
            self.fail(key, f"is {len(value)} characters long; at most {limit}")
        return value

    def number(self, key: str, default: int | None, low: int, high: int) -> int:
        value = self.doc.get(key, default)
        if value is None:
            self.fail(key, "is required")
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.fail(key, f"must be a whole number from {low} to {high}, not {shown(value)}")
        return int(value)

    def real(self, key: str) -> float | None:
        value = self.doc.get(key)
        if value is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            self.fail(key, f"must be a finite number, not {shown(value)}")
        return float(value)

    def sub(self, key: str, known: tuple[str, ...]) -> _Reader:
        return _Reader(self.source, f"{self.path}.{key}", self.doc.get(key), known)


def _fail(source: str, where: str, problem: str) -> NoReturn:
    raise InvalidInput(
        f"{source}: {where}: {problem}", hint=f"fix {where} in {source}", field="config"
    )


def _kind(value: Any) -> str:
    if value is None:
        return "empty"
    kind = json_kind(value)
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def parse_strategy(doc: Any, source: str, path: str) -> Strategy:
    """An environment's ``strategy`` mapping (``path`` names it in messages, e.g.
    ``environments.production.strategy``): ``steps`` and/or ``in_place``."""
    r = _Reader(source, path, doc, ("steps", "in_place"))
    if not r.has("steps") and not r.has("in_place"):
        r.fail("", "must give steps, in_place or both")
    steps: list[Step] = []
    raw = r.doc.get("steps")
    if raw is not None:
        if not isinstance(raw, list) or not raw:
            r.fail("steps", f"must list at least one step, not {_kind(raw)}")
        if len(raw) > MAX_STEPS:
            r.fail("steps", f"lists {len(raw)} steps; at most {MAX_STEPS}")
        canary = False
        for i, item in enumerate(raw):
            step = _step(source, f"{path}.steps[{i}]", item, i)
            if isinstance(step, AnalysisStep) and not canary:
                _fail(
                    source,
                    f"{path}.steps[{i}]",
                    "an analysis measures the canary: put a replicas step before it",
                )
            canary = canary or isinstance(step, CanaryReplicas)
            steps.append(step)
    in_place = None
    if r.has("in_place"):
        p = r.sub("in_place", ("max_unavailable",))
        in_place = InPlace(p.number("max_unavailable", 1, 1, MAX_REPLICAS))
    return Strategy(tuple(steps), in_place)


_STEP_KEYS = ("replicas", "pause_seconds", "analysis", "approval")


def _step(source: str, where: str, doc: Any, index: int) -> Step:
    if not isinstance(doc, Mapping):
        _fail(
            source,
            where,
            f"must be a mapping with one of {', '.join(_STEP_KEYS)}, not {_kind(doc)}",
        )
    keys = list(doc)
    if len(keys) != 1:
        shown_keys = ", ".join(key_shown(k) for k in keys[:4]) or "none"
        _fail(
            source,
            where,
            f"must have exactly one key of {', '.join(_STEP_KEYS)}, not {len(keys)} ({shown_keys})",
        )
    r = _Reader(source, where, doc, _STEP_KEYS)
    key = keys[0]
    if key == "replicas":
        return _replicas(r)
    if key == "pause_seconds":
        return Pause(r.number("pause_seconds", None, 1, 7 * 24 * 3600))
    if key == "approval":
        return _approval(r.sub("approval", ("approvers", "timeout_minutes")))
    return _analysis(r.sub("analysis", _ANALYSIS_KEYS), index)


def _replicas(r: _Reader) -> CanaryReplicas:
    value = r.doc["replicas"]
    if isinstance(value, str):
        m = _PERCENT.fullmatch(value.strip())
        if not m or not 1 <= int(m[1]) <= 100:
            r.fail(
                "replicas",
                f"must be a whole number >= 1 or a percentage from 1% to 100%, not {shown(value)}",
            )
        return CanaryReplicas(percent=int(m[1]))
    return CanaryReplicas(count=r.number("replicas", None, 1, MAX_REPLICAS))


def _approval(r: _Reader) -> ApprovalStep:
    approvers = r.doc.get("approvers")
    if isinstance(approvers, str):
        approvers = [p.strip(" ") for p in approvers.split(",")]
    if (
        not isinstance(approvers, list)
        or not approvers
        or not all(isinstance(x, str) and _APPROVER.fullmatch(x) for x in approvers)
    ):
        r.fail(
            "approvers",
            "must list at least one user or group name (letters, digits, '_', '.', '@', '-')",
        )
    return ApprovalStep(tuple(approvers), r.number("timeout_minutes", 60, 1, 60 * 24 * 14))


_ANALYSIS_KEYS = ("name", "interval_seconds", "count", "failure_limit", "inconclusive", *PROVIDERS)


def _analysis(r: _Reader, index: int) -> AnalysisStep:
    given = [k for k in PROVIDERS if r.has(k)]
    if len(given) != 1:
        r.fail("", f"must name exactly one provider of {', '.join(PROVIDERS)}, not {len(given)}")
    kind = given[0]
    name = r.text("name", f"{kind}-{index}", limit=63)
    if not _NAME.fullmatch(name):
        r.fail(
            "name", f"{shown(name)} is not a name: lowercase letters, digits and '-', at most 63"
        )
    inconclusive = r.text("inconclusive", "fail", limit=16)
    if inconclusive not in INCONCLUSIVE_POLICIES:
        r.fail(
            "inconclusive",
            f"must be one of {', '.join(INCONCLUSIVE_POLICIES)}, not {shown(inconclusive)}",
        )
    check = _CHECKS[kind](r.sub(kind, _CHECK_KEYS[kind]))
    if kind == "job":
        # one measurement: the Job's end; a limit or count would let a failing smoke test pass
        for key, only in (("count", 1), ("failure_limit", 0)):
            if r.doc.get(key, only) != only:
                r.fail(
                    key, f"must be {only} for a job analysis (its one measurement is the Job's end)"
                )
        if r.has("interval_seconds"):
            r.fail(
                "interval_seconds",
                "is not for a job analysis (its one measurement is the Job's end)",
            )
        return AnalysisStep(name, check, 1, 1, 0, inconclusive)
    interval = r.number("interval_seconds", 10, 1, 3600)
    count = r.number("count", 1, 1, 1000)
    limit = r.number("failure_limit", 0, 0, 1000)
    if limit >= count:
        r.fail(
            "failure_limit",
            f"is {limit}, not less than count ({count}): the analysis could never fail",
        )
    return AnalysisStep(name, check, interval, count, limit, inconclusive)


def _prometheus(r: _Reader) -> PrometheusCheck:
    url = r.text("url")
    try:
        parse_http(url, "prometheus url")
    except InvalidInput as exc:
        r.fail("url", exc.message)
    query = r.text("query", lines=True, limit=MAX_QUERY)
    lo, hi = r.real("min"), r.real("max")
    if lo is None and hi is None:
        r.fail("", "must give max, min or both: the threshold the query's value is judged by")
    if lo is not None and hi is not None and lo > hi:
        r.fail("min", f"is {lo}, above max ({hi}): no value could pass")
    token_env = r.text("token_env", "", limit=128) or None
    if token_env is not None and not _ENV_VAR.fullmatch(token_env):
        r.fail("token_env", f"{shown(token_env)} is not an environment variable name")
    ca_file = r.text("ca_file", "", limit=4096) or None
    if ca_file is not None and url.startswith("http://"):
        r.fail("ca_file", "is for an https url")
    return PrometheusCheck(url, query, lo, hi, token_env, ca_file)


def _http(r: _Reader) -> HttpCheck:
    port = r.number("port", None, 1, 65535)
    path = r.text("path", "/", limit=1024)
    segments = path.split("?", 1)[0].split("/")
    if (
        not _HTTP_PATH.fullmatch(path)
        or _PCT.search(path)
        or any(s in (".", "..") for s in segments)
        or "%2e" in path.lower()
        or "%2f" in path.lower()
    ):
        r.fail(
            "path",
            f"{shown(path)} is not an HTTP path: '/' then letters, digits and URL punctuation "
            "(no '.' or '..' segment, no blank, no '#')",
        )
    status = r.number("status", 200, 100, 599)
    latency = r.number("max_latency_ms", None, 1, 600_000) if r.has("max_latency_ms") else None
    field, equals = None, None
    if r.has("json"):
        j = r.sub("json", ("field", "equals"))
        field = j.text("field", limit=512)
        if not _FIELD.fullmatch(field):
            j.fail(
                "field",
                f"{shown(field)} is not a dotted path (names or list indexes joined by '.')",
            )
        if "equals" not in j.doc:
            j.fail("equals", "is required: the value the field must hold")
        equals = j.doc["equals"]
        if not (equals is None or isinstance(equals, str | int | float | bool)) or (
            isinstance(equals, float) and not math.isfinite(equals)
        ):
            j.fail("equals", f"must be a string, number, boolean or null, not {_kind(equals)}")
        if isinstance(equals, str) and len(equals) > 1024:
            j.fail("equals", f"is {len(equals)} characters long; at most 1024")
    return HttpCheck(port, path, status, latency, field, equals)


def _job(r: _Reader) -> JobCheck:
    command = r.doc.get("command")
    if isinstance(command, str):
        r.fail(
            "command", "must be a list of arguments (no shell runs it), e.g. [python, -m, smoke]"
        )
    if not isinstance(command, list) or not command or len(command) > 64:
        r.fail("command", f"must list 1 to 64 arguments, not {_kind(command)}")
    for i, arg in enumerate(command):
        if (
            not isinstance(arg, str)
            or "\x00" in arg
            or len(arg) > 4096
            or (i == 0 and not arg.strip())
        ):
            r.fail(
                f"command[{i}]",
                f"must be a string of at most 4096 characters without NUL, not {_kind(arg)}",
            )
    return JobCheck(tuple(command), r.number("timeout_seconds", 300, 1, 24 * 3600))


def _gpu(r: _Reader) -> GpuCheck:
    return GpuCheck(r.text("inventory", limit=4096))


_CHECKS: dict[str, Callable[[_Reader], Check]] = {
    "prometheus": _prometheus,
    "http": _http,
    "job": _job,
    "gpu": _gpu,
}
_CHECK_KEYS: dict[str, tuple[str, ...]] = {
    "prometheus": ("url", "query", "min", "max", "token_env", "ca_file"),
    "http": ("port", "path", "status", "max_latency_ms", "json"),
    "job": ("command", "timeout_seconds"),
    "gpu": ("inventory",),
}
