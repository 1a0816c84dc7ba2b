"""The build pod template (resources/org/gpuops/agent/pod.yaml), checked by real components.

The lab runs no containers for pods (kwok), so every pod template the library ships is checked
by the lab's real kube-apiserver with a server-side dry run (create with dryRun=All and strict
field validation: admission and validation run, nothing is stored). The builder container's
image (builder.Containerfile) is built through the lab's Podman API and its API service started
with runc; the Docker SDK then pings it through the socket, as buildImage's CLI would.

LAB STAND-IN: the builder's production base is quay.io/podman/stable, which cannot be pulled
here. The test builds builder.Containerfile on a stand-in base instead: the lab's busybox base
plus this machine's podman, conmon and runc binaries and their libraries, and runs the service
as root inside its container (BUILDER_USER=0; the stand-in has no newuidmap/subuid set-up), so
rootless Podman itself is not exercised here (docs/JENKINS-AGENT.md says so).
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
import yaml
from integration.conftest_kube import KubeLab, wait_until
from integration.conftest_registry import RegistryLab
from kubernetes import client

from gpuops_lab import podmanstandin

pytestmark = [pytest.mark.lab, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[3]
RESOURCES = ROOT / "resources"
AGENT = RESOURCES / "org" / "gpuops" / "agent"
#: Placeholder -> global property, as org.gpuops.AgentPod fills them (AgentPodTest checks that).
PLACEHOLDERS = {
    "@GPUOPS_JNLP_IMAGE@": "GPUOPS_JNLP_IMAGE",
    "@GPUOPS_AGENT_IMAGE@": "GPUOPS_AGENT_IMAGE",
    "@GPUOPS_BUILDER_IMAGE@": "GPUOPS_BUILDER_IMAGE",
}
IMAGES = {
    "GPUOPS_JNLP_IMAGE": "registry.internal/jenkins/inbound-agent:3309.v27b9314fd1a4-1-jdk17",
    "GPUOPS_AGENT_IMAGE": "registry.internal/gpu-ops/agent:0.1.0",
    "GPUOPS_BUILDER_IMAGE": "registry.internal/gpu-ops/builder:0.1.0",
}
SOCKET_DIR = "/run/gpuops-builder"


def pod_templates() -> list[Path]:
    """Every pod template the library ships: each YAML resource whose kind is Pod."""
    found = []
    for path in sorted(RESOURCES.rglob("*.y*ml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
        if any(d.get("kind") == "Pod" for d in docs):
            found.append(path)
    return found


def render(path: Path, images: dict[str, str] = IMAGES) -> dict[str, Any]:
    """The template as AgentPod.yaml(this) gives it to the Kubernetes plugin."""
    text = path.read_text()
    for placeholder, prop in PLACEHOLDERS.items():
        text = text.replace(placeholder, images[prop])
    assert not re.search(r"@[A-Z_]+@", text), f"{path}: a placeholder AgentPod does not fill"
    pod: dict[str, Any] = yaml.safe_load(text)
    # the plugin names each agent pod; it also adds its workspace volume and env (not modelled)
    pod["metadata"]["name"] = f"gpuops-agent-{uuid.uuid4().hex[:6]}"
    return pod


def post_dry_run(kube: KubeLab, namespace: str, pod: dict[str, Any]) -> tuple[int, Any]:
    """POST the pod as JSON with dryRun=All and strict field validation, through the official
    client's connection and credentials but without its models (which would refuse a bad
    field before the server sees it); (HTTP status, decoded body)."""
    cfg = kube.api.configuration
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    for auth in cfg.auth_settings().values():
        if auth.get("in") == "header" and auth.get("value"):
            headers[str(auth["key"])] = str(auth["value"])
    resp = kube.api.rest_client.pool_manager.request(
        "POST",
        f"{str(cfg.host).rstrip('/')}/api/v1/namespaces/{namespace}/pods"
        "?dryRun=All&fieldValidation=Strict",
        body=json.dumps(pod).encode(),
        headers=headers,
        preload_content=True,
        timeout=60,
    )
    return resp.status, json.loads(resp.data)


def dry_run(kube: KubeLab, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
    status, body = post_dry_run(kube, namespace, pod)
    assert status == 201, f"refused: HTTP {status}: {body.get('message')}"
    return dict(body)


def refused(kube: KubeLab, namespace: str, pod: dict[str, Any]) -> tuple[int, str]:
    status, body = post_dry_run(kube, namespace, pod)
    assert status >= 400, "the apiserver accepted it"
    return status, str(body.get("message"))


def make_namespace(kube: KubeLab, level: str) -> str:
    """A namespace whose Pod Security admission enforces ``level`` (the lab's apiserver runs
    the PodSecurity admission plugin, on by default)."""
    name = f"agent-{level[:4]}-{uuid.uuid4().hex[:6]}"
    labels = {"pod-security.kubernetes.io/enforce": level}
    kube.core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels))
    )
    # pods need the namespace's default ServiceAccount (ServiceAccount admission)
    wait_until(
        lambda: any(
            sa.metadata.name == "default"
            for sa in kube.core.list_namespaced_service_account(name).items
        ),
        f"default ServiceAccount in {name}",
    )
    return name


@pytest.fixture
def namespaces(kube_lab: KubeLab) -> Iterator[dict[str, str]]:
    made = {level: make_namespace(kube_lab, level) for level in ("privileged", "baseline")}
    yield made
    for name in made.values():
        kube_lab.core.delete_namespace(name)


def test_every_pod_template_passes_the_apiservers_dry_run(
    kube_lab: KubeLab, namespaces: dict[str, str]
) -> None:
    templates = pod_templates()
    assert AGENT / "pod.yaml" in templates
    namespace = namespaces["privileged"]
    for path in templates:
        created = dry_run(kube_lab, namespace, render(path))
        # validated and defaulted by the server, not stored
        assert created["metadata"]["uid"], path
        assert created["spec"]["containers"][0]["terminationMessagePath"] == "/dev/termination-log"
        assert kube_lab.core.list_namespaced_pod(namespace).items == []
    build = dry_run(kube_lab, namespace, render(AGENT / "pod.yaml"))
    containers = {c["name"]: c for c in build["spec"]["containers"]}
    # jnlp runs the agent; 'gpuops' is Jenkinsfile.example's defaultContainer
    assert list(containers) == ["jnlp", "gpuops", "builder"]
    assert {c["image"] for c in containers.values()} == set(IMAGES.values())
    # the steps' DOCKER_HOST is the socket the builder's service listens on, on a shared volume
    docker_host = {e["name"]: e["value"] for e in containers["gpuops"]["env"]}["DOCKER_HOST"]
    assert containers["builder"]["command"][-1] == docker_host
    assert docker_host == f"unix://{SOCKET_DIR}/podman.sock"
    for name in ("gpuops", "builder"):
        mounts = {m["name"]: m["mountPath"] for m in containers[name]["volumeMounts"]}
        assert mounts["builder-socket"] == SOCKET_DIR
    for name in ("jnlp", "gpuops"):
        sc = containers[name]["securityContext"]
        assert (sc["runAsNonRoot"], sc["allowPrivilegeEscalation"]) == (True, False)
        assert sc["capabilities"] == {"drop": ["ALL"]}
    builder = containers["builder"]["securityContext"]
    assert builder["runAsNonRoot"] is True and "privileged" not in builder
    assert builder["capabilities"] == {"drop": ["ALL"], "add": ["SETUID", "SETGID"]}


def test_a_pod_template_with_a_bad_field_is_refused(
    kube_lab: KubeLab, namespaces: dict[str, str]
) -> None:
    namespace = namespaces["privileged"]
    # a field Kubernetes does not have (here: a Jenkins option put into the pod spec)
    pod = render(AGENT / "pod.yaml")
    pod["spec"]["defaultContainer"] = "gpuops"
    status, message = refused(kube_lab, namespace, pod)
    assert status == 400
    assert 'unknown field "spec.defaultContainer"' in message
    # a value the field does not take
    pod = render(AGENT / "pod.yaml")
    pod["spec"]["containers"][1]["imagePullPolicy"] = "Sometimes"
    status, message = refused(kube_lab, namespace, pod)
    assert status == 422
    assert "spec.containers[1].imagePullPolicy" in message
    # two containers with one name: what a copied container block would give
    pod = render(AGENT / "pod.yaml")
    pod["spec"]["containers"][2]["name"] = "gpuops"
    status, message = refused(kube_lab, namespace, pod)
    assert status == 422 and "Duplicate value" in message


def test_pod_security_the_builder_needs_privileged_the_agents_meet_restricted(
    kube_lab: KubeLab, namespaces: dict[str, str]
) -> None:
    """Why the namespace of the build pods needs Pod Security level 'privileged' (the docs
    say so): 'baseline' refuses the builder's unconfined seccomp and AppArmor profiles; the
    two agent containers alone pass 'restricted'."""
    status, message = refused(kube_lab, namespaces["baseline"], render(AGENT / "pod.yaml"))
    assert status == 403
    assert 'violates PodSecurity "baseline:latest"' in message
    assert 'container "builder"' in message and '"Unconfined"' in message
    assert '"jnlp"' not in message and '"gpuops"' not in message
    restricted = make_namespace(kube_lab, "restricted")
    try:
        pod = render(AGENT / "pod.yaml")
        pod["spec"]["containers"] = pod["spec"]["containers"][:2]
        pod["spec"]["volumes"] = [
            v for v in pod["spec"]["volumes"] if v["name"] != "builder-storage"
        ]
        assert dry_run(kube_lab, restricted, pod)["metadata"]["uid"]
    finally:
        kube_lab.core.delete_namespace(restricted)


# -- the builder image, built and its API service started --------------------------------------
def standin_context(base: str) -> io.BytesIO:
    """FROM the lab's busybox base + the host's podman, conmon, runc and their libraries."""
    files = podmanstandin.host_files()
    dockerfile = (
        f"FROM {base}\n"
        "COPY rootfs/ /\n"
        'LABEL org.opencontainers.image.title="LAB STAND-IN for quay.io/podman/stable"\n'
    )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add_bytes(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))

        add_bytes("Dockerfile", dockerfile.encode())
        add_bytes("rootfs/etc/containers/containers.conf", podmanstandin.CONTAINERS_CONF.encode())
        for path in sorted(files):
            tar.add(os.path.realpath(path), f"rootfs{path}")  # the file a symlink names
    buf.seek(0)
    return buf


def builder_context() -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(AGENT / "builder.Containerfile"), "builder.Containerfile")
    buf.seek(0)
    return buf


def test_the_builder_image_serves_the_docker_api_on_the_pods_socket(
    registry_lab: RegistryLab, tmp_path: Path, record_property: Any
) -> None:
    started = time.monotonic()
    api = registry_lab.docker
    standin = registry_lab.ref("podman-standin")
    api.images.build(
        fileobj=standin_context(registry_lab.base_image),
        custom_context=True,
        tag=standin,
        rm=True,
        forcerm=True,
        timeout=300,
    )
    builder = registry_lab.ref("gpuops-builder")
    image, _ = api.images.build(
        fileobj=builder_context(),
        custom_context=True,
        dockerfile="builder.Containerfile",
        tag=builder,
        buildargs={"BASE_IMAGE": standin, "BUILDER_USER": "0"},
        rm=True,
        forcerm=True,
        timeout=300,
    )
    built = time.monotonic()
    config = image.attrs["Config"]
    env = dict(item.split("=", 1) for item in config["Env"])
    pod = yaml.safe_load((AGENT / "pod.yaml").read_text())
    spec = {c["name"]: c for c in pod["spec"]["containers"]}["builder"]
    # the image and the pod template agree on the socket and on vfs storage
    assert f"unix://{env['GPUOPS_BUILDER_SOCKET']}" == spec["command"][-1]
    assert env["STORAGE_DRIVER"] == "vfs"

    # the socket directory stands for the pod's emptyDir: bind-mounted, as a volume would be
    sockets = tmp_path / "sock"
    sockets.mkdir()
    container = api.containers.run(
        builder, detach=True, volumes={str(sockets): {"bind": SOCKET_DIR, "mode": "rw"}}
    )
    try:
        socket_path = sockets / "podman.sock"
        wait_until(
            lambda: socket_path.exists() or container.reload() or container.status == "exited",
            "the builder's API socket",
            timeout=40,
        )
        assert socket_path.exists(), container.logs().decode(errors="replace")
        # what gpuops image build does with DOCKER_HOST=unix://<socket> (adapters/builder.py)
        inner = docker.DockerClient(base_url=f"unix://{socket_path}", version="1.41", timeout=60)
        try:
            assert inner.ping() is True
            version = inner.version()
        finally:
            inner.close()
        assert {c["Name"] for c in version["Components"]} >= {"Podman Engine"}
        assert version["ApiVersion"].startswith("1.")
    finally:
        container.remove(force=True)
    record_property("builder_build_s", round(built - started, 1))
    record_property("builder_total_s", round(time.monotonic() - started, 1))
