"""Inspection parsing and judging (core.gpuparse, core.gpuhealth, core.xid) on the shapes the
real tools print: the lab's nvidia-smi (itself checked against real samples in test_nvsmi),
real Xid lines (leptonai/gpud's dmesg samples), /proc/net/dev and df -P."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gpuops.core import gpuhealth, gpuparse, xid
from gpuops.core.gpuhealth import CRITICAL, OK, WARNING, Thresholds
from gpuops.core.gpuhealth import gpu as gpuhealth_gpu
from gpuops.core.gpuhealth import host as gpuhealth_host
from gpuops.errors import InvalidInput
from gpuops_lab import gpus, nvsmi
from gpuops_lab.hoststate import xid_line
from gpuops_lab.spec import GpuHost

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = (ROOT / "ansible/roles/gpu_inspect/files/gpu-inspect.sh").read_text()
A100 = GpuHost("gpu-a100-01", "a100-80g", "535.161.08", "gpu_a100")
FAULTY = GpuHost("gpu-a100-03", "a100-80g", "535.161.08", "gpu_a100", faulty=True)
L40S = GpuHost("gpu-l40s-01", "l40s", "550.90.07", "gpu_l40s")
NETDEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0: 9120334   60123    {rx}    {drop}    0     0          0         0  3303223   30123    0    0    0     0       0          0
"""  # noqa: E501 - /proc/net/dev as the kernel writes it
DF = """Filesystem     1024-blocks      Used Available Capacity Mounted on
/dev/sda1        100000000  {used}  {avail}      70% /
"""
#: leptonai/gpud README: dmesg lines with Xid 13 and 109 (bus cb:00)
GPUD_LINES = [
    "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', "
    "name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction "
    "Parameter",
    "[Fri Aug 30 11:43:14 2024] NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, "
    "name=pt_main_thread, Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005",
]
#: NVIDIA/NVSentinel#155: a GPU fallen off the bus without an Xid, over three lines
FALLEN = [
    "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0",
    "               NVRM: (PCI ID: 10de:26b5) installed in this system has",
    "               NVRM: fallen off the bus and is not responding to commands.",
]


def query_fields() -> str:
    return ",".join(
        part
        for line in SCRIPT.splitlines()
        if (m := re.match(r"^Q=(?:\$Q,)?(\S+)$", line))
        for part in [m.group(1)]
    )


def smi(state: dict[str, Any] | None, *args: str) -> tuple[str, int]:
    return nvsmi.run(list(args), state, now=0.0)


def output(
    state: dict[str, Any] | None,
    kernel: list[str] = (),  # type: ignore[assignment]
    *,
    rx_errors: int = 0,
    free_pct: int = 30,
) -> str:
    """What gpu-inspect.sh prints for a host in ``state`` (lab nvidia-smi for the GPU parts)."""
    sections = {
        "gpus": smi(state, f"--query-gpu={query_fields()}", "--format=csv,nounits"),
        "nvlink": smi(state, "nvlink", "-s"),
        "nvlink_errors": smi(state, "nvlink", "-e"),
        "version": smi(state, "--version"),
        "kernel": ("".join(line + "\n" for line in kernel), 0),
        "netdev": (NETDEV.format(rx=rx_errors, drop=0), 0),
        "disk": (DF.format(used=100000000 - free_pct * 1000000, avail=free_pct * 1000000), 0),
    }
    text = "".join(f"@@gpuops {n} rc={rc}\n{body}" for n, (body, rc) in sections.items())
    return text + "@@gpuops end\n"


def evaluate(text: str, expected: int = 8, t: Thresholds | None = None) -> gpuhealth.HostHealth:
    return gpuhealth.evaluate("h", gpuparse.split_sections(text), expected, t or Thresholds())


def test_healthy_host_reads_every_gpu_and_has_no_finding() -> None:
    h = evaluate(output(gpus.host_state(A100)))
    assert h.status == OK and h.findings == []
    assert (h.driver, h.cuda, len(h.gpus)) == ("535.161.08", "12.2", 8)
    g = h.gpus[0]
    assert g["name"] == "NVIDIA A100-SXM4-80GB" and g["memory_total_mib"] == 81920
    assert g["nvlink"]["links"] == 12 and g["nvlink"]["inactive"] == []
    assert g["fan_pct"] is None  # SXM cards: [N/A]
    assert h.nics == [
        {"name": "eth0", "rx_errors": 0, "rx_dropped": 0, "tx_errors": 0, "tx_dropped": 0}
    ]
    assert h.disks[0]["mount"] == "/" and h.disks[0]["free_pct"] == 30.0


def test_faulty_card_is_critical_on_that_gpu_only() -> None:
    h = evaluate(output(gpus.host_state(FAULTY)))
    assert h.status == CRITICAL
    assert {f.gpu for f in h.findings} == {5}
    checks = {f.check: f.severity for f in h.findings}
    assert checks["temperature"] == CRITICAL and checks["ecc-uncorrected"] == CRITICAL
    assert checks["remapped-rows-pending"] == WARNING and checks["throttled"] == WARNING
    assert h.gpus[5]["worst"] == CRITICAL and h.gpus[4]["worst"] == OK


def test_thresholds_per_group_change_the_verdict() -> None:
    lenient = Thresholds.from_mapping(
        {
            "temperature_warning_c": 95,
            "temperature_critical_c": 99,
            "ecc_uncorrected_volatile_critical": 10,
            "ecc_uncorrected_aggregate_warning": 10,
            "remapped_rows_uncorrectable_warning": 10,
        },
        "test",
    )
    h = evaluate(output(gpus.host_state(FAULTY)), t=lenient)
    assert h.status == WARNING  # the pending remap and the throttling remain
    assert {f.check for f in h.findings} == {"remapped-rows-pending", "throttled"}


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"temperature_warn": 80}, "unknown threshold(s) temperature_warn"),
        ({"temperature_warning_c": "80"}, "must be a whole number"),
        ({"temperature_warning_c": True}, "must be a whole number"),
        ({"temperature_warning_c": 95}, "temperature_critical_c is below"),
        ({"xid_ignore": ["13"]}, "xid_ignore must be a list of Xid numbers"),
        ([1, 2], "must be a mapping"),
    ],
)
def test_bad_thresholds_are_input_errors_naming_the_host(values: Any, says: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(says)) as err:
        Thresholds.from_mapping(values, "inventory host gpu-l40s-01")
    assert err.value.message.startswith("inventory host gpu-l40s-01")


def test_xid_is_tied_to_its_gpu_with_meaning_and_action() -> None:
    state = gpus.host_state(A100)
    line = "[ 1234.500000] " + xid_line(
        state["gpus"][3]["pci_bus_id"],
        48,
        "An uncorrectable double bit error (DBE) has been detected",
    )
    h = evaluate(output(state, [line]))
    assert h.status == CRITICAL
    (f,) = h.findings
    assert (f.check, f.gpu, f.value) == ("xid-48", 3, 48)
    assert "Double-bit ECC error" in f.message and "reset-gpu" in f.message
    assert h.gpus[3]["xids"][0]["needs_reset"] is True
    assert h.xids[0]["bus"] == "0000:4e:00"


def test_real_xid_lines_parse() -> None:
    events = xid.parse(GPUD_LINES + FALLEN)
    assert [(e.xid, e.bus) for e in events] == [
        (13, "0000:cb:00"),
        (109, "0000:cb:00"),
        (79, "0000:b3:00"),
    ]
    assert events[0].detail.startswith("Graphics SM Warp Exception")
    assert events[1].detail.startswith("Ch 00000008, errorString CTX SWITCH TIMEOUT")
    assert xid.info(13).action == xid.NONE and xid.info(79).severity == xid.CRITICAL
    assert xid.info(999).name == "Xid 999" and xid.info(999).severity == xid.WARNING


def test_ignored_xids_make_no_finding() -> None:
    state = gpus.host_state(A100)
    line = xid_line(state["gpus"][0]["pci_bus_id"], 13, "Graphics SM Warp Exception")
    assert evaluate(output(state, [line])).status == WARNING
    quiet = Thresholds.from_mapping({"xid_ignore": [13]}, "test")
    assert evaluate(output(state, [line]), t=quiet).status == OK


def test_nvidia_smi_failures_are_classified() -> None:
    pending = {**gpus.host_state(A100), "driver": "550.90.07", "loaded_driver": "535.161.08"}
    h = evaluate(output(pending))
    assert h.nvidia_smi["failure"] == "reboot-pending" and h.nvidia_smi["rc"] == 18
    assert "Driver/library version mismatch" in h.findings[0].message
    assert h.gpus == [] and h.status == CRITICAL
    h = evaluate(output(None))
    assert h.nvidia_smi["failure"] == "driver-not-loaded" and h.status == CRITICAL
    assert [f.check for f in h.findings] == ["driver-not-loaded"]  # no "gpu missing" on top


def test_lost_gpu_and_missing_gpu() -> None:
    state = gpus.host_state(A100)
    state["gpus"][2]["lost"] = True
    h = evaluate(output(state))
    assert h.nvidia_smi["failure"] == "gpu-lost"
    lost = [g for g in h.gpus if g["lost"]]
    assert len(lost) == 1 and lost[0]["bus_id"] == "0000:47:00.0"
    assert [f.check for f in h.findings] == ["gpu-lost"]
    state = gpus.host_state(A100)
    del state["gpus"][7]
    h = evaluate(output(state))
    assert [(f.check, f.value, f.limit) for f in h.findings] == [("gpu-missing", 7, 8)]


def test_nvlink_inactive_is_critical_and_errors_warn() -> None:
    state = gpus.host_state(A100)
    state["gpus"][1]["nvlink_inactive"] = [3, 5]
    state["gpus"][6]["nvlink_errors"] = {"2": {"replay": 0, "recovery": 2, "crc": 17}}
    h = evaluate(output(state))
    checks = {(f.check, f.gpu, f.severity) for f in h.findings}
    assert checks == {("nvlink-inactive", 1, CRITICAL), ("nvlink-errors", 6, WARNING)}
    assert h.gpus[1]["nvlink"]["inactive"] == [3, 5]
    l40s = evaluate(output(gpus.host_state(L40S)))
    assert l40s.status == OK and l40s.gpus[0]["nvlink"]["supported"] is False


def test_nic_errors_and_disk_free() -> None:
    h = evaluate(output(gpus.host_state(A100), rx_errors=5000, free_pct=10))
    assert {(f.check, f.severity) for f in h.findings} == {
        ("nic-errors", WARNING),
        ("disk-free", WARNING),
    }
    h = evaluate(output(gpus.host_state(A100), free_pct=3))
    assert [(f.check, f.severity, f.value) for f in h.findings] == [("disk-free", CRITICAL, 3.0)]


def test_truncated_output_is_a_parse_error() -> None:
    text = output(gpus.host_state(A100))
    with pytest.raises(gpuparse.ParseError, match="no end marker"):
        gpuparse.split_sections(text.replace("@@gpuops end\n", ""))
    with pytest.raises(gpuparse.ParseError, match="sections nvlink, nvlink_errors, version"):
        gpuparse.split_sections("@@gpuops gpus rc=0\n@@gpuops end\n")


def test_bus_key_matches_the_kernel_log_form() -> None:
    assert xid.bus_key("00000000:CB:00.0") == "0000:cb:00"
    assert xid.bus_key("0000:b3:00.0") == "0000:b3:00"


def _with_disk(text: str, disk: str) -> str:
    """``text`` with its disk section's body replaced by ``disk``."""
    head, _, rest = text.partition("@@gpuops disk rc=0\n")
    _, _, tail = rest.partition("@@gpuops end\n")
    return f"{head}@@gpuops disk rc=1\n{disk}@@gpuops end\n{tail}"


def test_a_mount_the_host_lacks_is_a_finding_not_a_silent_skip() -> None:
    """The script says which mounts it could not check; before, df's complaint on stderr was
    skipped as an unparsable line and the mount silently left out."""
    disk = DF.format(used=70000000, avail=30000000)
    disk += "@@unchecked missing /data/models x\n@@unchecked df-failed /mnt/nfs\n"
    h = evaluate(_with_disk(output(gpus.host_state(A100)), disk))
    assert [d["mount"] for d in h.disks] == ["/"]
    unchecked = [f for f in h.findings if f.check == "disk-unchecked"]
    assert [(f.severity, f.value) for f in unchecked] == [
        (WARNING, "/data/models x"),
        (WARNING, "/mnt/nfs"),
    ]
    assert "/data/models x: does not exist on the host" in unchecked[0].message
    assert h.status == WARNING
    assert "disk-unchecked" in gpuhealth.HOST_ONLY_CHECKS


def test_the_script_reports_a_mount_that_does_not_exist(tmp_path: Path) -> None:
    """The disk section of the shipped script itself, run here on a missing and a real path."""
    import subprocess

    script = tmp_path / "gpu-inspect.sh"
    script.write_text(SCRIPT)
    done = subprocess.run(
        ["sh", str(script), "5", "/", str(tmp_path / "no such mount")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    section = gpuparse.split_sections(done.stdout).get("disk")
    assert [d["mount"] for d in gpuparse.parse_disk(section)] == ["/"]
    assert f"@@unchecked missing {tmp_path / 'no such mount'}" in section.lines


def test_each_check_is_a_small_function_returning_its_findings() -> None:
    """The GPU and host checks of the package (core/gpuhealth/gpu.py, host.py) each return
    findings; a card with a fan, retired pages and a pending retirement (no lab GPU has a fan
    or retires pages) shows the checks the lab does not reach."""
    t = Thresholds()
    quiet = gpuhealth_gpu.Card({"index": 0}, {"inactive": [], "errors": {}}, [])
    assert all(check(quiet, t) == [] for check in gpuhealth_gpu.GPU_CHECKS)
    worn = gpuhealth_gpu.Card(
        {
            "index": 3,
            "fan.speed": 97,
            "retired_pages.double_bit.count": 2,
            "retired_pages.pending": True,
        },
        {"inactive": [], "errors": {}},
        [],
    )
    readings, found = gpuhealth_gpu.check_gpu(worn, t)
    assert [(f.check, f.severity, f.gpu, f.value, f.limit) for f in found] == [
        ("retired-pages", WARNING, 3, 2, 0),
        ("retired-pages-pending", WARNING, 3, True, False),
        ("fan", WARNING, 3, 97, 95),
    ]
    assert found[2].message == "GPU 3: fan at 97%"
    assert readings["worst"] == WARNING
    assert readings["findings"] == ["fan", "retired-pages", "retired-pages-pending"]
    h = evaluate(output(gpus.host_state(A100)))
    seen = gpuhealth_host.Inspection(0, None, "", [], [], 0, [], h.nics, h.disks, [])
    assert all(check(seen, t) == [] for check in gpuhealth_host.HOST_CHECKS)


def test_one_severity_ranking() -> None:
    assert gpuhealth.RANK == {OK: 0, WARNING: 1, CRITICAL: 2}
    assert gpuhealth.worst([]) == OK
    assert gpuhealth.worst([WARNING, OK]) == WARNING
    assert gpuhealth.worst([OK, CRITICAL, WARNING]) == CRITICAL
    package = Path(gpuhealth.__file__).parent
    ranked = [p.name for p in sorted(package.glob("*.py")) if "RANK = " in p.read_text()]
    assert ranked == ["model.py"]
