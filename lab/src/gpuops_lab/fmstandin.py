"""The lab's ``nv-fabricmanager``: a stand-in for NVIDIA Fabric Manager on lab hosts (test
data, not NVIDIA software), shipped in the lab repository's Fabric Manager archive.

What it models of the real daemon (sources: NVIDIA's Fabric Manager user guide, quoted by
ai-infrastructure.net/fabric-manager: "the FM service checks the currently loaded kernel driver
stack version for compatibility, and if the loaded driver stack version is not compatible,
aborts the process"; the version text as parsed by leptonai/gpud's
``parseFabricManagerVersion`` test, ``Fabric Manager version is : 535.161.08``):

- ``nv-fabricmanager --version`` (or ``-v``) prints ``Fabric Manager version is : <v>``;
- ``nv-fabricmanager -c <cfg>`` starts the daemon: it refuses (exit 1, the real log line of a
  version mismatch) unless the loaded nvidia module is at its own version, then forks, writes
  its PID file (``/run/nvidia-fabricmanager/nv-fabricmanager.pid``, the unit's PIDFile) and
  stays until stopped; the parent exits 0 (``Type=forking``).

Faults (``/etc/nvidia-lab/fabricmanager.json``, gpuops_lab.hoststate): ``start_error`` makes
the start fail as an NVSwitch initialisation failure would. Only the standard library may be
imported here: the program runs on lab hosts.
"""

import json
import os
import sys
import time
from pathlib import Path

VERSION = "0.0.0"  # replaced by gpuops_lab.stack.fabricmanager_program
PID_FILE = Path("/run/nvidia-fabricmanager/nv-fabricmanager.pid")
LOG = Path("/var/log/fabricmanager.log")
FAULTS = Path("/etc/nvidia-lab/fabricmanager.json")
GPUS = Path("/etc/nvidia-lab/gpus.json")
MODULES = Path("/etc/nvidia-lab/loaded-modules")
MODULE_VERSION = Path("/etc/nvidia-lab/module-version")
#: the real daemon's message when the driver stack is at another version (Fabric Manager
#: sources, LocalFabricManager.cpp)
MISMATCH = (
    "fabric manager version is incompatible with NVSwitch driver. Please update with matching "
    "NVIDIA driver package"
)
START_ERROR = "request to query NVSwitch device information from NVSwitch driver failed"


def _log(line: str) -> None:
    try:
        with LOG.open("a") as f:
            f.write(f"[{time.strftime('%b %d %Y %H:%M:%S')}] [ERROR] {line}\n")
    except OSError:
        pass


def loaded_driver() -> str:
    """The version of the nvidia module the kernel runs ("" none)."""
    modules = MODULES.read_text().split() if MODULES.exists() else []
    if "nvidia" not in modules:
        return ""
    if MODULE_VERSION.exists():
        return MODULE_VERSION.read_text().strip()
    return str(json.loads(GPUS.read_text()).get("driver") or "")


def start() -> int:
    faults = json.loads(FAULTS.read_text()) if FAULTS.exists() else {}
    if faults.get("start_error"):
        _log(START_ERROR)
        print(START_ERROR, file=sys.stderr)
        return 1
    if loaded_driver() != VERSION:
        _log(MISMATCH)
        print(MISMATCH, file=sys.stderr)
        return 1
    PID_FILE.parent.mkdir(parents=True, exist_ok=True)
    PID_FILE.unlink(missing_ok=True)
    if os.fork():
        for _ in range(100):  # the parent returns once the daemon wrote its PID file
            if PID_FILE.exists():
                return 0
            time.sleep(0.02)
        return 1
    os.setsid()
    if os.fork():
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # never hold the caller's (ssh session's) pipes open
        os.dup2(null, fd)
    tmp = PID_FILE.with_suffix(".tmp")
    tmp.write_text(f"{os.getpid()}\n")
    tmp.replace(PID_FILE)
    while True:
        time.sleep(3600)


def main(argv: list[str]) -> int:
    if argv[:1] in (["--version"], ["-v"]):
        print(f"Fabric Manager version is : {VERSION}")
        return 0
    if len(argv) == 2 and argv[0] == "-c":
        return start()
    print(
        "usage: nv-fabricmanager [-v|--version] [-c <config file>] (lab stand-in)", file=sys.stderr
    )
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
