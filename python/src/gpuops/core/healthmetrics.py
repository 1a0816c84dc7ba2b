"""The findings of ``gpuops nodes inspect`` as Prometheus metrics, in the text exposition
format (version 0.0.4): the same text for node_exporter's textfile collector
(``--metrics-file``) and for a Pushgateway (``--pushgateway``). Pure: the result document in,
the text out.

Series (labels ``host``, ``group`` per host; ``environment`` is added by the Pushgateway
grouping key or, in a textfile, on every series):

* ``gpuops_node_health_status{host,group}``: 0 ok, 1 warning, 2 critical, 3 unreachable;
* ``gpuops_node_findings{host,group,severity}``: findings per severity (0 too);
* ``gpuops_node_quarantined{host,group}``: 1 while quarantined by gpuops (with --quarantine);
* ``gpuops_quarantine_breaker_open{class}``: 1 while a class's circuit breaker is open;
* ``gpuops_inspect_hosts{status}``: hosts per status;
* ``gpuops_inspect_last_run_timestamp_seconds`` and ``gpuops_inspect_duration_seconds``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

STATUS_VALUES = {"ok": 0, "warning": 1, "critical": 2, "unreachable": 3}
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape(value: str) -> str:
    """A label value as the exposition format quotes it: backslash, quote, newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{escape(v)}"' for k, v in labels.items()) + "}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _family(
    name: str, help_text: str, samples: Iterable[tuple[Mapping[str, str], float]]
) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
    lines += [f"{name}{_labels(labels)} {_number(v)}" for labels, v in samples]
    return lines


def exposition(
    doc: Mapping[str, Any],
    *,
    now: float,
    extra: Mapping[str, str] | None = None,
) -> str:
    """The metrics of one inspection result (``InspectDocument``); ``extra`` labels (e.g.
    ``environment`` in a textfile) go on every series."""
    base = dict(extra or {})
    hosts: Sequence[Mapping[str, Any]] = doc.get("hosts") or []
    quarantine = doc.get("quarantine") or {}
    quarantined = set(quarantine.get("quarantined") or ())

    def host_labels(h: Mapping[str, Any]) -> dict[str, str]:
        return {**base, "host": str(h["host"]), "group": str(h.get("group", ""))}

    lines: list[str] = []
    lines += _family(
        "gpuops_node_health_status",
        "Health of a GPU node at the last inspection: 0 ok, 1 warning, 2 critical, 3 unreachable.",
        ((host_labels(h), STATUS_VALUES.get(str(h["status"]), 3)) for h in hosts),
    )
    findings: list[tuple[Mapping[str, str], float]] = []
    for h in hosts:
        for severity in ("warning", "critical"):
            n = sum(1 for f in h.get("findings") or () if f.get("severity") == severity)
            findings.append(({**host_labels(h), "severity": severity}, n))
    lines += _family(
        "gpuops_node_findings", "Findings of the last inspection per severity.", findings
    )
    if quarantine:
        lines += _family(
            "gpuops_node_quarantined",
            "1 while gpuops keeps the node quarantined (taint gpuops.io/gpu-unhealthy).",
            ((host_labels(h), 1 if h["host"] in quarantined else 0) for h in hosts),
        )
        breakers = quarantine.get("breakers_open") or {}
        classes = sorted({str(h.get("group", "")) for h in hosts} | set(breakers))
        lines += _family(
            "gpuops_quarantine_breaker_open",
            "1 while the class's quarantine circuit breaker is open (needs a reset).",
            (({**base, "class": c}, 1 if c in breakers else 0) for c in classes),
        )
    summary = doc.get("summary") or {}
    lines += _family(
        "gpuops_inspect_hosts",
        "Hosts per status at the last inspection.",
        (({**base, "status": s}, float(summary.get(s, 0))) for s in STATUS_VALUES),
    )
    lines += _family(
        "gpuops_inspect_last_run_timestamp_seconds",
        "When the last inspection ended (Unix time).",
        [(base, round(now, 3))],
    )
    total = (doc.get("timings_s") or {}).get("total", 0.0)
    lines += _family(
        "gpuops_inspect_duration_seconds",
        "How long the last inspection took.",
        [(base, float(total))],
    )
    return "\n".join(lines) + "\n"
