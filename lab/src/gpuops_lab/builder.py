"""Lab component ``builder``: Podman's Docker-compatible API service, so the ``docker`` SDK
works unchanged: :func:`client`, or ``docker.DockerClient(base_url=facts["base_url"],
version=facts["docker_api_version"])`` from another process.

Everything Podman keeps lives under ``<lab dir>/builder``: its config files (selected with
``CONTAINERS_*`` variables), vfs storage, run root, temp dir and the API socket. Podman runs
containers with ``runc`` (crun fails on this cgroup hybrid setup) and host networking. On
``up`` a base image is built ``FROM scratch`` with the static busybox and pushed to the lab
registry as ``<registry>/lab/base:1`` (see :mod:`gpuops_lab.baseimage`).

In auth mode the registry's CA reaches Podman through ``SSL_CERT_DIR`` (root Podman reads
``certs.d`` only under ``/etc``); credentials are never in Podman's config: callers pass them
(``registry.auth_config``) or point ``REGISTRY_AUTH_FILE`` at the registry's auth file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuops.errors import OperationFailed
from gpuops_lab import baseimage, podmanstandin, proc

if TYPE_CHECKING:
    from gpuops_lab import Lab

log = logging.getLogger(__name__)

PROC = "podman"
#: Docker API version Podman 4.x serves on its compat endpoints.
DOCKER_API_VERSION = "1.41"
SYSTEM_CERTS = "/etc/ssl/certs"


def _dir(lab: Lab) -> Path:
    return lab.dir / "builder"


def _socket(lab: Lab) -> Path:
    return _dir(lab) / "podman.sock"


#: The longest ``--runroot`` Podman 4 accepts (its cleanup process gets it as that flag).
MAX_RUNROOT = 50


def _runroot(lab: Lab) -> Path:
    return _dir(lab) / "run"


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def podman_env(lab: Lab) -> dict[str, str]:
    """Environment that points podman/buildah/skopeo at this lab's config and storage."""
    base = _dir(lab)
    env = {
        "CONTAINERS_STORAGE_CONF": str(base / "conf" / "storage.conf"),
        "CONTAINERS_REGISTRIES_CONF": str(base / "conf" / "registries.conf"),
        "CONTAINERS_CONF": str(base / "conf" / "containers.conf"),
        # an empty lab-local auth file: never root's /run/containers/0/auth.json
        "REGISTRY_AUTH_FILE": str(base / "conf" / "auth.json"),
        "TMPDIR": str(base / "tmp"),
    }
    if (base / "certs").is_dir():
        env["SSL_CERT_DIR"] = f"{SYSTEM_CERTS}:{base / 'certs'}"
    return env


def _write_config(lab: Lab, reg: dict[str, Any]) -> None:
    base = _dir(lab)
    conf = base / "conf"
    for sub in ("conf", "storage", "run", "tmp", "volumes"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    (conf / "storage.conf").write_text(
        "[storage]\n"
        'driver = "vfs"\n'
        f"graphroot = {_toml(str(base / 'storage'))}\n"
        f"runroot = {_toml(str(_runroot(lab)))}\n"
    )
    insecure = "false" if reg.get("scheme") == "https" else "true"
    (conf / "registries.conf").write_text(
        "unqualified-search-registries = []\n"
        "[[registry]]\n"
        f"location = {_toml(str(reg['url']))}\n"
        f"insecure = {insecure}\n"
    )
    (conf / "containers.conf").write_text(
        podmanstandin.CONTAINERS_CONF + f"tmp_dir = {_toml(str(base / 'tmp'))}\n"
        f"volume_path = {_toml(str(base / 'volumes'))}\n"
    )
    (conf / "auth.json").write_text('{"auths": {}}\n')
    if reg.get("ca"):
        (base / "certs").mkdir(exist_ok=True)
        shutil.copyfile(reg["ca"], base / "certs" / "gpuops-lab-ca.crt")


def ping(lab: Lab, timeout: float = 1.0) -> bool:
    """True when the API answers ``GET /_ping`` with 200 on the lab socket."""
    path = _socket(lab)
    if not path.exists():
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(path))
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: podman\r\n\r\n")
            return s.recv(64).startswith((b"HTTP/1.0 200", b"HTTP/1.1 200"))
    except OSError:
        return False


def client(lab: Lab) -> Any:
    """A ``docker.DockerClient`` on the lab's Podman socket."""
    import docker  # noqa: PLC0415  (deferred: slow to import, `lab status` needs none)

    # a fixed API version: "auto" asks GET /version, which Podman answers slowly (it runs
    # conmon/runc --version each time: 1-10 s on a busy 2-core machine)
    return docker.DockerClient(
        base_url=f"unix://{_socket(lab)}", version=DOCKER_API_VERSION, timeout=300
    )


# -- component API -------------------------------------------------------------------------
def up(lab: Lab) -> dict[str, Any]:
    reg = lab.facts("registry")
    if not reg:
        raise OperationFailed(
            "the image builder needs the lab registry", hint="start it: gpuops lab up"
        )
    if shutil.which("podman") is None or shutil.which("runc") is None:
        raise OperationFailed(
            "podman and runc are needed for the lab image builder",
            hint="run scripts/setup-system.sh (Debian packages podman, runc)",
        )
    sock = _socket(lab)
    if len(str(sock)) > 100:
        raise OperationFailed(
            f"lab dir {lab.dir} is too long for a unix socket path ({sock})",
            hint="choose a shorter --dir / GPUOPS_LAB_DIR",
        )
    runroot = _runroot(lab)
    if len(str(runroot)) > MAX_RUNROOT:
        # the service takes it from storage.conf unchecked, but conmon's exit command gives it
        # to `podman container cleanup` as --runroot, which refuses it ("the specified runroot
        # is longer than 50 characters"): the service then waits 20 s for every container's
        # exit code (a docker SDK containers.run() took 20.0 s for `echo hi`)
        raise OperationFailed(
            f"lab dir {lab.dir} is too long for Podman: its run root {runroot} has "
            f"{len(str(runroot))} characters, Podman's cleanup accepts at most {MAX_RUNROOT}",
            hint="choose a shorter --dir / GPUOPS_LAB_DIR (e.g. the default /tmp/gpuops-lab)",
        )
    _write_config(lab, reg)
    env = podman_env(lab)
    pid = proc.spawn(
        PROC, ["podman", "system", "service", "--time=0", f"unix://{sock}"], lab.dir, env=env
    )
    proc.wait_for(
        lambda: ping(lab),
        f"podman API on {sock}",
        timeout=30,
        pid=pid,
        log_file=lab.dir / "logs" / f"{PROC}.log",
    )
    facts: dict[str, Any] = {
        "socket": str(sock),
        "base_url": f"unix://{sock}",
        "docker_api_version": DOCKER_API_VERSION,
        "env": env,
        "storage": str(_dir(lab) / "storage"),
        "registry": reg["url"],
        **_base_image(lab, reg),
    }
    facts.update(
        healthy=True, summary=f"podman API {facts['base_url']}; base {facts['base_image']}"
    )
    return facts


def _base_image(lab: Lab, reg: dict[str, Any]) -> dict[str, str]:
    api = client(lab)
    try:
        return baseimage.build_and_push(lab, api, reg)
    finally:
        api.close()


def status(lab: Lab) -> dict[str, Any]:
    pid = proc.pid_of(PROC, lab.dir)
    running = pid is not None and proc.alive(pid)
    # a registry started again elsewhere (new port) leaves this builder's config stale
    current = lab.facts("builder").get("registry") == lab.facts("registry").get("url")
    return {"healthy": running and current and ping(lab), "pid": pid if running else None}


def down(lab: Lab) -> None:
    """Remove containers, stop Podman and its conmon/runc children, unmount, delete files."""
    base = _dir(lab)
    if (base / "conf" / "storage.conf").exists() and shutil.which("podman"):
        # works with or without the service: removes containers, their runc state and mounts
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(
                ["podman", "rm", "--all", "--force", "--time", "0"],
                env={**os.environ, **podman_env(lab)},
                capture_output=True,
                timeout=60,
                check=False,
            )
    proc.stop(PROC, lab.dir)
    _kill_leftovers(base)
    _delete_runc_state(base)
    _unmount_under(base)
    # Podman (cgroupfs manager) leaves empty libpod_parent[/conmon] cgroups in every
    # hierarchy. They are shared by every Podman on the machine, not the lab's: kept.
    shutil.rmtree(base, ignore_errors=True)


# -- cleanup helpers (by path, so they work when state.json is gone) -----------------------
def _under(path: str, base: Path) -> bool:
    return path == str(base) or path.startswith(f"{base}/")


_OURS = frozenset({"podman", "conmon", "runc"})


def works_on(pid: int, base: Path) -> bool:
    """Whether ``pid`` is Podman, conmon or runc with ``base`` (the lab's builder dir) on its
    command line: the name alone proves nothing."""
    if pid == os.getpid():
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return Path(argv[0].decode(errors="replace")).name in _OURS and any(
        str(base).encode() in arg for arg in argv
    )


def processes_under(base: Path) -> list[int]:
    """Pids of Podman, conmon or runc working on ``base`` (containers: see runc state)."""
    found = [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()]
    return [pid for pid in found if works_on(pid, base) and proc.alive(pid)]


def _kill_leftovers(base: Path) -> None:
    for pid in processes_under(base):
        log.info("killing leftover lab process %d", pid)
        proc.stop_process(pid, lambda p: works_on(p, base), timeout=2)


def _delete_runc_state(base: Path) -> None:
    """runc keeps root's container state in /run/runc; drop entries of this lab."""
    runc_root = Path("/run/runc")
    if not runc_root.is_dir():
        return
    for state in runc_root.glob("*/state.json"):
        try:
            rootfs = str(json.loads(state.read_text())["config"]["rootfs"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _under(rootfs, base):
            subprocess.run(
                ["runc", "delete", "--force", state.parent.name],
                capture_output=True,
                timeout=30,
                check=False,
            )


def mounts_under(base: Path) -> list[str]:
    """Mount points below ``base`` from /proc/mounts, deepest first."""
    points = []
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        point = fields[1].encode().decode("unicode_escape")  # \040 etc.
        if _under(point, base):
            points.append(point)
    return sorted(points, key=len, reverse=True)


def _unmount_under(base: Path) -> None:
    for point in mounts_under(base):
        done = subprocess.run(
            ["umount", "--lazy", point], capture_output=True, timeout=30, check=False
        )
        if done.returncode != 0:
            log.warning("could not unmount %s: %s", point, done.stderr.decode(errors="replace"))
