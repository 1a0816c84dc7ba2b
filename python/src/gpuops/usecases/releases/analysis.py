"""Measuring a canary: one analysis step of a progressive release (S-22).

:func:`measure` takes one measurement of any provider; :func:`run` takes a step's
measurements ``interval_s`` apart and adds them up (:class:`gpuops.core.analysis.Tally`).
A measurement never raises a gpuops error: a source that did not answer (the API server,
Prometheus, a node's ssh) makes it ``inconclusive``, any other error ``failed``, both with the
error's message as the detail.

- ``prometheus``: the step's query with its placeholders filled in; a vector of one sample is
  its value, of several the worst against the threshold (its series named), an empty answer
  is inconclusive.
- ``http``: every current canary pod through the API server's pod proxy (what a Jenkins agent
  outside the cluster network reaches); one measurement judges them all, its detail names the
  failing pod; its value is the slowest answer's seconds.
- ``job``: a smoke-test Job in the new image (:mod:`.analysisjob`).
- ``gpu``: the inspection core on the canary pods' nodes (:mod:`.analysisgpu`).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuops.adapters.kube import KubeClient, NotFound, podproxy
from gpuops.adapters.prometheus import Prometheus, Sample
from gpuops.core.analysis import FAILED, INCONCLUSIVE, PASSED, Measurement, Tally, judge_value
from gpuops.core.analysis import number_text as num
from gpuops.core.releasehistory import now_iso
from gpuops.core.releasestrategy import (
    AnalysisStep,
    GpuCheck,
    HttpCheck,
    JobCheck,
    PrometheusCheck,
    substitute,
)
from gpuops.core.values import shown
from gpuops.errors import GpuOpsError, Unreachable
from gpuops.usecases.releases import analysisgpu, analysisjob

__all__ = ["PodRef", "Say", "Target", "measure", "run"]

Say = Callable[[str], None]
RANK = {PASSED: 0, INCONCLUSIVE: 1, FAILED: 2}


@dataclass(frozen=True)
class PodRef:
    """A canary pod as it is now: its name and the node it is bound to (None: not yet)."""

    name: str
    node: str | None = None


@dataclass
class Target:
    """What an analysis measures: the canary Deployment ``canary`` of ``deployment`` in
    ``namespace``, running ``image`` (the new image, by digest) for release ``release``;
    ``since``: when the step began (epoch seconds); ``pods``: the canary pods now."""

    kube: KubeClient
    namespace: str
    deployment: str
    canary: str
    release: int
    image: str
    since: float
    pods: Callable[[], list[PodRef]]
    #: the variables ``token_env`` is read from; None: the process's environment
    environ: Mapping[str, str] | None = field(default=None, repr=False)
    #: what a provider keeps between the measurements of one step (a gpu step's first readings)
    memory: dict[str, Any] = field(default_factory=dict, repr=False)


def measure(
    step: AnalysisStep,
    target: Target,
    *,
    attempt: int = 1,
    sleep: Callable[[float], None] = time.sleep,
    renew: Callable[[], None] = lambda: None,
) -> Measurement:
    """One measurement of ``step``'s provider against ``target`` (``attempt``: its number in
    the step, from 1: a job's name carries it; ``sleep`` and ``renew``: how a job's end is
    waited for, the release lock renewed meanwhile)."""
    at = now_iso()
    check = step.check
    try:
        if isinstance(check, PrometheusCheck):
            verdict, value, detail = _prometheus(check, target)
        elif isinstance(check, HttpCheck):
            verdict, value, detail = _http(check, target)
        elif isinstance(check, JobCheck):
            canary = analysisjob.Canary(
                target.kube,
                target.namespace,
                target.deployment,
                target.canary,
                target.release,
                target.image,
            )
            verdict, value, detail = analysisjob.smoke(step, check, canary, attempt, sleep, renew)
        elif isinstance(check, GpuCheck):
            nodes = [p.node for p in target.pods() if p.node]
            verdict, value, detail = analysisgpu.inspect(
                step, check, nodes, target.since, target.memory
            )
        else:  # pragma: no cover - the types above are all there are
            raise TypeError(type(check).__name__)
    except Unreachable as exc:
        return Measurement(at, INCONCLUSIVE, None, exc.message)
    except GpuOpsError as exc:
        return Measurement(at, FAILED, None, exc.message)
    return Measurement(at, verdict, value, detail)


Judged = tuple[str, float | None, str]


def run(
    step: AnalysisStep,
    target: Target,
    *,
    sleep: Callable[[float], None] = time.sleep,
    say: Say = lambda _line: None,
    renew: Callable[[], None] = lambda: None,
) -> Tally:
    """Take ``step``'s measurements ``interval_s`` apart (the first at once) until its tally
    is done (failed early, or ``count`` counted); renew the release lock between them."""
    tally = Tally(step)
    attempt = 0
    while not tally.done:
        if attempt:
            sleep(step.interval_s)
            renew()
        attempt += 1
        m = measure(step, target, attempt=attempt, sleep=sleep, renew=renew)
        tally.add(m)
        value = "" if m.value is None else f" value {num(m.value)}"
        say(
            f"analysis {step.name} ({step.kind}) measurement {attempt}: {m.verdict}{value}"
            + (f": {m.detail}" if m.detail else "")
        )
        renew()
    say(f"analysis {step.name}: {tally.verdict} ({tally.reason})")
    return tally


# -- prometheus ------------------------------------------------------------------------------
def _prometheus(check: PrometheusCheck, target: Target) -> Judged:
    token = None
    if check.token_env is not None:
        environ = os.environ if target.environ is None else target.environ
        token = environ.get(check.token_env) or None
        if token is None:
            return FAILED, None, f"token_env {check.token_env} is not set or empty"
    query = substitute(
        check.query,
        namespace=target.namespace,
        deployment=target.deployment,
        canary=target.canary,
        release=str(target.release),
    )
    samples = Prometheus(check.url, token, check.ca_file).query(query)
    if not samples:
        return INCONCLUSIVE, None, "the query answered no series"
    labels, value = worst_sample(samples, check.min, check.max)
    verdict = judge_value(value, check.min, check.max)
    series = f" (series {_series(labels)}, worst of {len(samples)})" if len(samples) > 1 else ""
    return verdict, value, f"value {num(value)} {_against(value, check.min, check.max)}{series}"


def worst_sample(samples: list[Sample], lo: float | None, hi: float | None) -> Sample:
    """The sample that judges worst (failed, then inconclusive, then passed), and among
    equals the farthest beyond (or nearest to) a bound."""

    def badness(sample: Sample) -> tuple[int, float]:
        v = sample[1]
        if math.isnan(v):
            return RANK[INCONCLUSIVE], 0.0
        beyond = max(
            (v - hi) if hi is not None else -math.inf,
            (lo - v) if lo is not None else -math.inf,
        )
        return RANK[judge_value(v, lo, hi)], beyond

    return max(samples, key=badness)


def _against(value: float, lo: float | None, hi: float | None) -> str:
    if math.isnan(value):
        return "(not a number: no data to divide?)"
    if hi is not None and value > hi:
        return f"> max {num(hi)}"
    if lo is not None and value < lo:
        return f"< min {num(lo)}"
    bounds = [
        f"min {num(lo)}" if lo is not None else "",
        f"max {num(hi)}" if hi is not None else "",
    ]
    return f"within {' and '.join(b for b in bounds if b)}"


def _series(labels: Mapping[str, str]) -> str:
    text = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items()))
    return shown("{" + text + "}", 160).strip("'")


# -- http ------------------------------------------------------------------------------------
def _http(check: HttpCheck, target: Target) -> Judged:
    pods = target.pods()
    if not pods:
        return INCONCLUSIVE, None, "no canary pod to ask"
    latency = (check.max_latency_ms or 0) / 1000
    timeout = min(60.0, max(5.0, 2 * latency))
    results: list[tuple[str, float | None, str]] = []
    for pod in pods:
        try:
            answer = podproxy.get(
                target.kube, target.namespace, pod.name, check.port, check.path, timeout
            )
        except NotFound:
            results.append((INCONCLUSIVE, None, f"pod {pod.name} is gone"))
            continue
        except Unreachable as exc:
            results.append((INCONCLUSIVE, None, exc.message))
            continue
        except GpuOpsError as exc:
            results.append((FAILED, None, exc.message))
            continue
        results.append(judge_http(check, pod.name, answer))
    verdict = max((r[0] for r in results), key=RANK.__getitem__)
    slowest = max((r[1] for r in results if r[1] is not None), default=None)
    bad = [r[2] for r in results if r[0] == verdict] if verdict != PASSED else []
    if bad:
        more = f" (and {len(bad) - 1} more pod(s))" if len(bad) > 1 else ""
        return verdict, slowest, bad[0] + more
    where = f"{len(pods)} pod(s)" if len(pods) > 1 else f"pod {pods[0].name}"
    return PASSED, slowest, f"{where} answered {check.status}, slowest {slowest or 0:.3f} s"


def judge_http(check: HttpCheck, pod: str, answer: podproxy.ProxyAnswer) -> Judged:
    """One pod's answer against the check: its status, latency and JSON field."""
    status, seconds, body = answer
    if status != check.status:
        return FAILED, seconds, f"pod {pod} answered HTTP {status}, not {check.status}"
    if check.max_latency_ms is not None and seconds * 1000 > check.max_latency_ms:
        return (
            FAILED,
            seconds,
            f"pod {pod} answered in {seconds:.3f} s, more than {check.max_latency_ms} ms",
        )
    if check.json_field is not None:
        found, value = json_field(body, check.json_field)
        if not found:
            return FAILED, seconds, f"pod {pod}: its answer has no JSON field {check.json_field}"
        if not same_json(value, check.json_equals):
            return (
                FAILED,
                seconds,
                f"pod {pod}: {check.json_field} is {shown(value, 80)}, "
                f"not {shown(check.json_equals, 80)}",
            )
    return PASSED, seconds, f"pod {pod} answered {status} in {seconds:.3f} s"


def same_json(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def json_field(body: bytes, path: str) -> tuple[bool, Any]:
    """The value at the dotted ``path`` of a JSON ``body`` (a list is indexed by a number):
    (found, value)."""
    try:
        doc: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False, None
    for part in path.split("."):
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            return False, None
    return True, doc
