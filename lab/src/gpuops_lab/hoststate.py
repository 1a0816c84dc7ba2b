"""A lab host's state as its tools see it, and faults to put into it (tests, the bench).

GPU state (``/etc/nvidia-lab/gpus.json``, read by the lab's ``nvidia-smi`` and changed by the
lab driver installer), the loaded kernel modules, the kernel headers, and the kernel ring
buffer (``/run/lab-kmsg``, printed by the lab's ``dmesg``). Everything is reached through the
running host's own mounts (``/proc/<its init>/root``), never by editing a mounted overlay's
upper dir.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuops.errors import InvalidInput
from gpuops_lab import fleet, gpus

if TYPE_CHECKING:
    from gpuops_lab import Lab


def host_path(lab: Lab, name: str, path: str) -> Path:
    """``path`` as the running host sees it (through its overlays), for the lab's own use."""
    fleet.host_entry(lab, name)
    init = fleet.init_pid(lab, name)
    if init is None:
        # a stopped host: its upper dirs are not mounted and may be edited directly
        rel = Path(path).relative_to("/etc")
        return fleet.fleet_dir(lab) / "hosts" / name / "etc" / rel
    return Path(f"/proc/{init}/root") / path.lstrip("/")


def gpu_state(lab: Lab, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(host_path(lab, name, "/etc/nvidia-lab/gpus.json").read_text())
    return data


_KEEP: Any = object()


def set_gpu_state(
    lab: Lab,
    name: str,
    *,
    driver: str | bool | None = False,
    nouveau: bool | None = None,
    kernel_headers: bool | None = None,
    install_error: Any = _KEEP,
    install_delay_s: float | None = None,
    latency_ms: int | None = None,
) -> None:
    """Put a host into a state for a test: ``driver=None`` uninstalls (False: unchanged; a
    version: installed and loaded, nothing pending), ``nouveau=True`` loads nouveau,
    ``kernel_headers=False`` removes the running kernel's headers (a running host only),
    ``install_error="module-load"`` makes the next driver install fail (None: succeed),
    ``install_delay_s`` makes it take that long, ``latency_ms`` slows every nvidia-smi."""
    state = gpu_state(lab, name)
    if driver is not False:
        state["driver"] = driver or None
        host_path(lab, name, "/etc/nvidia-lab/module-version").unlink(missing_ok=True)
    if install_error is not _KEEP:
        state["install_error"] = install_error
    if install_delay_s is not None:
        state["install_delay_s"] = install_delay_s
    if latency_ms is not None:
        state["latency_ms"] = latency_ms
    _write(host_path(lab, name, "/etc/nvidia-lab/gpus.json"), json.dumps(state, indent=1))
    modules_file = host_path(lab, name, "/etc/nvidia-lab/loaded-modules")
    modules = modules_file.read_text().split() if modules_file.exists() else []
    if driver is not False or nouveau is not None:
        load_nouveau = nouveau if nouveau is not None else "nouveau" in modules
        _write(modules_file, gpus.loaded_modules(state["driver"], nouveau=load_nouveau))
    if kernel_headers is not None:
        if fleet.init_pid(lab, name) is None:
            raise InvalidInput(f"lab host {name} is down: kernel headers change on a running host")
        headers = host_path(lab, name, f"/usr/src/linux-headers-{os.uname().release}")
        if kernel_headers:
            headers.mkdir(exist_ok=True)
            (headers / "Makefile").write_text("# lab headers\n")
        else:
            shutil.rmtree(headers, ignore_errors=True)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def set_card(lab: Lab, name: str, index: int, **changes: Any) -> None:
    """Change one card of a host: ``lost=True`` (fallen off the bus), ``nvlink_inactive=[3]``,
    ``nvlink_errors={"3": {"replay": 0, "recovery": 2, "crc": 117}}``, ``temperature=95``...
    Unknown keys are refused, so a typo cannot pass as a healthy card."""
    state = gpu_state(lab, name)
    cards = state["gpus"]
    if not 0 <= index < len(cards):
        raise InvalidInput(f"lab host {name} has no GPU {index}")
    unknown = sorted(set(changes) - set(cards[index]))
    if unknown:
        raise InvalidInput(f"unknown card field(s) {unknown}; known: {sorted(cards[index])}")
    cards[index].update(changes)
    _write(host_path(lab, name, "/etc/nvidia-lab/gpus.json"), json.dumps(state, indent=1))


def xid_line(bus_id: str, xid: int, detail: str, *, pid: str = "'<unknown>'") -> str:
    """An NVRM Xid line as the driver logs it: ``NVRM: Xid (PCI:0000:cb:00): 13, pid=...``
    (bus id from nvidia-smi's ``00000000:CB:00.0`` form; leptonai/gpud's dmesg samples)."""
    domain_bus = bus_id.lower()[4:].rsplit(".", 1)[0]
    return f"NVRM: Xid (PCI:{domain_bus}): {xid}, pid={pid}, name=<unknown>, {detail}"


def inject_xid(lab: Lab, name: str, index: int, xid: int, detail: str) -> str:
    """Append an Xid for GPU ``index`` to the host's kernel log; returns the line."""
    card = gpu_state(lab, name)["gpus"][index]
    line = xid_line(str(card["pci_bus_id"]), xid, detail)
    kernel_log_append(lab, name, line)
    return line


def kernel_log_append(lab: Lab, name: str, message: str) -> None:
    if fleet.init_pid(lab, name) is None:
        raise InvalidInput(f"lab host {name} is down: its kernel log is gone")
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    with host_path(lab, name, "/run/lab-kmsg").open("a") as kmsg:
        kmsg.write(f"[{uptime:12.6f}] {message}\n")


def kernel_log(lab: Lab, name: str) -> str:
    return host_path(lab, name, "/run/lab-kmsg").read_text()


def boot_id(lab: Lab, name: str) -> str:
    """The host's current boot id (a reboot changes it)."""
    return host_path(lab, name, "/proc/sys/kernel/random/boot_id").read_text().strip()


def reboot_pending(lab: Lab, name: str) -> bool:
    """Whether an installed driver waits for a reboot (the old kernel module still loaded)."""
    return host_path(lab, name, "/etc/nvidia-lab/module-version").exists()


def set_reboot_pending(lab: Lab, name: str, installed: str) -> None:
    """An upgrade to ``installed`` waiting for a reboot: the running module stays the one
    loaded now (as the lab installer leaves a host when the old module is in use)."""
    loaded = gpu_state(lab, name)["driver"]
    set_gpu_state(lab, name, driver=installed)
    _write(host_path(lab, name, "/etc/nvidia-lab/module-version"), f"{loaded}\n")
