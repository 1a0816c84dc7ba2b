"""Helpers for the release tests: images built and pushed for real (Podman API, lab registry),
environments files, Deployments on the lab's real control plane, and reading back what the
cluster, the registry and the history say."""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from integration.conftest_kube import KubeLab, wait_until
from integration.conftest_registry import RegistryLab, pushed_digest
from result_documents import check_document

from gpuops.contract import error_document, result_document
from gpuops.core.releasehistory import CHANGE_CAUSE, HISTORY_KEY, RELEASE_ANNOTATION
from gpuops.errors import GpuOpsError
from gpuops.usecases.images.registryops import RegistryAccess
from gpuops.usecases.outcome import Outcome
from gpuops.usecases.releases.model import ReleaseOutcome
from gpuops.usecases.releases.registry import ImageRegistry
from gpuops_lab import kube as labkube

REPOSITORY_PATH = "ai/infer"
#: The versions pushed once per session; the -labfault- tags make the lab's kwok stage a
#: kubelet's report for them (gpuops_lab.kwokstages).
TAGS = (
    "1.0.0",
    "1.1.0",
    "1.2.0",
    "1.3.0",
    "2.0.0-labfault-pullerror",
    "2.0.0-labfault-crashloop",
    "2.0.0-labfault-notready",
)


def pair(outcome: Outcome[ReleaseOutcome]) -> tuple[ReleaseOutcome, GpuOpsError | None]:
    """A release's outcome as (its result, its problem), what the release tests assert on;
    the document the CLI would write of it is checked against its schema first."""
    command = f"release {outcome.result.action}"
    if outcome.problem is None:
        check_document(result_document(command, outcome.to_dict()))
    else:
        check_document(error_document(command, outcome.problem, outcome.to_dict()))
    return outcome.result, outcome.problem


class LabRegistry(ImageRegistry):
    """The release's own registry side (usecases/releases/registry.py, the image use cases)
    on the plain-HTTP lab registry; it remembers the tag moves it made."""

    def __init__(self, rlab: RegistryLab) -> None:
        super().__init__(RegistryAccess(plain_http=True))
        self.rlab = rlab
        self.moves: list[tuple[str, str, str]] = []

    def move_tag(self, repository: str, digest: str, tag: str) -> None:
        super().move_tag(repository, digest, tag)
        self.moves.append((repository, digest, tag))


def build_and_push(rlab: RegistryLab, tag: str) -> str:
    """A small real image per version (a label makes each digest distinct); its digest."""
    ref = f"{rlab.url}/{REPOSITORY_PATH}:{tag}"
    dockerfile = (
        f"FROM {rlab.base_image}\n"
        f'LABEL org.opencontainers.image.version="{tag}" com.nvidia.cuda.version="12.2.2"\n'
    )
    rlab.docker.images.build(
        fileobj=io.BytesIO(dockerfile.encode()), tag=ref, rm=True, forcerm=True
    )
    return pushed_digest(rlab.push(ref))


@dataclass
class Images:
    repository: str
    digests: dict[str, str]

    def ref(self, tag: str) -> str:
        return f"{self.repository}:{tag}@{self.digests[tag]}"


def push_images(rlab: RegistryLab, tags: tuple[str, ...] = TAGS) -> Images:
    return Images(f"{rlab.url}/{REPOSITORY_PATH}", {t: build_and_push(rlab, t) for t in tags})


#: More versions for the progressive releases (issue 20): the app stand-in's behaviours
#: (gpuops_lab.labapp) and a smoke test that fails (gpuops_lab.kwokstages' Job stages).
PROGRESSIVE_TAGS = (
    "2.1.0-labfault-errors",
    "2.1.0-labfault-smokefail",
)


def deployment(
    name: str,
    image: str,
    *,
    replicas: int = 2,
    gpus: int = 1,
    node_class: str = "nvidia-h800",
    max_surge: int | str = 1,
    max_unavailable: int | str = 0,
    memory: str = "1Gi",
    env: dict[str, str] | None = None,
    progress_deadline_s: int | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A GPU Deployment; ``labels``: more labels of its pods (the lab's app stand-in plays
    pods labelled ``gpuops.io/lab-app``), its selector stays ``app: name``."""
    selector = {"app": name}
    labels = {**selector, **(labels or {})}
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "resources": {
            "requests": {"cpu": "100m", "memory": memory, "nvidia.com/gpu": str(gpus)},
            "limits": {"nvidia.com/gpu": str(gpus)},
        },
    }
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": selector},
        "strategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": max_unavailable},
        },
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "nodeSelector": {"accelerator": node_class},
                "containers": [container],
                "terminationGracePeriodSeconds": 0,
                "automountServiceAccountToken": False,
            },
        },
    }
    if progress_deadline_s is not None:
        spec["progressDeadlineSeconds"] = progress_deadline_s
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": spec,
    }


def environment(namespace: str, name: str, repository: str, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "namespace": namespace,
        "deployment": name,
        "container": name,
        "image": repository,
        "node_class": "nvidia-h800",
        "rollout": {
            "unschedulable_seconds": 4,
            "image_pull_seconds": 5,
            "ready_seconds": 6,
            "unreachable_seconds": 5,
        },
        "lock": {"lease_seconds": 8},
    }
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key] = {**doc[key], **value}
        elif value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    return doc


def write_config(path: Path, environments: dict[str, dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"environments": environments}, sort_keys=False))
    return path


@dataclass
class Target:
    """One environment on the lab: its namespace, Deployment and environments file."""

    kube: KubeLab
    namespace: str
    name: str
    config: Path
    images: Images
    lines: list[str] = field(default_factory=list)

    def say(self, line: str) -> None:
        self.lines.append(line)

    def deployment(self) -> Any:
        return self.kube.apps.read_namespaced_deployment(self.name, self.namespace)

    def image(self) -> str:
        return str(self.deployment().spec.template.spec.containers[0].image)

    def annotations(self) -> dict[str, str]:
        return dict(self.deployment().metadata.annotations or {})

    def release_number(self) -> int | None:
        value = self.annotations().get(RELEASE_ANNOTATION)
        return int(value) if value else None

    def history(self, env: str) -> list[dict[str, Any]]:
        try:
            cm = self.kube.core.read_namespaced_config_map(f"gpuops-releases-{env}", self.namespace)
        except Exception:
            return []
        return list(json.loads((cm.data or {}).get(HISTORY_KEY, "[]")))

    def change_causes(self) -> list[str]:
        """What ``kubectl rollout history`` prints per revision, in revision order."""
        rss = self.kube.apps.list_namespaced_replica_set(
            self.namespace, label_selector=f"app={self.name}"
        ).items
        rss.sort(key=lambda rs: int(rs.metadata.annotations["deployment.kubernetes.io/revision"]))
        return [rs.metadata.annotations.get(CHANGE_CAUSE, "") for rs in rss]

    def leases(self) -> list[Any]:
        api = __import__("kubernetes").client.CoordinationV1Api(self.kube.api)
        return list(api.list_namespaced_lease(self.namespace).items)

    def wait_leases_silent(self, margin_s: float = 1.0) -> None:
        """Until every Lease of the namespace (the release locks) has gone unrenewed for its
        own leaseDurationSeconds plus ``margin_s``, read from the Lease itself (renewTime, else
        acquireTime) as Kubernetes defines it. A fixed sleep of the lease's length after the run
        also waited for time that had already passed since its last renewal."""
        for lease in self.leases():
            spec = lease.spec
            renewed = spec.renew_time or spec.acquire_time
            assert renewed is not None and spec.lease_duration_seconds, lease
            silent_at = renewed + timedelta(seconds=spec.lease_duration_seconds + margin_s)
            left = (silent_at - datetime.now(UTC)).total_seconds()
            if left > 0:
                time.sleep(left)

    def wait_rolled_out(self, timeout: float = 60.0) -> None:
        def done() -> bool:
            d = self.deployment()
            s = d.status
            return bool(
                (s.observed_generation or 0) >= d.metadata.generation
                and (s.updated_replicas or 0) == d.spec.replicas
                and (s.replicas or 0) == d.spec.replicas
                and (s.available_replicas or 0) == d.spec.replicas
            )

        wait_until(done, f"deployment {self.namespace}/{self.name} rolled out", timeout)


def own_nodes(
    kube: KubeLab,
    node_class: str,
    count: int = 2,
    memory: str = "64Gi",
    driver: str = "550.90.07",
    gpus: int = 8,
) -> list[str]:
    """kwok H800 nodes of a class only this test uses (``gpus`` GPUs, ``memory`` each)."""
    specs = [
        replace(
            labkube.gpu_node(
                f"{node_class}-{i}", "h800", driver, gpus=gpus, labels={"accelerator": node_class}
            ),
            memory=memory,
        )
        for i in range(count)
    ]
    labkube.create_gpu_nodes(kube.api, specs)
    return [s.name for s in specs]


def fill_memory(kube: KubeLab, namespace: str, nodes: list[str], memory: str) -> None:
    """Bind a pod asking for ``memory`` (no GPU) to each node: a data-loading job that leaves
    the GPUs free but not the memory a new inference pod needs."""
    for node in nodes:
        body = labkube.pod_body(f"dataprep-{node}", namespace=namespace, node=node, memory=memory)
        kube.core.create_namespaced_pod(namespace, body)
    wait_until(
        lambda: all(
            p.status.phase == "Running"
            for p in kube.core.list_namespaced_pod(namespace, label_selector="").items
            if p.metadata.name.startswith("dataprep-")
        ),
        "dataprep pods running",
    )


#: Namespaces the current test made (conftest_release removes them after each test, so
#: that one test's Deployments do not hold the shared node classes' GPUs for the next).
MADE: list[tuple[KubeLab, str]] = []


def remove_made() -> None:
    """Delete the namespaces the test made and wait until their pods are gone."""
    while MADE:
        kube, name = MADE.pop()
        kube.core.delete_namespace(name, grace_period_seconds=0)
        wait_until(
            lambda k=kube, n=name: not k.core.list_namespaced_pod(n).items,
            f"pods of namespace {name} gone",
            timeout=120,
        )


def namespace(kube: KubeLab, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kube.core.create_namespace({"metadata": {"name": name}})
    MADE.append((kube, name))
    wait_until(
        lambda: any(
            sa.metadata.name == "default"
            for sa in kube.core.list_namespaced_service_account(name).items
        ),
        f"default ServiceAccount in {name}",
    )
    return name


def make_target(
    kube: KubeLab,
    images: Images,
    tmp: Path,
    prefix: str,
    *,
    envs: Callable[[str, str, str], dict[str, dict[str, Any]]],
    ns: str | None = None,
    **deploy: Any,
) -> Target:
    ns = ns or namespace(kube, prefix)
    name = "infer"
    kube.apps.create_namespaced_deployment(ns, deployment(name, images.ref("1.0.0"), **deploy))
    config = write_config(tmp / f"{ns}.yaml", envs(ns, name, images.repository))
    target = Target(kube, ns, name, config, images)
    target.wait_rolled_out()
    return target
