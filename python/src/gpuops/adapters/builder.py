"""The image builder through the ``docker`` SDK: Docker, or Podman's Docker-compatible API.

The daemon is ``DOCKER_HOST`` (or ``--docker-host``); the SDK is imported only when a builder
is used. Registry credentials go to the daemon per call (``X-Registry-Auth`` for a push,
``X-Registry-Config`` for the base images of a build): nothing is written to ``~/.docker``.

A build and a push run under one deadline. When it passes, the connection to the daemon is
shut down (Docker then cancels the build; Podman 4 finishes it on its own and its result is
left unused) and the caller gets an OperationFailed. Every SDK or transport exception becomes a
gpu-ops error naming the daemon address and the image; log lines from the daemon are handed to
the caller, who redacts and prints them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuops.adapters.registry import Credentials
from gpuops.core.imagerecord import StepCount
from gpuops.errors import GpuOpsError, OperationFailed, Unreachable

log = logging.getLogger(__name__)

#: Image ids a build log names: Podman ``--> 4f85d5ecc54``, Docker `` ---> 4f85d5ecc548``.
_LOG_ID = re.compile(r"^\s*-+> (?:Using cache )?([0-9a-f]{11,64})\s*$")
_PUSH_DIGEST = re.compile(r"digest: (sha256:[0-9a-f]{64})")
_REFUSED = re.compile(r"unauthorized|authentication required|denied|forbidden|401|403", re.I)
_UNREACHABLE = re.compile(
    r"connection refused|no such host|i/o timeout|timeout|connection reset|EOF|dial tcp|"
    r"server gave HTTP response|certificate|x509|tls",
    re.I,
)
LineSink = Callable[[str], None]


class Deadline:
    """A point in time that a build and its push must finish by."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.end - time.monotonic())


@dataclass(frozen=True)
class BuildSpec:
    context: Path
    dockerfile: str  # as the daemon reads it: relative to the context, or absolute
    tag: str  # the first full reference; the others are added with :meth:`Builder.tag`
    build_args: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    target: str | None = None
    platform: str | None = None
    base_image: str | None = None  # from the Dockerfile
    registry: str | None = None  # where credentials (if any) apply for base-image pulls
    credentials: Credentials | None = None


@dataclass
class BuiltImage:
    image_id: str
    produced: list[str]  # image ids this build made: new since it started and named in its log
    # (not a base image it pulled)
    steps: StepCount
    attrs: dict[str, Any]  # the daemon's inspection of the image

    @property
    def size(self) -> int:
        return int(self.attrs.get("Size") or 0)

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.attrs.get("Config") or {})


class Builder:
    """One daemon connection (Docker or Podman API)."""

    def __init__(self, client: Any, address: str) -> None:
        self._client = client
        self._api = client.api
        self.address = address
        self._responses: list[Any] = []
        self._api.hooks["response"].append(self._remember)

    @classmethod
    def connect(
        cls, docker_host: str | None = None, api_version: str | None = None, timeout_s: float = 300
    ) -> Builder:
        """Connect to ``docker_host`` (else $DOCKER_HOST, else the local socket) and ping it.
        ``api_version`` None asks the daemon (slow on Podman: pass 1.41 there)."""
        import docker  # noqa: PLC0415 - heavy, only when a builder is used

        environment = dict(os.environ)
        if docker_host:
            environment["DOCKER_HOST"] = docker_host
        address = environment.get("DOCKER_HOST") or "the local Docker socket"
        try:
            client = docker.DockerClient.from_env(
                version=api_version or "auto", timeout=int(timeout_s), environment=environment
            )
            builder = cls(client, address)
            client.api.ping()
        except GpuOpsError:
            raise
        except Exception as exc:  # the SDK raises DockerException, requests' and urllib3's own
            raise Unreachable(
                f"cannot reach the image builder at {address}: {type(exc).__name__}",
                hint="set DOCKER_HOST (or --docker-host) to the Docker or Podman API socket, "
                "and --docker-api-version 1.41 for Podman",
            ) from None
        return builder

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client.close()

    def __enter__(self) -> Builder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the deadline ---------------------------------------------------------------------
    def _remember(self, response: Any, *args: Any, **kwargs: Any) -> Any:
        self._responses.append(response)
        return response

    @contextlib.contextmanager
    def _watchdog(self, deadline: Deadline) -> Iterator[threading.Event]:
        """Shut the daemon connection down when ``deadline`` passes; the event says it did."""
        fired = threading.Event()

        def fire() -> None:
            fired.set()
            for response in list(self._responses):
                sock: Any = getattr(getattr(response.raw, "connection", None), "sock", None)
                if sock is not None:
                    with contextlib.suppress(OSError, AttributeError):
                        sock.shutdown(socket.SHUT_RDWR)

        timer = threading.Timer(deadline.remaining(), fire)
        timer.daemon = True
        timer.start()
        try:
            yield fired
        finally:
            timer.cancel()
            self._responses.clear()

    def _failure(
        self, exc: BaseException, what: str, fired: threading.Event, deadline: Deadline
    ) -> GpuOpsError:
        if fired.is_set():
            return OperationFailed(
                f"{what} did not finish within the timeout of {deadline.seconds:.0f} s",
                hint="raise --timeout, or make the build cheaper (cache, smaller context)",
            )
        status = getattr(exc, "status_code", None)
        if status is not None and int(status) < 500:
            return OperationFailed(
                f"the image builder at {self.address} refused {what}: HTTP {status}"
            )
        return Unreachable(
            f"the image builder at {self.address} failed during {what}: {type(exc).__name__}",
            hint="is the Docker/Podman API service running? check DOCKER_HOST",
        )

    # -- operations -----------------------------------------------------------------------
    def image_ids(self) -> set[str]:
        try:
            return {str(i) for i in self._api.images(all=True, quiet=True)}
        except Exception as exc:
            raise Unreachable(
                f"the image builder at {self.address} did not list its images: {type(exc).__name__}"
            ) from None

    def inspect(self, ref: str) -> dict[str, Any] | None:
        """The daemon's inspection of ``ref`` (an id or a name), None when it has no such image."""
        import docker  # noqa: PLC0415

        try:
            return dict(self._api.inspect_image(ref))
        except docker.errors.ImageNotFound:
            return None
        except Exception as exc:
            raise Unreachable(
                f"the image builder at {self.address} could not inspect {ref}: {type(exc).__name__}"
            ) from None

    def build(self, spec: BuildSpec, on_line: LineSink, deadline: Deadline) -> BuiltImage:
        """Build ``spec``, streaming the daemon's log lines to ``on_line``."""
        from docker import auth  # noqa: PLC0415

        before = self.image_ids()
        if spec.credentials is not None and spec.registry:
            # X-Registry-Config for the FROM images; set in memory, never in ~/.docker
            self._api._auth_configs = auth.AuthConfig(
                {
                    "auths": {
                        spec.registry: {
                            "username": spec.credentials.username,
                            "password": spec.credentials.password,
                        }
                    }
                }
            )
        steps = StepCount()
        named: set[str] = set()
        image_id = ""
        error = ""
        what = f"the build of {spec.tag}"
        with self._watchdog(deadline) as fired:
            try:
                stream = self._api.build(
                    path=str(spec.context),
                    dockerfile=spec.dockerfile,
                    tag=spec.tag,
                    buildargs=dict(spec.build_args) or None,
                    labels=dict(spec.labels) or None,
                    target=spec.target,
                    platform=spec.platform,
                    rm=True,
                    forcerm=True,
                    decode=True,
                    timeout=max(1, int(deadline.remaining()) + 1),
                )
                for event in stream:
                    if "error" in event:
                        error = str(event.get("error") or "").strip()
                        on_line(f"ERROR: {error}")
                        continue
                    if "aux" in event and isinstance(event["aux"], dict):
                        image_id = str(event["aux"].get("ID") or image_id)
                    text = str(event.get("stream") or "")
                    for line in text.splitlines():
                        steps.feed(line)
                        found = _LOG_ID.match(line)
                        if found:
                            named.add(found.group(1))
                        if line.strip():
                            on_line(line)
            except GpuOpsError:
                raise
            except Exception as exc:
                raise self._failure(exc, what, fired, deadline) from None
            if fired.is_set():
                raise self._failure(TimeoutError(), what, fired, deadline)
        if error:
            raise OperationFailed(
                f"{what} failed: {error[:300]}", hint="the build log above shows the failing step"
            )
        attrs = self.inspect(image_id or spec.tag)
        if attrs is None:
            raise OperationFailed(f"{what} reported success but the image is not there")
        image_id = str(attrs.get("Id") or image_id)
        named.add(image_id.removeprefix("sha256:"))
        produced = [
            i
            for i in self.image_ids() - before
            if any(i.removeprefix("sha256:").startswith(short) for short in named)
        ]
        # a base image this build pulled is not among them: the base the last build used stays
        # on the agent (issue 22; `image clean --daemon-wide` removes it once no build names it)
        return BuiltImage(image_id, produced, steps, attrs)

    def tag(self, image_id: str, ref: str) -> None:
        repo, _, tag = ref.rpartition(":")
        try:
            self._api.tag(image_id, repo, tag)
        except Exception as exc:
            raise OperationFailed(
                f"the image builder at {self.address} could not tag {ref}: {type(exc).__name__}"
            ) from None

    def push(
        self, ref: str, credentials: Credentials | None, on_line: LineSink, deadline: Deadline
    ) -> str | None:
        """Push ``ref``; the digest the daemon reported, if it did (the caller asks the
        registry: that is the digest that counts)."""
        repo, _, tag = ref.rpartition(":")
        auth = (
            {"username": credentials.username, "password": credentials.password}
            if credentials
            else None
        )
        digest = None
        error = ""
        what = f"the push of {ref}"
        with self._watchdog(deadline) as fired:
            try:
                for event in self._api.push(
                    repo, tag=tag, auth_config=auth, stream=True, decode=True
                ):
                    if "error" in event:
                        error = str(event.get("error") or "").strip()
                        on_line(f"ERROR: {error}")
                        continue
                    status = str(event.get("status") or "")
                    found = _PUSH_DIGEST.search(status)
                    if found:
                        digest = found.group(1)
                    if status and not event.get("progressDetail"):
                        on_line(f"{event.get('id', '')}: {status}".lstrip(": "))
            except Exception as exc:
                raise self._failure(exc, what, fired, deadline) from None
            if fired.is_set():
                raise self._failure(TimeoutError(), what, fired, deadline)
        if error:
            registry = ref.split("/", 1)[0]
            if _REFUSED.search(error):
                raise OperationFailed(
                    f"the registry {registry} refused {what} (authentication or permission)",
                    hint="check the registry credentials (GPUOPS_REGISTRY_USERNAME/PASSWORD)",
                )
            if _UNREACHABLE.search(error):
                raise Unreachable(
                    f"the image builder could not reach the registry {registry} for {what}",
                    hint="is the registry up, and does the daemon trust its certificate?",
                )
            raise OperationFailed(f"{what} failed", hint="the push log above says why")
        return digest

    def remove(self, refs: list[str], image_ids: list[str]) -> dict[str, list[str]]:
        """Untag ``refs``, then remove ``image_ids`` (never forced: an image a container or
        another image still uses stays). Returns what was removed and what was kept."""
        removed: list[str] = []
        kept: list[str] = []
        for ref in refs:
            try:
                self._api.remove_image(ref, force=False, noprune=True)
                removed.append(ref)
            except Exception as exc:
                kept.append(f"{ref} ({type(exc).__name__})")
        remaining = list(dict.fromkeys(image_ids))
        for _ in range(len(remaining) + 1):  # children first: retry what a child held back
            progress = False
            for image in list(remaining):
                try:
                    self._api.remove_image(image, force=False, noprune=False)
                except Exception as exc:
                    if getattr(exc, "status_code", None) == 404:  # went with its last tag
                        removed.append(image)
                        remaining.remove(image)
                        progress = True
                    continue
                removed.append(image)
                remaining.remove(image)
                progress = True
            if not progress:
                break
        kept += [f"{image} (still in use)" for image in remaining]
        return {"removed": removed, "kept": kept}

    # -- the image store (``gpuops image clean``) -----------------------------------------
    def list_images(self) -> list[dict[str, Any]]:
        """Every image, intermediate ones included (``GET /images/json?all=1``)."""
        try:
            return [dict(i) for i in self._api.images(all=True)]
        except Exception as exc:
            raise Unreachable(
                f"the image builder at {self.address} did not list its images: {type(exc).__name__}"
            ) from None

    def system_df(self) -> dict[str, Any]:
        """The daemon's own disk figures (``GET /system/df``)."""
        try:
            return dict(self._api.df())
        except Exception as exc:
            raise Unreachable(
                f"the image builder at {self.address} did not report its disk use: "
                f"{type(exc).__name__}"
            ) from None

    def remove_one(self, ref: str) -> tuple[list[str], str | None]:
        """Remove (untag) ``ref``, never forced: (the image ids the daemon deleted, None), or
        ([], why it refused). An image already gone is ([], "gone")."""
        try:
            answer = self._api.remove_image(ref, force=False, noprune=True)
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if status == 404:
                return [], "gone"
            if status is None:
                raise Unreachable(
                    f"the image builder at {self.address} failed while removing {ref}: "
                    f"{type(exc).__name__}"
                ) from None
            explanation = str(getattr(exc, "explanation", "") or "")[:200]
            return [], f"HTTP {status}: {explanation}".rstrip(": ")
        deleted = [
            str(e["Deleted"]) for e in answer or [] if isinstance(e, dict) and e.get("Deleted")
        ]
        return [d if d.startswith("sha256:") else f"sha256:{d}" for d in deleted], None

    def prune_build_cache(self) -> tuple[int | None, str | None]:
        """``docker builder prune`` (``POST /build/prune``): (bytes reclaimed, None), or
        (None, why not: Podman 4.3 has no such endpoint and answers 404)."""
        try:
            answer = self._api.prune_builds()
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if status is None:
                raise Unreachable(
                    f"the image builder at {self.address} failed during the build cache prune: "
                    f"{type(exc).__name__}"
                ) from None
            return None, f"the daemon answered HTTP {status} (no build cache prune)"
        return int((answer or {}).get("SpaceReclaimed") or 0), None
