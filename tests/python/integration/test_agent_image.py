"""The agent image (the recommended path), built and run for real in the lab.

A Python-capable base (Debian bookworm from debootstrap, see gpuops_lab.pythonbase) is pushed
to the lab registry; resources/org/gpuops/agent/Containerfile is built on it through the lab's
Podman API with the offline wheelhouse in the build context, pushed, pulled back and run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.conftest_agent import (
    AGENT,
    LIBRARY_VERSION,
    AgentImage,
)
from integration.conftest_registry import RegistryLab, split_ref

from gpuops_lab import pythonbase

pytestmark = pytest.mark.lab


def run(rlab: RegistryLab, image: str, *argv: str, **kw: Any) -> str:
    out = rlab.docker.containers.run(image, list(argv), remove=True, **kw)
    return bytes(out).decode()


def test_pushed_agent_image_reports_the_library_version(
    agent_image: AgentImage, registry_lab: RegistryLab, record_testsuite_property: Any
) -> None:
    # what the image cost, as JUnit suite properties (--junitxml)
    for key, value in {**agent_image.timings, "base_source": agent_image.base["source"]}.items():
        record_testsuite_property(f"agent_image_{key}", value)
    # drop the local copy: the container runs what the registry serves
    registry_lab.docker.images.remove(agent_image.ref)
    pulled = registry_lab.docker.images.pull(agent_image.ref)
    repo = agent_image.ref.rsplit(":", 1)[0]
    assert f"{repo}@{agent_image.digest}" in pulled.attrs["RepoDigests"]
    assert registry_lab.manifest_digest(*split_ref(agent_image.ref)) == agent_image.digest

    out = run(registry_lab, agent_image.ref, "gpuops", "--output", "json", "--version")
    assert json.loads(out) == {"version": LIBRARY_VERSION}


def test_agent_as_the_pod_template_runs_it_has_the_cli_and_needs_no_bootstrap(
    agent_image: AgentImage, registry_lab: RegistryLab, wheelhouse: Path
) -> None:
    config = registry_lab.docker.images.get(agent_image.ref).attrs["Config"]
    assert config["Labels"]["org.gpuops.version"] == LIBRARY_VERSION
    env = dict(item.split("=", 1) for item in config["Env"])
    pod = yaml.safe_load((AGENT / "pod.yaml").read_text())
    # the container the steps run in (defaultContainer 'gpuops'), not jnlp or builder
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "gpuops")
    pod_env = {e["name"]: e["value"] for e in container["env"]}
    run_as = str(container["securityContext"]["runAsUser"])
    # the pod template and the image agree on the user and on where the CLI is
    assert config["User"] == run_as
    assert pod_env["GPUOPS_CLI"] == env["GPUOPS_CLI"]
    assert container["image"] == "@GPUOPS_AGENT_IMAGE@"

    # one container (each costs a full rootfs copy on vfs): as the pod's user, the CLI that
    # gpuopsExec would call, then the plain-agent bootstrap, which must find the CLI there
    # and install nothing (its index is unreachable and /opt/gpuops is not writable by 1000);
    # the hashed requirements file it was installed from is kept in the image, and the venv
    # holds the product as gpu-ops-cli (never the public index's unrelated "gpuops")
    dists = (
        "import importlib.metadata as m; "
        "print(sorted(n for d in m.distributions() if 'ops' in (n := d.metadata['Name'])))"
    )
    script = (
        'id -u; echo "--"; "$GPUOPS_CLI" --output json --version; echo "--"; '
        'sh /usr/local/lib/gpuops/bootstrap-gpuops.sh; echo "--"; '
        f'/opt/gpuops/bin/python -c "{dists}"; echo "--"; cat "$GPUOPS_REQUIREMENTS"'
    )
    bootstrap_env = {
        "GPUOPS_VERSION": LIBRARY_VERSION,
        "GPUOPS_INDEX_URL": "http://127.0.0.1:9/simple/",
        "GPUOPS_REQUIREMENTS": "/usr/local/lib/gpuops/requirements.txt",
        "GPUOPS_VENV": "/opt/gpuops",
    }
    out = run(
        registry_lab, agent_image.ref, "sh", "-c", script, user=run_as, environment=bootstrap_env
    )
    uid, version, bootstrap, products, kept = out.split("\n--\n")
    assert products.strip() == "['gpu-ops-cli']"
    assert kept == (wheelhouse / "requirements.txt").read_text()
    assert uid == run_as
    assert json.loads(version) == {"version": LIBRARY_VERSION}
    assert bootstrap.splitlines() == [
        f"gpuops {LIBRARY_VERSION}",
        f"GPUOPS_CLI={env['GPUOPS_CLI']}",
    ]


def test_python_base_is_reused_with_the_same_identity(
    agent_image: AgentImage, registry_lab: RegistryLab
) -> None:
    """A second request in the same lab takes the image already in storage: same image ID,
    same registry digest; and the cache archive it came from is where the recipe says."""
    again = pythonbase.build_and_push(registry_lab.lab, registry_lab.docker)
    assert again["source"] == "storage"
    assert (again["image_id"], again["digest"]) == (
        agent_image.base["image_id"],
        agent_image.base["digest"],
    )
    assert pythonbase.cache_file(registry_lab.lab.config.cache).is_file()
    out = run(registry_lab, again["image"], "python3", "-c", "import sys, venv; print(sys.version)")
    assert out.startswith("3.11.")
