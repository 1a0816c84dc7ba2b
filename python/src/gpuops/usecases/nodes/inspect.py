"""``gpuops nodes inspect``: every GPU node's health (S-16) in one fast pass, thresholds per
group, a JSON and a JUnit report and the fleet health page, and one webhook alert per
incident. Critical findings are a refused gate (exit 3), hosts not inspected unreachable
(exit 4)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, NotRequired, TypedDict

from gpuops import fsio
from gpuops.adapters import hostkeys, webhook
from gpuops.adapters.kube import KubeClient
from gpuops.core import gpuhealth, healthmetrics, inventory, nodelabels
from gpuops.core.gpuhealth import CRITICAL, UNREACHABLE, HostHealth
from gpuops.core.inventory import DEFAULT_PATTERN
from gpuops.core.junit import Case, junit_xml
from gpuops.core.urls import parse_http
from gpuops.core.values import shown
from gpuops.errors import GateRefused, GpuOpsError, InvalidInput, Unreachable
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.nodes import common, quarantine
from gpuops.usecases.nodes.quarantine import QuarantineDocument, QuarantinePolicy, QuarantineReport
from gpuops.usecases.outcome import Outcome
from gpuops.usecases.reportdoc import ReportDocument

#: The alert state is one fingerprint per open incident: small.
MAX_STATE_BYTES = 8 << 20
#: the Pushgateway job the inspection's metrics are pushed as
PUSH_JOB = "gpuops_nodes_inspect"


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
    #: --quarantine: taint critical nodes, release healthy ones (needs ``cluster``)
    quarantine: QuarantinePolicy | None = None
    cluster: Cluster | None = None
    metrics_file: str | None = None  # node_exporter textfile collector file
    pushgateway: str | None = None  # a Pushgateway's base URL


#: A host's health as the inspection found it.
Health = Annotated[
    str,
    {"enum": [gpuhealth.OK, gpuhealth.WARNING, gpuhealth.CRITICAL, gpuhealth.UNREACHABLE]},
]


class FindingDocument(TypedDict):
    check: str
    severity: Annotated[str, {"enum": [gpuhealth.WARNING, gpuhealth.CRITICAL]}]
    message: str
    gpu: int | None  # the GPU's index; None: the host's
    value: Any  # what was read
    limit: Any  # the threshold it broke


class HostHealthDocument(TypedDict):
    """One host's readings and findings, and its inventory group."""

    host: str
    status: Health
    gpus: list[dict[str, Any]]  # per GPU, as nvidia-smi reads it
    findings: list[FindingDocument]
    driver: str | None
    cuda: str | None
    gpus_expected: int
    nvidia_smi: dict[str, Any]
    xids: list[dict[str, Any]]
    nics: list[dict[str, Any]]
    disks: list[dict[str, Any]]
    thresholds: Annotated[dict[str, Any], gpuhealth.Thresholds, "asdict"]
    gpu_count: int
    group: str


class AlertDocument(TypedDict):
    host: str
    fingerprint: str
    status: Annotated[str, {"enum": ["sent", "failed", "not-configured", "suppressed"]}]
    detail: str


class InspectSummaryDocument(TypedDict):
    """Hosts by status (every status counted, 0 too)."""

    ok: int
    warning: int
    critical: int
    unreachable: int


class MetricsDocument(TypedDict, total=False):
    """Where ``--metrics-file`` / ``--pushgateway`` put the inspection's metrics."""

    file: str  # the textfile written
    pushgateway: str  # the group URL pushed to (without user:password)
    pushgateway_error: str  # why the push failed (the run's verdict says it too)


class InspectDocument(TypedDict):
    """The ``result`` of ``gpuops nodes inspect`` (and ``inspect.json``)."""

    environment: str
    inventory: str
    limit: str | None
    status: Annotated[str, {"enum": [gpuhealth.OK, gpuhealth.WARNING, gpuhealth.CRITICAL]}]
    summary: Annotated[dict[str, int], InspectSummaryDocument]
    hosts_total: int
    critical_hosts: list[str]
    unreachable_hosts: list[str]
    hosts: list[Annotated[dict[str, Any], HostHealthDocument]]
    alerts: list[AlertDocument]
    thresholds: dict[str, Annotated[dict[str, Any], gpuhealth.Thresholds, "asdict"]]  # group
    timings_s: dict[str, float]  # phase -> seconds
    reports: dict[str, str]  # with --report-dir: json, junit -> file
    report: NotRequired[ReportDocument]  # with --report-dir: the fleet health page
    quarantine: NotRequired[QuarantineDocument]  # with --quarantine
    metrics: MetricsDocument  # where the metrics went (file, pushgateway); empty: nowhere


@dataclass
class Alert:
    host: str
    fingerprint: str
    status: str  # sent, failed, not-configured, suppressed (already alerted)
    detail: str = ""

    def to_dict(self) -> AlertDocument:
        return {
            "host": self.host,
            "fingerprint": self.fingerprint,
            "status": self.status,
            "detail": self.detail,
        }


@dataclass
class InspectResult:
    request: InspectRequest
    environment: str
    groups: dict[str, str]
    hosts: list[HostHealth]
    alerts: list[Alert] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)
    reports: dict[str, str] = field(default_factory=dict)
    #: the limits each group was judged by (its first host's: group variables apply per group)
    thresholds: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the fleet health page beside the reports: written (its files) or why not; None: none
    report: ReportDocument | None = None
    quarantine: QuarantineReport | None = None
    metrics: MetricsDocument = field(default_factory=MetricsDocument)

    def count(self, status: str) -> int:
        return sum(1 for h in self.hosts if h.status == status)

    @property
    def critical(self) -> list[str]:
        return [h.host for h in self.hosts if h.status == CRITICAL]

    @property
    def unreachable(self) -> list[str]:
        return [h.host for h in self.hosts if h.status == UNREACHABLE]

    def to_dict(self) -> InspectDocument:
        statuses = (gpuhealth.OK, gpuhealth.WARNING, CRITICAL, UNREACHABLE)
        doc: InspectDocument = {
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
            "metrics": self.metrics.copy(),
        }
        if self.report is not None:
            doc["report"] = self.report.copy()
        if self.quarantine is not None:
            doc["quarantine"] = self.quarantine.to_dict()
        return doc


def inspect(request: InspectRequest) -> Outcome[InspectResult]:
    """Inspect the hosts; alert each new incident; write the reports when asked: the
    outcome's files ``json``, ``junit`` and the fleet health page (``page``; one that cannot
    be written is said in the result's ``report``)."""
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
    _check_outputs(request)
    kube = _quarantine_cluster(request)  # its namespace checked before anything is inspected
    try:
        return _inspect(request, started, keys, folder, inv, thresholds, kube)
    finally:
        if kube is not None:
            kube.close()


def _inspect(
    request: InspectRequest,
    started: float,
    keys: hostkeys.HostKeys,
    folder: fsio.OutDir | None,
    inv: inventory.Inventory,
    thresholds: dict[str, gpuhealth.Thresholds],
    kube: KubeClient | None,
) -> Outcome[InspectResult]:
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
    files: dict[str, str] = {}
    result = InspectResult(
        request=request,
        environment=inv.environment,
        groups={h.name: h.group for h in inv.hosts},
        hosts=[health[h.name] for h in inv.hosts],
    )
    for h in inv.hosts:
        result.thresholds.setdefault(h.group, asdict(thresholds[h.name]))
    if request.quarantine is not None and kube is not None:
        result.quarantine = _quarantine(kube, request.quarantine, inv, result)
    quarantined = time.monotonic()
    result.alerts = _alert(result, request, state)
    if request.alert_state:
        _save_state(request.alert_state, result)
    result.timings_s = {
        "inventory": round(loaded - started, 3),
        "inspect": round(inspected - loaded, 3),
        **({"quarantine": round(quarantined - inspected, 3)} if result.quarantine else {}),
        "total": round(time.monotonic() - started, 3),
    }
    push_error = _metrics(request, result)
    if folder is not None:
        result.reports = {
            "json": str(folder.file("inspect.json")),
            "junit": str(folder.save_text("inspect-junit.xml", junit(result))),
        }
        folder.save_json("inspect.json", result.to_dict())
        from gpuops.usecases import reports  # noqa: PLC0415 - Jinja2 and pygal only when asked

        doc = result.to_dict()
        page = reports.write_beside("fleet", folder.path, lambda: doc)
        result.report = page.to_dict()
        files = {**result.reports, **page.files}
    if request.metrics_file:
        files["metrics"] = request.metrics_file
    return Outcome(result, _verdict(result) or push_error, files=files)


def _check_outputs(request: InspectRequest) -> None:
    """The metrics file's folder and the Pushgateway URL, before anything is inspected."""
    if request.metrics_file:
        folder = Path(request.metrics_file).parent
        if not folder.is_dir() or not Path(request.metrics_file).name:
            raise InvalidInput(
                f"metrics file {shown(request.metrics_file)}: its folder does not exist",
                hint="node_exporter's --collector.textfile.directory, e.g. "
                "/var/lib/prometheus/node-exporter",
                field="metrics_file",
            )
        if not request.metrics_file.endswith(".prom"):
            raise InvalidInput(
                f"metrics file {shown(request.metrics_file)} does not end in .prom: "
                "node_exporter's textfile collector reads only *.prom files",
                field="metrics_file",
            )
    if request.pushgateway:
        from gpuops.adapters import pushgateway  # noqa: PLC0415

        parse_http(request.pushgateway, "pushgateway", userinfo=True)
        pushgateway.env_auth(os.environ, request.pushgateway)  # before anything is inspected


def _quarantine_cluster(request: InspectRequest) -> KubeClient | None:
    """With --quarantine: the cluster, its state namespace checked (exit 2 when missing)."""
    if request.quarantine is None:
        return None
    kube = (request.cluster or Cluster()).connect()
    try:
        kube.ensure_namespace(request.quarantine.namespace)
    except BaseException:
        kube.close()
        raise
    return kube


def _quarantine(
    kube: KubeClient,
    policy: QuarantinePolicy,
    inv: inventory.Inventory,
    result: InspectResult,
) -> QuarantineReport:
    statuses = {
        h.host: (h.status, nodelabels.unhealthy_reason(h) if h.status == CRITICAL else "")
        for h in result.hosts
    }
    return quarantine.apply(kube, inv, statuses, policy, common.say)


def _metrics(request: InspectRequest, result: InspectResult) -> GpuOpsError | None:
    """The metrics file (through the writer: replaced by a rename, as the textfile collector
    wants) and the push; a push that fails is returned (the run's problem), not raised."""
    if not (request.metrics_file or request.pushgateway):
        return None
    doc = result.to_dict()
    now = time.time()
    if request.metrics_file:
        text = healthmetrics.exposition(doc, now=now, extra={"environment": result.environment})
        fsio.write_file(request.metrics_file, text, option="metrics_file")
        result.metrics["file"] = request.metrics_file
    if request.pushgateway:
        from gpuops.adapters import pushgateway  # noqa: PLC0415

        grouping = {"environment": result.environment, "scope": request.limit or "all"}
        try:
            pushed = pushgateway.push(
                request.pushgateway,
                PUSH_JOB,
                grouping,
                healthmetrics.exposition(doc, now=now),
                auth=pushgateway.env_auth(os.environ, request.pushgateway),
            )
        except GpuOpsError as exc:
            result.metrics["pushgateway_error"] = exc.message
            common.say(f"[gpuops] metrics not pushed: {exc.message}")
            return exc
        result.metrics["pushgateway"] = pushgateway.group_url(pushed.url, PUSH_JOB, grouping)
    return None


def _verdict(result: InspectResult) -> GpuOpsError | None:
    """Critical findings: a refused gate; else hosts not inspected: unreachable. An open
    quarantine breaker is said first (it needs a person)."""
    q = result.quarantine.to_dict() if result.quarantine is not None else None
    if q is not None and q["breakers_open"]:  # open until a person resets it: never green
        held = (
            f"{len(q['held'])} critical host(s) not quarantined: {', '.join(q['held'])}"
            if q["held"]
            else "automatic quarantine is off for it"
        )
        return GateRefused(
            f"quarantine circuit breaker open for class(es) {', '.join(q['breakers_open'])}: "
            + held,
            hint="find what the class's hosts have in common (driver, rack, monitoring); then "
            "gpuops nodes quarantine-reset --class CLASS",
        )
    if result.critical:
        quarantined = f" (quarantined: {', '.join(q['quarantined'])})" if q else ""
        return GateRefused(
            f"critical findings on {len(result.critical)} host(s): {', '.join(result.critical)}"
            + quarantined,
            hint="drain and repair them (see the findings); their Xid actions say what helps",
        )
    if result.unreachable:
        return Unreachable(
            f"{len(result.unreachable)} host(s) could not be inspected: "
            f"{', '.join(result.unreachable)}",
            hint="check their management network and ssh",
        )
    return None


def fingerprint(h: HostHealth) -> str:
    checks = sorted({f"{f.check}@{f.gpu}" for f in h.findings if f.severity == CRITICAL})
    return hashlib.sha256(f"{h.host}|{'|'.join(checks)}".encode()).hexdigest()[:16]


def _alert(outcome: InspectResult, request: InspectRequest, state: dict[str, Any]) -> list[Alert]:
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
    if outcome.quarantine is not None:
        alerts += _breaker_alerts(outcome, outcome.quarantine, request)
    return alerts


def _breaker_alerts(
    outcome: InspectResult, report: QuarantineReport, request: InspectRequest
) -> list[Alert]:
    """The breaker alerts instead of quarantining: one message per class when it opens."""
    alerts = []
    for klass in report.plan.tripped:
        breaker = report.plan.state.breakers[klass]
        fp = hashlib.sha256(f"breaker|{klass}|{breaker.since}".encode()).hexdigest()[:16]
        payload = {
            "event": "gpu-quarantine-breaker",
            "text": f"gpuops nodes inspect: quarantine circuit breaker of class {klass} opened: "
            f"{breaker.reason}; nodes not quarantined: {', '.join(breaker.nodes)}",
            "class": klass,
            "nodes": list(breaker.nodes),
            "environment": outcome.environment,
            "fingerprint": fp,
            "link": request.link or "",
        }
        delivery = webhook.post(request.webhook_url_env, payload)
        alerts.append(Alert(f"class:{klass}", fp, delivery.status, delivery.detail))
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


def _save_state(path: str, outcome: InspectResult) -> None:
    sent = {a.fingerprint: a.host for a in outcome.alerts if a.status in ("sent", "suppressed")}
    fsio.write_json_file(path, {"open": sent}, option="alert_state")


def junit(outcome: InspectResult) -> str:
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
