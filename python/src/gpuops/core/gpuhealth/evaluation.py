"""The evaluation of one node: its parsed inspection through every check, into a
:class:`~gpuops.core.gpuhealth.model.HostHealth` whose status is its worst finding. Pure."""

from __future__ import annotations

from gpuops.core import gpuparse
from gpuops.core.gpuhealth import gpu, host
from gpuops.core.gpuhealth.model import (
    CRITICAL,
    OK,
    UNREACHABLE,
    Finding,
    HostHealth,
    Thresholds,
    worst,
)


def unreachable(host_name: str, message: str, expected: int, t: Thresholds) -> HostHealth:
    """The health of a node that could not be inspected at all."""
    return HostHealth(
        host=host_name,
        status=UNREACHABLE,
        findings=[Finding("unreachable", CRITICAL, message)],
        gpus_expected=expected,
        nvidia_smi={"rc": None, "failure": None, "message": ""},
        thresholds=t,
    )


def evaluate(host_name: str, raw: gpuparse.RawHost, expected: int, t: Thresholds) -> HostHealth:
    """Readings and findings of one node from its parsed inspection output: nvidia-smi's
    failure first, then each GPU's findings, then the rest of the host's."""
    smi = raw.get("gpus")
    gpus, lost = gpuparse.parse_gpus(smi)
    failure = gpuparse.classify_smi(smi, lost)
    version = gpuparse.parse_version(raw.get("version"))
    nvlinks = gpuparse.parse_nvlink(raw.get("nvlink"), raw.get("nvlink_errors"))
    events = [e for e in gpuparse.parse_kernel(raw.get("kernel")) if e.xid not in t.xid_ignore]
    seen = host.Inspection(
        smi_rc=smi.rc,
        failure=failure,
        smi_message=" / ".join(line.strip() for line in smi.lines[:2]) if failure else "",
        gpus=gpus,
        lost=lost,
        expected=expected,
        xids=events,
        nics=gpuparse.parse_netdev(raw.get("netdev")),
        disks=gpuparse.parse_disk(raw.get("disk")),
        unchecked=gpuparse.parse_unchecked_mounts(raw.get("disk")),
    )
    health = HostHealth(
        host=host_name,
        status=OK,
        driver=version.get("driver") or next((g.get("driver_version") for g in gpus), None),
        cuda=version.get("cuda"),
        gpus_expected=expected,
        nvidia_smi={"rc": smi.rc, "failure": failure, "message": seen.smi_message},
        xids=[e.to_dict() for e in events],
        nics=seen.nics,
        disks=seen.disks,
        thresholds=t,
    )
    health.findings.extend(host.nvidia_smi_failed(seen, t))
    for fields in gpus:
        readings, found = gpu.check_gpu(gpu.card(fields, nvlinks, events), t)
        health.gpus.append(readings)
        health.findings.extend(found)
    health.gpus.extend(host.lost_readings(item, events) for item in lost)
    for check in host.HOST_CHECKS:
        health.findings.extend(check(seen, t))
    health.status = worst(f.severity for f in health.findings)
    return health
