"""GPU models of the lab fleet and the per-host GPU state that the lab ``nvidia-smi`` reads.

Model facts come from ``shared/docs/NVIDIA_SMI.md`` (names, memory totals, NVLink speeds) and
from utkuozdemir/nvidia_gpu_exporter's captures (H100 and L40S field values). Where no public
sample was at hand the value is an assumption, marked as such below.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from gpuops_lab.spec import GpuHost

#: Driver versions the lab driver repository serves (``NVIDIA-Linux-x86_64-<v>.run``).
REPO_DRIVERS: tuple[str, ...] = ("535.161.08", "550.90.07", "570.133.20")


@dataclass(frozen=True)
class GpuModel:
    key: str
    name: str  # what nvidia-smi prints
    memory_mib: int
    reserved_mib: int
    power_limit_w: float
    power_min_w: float
    idle_power_w: float
    nvlinks: int
    nvlink_speed: str
    compute_cap: str
    mig: bool
    fan: bool
    memory_temp: bool
    pcie_gen: int
    pci_device_id: str
    vbios: str
    clock_idle: int
    clock_max: int
    clock_mem: int
    clock_video: int
    bus_ids: tuple[str, ...]  # the PCI bus numbers of the 8 cards of a typical server


_SXM_A100 = ("07", "0F", "47", "4E", "87", "90", "B7", "BD")  # DGX A100 layout
_SXM_HOPPER = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")  # HGX H100/H800 layout
_PCIE_8 = ("01", "25", "41", "61", "81", "A1", "C1", "E1")

MODELS: dict[str, GpuModel] = {
    # NVIDIA_SMI.md: name, 81920 MiB, 12 links at 25 GB/s (A100 SXM4, NVLink 3).
    # Assumed: reserved memory, idle clocks, VBIOS string.
    "a100-80g": GpuModel(
        "a100-80g",
        "NVIDIA A100-SXM4-80GB",
        81920,
        567,
        400.0,
        100.0,
        61.0,
        12,
        "25 GB/s",
        "8.0",
        True,
        False,
        True,
        4,
        "0x20B210DE",
        "92.00.45.00.03",
        210,
        1410,
        1593,
        795,
        _SXM_A100,
    ),
    # H800 SXM5 is an H100 SXM5 with NVLink cut from 18 to 8 links (400 GB/s instead of
    # 900 GB/s, NVIDIA's H800 product brief). Assumed from the H100 capture: the name
    # "NVIDIA H800", 81559 MiB, 479 MiB reserved, 700 W, 26.562 GB/s per link, clocks.
    "h800": GpuModel(
        "h800",
        "NVIDIA H800",
        81559,
        479,
        700.0,
        200.0,
        69.85,
        8,
        "26.562 GB/s",
        "9.0",
        True,
        False,
        True,
        5,
        "0x232410DE",
        "96.00.74.00.0D",
        345,
        1980,
        2619,
        765,
        _SXM_HOPPER,
    ),
    # L40S capture (driver 595.80): 46068 MiB, 609 reserved, 350 W, no fan reading,
    # temperature.memory "N/A", no MIG, no NVLink, clocks 2520/9001 MHz.
    "l40s": GpuModel(
        "l40s",
        "NVIDIA L40S",
        46068,
        609,
        350.0,
        100.0,
        35.42,
        0,
        "",
        "8.9",
        False,
        False,
        False,
        4,
        "0x26B910DE",
        "95.02.66.00.02",
        210,
        2520,
        9001,
        1965,
        _PCIE_8,
    ),
}

#: the faulty card of a faulty host: index, temperature and error counters
FAULTY_INDEX = 5


def _uuid(host: str, index: int) -> str:
    h = hashlib.sha256(f"{host}/{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def card_state(host: GpuHost, index: int) -> dict[str, Any]:
    """One card as ``gpus.json`` stores it; the faulty card runs hot with ECC errors."""
    m = MODELS[host.model]
    seed = int(hashlib.sha256(f"{host.name}/{index}".encode()).hexdigest()[:6], 16)
    faulty = host.faulty and index == FAULTY_INDEX % host.gpus
    card: dict[str, Any] = {
        "index": index,
        "name": m.name,
        "uuid": _uuid(host.name, index),
        "serial": str(1320000000000 + seed % 1000000000),
        "pci_bus_id": f"00000000:{m.bus_ids[index % len(m.bus_ids)]}:00.0",
        "pci_device_id": m.pci_device_id,
        "pcie_gen": m.pcie_gen,
        "vbios": m.vbios,
        "persistence": m.mig,  # datacenter SXM boards usually run with persistence on
        "fan": 30 if m.fan else None,
        "pstate": "P0",
        "temperature": 29 + seed % 9,
        "temperature_memory": (33 + seed % 7) if m.memory_temp else None,
        "power_draw": round(m.idle_power_w + (seed % 400) / 100, 2),
        "power_limit": m.power_limit_w,
        "power_min": m.power_min_w,
        "memory_total": m.memory_mib,
        "memory_reserved": m.reserved_mib,
        "memory_used": 0,
        "utilization": 0,
        "utilization_memory": 0,
        "compute_cap": m.compute_cap,
        "mig": "Disabled" if m.mig else None,
        "nvlinks": m.nvlinks,
        "nvlink_speed": m.nvlink_speed,
        "clocks": {
            "sm": m.clock_idle,
            "max_sm": m.clock_max,
            "mem": m.clock_mem,
            "video": m.clock_video,
        },
        "event_reasons": 0x1,  # GPU idle
        "ecc": {
            "corrected_volatile": 0,
            "uncorrected_volatile": 0,
            "corrected_aggregate": 0,
            "uncorrected_aggregate": 0,
        },
        "remapped": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
        "lost": False,  # fallen off the bus: nvidia-smi cannot get a handle for it
        "nvlink_inactive": [],  # link numbers `nvidia-smi nvlink -s` shows as <inactive>
        "nvlink_errors": {},  # "link" -> {"replay": n, "recovery": n, "crc": n}
    }
    if faulty:
        card.update(
            temperature=92,
            temperature_memory=95 if m.memory_temp else None,
            power_draw=round(m.power_limit_w * 0.71, 2),
            event_reasons=0x48,  # HW slowdown + HW thermal slowdown
            ecc={
                "corrected_volatile": 12,
                "uncorrected_volatile": 3,
                "corrected_aggregate": 87,
                "uncorrected_aggregate": 3,
            },
            remapped={"correctable": 0, "uncorrectable": 4, "pending": True, "failure": False},
        )
        card["clocks"] = {**card["clocks"], "sm": m.clock_max // 2}
    return card


def host_state(host: GpuHost) -> dict[str, Any]:
    """The content of a host's ``/etc/nvidia-lab/gpus.json``. ``driver`` is the installed
    driver; the loaded kernel module is the same unless ``module-version`` says otherwise
    (an upgrade waiting for a reboot)."""
    return {
        "model": host.model,
        "driver": host.driver or None,
        "install": None,  # the last .run install: version and flags (written by the installer)
        "install_error": None,  # fault: the next install fails ("module-load")
        "install_delay_s": 0,  # fault: the next installs take this long
        "latency_ms": 0,  # how long each nvidia-smi call takes (a real one: a few hundred ms)
        "gpus": [card_state(host, i) for i in range(host.gpus)],
    }


def loaded_modules(driver: str | None, *, nouveau: bool = False) -> str:
    """``/etc/nvidia-lab/loaded-modules``: the lab's stand-in for ``/proc/modules``."""
    mods = ["nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia"] if driver else []
    if nouveau:
        mods.append("nouveau")
    return "".join(m + "\n" for m in mods)
