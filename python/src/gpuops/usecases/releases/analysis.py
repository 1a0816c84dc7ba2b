"""Measuring a canary: one analysis step of a progressive release (S-22).

:func:`measure` takes one measurement of any provider; :func:`run` takes a step's
measurements ``interval_s`` apart and adds them up (:class:`gpuops.core.analysis.Tally`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuops.adapters.kube import KubeClient
from gpuops.core.analysis import Measurement, Tally
from gpuops.core.releasestrategy import AnalysisStep

__all__ = ["PodRef", "Say", "Target", "measure", "run"]

Say = Callable[[str], None]


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
    #: environment for the Prometheus token (``token_env``); None: the process's own
    environ: dict[str, str] | None = field(default=None, repr=False)


def measure(step: AnalysisStep, target: Target, *, attempt: int = 1) -> Measurement:
    """One measurement of ``step``'s provider against ``target`` (``attempt``: its number in
    the step, from 1; a job's name carries it)."""
    raise NotImplementedError(step.kind)


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
            renew()
            sleep(step.interval_s)
            renew()
        attempt += 1
        m = measure(step, target, attempt=attempt)
        tally.add(m)
        shown = f"{m.verdict}" + (f": {m.detail}" if m.detail else "")
        say(f"analysis {step.name} ({step.kind}) {attempt}: {shown}")
    say(f"analysis {step.name}: {tally.verdict} ({tally.reason})")
    return tally
