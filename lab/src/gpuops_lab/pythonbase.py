"""The lab's Python-capable base image: Debian bookworm (``debootstrap --variant=minbase``)
with ``python3`` and ``python3-venv``, for images that run gpuops (the agent image).

No image can be pulled from the internet, but Debian's mirror is reachable through apt's
configured sources, so the root file system is bootstrapped from it, pruned (apt caches,
docs), and imported into the lab's Podman storage as ``localhost/gpuops/python-base:<key>``.
The image is cached as an OCI archive in ``$GPUOPS_CACHE/lab/python-base-<key>.oci.tar``;
``<key>`` hashes the recipe below, so only the first run pays for debootstrap (~2.5 min on
2 cores) and later labs load the archive in seconds, with the same image ID every time.

Needs root and the Debian package ``debootstrap``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuops.errors import OperationFailed
from gpuops_lab import baseimage, builder

if TYPE_CHECKING:
    from gpuops_lab import Lab

log = logging.getLogger(__name__)

SUITE = "bookworm"
REPO = "lab/python-base"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
#: Everything that decides the image's content; a change gives a new cache key.
RECIPE: dict[str, Any] = {
    "revision": 1,
    "suite": SUITE,
    "variant": "minbase",
    "include": ["python3", "python3-venv"],
    "prune": [
        "var/cache/apt/archives/*.deb",
        "var/cache/apt/*.bin",
        "var/lib/apt/lists/*_*",
        "usr/share/doc/*",
        "usr/share/man/*",
        "usr/share/info/*",
        "var/log/*.log",
    ],
    "exclude": ["./dev/*", "./proc/*", "./sys/*", "./run/*", "./tmp/*"],
    "changes": [
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV LANG=C.UTF-8",
        'CMD ["/bin/bash"]',
        "LABEL org.opencontainers.image.title=gpuops-lab-python-base",
    ],
}
#: debootstrap's wall time is bounded by the mirror; give it room on a slow link.
DEBOOTSTRAP_TIMEOUT_S = 1200


def recipe_key() -> str:
    return hashlib.sha256(json.dumps(RECIPE, sort_keys=True).encode()).hexdigest()[:16]


def local_name() -> str:
    """The image's name in Podman storage (independent of the lab registry's port)."""
    return f"localhost/gpuops/python-base:{recipe_key()}"


def cache_file(cache: Path) -> Path:
    return cache / "lab" / f"python-base-{recipe_key()}.oci.tar"


# -- the Debian mirror ---------------------------------------------------------------------
def _deb822_uris(text: str, suite: str) -> list[str]:
    uris: list[str] = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            name, value = line.split(":", 1)
            fields[name.strip().lower()] = value.strip()
        if (
            "deb" in fields.get("types", "").split()
            and suite in fields.get("suites", "").split()
            and fields.get("enabled", "yes").lower() != "no"
        ):
            uris.extend(fields.get("uris", "").split())
    return uris


def _one_line_uris(text: str, suite: str) -> list[str]:
    uris = []
    for line in text.splitlines():
        words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
        if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
            uris.append(words[1])
    return uris


def debian_mirror(apt_dir: Path = Path("/etc/apt"), suite: str = SUITE) -> str:
    """The Debian mirror for ``suite``: ``$GPUOPS_DEBIAN_MIRROR``, else the first one apt's
    sources name (``sources.list.d/*.sources`` and ``*.list``, ``sources.list``), else
    deb.debian.org."""
    env = os.environ.get("GPUOPS_DEBIAN_MIRROR")
    if env:
        return env
    files = [
        *sorted((apt_dir / "sources.list.d").glob("*.sources")),
        apt_dir / "sources.list",
        *sorted((apt_dir / "sources.list.d").glob("*.list")),
    ]
    for path in files:
        try:
            text = path.read_text()
        except OSError:
            continue
        found = _deb822_uris(text, suite) if path.suffix == ".sources" else []
        found += _one_line_uris(text, suite) if path.suffix == ".list" else []
        if found:
            return found[0]
    return DEFAULT_MIRROR


# -- building ------------------------------------------------------------------------------
def _podman(lab: Lab, *args: str, timeout: float = 600) -> str:
    done = subprocess.run(
        ["podman", *args],
        env={**os.environ, **builder.podman_env(lab)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise OperationFailed(
            f"podman {args[0]} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}"
        )
    return done.stdout


def _unmount_all(root: Path) -> bool:
    """Unmount whatever a failed debootstrap left mounted below ``root``; True when none is."""
    for point in builder.mounts_under(root):
        subprocess.run(["umount", "--lazy", point], capture_output=True, timeout=30, check=False)
    return not builder.mounts_under(root)


def _prune(root: Path) -> None:
    for pattern in RECIPE["prune"]:
        for path in root.glob(pattern):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()


def _debootstrap(root: Path, mirror: str, log_file: Path) -> None:
    if shutil.which("debootstrap") is None:
        raise OperationFailed(
            "debootstrap is not installed (needed for the lab's Python base image)",
            hint="apt-get install --no-install-recommends debootstrap (scripts/setup.sh)",
        )
    if os.geteuid() != 0:
        raise OperationFailed("building the lab's Python base image needs root (debootstrap)")
    argv = [
        "debootstrap",
        f"--variant={RECIPE['variant']}",
        f"--include={','.join(RECIPE['include'])}",
        SUITE,
        str(root),
        mirror,
    ]
    log.info("debootstrap %s from %s into %s (log %s)", SUITE, mirror, root, log_file)
    with log_file.open("wb") as out:
        try:
            done = subprocess.run(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=DEBOOTSTRAP_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise OperationFailed(
                f"debootstrap took longer than {DEBOOTSTRAP_TIMEOUT_S}s (log {log_file})"
            ) from exc
    if done.returncode != 0:
        tail = "\n".join(log_file.read_text(errors="replace").splitlines()[-15:])
        raise OperationFailed(
            f"debootstrap {SUITE} from {mirror} failed (exit {done.returncode}):\n{tail}",
            hint=f"is the mirror reachable? set GPUOPS_DEBIAN_MIRROR to override (log {log_file})",
        )


def _import(lab: Lab, root: Path) -> None:
    """``tar`` the root file system into ``podman import`` as :func:`local_name`."""
    changes = [arg for change in RECIPE["changes"] for arg in ("--change", change)]
    excludes = [f"--exclude={pattern}" for pattern in RECIPE["exclude"]]
    env = {**os.environ, **builder.podman_env(lab)}
    with subprocess.Popen(
        ["tar", "--numeric-owner", "-C", str(root), *excludes, "-c", "."],
        stdout=subprocess.PIPE,
    ) as tar:
        done = subprocess.run(
            ["podman", "import", *changes, "-", local_name()],
            stdin=tar.stdout,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if tar.stdout is not None:
            tar.stdout.close()
    if tar.returncode != 0 or done.returncode != 0:
        raise OperationFailed(
            f"importing {root} as {local_name()} failed (tar exit {tar.returncode}, "
            f"podman exit {done.returncode}): {done.stderr.strip()[-2000:]}"
        )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One builder at a time per cache file (two test sessions may start cold together)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.with_suffix(".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build_into_cache(lab: Lab, cached: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="python-base-", dir=cached.parent))
    root = work / "rootfs"
    try:
        _debootstrap(root, debian_mirror(), work / "debootstrap.log")
        if not _unmount_all(root):
            raise OperationFailed(f"debootstrap left mounts under {root}")
        _prune(root)
        _import(lab, root)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        _podman(lab, "save", "--format", "oci-archive", "-o", str(tmp), local_name())
        tmp.replace(cached)
    finally:
        # never rmtree through a mount (a leftover /proc or /sys would be walked)
        if _unmount_all(root):
            shutil.rmtree(work, ignore_errors=True)
        else:
            log.warning("left %s in place: mounts remain below it", work)


def ensure_local(lab: Lab) -> str:
    """Put the image into the lab's Podman storage as :func:`local_name`; returns how it
    came: "storage" (already there), "cache" (loaded) or "build" (debootstrap, then cached)."""
    name = local_name()
    cached = cache_file(lab.config.cache)
    with _locked(cached):
        if _exists(lab, name):
            return "storage"
        if cached.is_file():
            try:
                _podman(lab, "load", "-i", str(cached))
                if _exists(lab, name):
                    return "cache"
                log.warning("%s did not hold %s; building", cached, name)
            except OperationFailed as exc:
                log.warning("cached %s is unusable (%s); building", cached, exc)
            # the cache is shared ($GPUOPS_CACHE): never removed, only replaced by rename
        _build_into_cache(lab, cached)
        _podman(lab, "load", "-i", str(cached))
        if not _exists(lab, name):
            raise OperationFailed(f"{cached} was written but loading it gave no {name}")
        return "build"


def _exists(lab: Lab, name: str) -> bool:
    done = subprocess.run(
        ["podman", "image", "exists", name],
        env={**os.environ, **builder.podman_env(lab)},
        capture_output=True,
        timeout=60,
        check=False,
    )
    return done.returncode == 0


def build_and_push(lab: Lab, api: Any) -> dict[str, Any]:
    """Ensure the Python base image (cache or debootstrap) and push it to the lab registry
    as ``<registry>/lab/python-base:bookworm``. Returns facts about it."""
    reg = lab.facts("registry")
    if not reg:
        raise OperationFailed("the Python base image needs the lab registry (gpuops lab up)")
    ref = f"{reg['url']}/{REPO}:{SUITE}"
    started = time.monotonic()
    source = ensure_local(lab)
    ready = time.monotonic()
    try:
        image = api.images.get(local_name())
        image.tag(ref.rsplit(":", 1)[0], SUITE)
        digest = baseimage.push(lab, api, ref)
    except OperationFailed:
        raise
    except Exception as exc:  # the docker SDK raises its own (untyped) errors
        raise OperationFailed(f"tagging/pushing {ref} failed: {exc}") from exc
    facts = {
        "image": ref,
        "image_id": str(image.id),
        "digest": digest,
        "source": source,
        "ready_s": round(ready - started, 2),
        "push_s": round(time.monotonic() - ready, 2),
    }
    log.info("python base %s", facts)
    return facts
