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
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuops.errors import InvalidInput
from gpuops_lab import dcgmi, fleet, fleetfiles, gpus, stack

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
    # stamped as the kernel stamps its log: seconds since boot to the microsecond (the lab's
    # hosts share this machine's kernel). /proc/uptime counts in hundredths, so a line logged
    # within 10 ms after an analysis step began read as logged before it.
    uptime = time.clock_gettime(time.CLOCK_BOOTTIME)
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


def set_fabricmanager(
    lab: Lab,
    name: str,
    *,
    installed: str | None = None,
    running: bool | None = None,
    start_error: bool | None = None,
) -> None:
    """Fabric Manager faults of a running host: ``installed="535.161.08"`` puts that version's
    ``nv-fabricmanager`` in place (the unit keeps running what it started with until a
    restart), ``start_error=True`` makes every later start fail (as an NVSwitch initialisation
    failure does; False: starts succeed again), ``running=False``/``True`` stops/starts the
    unit through the host's (lab) ``systemctl``."""
    if fleet.init_pid(lab, name) is None:
        raise InvalidInput(f"lab host {name} is down: Fabric Manager faults need a running host")
    if installed is not None:
        _write(
            host_path(lab, name, "/usr/bin/nv-fabricmanager"),
            stack.fabricmanager_program(installed),
        )
        host_path(lab, name, "/usr/bin/nv-fabricmanager").chmod(0o755)
    if start_error is not None:
        _write(
            host_path(lab, name, "/etc/nvidia-lab/fabricmanager.json"),
            json.dumps({"start_error": start_error}),
        )
    if running is not None:
        verb = "start" if running else "stop"
        done = fleet.ssh(lab, name, f"systemctl {verb} nvidia-fabricmanager")
        if running and done.returncode != 0:
            raise InvalidInput(
                f"lab host {name}: Fabric Manager did not start: {done.stderr.strip()}"
            )


def fabricmanager(lab: Lab, name: str) -> dict[str, str]:
    """What the host's Fabric Manager unit shows (``ActiveState``, ``ExecMainPID``...) and the
    installed ``nv-fabricmanager --version`` line, read on the host as an operator would."""
    shown = fleet.ssh(
        lab, name, "systemctl show -p ActiveState -p SubState -p ExecMainPID nvidia-fabricmanager"
    )
    out = dict(line.split("=", 1) for line in shown.stdout.splitlines() if "=" in line)
    out["version"] = fleet.ssh(lab, name, "nv-fabricmanager --version").stdout.strip()
    return out


def container_toolkit(lab: Lab, name: str) -> str:
    """The host's ``nvidia-ctk --version`` first line ("" none)."""
    done = fleet.ssh(lab, name, "nvidia-ctk --version")
    return done.stdout.splitlines()[0] if done.returncode == 0 and done.stdout else ""


def set_dcgm(
    lab: Lab,
    name: str,
    *,
    version: Any = _KEEP,
    failing: dict[int, list[str]] | None = None,
    installed: bool | None = None,
) -> None:
    """The host's DCGM for the lab's ``dcgmi``: ``version="4.1.1"`` (None: the model's
    default, gpuops_lab.dcgmi.DEFAULT_VERSIONS), ``failing={3: ["memory"]}`` (these tests
    fail on GPU 3; ``{}``: none fail; names are dcgmi.FAILURES' keys), ``installed=False``
    removes ``/usr/bin/dcgmi`` from this host (True puts it back). Unknown tests or GPUs are
    refused, so a typo cannot pass as a healthy host."""
    state = gpu_state(lab, name)
    conf = dict(state.get("dcgm") or {})
    if version is None:
        conf.pop("version", None)
    elif version is not _KEEP:
        if not isinstance(version, str) or version[:2] not in ("3.", "4."):
            raise InvalidInput(f"lab dcgmi models DCGM 3.x and 4.x, not {version!r}")
        conf["version"] = version
    if failing is not None:
        count = len(state["gpus"])
        for gpu, tests in failing.items():
            if not 0 <= int(gpu) < count:
                raise InvalidInput(f"lab host {name} has no GPU {gpu}")
            unknown = sorted(set(tests) - set(dcgmi.FAILURES))
            if unknown:
                raise InvalidInput(
                    f"unknown DCGM test(s) {unknown}; known: {sorted(dcgmi.FAILURES)}"
                )
        conf["failing"] = {str(int(g)): list(t) for g, t in failing.items() if t}
    if installed is not None:
        if fleet.init_pid(lab, name) is None:
            raise InvalidInput(f"lab host {name} is down: DCGM is installed on a running host")
        program = host_path(lab, name, "/usr/bin/dcgmi")
        if installed and not program.exists():
            program.write_text(fleetfiles.dcgmi_script())
            program.chmod(0o755)
        elif not installed:
            program.unlink(missing_ok=True)  # a whiteout in the host's own /usr/bin layer
        conf["installed"] = installed
    state["dcgm"] = conf
    _write(host_path(lab, name, "/etc/nvidia-lab/gpus.json"), json.dumps(state, indent=1))


def restore_stack(lab: Lab, name: str, driver: str) -> None:
    """The GPU stack beside ``driver`` back as the lab starts a running host: on an NVSwitch
    host Fabric Manager at ``driver``, no start fault, restarted; the container toolkit at the
    lab's version. Call after :func:`set_gpu_state` has loaded ``driver``."""
    host = next(h for h in fleet.hosts(lab) if h.name == name)
    ctk = host_path(lab, name, "/usr/bin/nvidia-ctk")
    _write(ctk, stack.nvidia_ctk(stack.TOOLKIT_VERSION))
    ctk.chmod(0o755)
    if gpus.MODELS[host.model].nvlinks > 0:
        set_fabricmanager(lab, name, installed=driver, start_error=False)
        done = fleet.ssh(lab, name, "systemctl restart nvidia-fabricmanager")
        if done.returncode != 0:
            raise InvalidInput(f"lab host {name}: Fabric Manager did not restart: {done.stderr}")
