"""The lab's ``nvidia-smi``: prints what the real tool prints, from a host's GPU state file.

Test data, not a mock of our code: every lab host gets this file as ``/usr/bin/nvidia-smi``
(run by the host's ``/usr/bin/python3``), so it imports nothing but the standard library.
It reads ``/etc/nvidia-lab/gpus.json`` (written by :mod:`gpuops_lab.gpus`, changed by the lab
driver installer) and ``/etc/nvidia-lab/loaded-modules`` (the lab's stand-in for
``/proc/modules``). Output shapes follow ``shared/docs/NVIDIA_SMI.md`` (verbatim samples from
public logs and utkuozdemir/nvidia_gpu_exporter's captures): 535 vs 550+ table widths, CSV
headers with canonical names and units, ``[N/A]``, the real error texts and exit codes.

One module on purpose: its text is the host's whole ``nvidia-smi`` script
(:func:`gpuops_lab.fleetfiles.nvidia_smi_script` copies this one file).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STATE_FILE = "/etc/nvidia-lab/gpus.json"
MODULES_FILE = "/etc/nvidia-lab/loaded-modules"
#: version of the loaded nvidia kernel module when it differs from the installed driver
#: (written by the lab installer on an upgrade, removed at boot)
MODULE_VERSION_FILE = "/etc/nvidia-lab/module-version"

NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n\n"
)
BAD_ARGS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n"
NO_DEVICES = "No devices were found\n"
MISMATCH = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: {}\n"
#: a card fallen off the bus (NVIDIA_SMI.md; newer drivers: no space after "GPU")
LOST = (
    "Unable to determine the device handle for GPU{}: GPU is lost. "
    "Reboot the system to recover this GPU\n"
)
EXIT_LOST = 15
NA = "[N/A]"

Card = dict[str, Any]
Getter = Callable[[Card, "Ctx"], Any]


#: driver branch -> the CUDA version nvidia-smi reports (NVIDIA_SMI.md; CUDA release notes)
_CUDA = "590 13.1 580 13.0 575 12.9 570 12.8 565 12.7 560 12.6 555 12.5 550 12.4 545 12.3 535 12.2"


def cuda_version(driver: str) -> str:
    """CUDA version the driver branch reports (535->12.2 ... 580->13.0, 590->13.1)."""
    branch = int(driver.split(".", 1)[0])
    pairs = _CUDA.split()
    for floor, cuda in zip(pairs[::2], pairs[1::2], strict=True):
        if branch >= int(floor):
            return cuda
    return "12.1" if branch >= 530 else "12.0"


class Ctx:
    def __init__(self, state: dict[str, Any], now: float) -> None:
        self.state = state
        self.driver = str(state["driver"])
        self.branch = int(self.driver.split(".")[0])
        self.cards: list[Card] = list(state["gpus"])
        self.now = now

    def lost(self, i: int) -> str:
        """The error line for a lost card (bus id as the driver's messages write it)."""
        return LOST.format(self.cards[i]["pci_bus_id"][4:])


def _w(value: float) -> str:
    return f"{value:.2f}"


def _reason(bit: int) -> Getter:
    return lambda c, _x: "Active" if int(c["event_reasons"]) & bit else "Not Active"


def _ecc(kind: str) -> Getter:
    return lambda c, _x: c["ecc"][kind]


def _remap(key: str) -> Getter:
    return lambda c, _x: c["remapped"][key]


def _yes(value: Any) -> str:
    return "Yes" if value else "No"


def _timestamp(_c: Card, x: Ctx) -> str:
    ms = int((x.now % 1) * 1000)
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(x.now)) + f".{ms:03d}"


#: canonical field -> (unit shown in brackets in the header and after values, value getter)
FIELDS: dict[str, tuple[str | None, Getter]] = {
    "timestamp": (None, _timestamp),
    "driver_version": (None, lambda _c, x: x.driver),
    "count": (None, lambda _c, x: len(x.cards)),
    "name": (None, lambda c, _x: c["name"]),
    "serial": (None, lambda c, _x: c["serial"]),
    "uuid": (None, lambda c, _x: c["uuid"]),
    "pci.bus_id": (None, lambda c, _x: c["pci_bus_id"]),
    "pci.domain": (None, lambda c, _x: "0x" + c["pci_bus_id"][4:8]),
    "pci.bus": (None, lambda c, _x: "0x" + c["pci_bus_id"][9:11]),
    "pci.device": (None, lambda c, _x: "0x" + c["pci_bus_id"][12:14]),
    "pci.device_id": (None, lambda c, _x: c["pci_device_id"]),
    "pcie.link.gen.current": (None, lambda c, _x: c["pcie_gen"]),
    "pcie.link.gen.max": (None, lambda c, _x: c["pcie_gen"]),
    "pcie.link.width.current": (None, lambda _c, _x: 16),
    "pcie.link.width.max": (None, lambda _c, _x: 16),
    "index": (None, lambda c, _x: c["index"]),
    "display_mode": (None, lambda _c, _x: "Disabled"),
    "display_active": (None, lambda _c, _x: "Disabled"),
    "persistence_mode": (None, lambda c, _x: "Enabled" if c["persistence"] else "Disabled"),
    "vbios_version": (None, lambda c, _x: c["vbios"]),
    "fan.speed": ("%", lambda c, _x: NA if c["fan"] is None else c["fan"]),
    "pstate": (None, lambda c, _x: c["pstate"]),
    "clocks_event_reasons.supported": (None, lambda _c, _x: "0x00000000000001FF"),
    "clocks_event_reasons.active": (None, lambda c, _x: f"0x{int(c['event_reasons']):016X}"),
    "clocks_event_reasons.gpu_idle": (None, _reason(0x1)),
    "clocks_event_reasons.applications_clocks_setting": (None, _reason(0x2)),
    "clocks_event_reasons.sw_power_cap": (None, _reason(0x4)),
    "clocks_event_reasons.hw_slowdown": (None, _reason(0x8)),
    "clocks_event_reasons.sync_boost": (None, _reason(0x10)),
    "clocks_event_reasons.sw_thermal_slowdown": (None, _reason(0x20)),
    "clocks_event_reasons.hw_thermal_slowdown": (None, _reason(0x40)),
    "clocks_event_reasons.hw_power_brake_slowdown": (None, _reason(0x80)),
    "memory.total": ("MiB", lambda c, _x: c["memory_total"]),
    "memory.reserved": ("MiB", lambda c, _x: c["memory_reserved"]),
    "memory.used": ("MiB", lambda c, _x: c["memory_used"]),
    "memory.free": (
        "MiB",
        lambda c, _x: c["memory_total"] - c["memory_reserved"] - c["memory_used"],
    ),
    "compute_mode": (None, lambda _c, _x: "Default"),
    "compute_cap": (None, lambda c, _x: c["compute_cap"]),
    "utilization.gpu": ("%", lambda c, _x: c["utilization"]),
    "utilization.memory": ("%", lambda c, _x: c["utilization_memory"]),
    "ecc.mode.current": (None, lambda _c, _x: "Enabled"),
    "ecc.mode.pending": (None, lambda _c, _x: "Enabled"),
    "ecc.errors.corrected.volatile.dram": (None, _ecc("corrected_volatile")),
    "ecc.errors.corrected.volatile.total": (None, _ecc("corrected_volatile")),
    "ecc.errors.corrected.aggregate.dram": (None, _ecc("corrected_aggregate")),
    "ecc.errors.corrected.aggregate.total": (None, _ecc("corrected_aggregate")),
    "ecc.errors.uncorrected.volatile.dram": (None, _ecc("uncorrected_volatile")),
    "ecc.errors.uncorrected.volatile.total": (None, _ecc("uncorrected_volatile")),
    "ecc.errors.uncorrected.aggregate.dram": (None, _ecc("uncorrected_aggregate")),
    "ecc.errors.uncorrected.aggregate.total": (None, _ecc("uncorrected_aggregate")),
    # A100, Hopper and Ada remap rows instead of retiring pages: page retirement is [N/A]
    "retired_pages.single_bit_ecc.count": (None, lambda _c, _x: NA),
    "retired_pages.double_bit.count": (None, lambda _c, _x: NA),
    "retired_pages.pending": (None, lambda _c, _x: NA),
    "remapped_rows.correctable": (None, _remap("correctable")),
    "remapped_rows.uncorrectable": (None, _remap("uncorrectable")),
    "remapped_rows.pending": (None, lambda c, _x: _yes(c["remapped"]["pending"])),
    "remapped_rows.failure": (None, lambda c, _x: _yes(c["remapped"]["failure"])),
    "temperature.gpu": (None, lambda c, _x: c["temperature"]),
    # L40S prints a bare N/A here (sample in NVIDIA_SMI.md), not [N/A]
    "temperature.memory": (
        None,
        lambda c, _x: "N/A" if c["temperature_memory"] is None else c["temperature_memory"],
    ),
    "power.management": (None, lambda _c, _x: "Enabled"),
    "power.draw": ("W", lambda c, _x: _w(c["power_draw"])),
    "power.draw.average": ("W", lambda c, _x: _w(c["power_draw"])),
    "power.draw.instant": ("W", lambda c, _x: _w(c["power_draw"])),
    "power.limit": ("W", lambda c, _x: _w(c["power_limit"])),
    "enforced.power.limit": ("W", lambda c, _x: _w(c["power_limit"])),
    "power.default_limit": ("W", lambda c, _x: _w(c["power_limit"])),
    "power.min_limit": ("W", lambda c, _x: _w(c["power_min"])),
    "power.max_limit": ("W", lambda c, _x: _w(c["power_limit"])),
    "clocks.current.graphics": ("MHz", lambda c, _x: c["clocks"]["sm"]),
    "clocks.current.sm": ("MHz", lambda c, _x: c["clocks"]["sm"]),
    "clocks.current.memory": ("MHz", lambda c, _x: c["clocks"]["mem"]),
    "clocks.current.video": ("MHz", lambda c, _x: c["clocks"]["video"]),
    "clocks.max.graphics": ("MHz", lambda c, _x: c["clocks"]["max_sm"]),
    "clocks.max.sm": ("MHz", lambda c, _x: c["clocks"]["max_sm"]),
    "clocks.max.memory": ("MHz", lambda c, _x: c["clocks"]["mem"]),
    "mig.mode.current": (None, lambda c, _x: NA if c["mig"] is None else c["mig"]),
    "mig.mode.pending": (None, lambda c, _x: NA if c["mig"] is None else c["mig"]),
}

#: aliases accepted by --query-gpu (``nvidia-smi --help-query-gpu``); output uses the canonical
ALIASES: dict[str, str] = {
    "gpu_name": "name",
    "gpu_serial": "serial",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "retired_pages.sbe": "retired_pages.single_bit_ecc.count",
    "retired_pages.dbe": "retired_pages.double_bit.count",
    "remapped_rows.sbe": "remapped_rows.correctable",
    "remapped_rows.dbe": "remapped_rows.uncorrectable",
    "clocks.gr": "clocks.current.graphics",
    "clocks.sm": "clocks.current.sm",
    "clocks.mem": "clocks.current.memory",
    "clocks.video": "clocks.current.video",
    "clocks.max.gr": "clocks.max.graphics",
    "clocks.max.mem": "clocks.max.memory",
    "gpu.power.draw.average": "power.draw.average",
    "gpu.power.draw.instant": "power.draw.instant",
    "gpu.power.requested_limit": "power.limit",
    "gpu.power.current_limit": "enforced.power.limit",
    "gpu.power.default_limit": "power.default_limit",
    "gpu.power.min_limit": "power.min_limit",
    "gpu.power.max_limit": "power.max_limit",
}


def canonical(field: str) -> str | None:
    field = field.strip()
    if field.startswith("clocks_throttle_reasons."):  # renamed since driver 535
        field = "clocks_event_reasons." + field.split(".", 1)[1]
    field = ALIASES.get(field, field)
    return field if field in FIELDS else None


def query_gpu(ctx: Ctx, fields: list[str], fmt: list[str], ids: list[int]) -> tuple[str, int]:
    names = []
    for field in fields:
        name = canonical(field)
        if name is None:
            return f'Field "{field.strip()}" is not a valid field to query.\n\n', 2
        names.append(name)
    units = "nounits" not in fmt
    out = []
    if "noheader" not in fmt:
        out.append(", ".join(n + (f" [{FIELDS[n][0]}]" if FIELDS[n][0] else "") for n in names))
    for i in ids:
        if ctx.cards[i].get("lost"):
            out.append(ctx.lost(i).rstrip("\n"))
            continue
        row = []
        for n in names:
            unit, get = FIELDS[n]
            value = str(get(ctx.cards[i], ctx))
            special = value.startswith("[") or value == "N/A"
            row.append(f"{value} {unit}" if unit and units and not special else value)
        out.append(", ".join(row))
    return "".join(line + "\n" for line in out), 0


def list_gpus(ctx: Ctx, ids: list[int]) -> str:
    return "".join(
        ctx.lost(i)
        if ctx.cards[i].get("lost")
        else f"GPU {i}: {ctx.cards[i]['name']} (UUID: {ctx.cards[i]['uuid']})\n"
        for i in ids
    )


def nvlink(ctx: Ctx, errors: bool, ids: list[int]) -> str:
    out = []
    for i in ids:
        card = ctx.cards[i]
        if card.get("lost"):
            out.append(ctx.lost(i))
            continue
        out.append(f"GPU {i}: {card['name']} (UUID: {card['uuid']})\n")
        if not card["nvlinks"]:
            out.append("Device does not have or support Nvlink\n")
            continue
        inactive = {int(n) for n in card.get("nvlink_inactive") or ()}
        counters = card.get("nvlink_errors") or {}
        for link in range(int(card["nvlinks"])):
            if errors:
                count = counters.get(str(link)) or {}
                for kind in ("Replay", "Recovery", "CRC"):
                    out.append(f"\t Link {link}: {kind} Errors: {count.get(kind.lower(), 0)}\n")
                out.append("\n")
            elif link in inactive:
                out.append(f"\t Link {link}: <inactive>\n")
            else:
                out.append(f"\t Link {link}: {card['nvlink_speed']}\n")
    return "".join(out)


def _kv(indent: int, key: str, value: Any = None, width: int = 42) -> str:
    label = " " * indent + key
    return f"{label.ljust(width)}: {value}\n" if value is not None else label + "\n"


def query(ctx: Ctx, displays: list[str], ids: list[int]) -> str:
    """``-q [-d ECC,PAGE_RETIREMENT,ROW_REMAPPER]`` (the ECC-related sections only)."""
    width = 55 if ctx.branch >= 590 else 42
    stamp = time.strftime("%a %b %e %H:%M:%S %Y", time.localtime(ctx.now))
    out = [
        "\n==============NVSMI LOG==============\n\n",
        _kv(0, "Timestamp", stamp, width),
        _kv(0, "Driver Version", ctx.driver, width),
        _kv(0, "CUDA Version", cuda_version(ctx.driver), width),
        "\n",
        _kv(0, "Attached GPUs", len(ctx.cards), width),
    ]
    show = {d.strip().upper() for d in displays} or {"ECC", "PAGE_RETIREMENT", "ROW_REMAPPER"}
    for n, i in enumerate(ids):
        card = ctx.cards[i]
        if card.get("lost"):
            out.append(ctx.lost(i))
            continue
        ecc, remap = card["ecc"], card["remapped"]
        out.append(("\n" if n else "") + f"GPU {card['pci_bus_id']}\n")
        if "ECC" in show:
            out += [
                _kv(4, "ECC Mode"),
                _kv(8, "Current", "Enabled", width),
                _kv(8, "Pending", "Enabled", width),
                _kv(4, "ECC Errors"),
            ]
            for scope in ("volatile", "aggregate"):
                out += [
                    _kv(8, scope.capitalize()),
                    _kv(12, "SRAM Correctable", 0, width),
                    _kv(12, "SRAM Uncorrectable", 0, width),
                    _kv(12, "DRAM Correctable", ecc[f"corrected_{scope}"], width),
                    _kv(12, "DRAM Uncorrectable", ecc[f"uncorrected_{scope}"], width),
                ]
        if "PAGE_RETIREMENT" in show:
            out += [
                _kv(4, "Retired Pages"),
                _kv(8, "Single Bit ECC", "N/A", width),
                _kv(8, "Double Bit ECC", "N/A", width),
                _kv(8, "Pending Page Blacklist", "N/A", width),
            ]
        if "ROW_REMAPPER" in show:
            out += [
                _kv(4, "Remapped Rows"),
                _kv(8, "Correctable Error", remap["correctable"], width),
                _kv(8, "Uncorrectable Error", remap["uncorrectable"], width),
                _kv(8, "Pending", _yes(remap["pending"]), width),
                _kv(8, "Remapping Failure Occurred", _yes(remap["failure"]), width),
            ]
    return "".join(out) + "\n"


def table(ctx: Ctx) -> str:
    """The default summary table; 535 and 550+ layouts differ in the middle column's width."""
    wide = ctx.branch >= 550
    mid = 24 if wide else 22
    total = 41 + mid + 22 + 4
    rule = "+" + "-" * 41 + "+" + "-" * mid + "+" + "-" * 22 + "+"
    drv = ctx.driver.ljust(15 if wide else 13)
    cuda = cuda_version(ctx.driver)
    lines = [
        time.strftime("%a %b %e %H:%M:%S %Y", time.localtime(ctx.now)) + " " * 7,
        "+" + "-" * (total - 2) + "+",
        f"| NVIDIA-SMI {ctx.driver:<23}Driver Version: {drv}CUDA Version: {cuda:<9}|",
        ("+" if ctx.branch >= 590 else "|") + rule[1:],
        "| GPU  Name                 Persistence-M | "
        + "Bus-Id".ljust(mid - 8)
        + "Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap | "
        + "Memory-Usage".rjust(mid - 2)
        + " | GPU-Util  Compute M. |",
        "|                                         | "
        + " " * (mid - 2)
        + " |               MIG M. |",
        "|" + "=" * 41 + "+" + "=" * mid + "+" + "=" * 22 + "|",
    ]
    for card in ctx.cards:
        if card.get("lost"):
            continue
        fan = "N/A" if card["fan"] is None else f"{card['fan']}%"
        usage = f"{round(card['power_draw'])}W"
        cap = f"{round(card['power_limit'])}W"
        if wide:
            power = f"{usage:>16} / {cap:>5}"
            mem = f"{card['memory_used']:>7}MiB / {card['memory_total']:>6}MiB"
        else:
            power = f"{usage:>17} / {cap:>4}"
            mem = f"{card['memory_used']:>6}MiB / {card['memory_total']:>5}MiB"
        persist = "On" if card["persistence"] else "Off"
        mig = "N/A" if card["mig"] is None else card["mig"]
        bus = f"{card['pci_bus_id']} Off".rjust(mid - 2)
        util = f"{card['utilization']}%"
        lines += [
            f"| {card['index']:>3}  {card['name']:<31}{persist:<3} | {bus} |"
            f"{card['ecc']['uncorrected_volatile']:>21} |",
            f"| {fan:>3}   {str(card['temperature']) + 'C':>3}    {card['pstate']:<2}{power} |"
            f" {mem} | {util:>7}{'Default':>13} |",
            "|" + " " * 41 + "|" + " " * mid + "|" + f"{mig:>21} |",
            rule,
        ]
    procs = "|  GPU   GI   CI        PID   Type   Process name"
    lines += [
        " " * 89,
        "+" + "-" * (total - 2) + "+",
        "| Processes:".ljust(total - 1) + "|",
        procs.ljust(total - 12) + "GPU Memory |",
        "|        ID   ID".ljust(total - 12) + "Usage      |",
        "|" + "=" * (total - 2) + "|",
        "|  No running processes found".ljust(total - 1) + "|",
        "+" + "-" * (total - 2) + "+",
    ]
    return "\n".join(lines) + "\n"


def version(ctx: Ctx) -> str:
    nvml = ".".join(ctx.driver.split(".")[:2])
    return (
        f"NVIDIA-SMI version  : {ctx.driver}\nNVML version        : {nvml}\n"
        f"DRIVER version      : {ctx.driver}\nCUDA Version        : {cuda_version(ctx.driver)}\n"
    )


#: option spellings -> the name used below; _VALUED options take a value
_FLAGS = {
    "-L": "-L",
    "--list-gpus": "-L",
    "-q": "-q",
    "--query": "-q",
    "-s": "-s",
    "--status": "-s",
    "-e": "-e",
    "--errorcounters": "-e",
    "--version": "--version",
    "nvlink": "nvlink",
}
_VALUED = {
    "--query-gpu": "--query-gpu",
    "--format": "--format",
    "-i": "-i",
    "--id": "-i",
    "-d": "-d",
    "--display": "-d",
}


def _options(argv: list[str]) -> dict[str, str] | None:
    """``--opt=value``, ``--opt value``, ``-i 0`` and flags; None when an option is unknown."""
    opts: dict[str, str] = {}
    args = list(argv)
    while args:
        arg = args.pop(0)
        key, eq, value = arg.partition("=")
        if key in _VALUED:
            if not eq:
                if not args:
                    return None
                value = args.pop(0)
            opts[_VALUED[key]] = value
        elif arg in _FLAGS:
            opts[_FLAGS[arg]] = ""
        else:
            return None
    return opts


def run(argv: list[str], state: dict[str, Any] | None, now: float | None = None) -> tuple[str, int]:
    """What ``nvidia-smi argv`` prints on stdout, and its exit code, for a host in ``state``."""
    if state is None or not state.get("driver"):
        return NO_DRIVER, 9
    loaded = state.get("loaded_driver") or state["driver"]
    if loaded != state["driver"]:
        return MISMATCH.format(".".join(str(state["driver"]).split(".")[:2])), 18
    ctx = Ctx(state, time.time() if now is None else now)
    opts = _options(argv)
    if opts is None:
        return BAD_ARGS, 2
    ids = list(range(len(ctx.cards)))
    if "-i" in opts:
        try:
            ids = [int(i) for i in opts["-i"].split(",")]
        except ValueError:
            return BAD_ARGS, 2
        if any(i < 0 or i >= len(ctx.cards) for i in ids):
            return NO_DEVICES, 6
    lost = EXIT_LOST if any(ctx.cards[i].get("lost") for i in ids) else 0
    if "nvlink" in opts:
        if "-s" not in opts and "-e" not in opts:
            return BAD_ARGS, 2
        return nvlink(ctx, "-e" in opts, ids), lost
    if "--query-gpu" in opts:
        fmt = [f.strip() for f in opts.get("--format", "").split(",")]
        if "csv" not in fmt or any(f not in ("csv", "noheader", "nounits") for f in fmt):
            return BAD_ARGS, 2
        out, code = query_gpu(ctx, opts["--query-gpu"].split(","), fmt, ids)
        return out, code or lost
    if "--version" in opts:
        return version(ctx), 0
    if "-L" in opts:
        return list_gpus(ctx, ids), lost
    if "-q" in opts:
        return query(ctx, [d for d in opts.get("-d", "").split(",") if d], ids), lost
    if opts and set(opts) != {"-i"}:
        return BAD_ARGS, 2
    sub = Ctx({**state, "gpus": [ctx.cards[i] for i in ids]}, ctx.now)
    errors = "".join(ctx.lost(i) for i in ids if ctx.cards[i].get("lost"))
    return errors + table(sub), lost


def load_state(
    state_file: str = STATE_FILE,
    modules_file: str = MODULES_FILE,
    module_version_file: str = MODULE_VERSION_FILE,
) -> dict[str, Any]:
    """The host's GPU state; ``driver`` is cleared when the nvidia module is not loaded, and
    ``loaded_driver`` is the loaded module's version (the installed one unless an upgrade
    waits for a reboot)."""
    try:
        state: dict[str, Any] = json.loads(Path(state_file).read_text())
    except (OSError, ValueError):
        return {"driver": None, "gpus": []}
    try:
        modules = Path(modules_file).read_text().split()
    except OSError:
        modules = []
    if "nvidia" not in modules:
        state["driver"] = None
    try:
        state["loaded_driver"] = Path(module_version_file).read_text().strip() or None
    except OSError:
        state["loaded_driver"] = None
    return state


def main() -> int:
    state = load_state()
    time.sleep(float(state.get("latency_ms") or 0) / 1000)  # NVML init and queries take time
    out, code = run(sys.argv[1:], state)
    sys.stdout.write(out)
    return code


if __name__ == "__main__":
    sys.exit(main())
