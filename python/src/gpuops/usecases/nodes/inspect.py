"""``gpuops nodes inspect``: every GPU node's health (S-16) in one fast pass, thresholds per
group, a JSON and a JUnit report, and one webhook alert per incident."""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpuops import fsio
from gpuops.adapters import hostkeys, webhook
from gpuops.core import gpuhealth, inventory
from gpuops.core.gpuhealth import CRITICAL, UNREACHABLE, HostHealth
from gpuops.core.inventory import DEFAULT_PATTERN
from gpuops.core.values import shown
from gpuops.errors import InvalidInput
from gpuops.render.junit import Case, junit_xml
from gpuops.usecases.nodes import common

#: The alert state is one fingerprint per open incident: small.
MAX_STATE_BYTES = 8 << 20


@dataclass(frozen=True)
class InspectRequest:
    inventory: str
    limit: str | None = None
    pattern: str = DEFAULT_PATTERN
    timeout_s: int = 60
    parallel: int = 50
    mounts: tuple[str, ...] = ("/", "/var")
    report_dir: str | None = None
    webhook_url_env: str = webhook.DEFAULT_ENV
    link: str | None = None
    alert_state: str | None = None
    known_hosts: str | None = None  # None: the inventory's known_hosts, else ssh's own


@dataclass
class Alert:
    host: str
    fingerprint: str
    status: str  # sent, failed, not-configured, suppressed (already alerted)
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "host": self.host,
            "fingerprint": self.fingerprint,
            "status": self.status,
            "detail": self.detail,
        }


@dataclass
class InspectOutcome:
    request: InspectRequest
    environment: str
    groups: dict[str, str]
    hosts: list[HostHealth]
    alerts: list[Alert] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)
    reports: dict[str, str] = field(default_factory=dict)
    #: the limits each group was judged by (its first host's: group variables apply per group)
    thresholds: dict[str, dict[str, Any]] = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(1 for h in self.hosts if h.status == status)

    @property
    def critical(self) -> list[str]:
        return [h.host for h in self.hosts if h.status == CRITICAL]

    @property
    def unreachable(self) -> list[str]:
        return [h.host for h in self.hosts if h.status == UNREACHABLE]

    def to_dict(self) -> dict[str, Any]:
        statuses = (gpuhealth.OK, gpuhealth.WARNING, CRITICAL, UNREACHABLE)
        return {
            "environment": self.environment,
            "inventory": self.request.inventory,
            "limit": self.request.limit,
            "status": gpuhealth.worst([h.status for h in self.hosts if h.status != UNREACHABLE])
            if not self.critical
            else CRITICAL,
            "summary": {s: self.count(s) for s in statuses},
            "hosts_total": len(self.hosts),
            "critical_hosts": self.critical,
            "unreachable_hosts": self.unreachable,
            "hosts": [{**h.to_dict(), "group": self.groups[h.host]} for h in self.hosts],
            "alerts": [a.to_dict() for a in self.alerts],
            "thresholds": dict(self.thresholds),
            "timings_s": dict(self.timings_s),
            "reports": dict(self.reports),
        }


def inspect(request: InspectRequest) -> InspectOutcome:
    """Inspect the hosts; alert each new incident; write the reports when asked."""
    started = time.monotonic()
    webhook.webhook_url(request.webhook_url_env)  # a malformed URL is an input error, up front
    keys = hostkeys.HostKeys(hostkeys.find(request.known_hosts, request.inventory))
    folder = (  # checked now (a link or a file there is exit 2), made when written
        common.artifacts_dir(request.report_dir, "nodes-inspect", option="report_dir")
        if request.report_dir
        else None
    )
    inv = common.load(request.inventory, request.limit, request.pattern)
    thresholds = inventory.check_thresholds(inv)
    state = _load_state(request.alert_state)
    loaded = time.monotonic()
    health, _ = common.inspect_hosts(
        inv.hosts,
        thresholds,
        timeout_s=request.timeout_s,
        parallel=request.parallel,
        mounts=request.mounts,
        host_keys=keys,
    )
    inspected = time.monotonic()
    outcome = InspectOutcome(
        request=request,
        environment=inv.environment,
        groups={h.name: h.group for h in inv.hosts},
        hosts=[health[h.name] for h in inv.hosts],
    )
    for h in inv.hosts:
        outcome.thresholds.setdefault(h.group, asdict(thresholds[h.name]))
    outcome.alerts = _alert(outcome, request, state)
    if request.alert_state:
        _save_state(request.alert_state, outcome)
    outcome.timings_s = {
        "inventory": round(loaded - started, 3),
        "inspect": round(inspected - loaded, 3),
        "total": round(time.monotonic() - started, 3),
    }
    if folder is not None:
        outcome.reports = {
            "json": str(folder.file("inspect.json")),
            "junit": str(folder.save_text("inspect-junit.xml", junit(outcome))),
        }
        folder.save_json("inspect.json", outcome.to_dict())
    return outcome


def fingerprint(h: HostHealth) -> str:
    checks = sorted({f"{f.check}@{f.gpu}" for f in h.findings if f.severity == CRITICAL})
    return hashlib.sha256(f"{h.host}|{'|'.join(checks)}".encode()).hexdigest()[:16]


def _alert(outcome: InspectOutcome, request: InspectRequest, state: dict[str, Any]) -> list[Alert]:
    """One webhook message per incident: a host with critical findings (or unreachable).
    With an alert state file, an incident already announced is not announced again."""
    alerts = []
    for h in outcome.hosts:
        if h.status not in (CRITICAL, UNREACHABLE):
            continue
        fp = fingerprint(h)
        if fp in state.get("open", {}):
            alerts.append(Alert(h.host, fp, "suppressed", "already alerted"))
            continue
        critical = [f.to_dict() for f in h.findings if f.severity == CRITICAL]
        payload = {
            "event": "gpu-node-incident",
            "text": f"gpuops nodes inspect: {h.host} {h.status}: "
            + "; ".join(str(f["message"]) for f in critical[:5]),
            "host": h.host,
            "group": outcome.groups[h.host],
            "environment": outcome.environment,
            "status": h.status,
            "findings": critical,
            "fingerprint": fp,
            "link": request.link or "",
        }
        delivery = webhook.post(request.webhook_url_env, payload)
        alerts.append(Alert(h.host, fp, delivery.status, delivery.detail))
    return alerts


def _load_state(path: str | None) -> dict[str, Any]:
    if not path:
        return {"open": {}}
    if not os.path.lexists(path):
        if not Path(path).parent.is_dir():  # checked now: it is written after the inspection
            raise InvalidInput(
                f"alert state file {shown(path)}: its folder does not exist", field="alert_state"
            )
        return {"open": {}}  # no incident alerted yet
    text = fsio.read_text(path, cap=MAX_STATE_BYTES, what="alert state file", option="alert_state")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidInput(
            f"alert state file {shown(path)} is not readable JSON", field="alert_state"
        ) from None
    return doc if isinstance(doc, dict) and isinstance(doc.get("open"), dict) else {"open": {}}


def _save_state(path: str, outcome: InspectOutcome) -> None:
    sent = {a.fingerprint: a.host for a in outcome.alerts if a.status in ("sent", "suppressed")}
    fsio.write_json_file(path, {"open": sent}, option="alert_state")


def junit(outcome: InspectOutcome) -> str:
    cases = []
    for h in outcome.hosts:
        group = outcome.groups[h.host]
        lines = [f"{f.severity}: {f.message}" for f in h.findings]
        critical = "; ".join(f.message for f in h.findings if f.severity == CRITICAL)
        cases.append(
            Case(
                name=h.host,
                classname=f"gpu-inspect.{group}",
                failure=critical if h.status == CRITICAL else None,
                error=critical if h.status == UNREACHABLE else None,
                output="\n".join(lines),
            )
        )
    return junit_xml("gpuops nodes inspect", cases)
