"""Session fixtures for the two ways an agent gets the gpuops CLI (issue 2).

* ``wheelhouse``: an offline wheelhouse built once per session by scripts/wheelhouse.sh.
* ``simple_index``: that wheelhouse served as a PEP 503 "simple" index on 127.0.0.1 by
  ``python -m http.server`` (an internal index, as Artifactory/devpi/Nexus serve one).
* ``agent_image`` (lab): the Python base image (Debian bookworm from debootstrap, cached, see
  :mod:`gpuops_lab.pythonbase`) pushed to the lab registry, and the agent image built from
  ``resources/org/gpuops/agent/Containerfile`` on it through the lab's Podman API, pushed too.

Wire it from tests/python/conftest.py: ``pytest_plugins = [..., "integration.conftest_agent"]``.
"""

from __future__ import annotations

import hashlib
import html
import io
import os
import re
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_registry import RegistryLab, pushed_digest

from gpuops_lab import proc, pythonbase

ROOT = Path(__file__).resolve().parents[3]
AGENT = ROOT / "resources" / "org" / "gpuops" / "agent"
LIBRARY_VERSION = (ROOT / "resources" / "org" / "gpuops" / "VERSION").read_text().strip()
#: A port nothing listens on: pip would fail fast if it tried an index it was not given.
DEAD_INDEX = "http://127.0.0.1:9/simple/"


def offline_env(**extra: str) -> dict[str, str]:
    """The environment minus any pip configuration, with the default index unreachable:
    what the bootstrap does must come from the wheelhouse/index it is given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "GPUOPS_"))}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_INDEX_URL=DEAD_INDEX,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_CACHE_DIR="1",
    )
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """gpuops and every locked dependency as wheels (scripts/wheelhouse.sh), once."""
    out = tmp_path_factory.mktemp("wheelhouse")
    done = subprocess.run(
        [str(ROOT / "scripts" / "wheelhouse.sh"), str(out)],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"wheelhouse.sh failed:\n{done.stdout}\n{done.stderr}"
    return out


# -- a PEP 503 index over the wheelhouse ---------------------------------------------------
def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def write_simple_index(wheels: Path, root: Path) -> None:
    """``root/simple/<project>/index.html`` linking ``root/files/<wheel>#sha256=...``."""
    (root / "files").mkdir(parents=True)
    projects: dict[str, list[Path]] = {}
    for wheel in sorted(wheels.glob("*.whl")):
        (root / "files" / wheel.name).write_bytes(wheel.read_bytes())
        projects.setdefault(normalize(wheel.name.split("-")[0]), []).append(wheel)
    simple = root / "simple"
    simple.mkdir()
    links = "".join(f'<a href="{p}/">{p}</a>\n' for p in sorted(projects))
    (simple / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")
    for project, files in projects.items():
        (simple / project).mkdir()
        anchors = "".join(
            f'<a href="../../files/{html.escape(w.name)}#sha256='
            f'{hashlib.sha256(w.read_bytes()).hexdigest()}">{html.escape(w.name)}</a>\n'
            for w in files
        )
        (simple / project / "index.html").write_text(
            f"<!DOCTYPE html>\n<html><body>\n{anchors}</body></html>\n"
        )


@dataclass
class SimpleIndex:
    url: str  # .../simple/
    root: Path
    server: subprocess.Popen[bytes]
    log: Path

    def requested(self) -> list[str]:
        """Paths the server was asked for (http.server logs each request on stderr)."""
        return re.findall(r'"GET (\S+) HTTP', self.log.read_text(errors="replace"))


@pytest.fixture(scope="session")
def simple_index(
    wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SimpleIndex]:
    root = tmp_path_factory.mktemp("index")
    write_simple_index(wheelhouse, root)
    port = proc.free_port()
    log = root.parent / f"{root.name}-http.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
            cwd=root,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/simple/"
    try:
        proc.wait_for(lambda: proc.http_ok(url), f"index on {url}", timeout=20, pid=server.pid)
        yield SimpleIndex(url=url, root=root, server=server, log=log)
    finally:
        server.terminate()
        server.wait(timeout=10)


# -- the agent image -----------------------------------------------------------------------
@dataclass
class AgentImage:
    ref: str
    digest: str
    base: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)


def agent_context(wheels: Path) -> io.BytesIO:
    """Build context: the agent folder (Containerfile, scripts) plus ``wheelhouse/``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(AGENT.iterdir()):
            if path.is_file():
                tar.add(str(path), path.name)
        tar.add(str(wheels), "wheelhouse")
    buf.seek(0)
    return buf


def build_agent_image(rlab: RegistryLab, wheels: Path, base_ref: str) -> tuple[str, str]:
    """Build the Containerfile on ``base_ref`` and push it; (ref, pushed digest)."""
    ref = rlab.ref("gpuops-agent")
    try:
        rlab.docker.images.build(
            fileobj=agent_context(wheels),
            custom_context=True,
            dockerfile="Containerfile",
            tag=ref,
            buildargs={"BASE_IMAGE": base_ref, "GPUOPS_VERSION": LIBRARY_VERSION},
            rm=True,
            forcerm=True,
            timeout=900,
        )
    except Exception as exc:  # docker.errors.BuildError carries the build log
        build_log = "".join(str(e.get("stream", e)) for e in getattr(exc, "build_log", []))
        raise AssertionError(f"agent image build failed: {exc}\n{build_log[-4000:]}") from exc
    return ref, pushed_digest(rlab.push(ref))


@pytest.fixture(scope="session")
def agent_image(registry_lab: RegistryLab, wheelhouse: Path) -> AgentImage:
    started = time.monotonic()
    base = pythonbase.build_and_push(registry_lab.lab, registry_lab.docker)
    base_done = time.monotonic()
    ref, digest = build_agent_image(registry_lab, wheelhouse, str(base["image"]))
    return AgentImage(
        ref=ref,
        digest=digest,
        base=base,
        timings={
            "base_s": round(base_done - started, 2),
            "agent_build_push_s": round(time.monotonic() - base_done, 2),
        },
    )
