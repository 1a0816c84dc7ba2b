"""The alerts gate of ``gpuops nodes update`` (issue 21): firing alerts hold the next batch.

Before each batch the gate asks Alertmanager (API v2) for the active alerts that no silence
mutes and no inhibition hides and that match ``--alerts-selector``. None: the batch may start.
Some: it asks again every few seconds (:data:`RECHECK_S`) until ``--alerts-wait`` is spent,
then holds the rollout naming the alerts (name and labels); the batch and the later ones are
not started and the run's node history record says where a later run resumes. An alert that
resolves within the wait lets the batch start.

Fail closed: an Alertmanager that cannot be reached (or does not answer within its deadline)
within the wait holds the rollout too, and says so: a rollout does not go on blind because its
alarm is down. Credentials it refuses hold at once (asking again would not help).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gpuops.adapters.alertmanager import DEFAULT_TIMEOUT_S, Alert, Alertmanager
from gpuops.core.alertmatchers import Matcher
from gpuops.core.values import shown
from gpuops.errors import GpuOpsError, InvalidInput, Unreachable
from gpuops.usecases.nodes.gates import BatchGate, GateContext, Hold
from gpuops.usecases.nodes.records import BatchRecord, HostRecord

GATE = "alerts"
#: seconds between two questions to Alertmanager while alerts fire (or it does not answer)
RECHECK_S = 5.0
#: alerts named in a hold's message (all of them are in its details, up to MAX_DETAILS)
SHOWN = 5
MAX_DETAILS = 50


class Source(Protocol):
    url: str

    def firing(self, matchers: Sequence[Matcher]) -> list[Alert]: ...


@dataclass(frozen=True)
class AlertsSpec:
    """``--alerts-url``, ``--alerts-selector`` (parsed), ``--alerts-wait`` seconds; the
    bearer token and CA file for an Alertmanager behind TLS or an auth proxy. ``connect``,
    ``sleep`` and ``clock`` are replaced in unit tests only."""

    url: str
    matchers: tuple[Matcher, ...]
    wait_s: float = 0.0
    token: str | None = field(default=None, repr=False)
    ca_file: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    recheck_s: float = RECHECK_S
    connect: Callable[[AlertsSpec], Source] | None = None
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    @property
    def selector(self) -> str:
        return ",".join(m.text() for m in self.matchers)

    def open(self, ctx: GateContext) -> BatchGate:
        source = (
            self.connect(self)
            if self.connect is not None
            else Alertmanager(self.url, self.token, self.ca_file, self.timeout_s)
        )
        return AlertsGate(self, source, ctx)


class AlertsGate:
    name = GATE

    def __init__(self, spec: AlertsSpec, source: Source, ctx: GateContext) -> None:
        self.spec = spec
        self.source = source
        self.say = ctx.say

    def admit(self, batch: BatchRecord, hosts: Sequence[HostRecord]) -> Hold | None:
        spec = self.spec
        started = spec.clock()
        until = started + spec.wait_s
        said = False
        while True:
            alerts, problem, final = self._ask()
            waited = round(spec.clock() - started, 3)
            if not alerts and problem is None:
                if said:
                    self.say(f"[alerts] no matching alert fires any more after {waited:g} s")
                return None
            left = until - spec.clock()
            if final or left <= 0:
                return self._hold(alerts, problem, waited)
            if not said:
                what = problem or f"{len(alerts)} alert(s) fire: {_names(alerts)}"
                self.say(
                    f"[alerts] {what}; asking again every {min(spec.recheck_s, spec.wait_s):g} s "
                    f"for up to {spec.wait_s:g} s (--alerts-wait)"
                )
                said = True
            spec.sleep(min(spec.recheck_s, left))

    def _ask(self) -> tuple[list[Alert], str | None, bool]:
        """The matching alerts; or why there is no answer, and whether asking again may help."""
        try:
            return self.source.firing(self.spec.matchers), None, False
        except Unreachable as exc:
            return [], exc.message, False
        except GpuOpsError as exc:  # refused credentials, a malformed answer: not transient
            return [], exc.message, True

    def _hold(self, alerts: list[Alert], problem: str | None, waited: float) -> Hold:
        spec = self.spec
        details = {
            "url": self.source.url,
            "selector": spec.selector,
            "waited_s": waited,
            "alerts": [a.to_dict() for a in alerts[:MAX_DETAILS]],
            "firing": len(alerts),
            "unreachable": problem,
        }
        if problem is not None:
            message = (
                f"no answer from Alertmanager after {waited:g} s, so the batch is held (fail "
                f"closed): {problem}"
            )
        else:
            message = (
                f"{len(alerts)} alert(s) matching {spec.selector} still fire after {waited:g} s: "
                f"{_names(alerts)}"
            )
        return Hold(GATE, message, details)

    def done(self, batch: BatchRecord, hosts: Sequence[HostRecord]) -> None:
        return None

    def close(self) -> None:
        return None


def _names(alerts: Sequence[Alert]) -> str:
    """The first alerts by name and labels, for one line: ``GpuXid{instance='n1', ...}``."""
    shown_ = [_one(a) for a in sorted(alerts, key=lambda a: (a.name, sorted(a.labels.items())))]
    more = len(shown_) - SHOWN
    return "; ".join(shown_[:SHOWN]) + (f"; and {more} more" if more > 0 else "")


def _one(alert: Alert) -> str:
    labels = ", ".join(
        f"{k}={shown(v, 40)}" for k, v in sorted(alert.labels.items()) if k != "alertname"
    )
    return f"{shown(alert.name or '(no alertname)', 60)}{{{labels}}}"


#: the environment variable holding a bearer token for an Alertmanager behind an auth proxy
TOKEN_ENV = "GPUOPS_ALERTS_TOKEN"  # noqa: S105 - a variable's name, not a secret


def spec(
    url: str | None,
    matchers: tuple[Matcher, ...] | None,
    wait_s: float,
    ca_file: str | None = None,
) -> AlertsSpec | None:
    """The gate of ``--alerts-url`` and ``--alerts-selector`` (both or neither: None), with the
    token of :data:`TOKEN_ENV` if set; checked now, before anything runs."""
    if url is None and matchers is None:
        if ca_file is not None:
            raise InvalidInput("--alerts-ca-file without --alerts-url", field="alerts_ca_file")
        return None
    if url is None or matchers is None:
        given, missing = (
            ("--alerts-url", "--alerts-selector")
            if url
            else (
                "--alerts-selector",
                "--alerts-url",
            )
        )
        raise InvalidInput(
            f"{given} without {missing}: the alerts gate needs both",
            hint="e.g. --alerts-url https://alertmanager.example:9093 --alerts-selector "
            "'severity=\"critical\"'",
            field=missing.lstrip("-").replace("-", "_"),
        )
    token = os.environ.get(TOKEN_ENV) or None
    Alertmanager(url, token, ca_file)  # URL, token and CA file checked before anything runs
    return AlertsSpec(url=url, matchers=matchers, wait_s=wait_s, token=token, ca_file=ca_file)
