"""``gpuops image prune`` and ``image gc`` against real components: the lab's Debian
docker-registry (distribution 2.8, its own process here so that the test can restart it with
deletes off and read-only), the lab's real control plane (kube-apiserver, kwok) and real
releases (promote, rollback) of the release use cases.

One test, to pay the set-up once: a repository of 30 builds pushed by manifest (tiny blobs),
three environments. prod's history comes from real releases; dev's and staging's histories
are written through the release's own HistoryStore (the records a release writes, without
paying a rollout for each: a stand-in for two more release runs).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_kube import KubeLab
from integration.releaselab import (
    deployment,
    environment,
    namespace,
    own_nodes,
    pair,
    write_config,
)
from kubernetes import client

from gpuops.adapters.kube import KubeClient
from gpuops.core import releasehistory as hist
from gpuops.core.releaseconfig import Environment
from gpuops.core.retention import Policy
from gpuops.errors import GateRefused
from gpuops.render.html import prune as prune_page
from gpuops.usecases import releases
from gpuops.usecases.outcome import Outcome
from gpuops.usecases.releases import config as release_config
from gpuops.usecases.releases import model as m
from gpuops.usecases.releases.registry import ImageRegistry, registry_for
from gpuops.usecases.releases.store import HistoryStore
from gpuops.usecases.retention import gc as gc_usecase
from gpuops.usecases.retention import prune as prune_usecase
from gpuops_lab.ownregistry import OwnRegistry, random_layer

pytestmark = pytest.mark.timeout(300)
REPO = "ai/prune-infer"
CLASS = "prune-h800"
KEEP_LAST = 5


@dataclass
class Scene:
    kube: KubeLab
    reg: OwnRegistry
    tmp: Path
    builds: dict[str, str] = field(default_factory=dict)  # tag -> digest
    own_layer: dict[str, str] = field(default_factory=dict)  # digest -> its own layer
    kids: list[str] = field(default_factory=list)
    index: str = ""
    sig: dict[str, str] = field(default_factory=dict)
    ns: str = ""
    config: Path = Path()
    lines: list[str] = field(default_factory=list)

    @property
    def repository(self) -> str:
        return f"{self.reg.url}/{REPO}"

    def connect(self, _cluster: Any = None) -> KubeClient:
        return KubeClient.connect(str(self.kube.kubeconfig))

    def deps(self, say: Callable[[str], None] | None = None) -> releases.Deps:
        return releases.Deps(registry_for, say or self.lines.append, self.connect)

    @property
    def prod(self) -> m.Target:
        return m.Target(str(self.config), "prod")

    def request(self, dry_run: bool = False) -> prune_usecase.PruneRequest:
        return prune_usecase.PruneRequest(
            str(self.config), Policy(keep_last=KEEP_LAST), (), dry_run, str(self.kube.kubeconfig)
        )

    def prune(self, dry_run: bool = False) -> Outcome[prune_usecase.PruneResult]:
        return prune_usecase.prune(self.request(dry_run), self.connect)

    def snapshot(self) -> dict[str, bool]:
        every = [*self.builds.values(), *self.kids, self.index, *self.sig.values()]
        present = {d: self.reg.has_manifest(REPO, d) for d in every}
        return present | dict.fromkeys(self.reg.tags(REPO), True)


def test_prune_keeps_every_rollback_target_and_gc_frees_the_rest(
    kube_lab: KubeLab, tmp_path: Path
) -> None:
    reg = OwnRegistry(tmp_path / "registry")
    reg.start(deletes=True)
    try:
        scene = Scene(kube_lab, reg, tmp_path)
        _push(scene)
        _environments(scene)
        before = scene.snapshot()
        _a_release_in_flight_refuses_the_prune(scene, before)
        _refusals_change_nothing(scene, before)
        _prune_then_gc(scene)
        # a rollback to the oldest protected release still works
        scene.reg.start(deletes=True)
        _, error = pair(releases.rollback(m.RollbackRequest(scene.prod, "b02"), scene.deps()))
        assert error is None, (error, scene.lines)
        dep = kube_lab.apps.read_namespaced_deployment("infer-prod", scene.ns)
        want = f"{scene.repository}:b02@{scene.builds['b02']}"
        assert dep.spec.template.spec.containers[0].image == want
    finally:
        reg.stop()
        # the kwok node of this test's own class (the session's cluster is every lab test's:
        # test_lab_kube counts its nodes)
        for node in kube_lab.core.list_node(label_selector=f"accelerator={CLASS}").items:
            kube_lab.core.delete_node(node.metadata.name)


def _push(scene: Scene) -> None:
    """30 builds b01..b30 (b30 newest), an old index of two untagged manifests, signatures
    of b06 and b03, and the tag dev on b13 (dev's registry tag)."""
    reg, t0 = scene.reg, datetime.now(UTC) - timedelta(days=60)
    shared = reg.blob(REPO, random_layer(1024))
    for i in range(1, 31):
        tag = f"b{i:02d}"
        digest, layer = reg.image(REPO, tag, t0 + timedelta(days=i), random_layer(), shared)
        scene.builds[tag], scene.own_layer[digest] = digest, layer
    scene.kids = [reg.image(REPO, None, t0, random_layer(), shared)[0] for _ in range(2)]
    scene.index = reg.index(REPO, "multi", scene.kids, t0)
    for tag in ("b06", "b03"):
        hex_ = scene.builds[tag].split(":")[1]
        scene.sig[tag], _ = reg.image(REPO, f"sha256-{hex_}.sig", t0, random_layer(256), shared)
    b13 = _doc_of(reg, scene.builds["b13"])
    reg.manifest(REPO, "dev", b13, "application/vnd.oci.image.manifest.v1+json")


def _environments(scene: Scene) -> None:
    """dev runs b14, staging b08, prod b01 then two real releases b02, b06; dev's history
    names b11, staging's b08 and the index."""
    kube, builds = scene.kube, scene.builds
    scene.ns = ns = namespace(kube, "prune")
    own_nodes(kube, CLASS, count=1)
    for env, tag in {"dev": "b14", "staging": "b08", "prod": "b01"}.items():
        image = f"{scene.repository}:{tag}@{builds[tag]}"
        body = deployment(f"infer-{env}", image, replicas=1, node_class=CLASS, memory="256Mi")
        kube.apps.create_namespaced_deployment(ns, body)

    def env_doc(env: str, **extra: Any) -> dict[str, Any]:
        return environment(
            ns,
            f"infer-{env}",
            scene.repository,
            node_class=CLASS,
            registry={"plain_http": True},
            rollout={"ready_seconds": 30},
            **extra,
        )

    docs = {"dev": env_doc("dev", registry_tag="dev"), "staging": env_doc("staging")}
    scene.config = write_config(scene.tmp / "environments.yaml", {**docs, "prod": env_doc("prod")})
    envs = release_config.load(str(scene.config)).environments
    client = scene.connect()
    try:
        _history(client, envs["dev"], scene.repository, [("b11", builds["b11"])])
        staging = [("b08", builds["b08"]), ("multi", scene.index)]
        _history(client, envs["staging"], scene.repository, staging)
    finally:
        client.close()
    for tag in ("b02", "b06"):
        _, error = pair(releases.promote(m.PromoteRequest(scene.prod, tag=tag), scene.deps()))
        assert error is None, (error, scene.lines)


def _a_release_in_flight_refuses_the_prune(scene: Scene, before: dict[str, bool]) -> None:
    """prod's release of b20 paused between its pending record and its patch (its lock
    held): a prune then refuses before it deletes anything; the release finishes."""
    seen: dict[str, Any] = {}
    fired = threading.Event()

    def say(line: str) -> None:
        scene.lines.append(line)
        if line.startswith("infer-prod: ") and not fired.is_set():
            fired.set()
            seen["prune"] = scene.prune()
            seen["after"] = scene.snapshot()

    request = m.PromoteRequest(scene.prod, tag="b20")
    _, error = pair(releases.promote(request, scene.deps(say)))
    assert error is None, (error, scene.lines)
    assert fired.is_set(), scene.lines
    refused = seen["prune"]
    assert isinstance(refused.problem, GateRefused), refused.problem
    assert "is being released by" in refused.problem.message
    assert refused.exit_code == 3
    assert seen["after"] == before  # nothing deleted


def _expected(scene: Scene) -> tuple[set[str], set[str], set[str]]:
    """(tags kept, digests kept, digests deleted): protected (histories, running and
    ReplicaSets, dev's registry tag, the index's children, the signature of a protected
    digest, the release just made) and the last 5 builds."""
    b = scene.builds
    protected = {"b01", "b02", "b06", "b08", "b11", "b13", "b14", "b20"}
    last = {f"b{i}" for i in range(26, 31)}
    keep = {b[t] for t in protected | last} | {scene.index, *scene.kids, scene.sig["b06"]}
    doomed = {b[t] for t in set(b) - protected - last} | {scene.sig["b03"]}
    sig_tag = f"sha256-{b['b06'].split(':')[1]}.sig"
    return protected | last | {"multi", "dev", sig_tag}, keep, doomed


def _refusals_change_nothing(scene: Scene, before: dict[str, bool]) -> None:
    api, ns = scene.kube.core, scene.ns
    # a history that cannot be read
    good = dict(api.read_namespaced_config_map("gpuops-releases-dev", ns).data)
    bad = {"data": {hist.HISTORY_KEY: "{not json"}}
    api.patch_namespaced_config_map("gpuops-releases-dev", ns, bad)
    broken = scene.prune()
    assert isinstance(broken.problem, GateRefused) and broken.exit_code == 3, broken.problem
    assert "cannot read what dev protects" in broken.problem.message
    assert scene.snapshot() == before
    api.patch_namespaced_config_map("gpuops-releases-dev", ns, {"data": good})
    # a registry without deletes: the plan is made, the prune refused
    _, keep, doomed = _expected(scene)
    scene.reg.start(deletes=False)
    plan = scene.prune(dry_run=True)
    assert plan.ok, plan.problem
    planned = {d["digest"]: d for r in plan.to_dict()["repositories"] for d in r["decisions"]}
    assert {d for d, x in planned.items() if x["action"] == "delete"} == doomed
    assert {d for d, x in planned.items() if x["action"] == "keep"} == keep
    assert any("prod release #3" in r for r in planned[scene.builds["b20"]]["reasons"])
    assert any("registry tag dev" in r for r in planned[scene.builds["b13"]]["reasons"])
    html = prune_page.write(plan.to_dict(), scene.tmp / "page").page.read_text()
    assert f"plan: {len(doomed)} manifests would be deleted" in html
    assert html.count('data-key="action">delete<') == len(doomed)
    assert "prod release #3 (succeeded)" in html
    refused = scene.prune()
    assert isinstance(refused.problem, GateRefused) and refused.exit_code == 3
    assert "does not allow deletes" in refused.problem.message
    assert scene.snapshot() == before


def _prune_then_gc(scene: Scene) -> None:
    reg = scene.reg
    tags, keep, doomed = _expected(scene)
    reg.start(deletes=True)
    # the prune runs while a release of b04 (a digest nothing keeps) is between its gates
    # and its lock: prune deletes b04; the release, under its lock, finds it gone and refuses
    # before it changes anything (it never deploys a digest the registry no longer has)
    runs_before = _image_of(scene)
    seen: dict[str, Any] = {}

    class PruneAfterGates(ImageRegistry):
        def compat(self, *args: Any, **kwargs: Any) -> Any:
            gate = super().compat(*args, **kwargs)
            seen.setdefault("prune", scene.prune())
            return gate

    deps = releases.Deps(
        lambda env: PruneAfterGates(registry_for(env).access), scene.lines.append, scene.connect
    )
    _, error = pair(releases.promote(m.PromoteRequest(scene.prod, tag="b04"), deps))
    assert isinstance(error, GateRefused), (error, scene.lines)
    assert "no longer in the registry" in error.message
    assert _image_of(scene) == runs_before
    done = seen["prune"]
    assert done.ok, done.problem
    result = done.to_dict()
    assert set(result["repositories"][0]["deleted"]) == doomed
    assert all(reg.has_manifest(REPO, d) for d in keep)
    assert not any(reg.has_manifest(REPO, d) for d in doomed)
    assert set(reg.tags(REPO)) == tags
    assert result["repositories"][0]["requests"]["DELETE manifest"] == len(doomed) + 1  # probe
    leases = client.CoordinationV1Api(scene.kube.api)
    assert not leases.list_namespaced_lease(scene.ns).items  # prune gave its locks back
    # garbage collection: refused while the registry takes writes; read-only: it frees the
    # blobs only the deleted manifests used, measured on disk
    gc_request = gc_usecase.GcRequest(str(reg.config))
    writable = gc_usecase.collect(gc_request)
    assert isinstance(writable.problem, GateRefused) and writable.result.registry == "writable"
    reg.start(deletes=True, readonly=True)
    # --delete-untagged would delete the index's platform manifests (kept, untagged): refused
    untagged = gc_usecase.GcRequest(str(reg.config), True, scene.request())
    refused = gc_usecase.collect(untagged, scene.connect)
    assert isinstance(refused.problem, GateRefused) and not refused.result.collected
    assert all(k in refused.problem.message for k in scene.kids), refused.problem.message
    gone = [scene.own_layer[d] for d in doomed if d in scene.own_layer]
    assert all(reg.blob_on_disk(b) for b in gone)
    collected = gc_usecase.collect(gc_request)
    assert collected.ok, collected.problem
    doc = collected.to_dict()
    assert doc["registry"] == "read-only" and doc["collected"]
    assert doc["bytes_freed"] >= 4096 * len(gone), doc
    assert not any(reg.blob_on_disk(b) for b in gone)
    assert all(reg.blob_on_disk(scene.own_layer[d]) for d in keep if d in scene.own_layer)


def _image_of(scene: Scene) -> str:
    dep = scene.kube.apps.read_namespaced_deployment("infer-prod", scene.ns)
    return str(dep.spec.template.spec.containers[0].image)


def _doc_of(reg: OwnRegistry, digest: str) -> dict[str, Any]:
    status, _, body = reg.request(
        "GET",
        f"/v2/{REPO}/manifests/{digest}",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
    )
    assert status == 200
    return dict(json.loads(body))


def _history(
    kube: KubeClient, env: Environment, repository: str, items: list[tuple[str, str]]
) -> None:
    store = HistoryStore(kube, env)
    for number, (tag, digest) in enumerate(items, 1):
        store.put(
            hist.Release(
                number,
                env.name,
                "promote",
                hist.SUCCEEDED,
                hist.now_iso(),
                tag=tag,
                digest=digest,
                image=f"{repository}:{tag}@{digest}",
            )
        )


def test_gc_of_a_stopped_registry_that_stores_nothing_frees_nothing(tmp_path: Path) -> None:
    """docker-registry garbage-collect fails on a storage root without repositories (seen
    with distribution 2.8): an empty, stopped registry is nothing to collect, not a failure."""
    reg = OwnRegistry(tmp_path / "registry")
    reg.start(deletes=True)
    reg.stop()  # stopped: gc may run; its storage holds no repository yet
    outcome = gc_usecase.collect(gc_usecase.GcRequest(str(reg.config)))
    assert outcome.ok, outcome.problem
    doc = outcome.to_dict()
    assert doc["registry"] == "stopped" and not doc["collected"] and doc["bytes_freed"] == 0
