"""The lab's base image: ``FROM scratch`` plus the static busybox, every applet linked, so
``sh`` and the usual tools work. No image can come from the internet, so everything the lab
builds starts from this one.

The built image is cached as an archive in ``$GPUOPS_CACHE/lab`` (keyed by the busybox binary
and this recipe); later labs load it (~0.3 s) instead of building it (~1.5-3 s on 2 cores),
and the base digest stays the same between labs.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import re
import subprocess
import tarfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuops.errors import OperationFailed
from gpuops_lab import registry

if TYPE_CHECKING:
    from gpuops_lab import Lab

log = logging.getLogger(__name__)

BASE_REPO = "lab/base"
BASE_TAG = "1"
BUSYBOX = Path("/bin/busybox")


def _base_context() -> io.BytesIO:
    """A build context: ``FROM scratch`` + static busybox with every applet linked."""
    if not BUSYBOX.exists():
        raise OperationFailed(
            f"{BUSYBOX} is missing", hint="install busybox-static (scripts/setup-system.sh)"
        )
    applets = subprocess.run(
        [str(BUSYBOX), "--list-full"], capture_output=True, text=True, check=True, timeout=30
    ).stdout.split()
    dockerfile = (
        b"FROM scratch\n"
        b"COPY rootfs/ /\n"
        b'LABEL org.opencontainers.image.title="gpuops lab base (busybox)"\n'
        b'ENV PATH="/usr/sbin:/usr/bin:/sbin:/bin"\n'
        b'CMD ["/bin/sh"]\n'
    )
    files = {
        "Dockerfile": (dockerfile, 0o644),
        "rootfs/etc/passwd": (b"root:x:0:0:root:/root:/bin/sh\n", 0o644),
        "rootfs/etc/group": (b"root:x:0:\n", 0o644),
    }
    dirs = {"rootfs/root": 0o700, "rootfs/tmp": 0o1777}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        made: set[str] = set()

        def mkdir(name: str, mode: int = 0o755) -> None:
            parent = name.rsplit("/", 1)[0]
            if "/" in name and parent not in made:
                mkdir(parent)
            if name not in made:
                info = tarfile.TarInfo(name)
                info.type, info.mode = tarfile.DIRTYPE, mode
                tar.addfile(info)
                made.add(name)

        for name, mode in dirs.items():
            mkdir(name, mode)
        for name, (data, mode) in files.items():
            if "/" in name:
                mkdir(name.rsplit("/", 1)[0])
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        mkdir("rootfs/bin")
        tar.add(str(BUSYBOX), "rootfs/bin/busybox")
        for applet in applets:
            if "/" not in applet or applet == "bin/busybox":
                continue  # e.g. "linuxrc"
            name = f"rootfs/{applet}"
            mkdir(name.rsplit("/", 1)[0])
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, "/bin/busybox"
            tar.addfile(info)
    buf.seek(0)
    return buf


_DIGEST = re.compile(r"digest: (sha256:[0-9a-f]{64})")


def push(lab: Lab, docker_client: Any, ref: str) -> str:
    """Push ``ref`` through Podman and return the manifest digest the registry reported."""
    repo, tag = ref.rsplit(":", 1)
    digest = ""
    for event in docker_client.api.push(
        repo, tag=tag, auth_config=registry.auth_config(lab), stream=True, decode=True
    ):
        if "error" in event:
            raise OperationFailed(f"pushing {ref} to the lab registry failed: {event['error']}")
        found = _DIGEST.search(str(event.get("status", "")))
        if found:
            digest = found.group(1)
    if not digest:
        raise OperationFailed(f"pushing {ref}: the registry reported no digest")
    return digest


def _cache_file(lab: Lab, context: bytes) -> Path:
    """Where the built base image is cached; the name changes with busybox or the recipe."""
    key = hashlib.sha256(context).hexdigest()[:16]
    return lab.config.cache / "lab" / f"base-image-{key}.tar"


def _build_or_load(lab: Lab, api: Any, ref: str) -> tuple[Any, str]:
    """The base image in Podman's storage, tagged ``ref``: loaded from the cache if there,
    else built (and then cached). Returns the image and how it came ("cache" / "build")."""
    context = _base_context()
    cached = _cache_file(lab, context.getvalue())
    if cached.is_file():
        try:
            with cached.open("rb") as data:
                images = api.images.load(data)
            image = images[0]
            repo, tag = ref.rsplit(":", 1)
            image.tag(repo, tag)
            return api.images.get(ref), "cache"
        except Exception as exc:  # a damaged cache file: build instead
            # the cache is shared ($GPUOPS_CACHE): never removed, only replaced by rename below
            log.warning("cached base image %s is unusable (%s); building", cached, exc)
    image, _ = api.images.build(
        fileobj=context, custom_context=True, tag=ref, rm=True, forcerm=True
    )
    with contextlib.suppress(OSError):
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        with tmp.open("wb") as out:
            for chunk in image.save(named=False):
                out.write(chunk)
        tmp.replace(cached)
    return image, "build"


def build_and_push(lab: Lab, api: Any, reg: dict[str, Any]) -> dict[str, str]:
    """Put the busybox base image into Podman (``api``: a docker client on it) and push it
    to the lab registry (``reg``: the registry's facts)."""
    ref = f"{reg['url']}/{BASE_REPO}:{BASE_TAG}"
    try:
        started = time.monotonic()
        image, source = _build_or_load(lab, api, ref)
        ready = time.monotonic()
        digest = push(lab, api, ref)
        log.info(
            "base image %s from %s in %.2fs, pushed in %.2fs",
            ref,
            source,
            ready - started,
            time.monotonic() - ready,
        )
    except OperationFailed:
        raise
    except Exception as exc:  # the docker SDK raises its own (untyped) errors
        raise OperationFailed(f"building the lab base image {ref} failed: {exc}") from exc
    return {
        "base_image": ref,
        "base_image_id": str(image.id),
        "base_digest": digest,
        "base_source": source,
    }
