"""Progressive releases (issue 20, S-22) on the lab: a canary Deployment first, measured by real
signals, then all replicas; in place on a full cluster; a run killed mid-step.

Real here: kube-apiserver, controller-manager (the Deployment and Job controllers), the
scheduler, the registry, Prometheus (Debian's, scraping every second) and the API server's pod
proxy. **Lab stand-ins** (said as the lab's docs say them): kwok runs no container, so the
lab's app stand-in (gpuops_lab.appstandin) answers on each pod's IP and exports its request
counters, with the behaviour its image tag names (``-labfault-errors``: 30 % answered 500);
in a real cluster the pods' own containers answer and Prometheus scrapes them. A smoke Job's
pod "exits" as the lab's kwok stages decide by its image tag (``-labfault-smokefail``: exit
code 1); a real kubelet runs the container and reports its exit code.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_kube import KubeLab
from integration.conftest_metrics import MetricsLab
from integration.conftest_registry import RegistryLab
from integration.releaselab import (
    Images,
    LabRegistry,
    Target,
    environment,
    make_target,
    own_nodes,
    pair,
    write_config,
)
from kubernetes import client, watch

from gpuops.adapters.kube import KubeClient
from gpuops.errors import GateRefused, OperationFailed
from gpuops.usecases import releases
from gpuops.usecases.releases import model as m

pytestmark = pytest.mark.timeout(600)
GPUOPS = str(Path(sys.executable).parent / "gpuops")
#: what the canary's analysis asks Prometheus: the canary's share of answers that were not 200
ERROR_RATE = (
    '1 - sum(rate(lab_app_requests_total{namespace="$namespace",track="canary",code="200"}[5s]))'
    ' / sum(rate(lab_app_requests_total{namespace="$namespace",track="canary"}[5s]))'
)
#: a query with no series: an empty answer, inconclusive
NOTHING = 'sum(rate(lab_app_requests_total{namespace="$namespace",track="nosuch"}[5s]))'


def deps(kube: KubeLab, rlab: RegistryLab, say: Callable[[str], None]) -> releases.Deps:
    return releases.Deps(
        registry_for=lambda env: LabRegistry(rlab),
        say=say,
        connect=lambda cluster: KubeClient.connect(str(kube.kubeconfig)),
    )


def promote(t: Target, d: releases.Deps, env: str, **kw: Any) -> tuple[m.ReleaseOutcome, Any]:
    return pair(releases.promote(m.PromoteRequest(m.Target(str(t.config), env), **kw), d))


def resume(t: Target, d: releases.Deps, env: str, **kw: Any) -> tuple[m.ReleaseOutcome, Any]:
    who = m.Who(requested_by="alice", approved_by="bob", reason=kw.pop("reason", None))
    return pair(releases.resume(m.ResumeRequest(m.Target(str(t.config), env), who, **kw), d))


def prometheus(url: str, query: str, **kw: Any) -> dict[str, Any]:
    return {
        "analysis": {
            "interval_seconds": 1,
            **kw,
            "prometheus": {"url": url, "query": query, "max": kw.pop("max", 0.05)},
        }
    }


def canary(t: Target) -> Any | None:
    try:
        return t.kube.apps.read_namespaced_deployment(f"{t.name}-canary", t.namespace)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def steps_of(record: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s["kind"], s["state"]) for s in record.get("steps") or []]


def on(t: Target, starts: str, action: Callable[[], None]) -> Callable[[str], None]:
    """A console that runs ``action`` once, when a line starting with ``starts`` is said."""
    done = threading.Event()

    def say(line: str) -> None:
        t.say(line)
        if line.startswith(starts) and not done.is_set():
            done.set()
            action()

    return say


@pytest.fixture
def app(metrics_lab: MetricsLab) -> dict[str, str]:
    """Pod labels that make the lab's app stand-in play the release's pods."""
    return metrics_lab.app_labels("infer")


def test_a_healthy_canary_passes_every_step_and_a_model_release_canaries_the_model(
    kube_lab: KubeLab,
    registry_lab: RegistryLab,
    progressive_images: Images,
    metrics_lab: MetricsLab,
    app: dict[str, str],
    tmp_path: Path,
) -> None:
    url = metrics_lab.prometheus_url

    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        steps = [
            {"replicas": 1},
            {"pause_seconds": 2},  # the new pod's first scrapes
            prometheus(url, ERROR_RATE, count=3, inconclusive="ignore", name="error-rate"),
            {
                "analysis": {
                    "http": {
                        "port": 8080,
                        "path": "/healthz",
                        "status": 200,
                        "json": {"field": "status", "equals": "ok"},
                    }
                }
            },
            {"analysis": {"job": {"command": ["python", "-m", "smoke"], "timeout_seconds": 60}}},
            {"replicas": "50%"},
            {"approval": {"approvers": ["release-managers"], "timeout_minutes": 5}},
        ]
        # the lab's app stand-in starts answering on a new pod's IP a moment after kwok marks
        # it Ready (a real container's readiness probe passes once it answers): a short pause
        model = [
            {"replicas": 1},
            {"pause_seconds": 1},
            {"analysis": {"http": {"port": 8080, "path": "/healthz"}}},
        ]
        return {
            "staging": environment(
                ns, name, repo, registry_tag="staging", model={"env": "MODEL_VERSION"},
                strategy={"steps": steps},
            ),
            "models": environment(
                ns, name, repo, model={"env": "MODEL_VERSION"}, strategy={"steps": model}
            ),
        }  # fmt: skip

    t = make_target(
        kube_lab,
        progressive_images,
        tmp_path,
        "prog",
        envs=envs,
        replicas=2,
        labels=app,
        env={"MODEL_VERSION": "v1"},
    )
    d = deps(kube_lab, registry_lab, t.say)
    was = t.image()

    out, error = promote(t, d, "staging", tag="1.1.0", who=m.Who(requested_by="alice"))

    assert error is None, error
    assert out.state == "paused" and out.paused is not None, t.lines
    assert out.paused == {
        "step": 6,
        "approvers": ["release-managers"],
        "timeout_minutes": 5,
        "record": 1,
    }
    [record] = t.history("staging")
    assert record["status"] == "pending" and record["paused"]["step"] == 6
    assert steps_of(record) == [
        ("replicas", "passed"),
        ("pause", "passed"),
        ("analysis", "passed"),
        ("analysis", "passed"),
        ("analysis", "passed"),
        ("replicas", "passed"),
        ("approval", "paused"),
    ]
    prom, http, job = record["steps"][2:5]
    assert prom["provider"] == "prometheus" and prom["name"] == "error-rate"
    conclusive = [x for x in prom["measurements"] if x["verdict"] != "inconclusive"]
    assert len(conclusive) == 3 and all(x["verdict"] == "passed" for x in conclusive)
    assert all(x["value"] == 0 for x in conclusive), prom  # the healthy image answers 200
    assert http["provider"] == "http" and http["verdict"] == "passed"
    assert job["provider"] == "job" and job["verdict"] == "passed"
    # the canary runs 50 % of 2 beside the stable, which still runs the old release
    c = canary(t)
    assert c is not None and c.spec.replicas == 1 and c.status.ready_replicas == 1
    assert c.spec.template.spec.containers[0].image == progressive_images.ref("1.1.0")
    assert c.spec.template.metadata.labels["gpuops.io/track"] == "canary"
    assert t.image() == was and t.deployment().spec.replicas == 2
    assert not t.leases(), "a paused release holds no lock"

    done, error = resume(t, d, "staging", reason="dashboards look fine")

    assert error is None, (error, t.lines)
    assert done.state == "succeeded"
    assert t.image() == progressive_images.ref("1.1.0") and canary(t) is None
    [record] = t.history("staging")
    assert record["status"] == "succeeded" and "paused" not in record
    assert steps_of(record)[-2:] == [("approval", "passed"), ("all", "passed")]
    assert record["steps"][6]["approved_by"] == "bob"
    assert any(line.startswith("step 7/7 approval: passed") for line in t.lines), t.lines
    assert (
        LabRegistry(registry_lab).resolve(progressive_images.repository, "staging")
        == (progressive_images.digests["1.1.0"])
    )

    model_release_canaries_the_model(t, kube_lab, registry_lab, progressive_images)


def model_release_canaries_the_model(
    t: Target, kube_lab: KubeLab, registry_lab: RegistryLab, images: Images
) -> None:
    # a model release (S-22): the canary runs the new model version in the same image
    seen: dict[str, Any] = {}

    def look() -> None:
        c = canary(t)
        assert c is not None
        seen["canary"] = {e.name: e.value for e in c.spec.template.spec.containers[0].env}
        seen["canary_image"] = c.spec.template.spec.containers[0].image
        seen["stable"] = {
            e.name: e.value for e in t.deployment().spec.template.spec.containers[0].env
        }

    d = deps(kube_lab, registry_lab, on(t, "step 3/3 analysis:", look))
    _, error = promote(t, d, "models", model="v2")

    assert error is None, (error and error.message, t.lines[-12:])
    assert seen == {
        "canary": {"MODEL_VERSION": "v2"},
        "canary_image": images.ref("1.1.0"),
        "stable": {"MODEL_VERSION": "v1"},
    }
    container = t.deployment().spec.template.spec.containers[0]
    assert {e.name: e.value for e in container.env} == {"MODEL_VERSION": "v2"}
    assert steps_of(t.history("models")[-1]) == [
        ("replicas", "passed"),
        ("pause", "passed"),
        ("analysis", "passed"),
        ("all", "passed"),
    ]


def test_an_error_rate_over_the_threshold_is_rolled_back_after_exactly_the_failure_limit(
    kube_lab: KubeLab,
    registry_lab: RegistryLab,
    progressive_images: Images,
    metrics_lab: MetricsLab,
    app: dict[str, str],
    tmp_path: Path,
) -> None:
    url = metrics_lab.prometheus_url

    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        steps = [
            {"replicas": 1},
            prometheus(url, ERROR_RATE, count=5, failure_limit=1, inconclusive="ignore"),
        ]
        return {"staging": environment(ns, name, repo, registry_tag="staging",
                                       strategy={"steps": steps})}  # fmt: skip

    t = make_target(
        kube_lab, progressive_images, tmp_path, "proge", envs=envs, replicas=2, labels=app
    )
    d = deps(kube_lab, registry_lab, t.say)
    was = t.image()
    registry = LabRegistry(registry_lab)
    tagged = registry.resolve(progressive_images.repository, "staging")  # other tests' too

    out, error = promote(t, d, "staging", tag="2.1.0-labfault-errors")

    assert isinstance(error, OperationFailed), (error, t.lines)
    assert out.state == "failed"
    assert "failed at step 2 (analysis)" in error.message and "rolled back to" in error.message
    [record] = t.history("staging")
    assert record["status"] == "failed" and record["failure"]["step"] == 1
    analysis = record["steps"][1]
    failed = [x for x in analysis["measurements"] if x["verdict"] == "failed"]
    # failure limit 1: the second failed measurement ends the step, none more is taken
    assert len(failed) == 2 and analysis["failures"] == 2, analysis
    assert analysis["measurements"][-1]["verdict"] == "failed"
    assert all(abs(x["value"] - 0.3) < 0.08 for x in failed), failed  # 30 % answered 500
    assert steps_of(record) == [("replicas", "passed"), ("analysis", "failed")]
    assert canary(t) is None and t.image() == was and t.deployment().spec.replicas == 2
    assert registry.resolve(progressive_images.repository, "staging") == tagged, "not moved"
    assert not t.leases()


def test_an_inconclusive_query_counts_as_configured_and_a_failing_smoke_job_stops_it(
    kube_lab: KubeLab,
    registry_lab: RegistryLab,
    progressive_images: Images,
    metrics_lab: MetricsLab,
    app: dict[str, str],
    tmp_path: Path,
) -> None:
    url = metrics_lab.prometheus_url

    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        def env(*steps: dict[str, Any]) -> dict[str, Any]:
            return environment(ns, name, repo, strategy={"steps": [{"replicas": 1}, *steps]})

        return {
            "passes": env(prometheus(url, NOTHING, count=2, inconclusive="pass")),
            "fails": env(prometheus(url, NOTHING, count=3, inconclusive="fail")),
            "ignores": env(prometheus(url, NOTHING, count=1, inconclusive="ignore")),
            "smoke": env({"analysis": {"job": {"command": ["smoke"], "timeout_seconds": 60}}}),
        }

    t = make_target(
        kube_lab, progressive_images, tmp_path, "progi", envs=envs, replicas=1, labels=app
    )
    d = deps(kube_lab, registry_lab, t.say)

    _, error = promote(t, d, "passes", tag="1.1.0")
    assert error is None, (error, t.lines)
    measured = t.history("passes")[-1]["steps"][1]["measurements"]
    assert [x["verdict"] for x in measured] == ["inconclusive", "inconclusive"]

    _, error = promote(t, d, "fails", tag="1.2.0")
    assert isinstance(error, OperationFailed), error
    analysis = t.history("fails")[-1]["steps"][1]
    assert [x["verdict"] for x in analysis["measurements"]] == ["inconclusive"], analysis
    assert t.image() == progressive_images.ref("1.1.0") and canary(t) is None

    _, error = promote(t, d, "ignores", tag="1.2.0")
    assert isinstance(error, OperationFailed), error
    analysis = t.history("ignores")[-1]["steps"][1]
    assert len(analysis["measurements"]) == 3, analysis  # 3 x count, none conclusive

    _out, error = promote(t, d, "smoke", tag="2.1.0-labfault-smokefail")
    assert isinstance(error, OperationFailed), error
    record = t.history("smoke")[-1]
    assert record["status"] == "failed" and steps_of(record)[-1] == ("analysis", "failed")
    assert record["steps"][1]["provider"] == "job"
    assert "exited 1" in record["steps"][1]["measurements"][0]["detail"], record["steps"][1]
    assert t.image() == progressive_images.ref("1.1.0") and canary(t) is None
    jobs = client.BatchV1Api(kube_lab.api).list_namespaced_job(t.namespace).items
    assert not jobs, "the smoke Job is gone with the release"


class Watcher:
    """An independent watcher of the release's pods on the API's watch events (not polling):
    the pods as listed first, then after each event how many of ``replicas`` are not Ready
    (a pod being deleted is not Ready)."""

    def __init__(self, kube: KubeLab, namespace: str, replicas: int) -> None:
        self.kube, self.namespace, self.replicas = kube, namespace, replicas
        self.ready: dict[str, bool] = {}
        self.worst = 0
        self.events = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._listed = threading.Event()

    def __enter__(self) -> Watcher:
        self._thread.start()
        assert self._listed.wait(30), "the watcher listed the pods"
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _see(self, pod: Any, deleted: bool = False) -> None:
        gone = deleted or pod.metadata.deletion_timestamp is not None
        conditions = {c.type: c.status for c in (pod.status.conditions or [])}
        self.ready[pod.metadata.name] = not gone and conditions.get("Ready") == "True"

    def _run(self) -> None:
        listed = self.kube.core.list_namespaced_pod(self.namespace, label_selector="app=infer")
        for pod in listed.items:
            self._see(pod)
        self.worst = self.replicas - sum(self.ready.values())
        self._listed.set()
        w = watch.Watch()
        try:
            for ev in w.stream(
                self.kube.core.list_namespaced_pod,
                self.namespace,
                label_selector="app=infer",
                resource_version=listed.metadata.resource_version,
                timeout_seconds=300,
            ):
                self._see(ev["object"], ev["type"] == "DELETED")
                self.events += 1
                self.worst = max(self.worst, self.replicas - sum(self.ready.values()))
                if self._stop.is_set():
                    w.stop()
                    return
        except Exception:  # the namespace went with the test, after what was measured
            if not self._stop.is_set():
                raise


def full_class(kube: KubeLab) -> str:
    """A node class of the test's own: 2 nodes of 2 GPUs each (4 in all)."""
    cls = f"full-{uuid.uuid4().hex[:6]}"
    own_nodes(kube, cls, count=2, gpus=2)
    return cls


def test_a_release_on_a_cluster_with_no_free_gpu_replaces_in_place(
    kube_lab: KubeLab,
    registry_lab: RegistryLab,
    progressive_images: Images,
    tmp_path: Path,
) -> None:
    cls = full_class(kube_lab)

    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        strategy = {"steps": [{"replicas": 1}, {"pause_seconds": 1}], "in_place": {}}
        return {
            "staging": environment(ns, name, repo, node_class=cls, strategy=strategy),
            # no steps: "all" alone, in place
            "direct": environment(ns, name, repo, node_class=cls, strategy={"in_place": {}}),
        }

    t = make_target(
        kube_lab, progressive_images, tmp_path, "progp", envs=envs, replicas=4, node_class=cls
    )
    d = deps(kube_lab, registry_lab, t.say)
    before = t.deployment().spec.strategy.rolling_update

    with Watcher(kube_lab, t.namespace, 4) as watcher:
        out, error = promote(t, d, "staging", tag="1.1.0")
        t.wait_rolled_out()

    assert error is None, (error, t.lines)
    assert out.state == "succeeded"
    headroom = next(g for g in out.gates if g.name == "headroom")
    assert headroom.ok and headroom.details["mode"] == "in-place", headroom
    # never more than max_unavailable (1) down, and the watcher did see the one move down
    assert watcher.worst == 1, f"{watcher.worst} replicas down at once ({watcher.events} events)"
    assert t.image() == progressive_images.ref("1.1.0") and canary(t) is None
    spec = t.deployment().spec
    assert spec.replicas == 4
    assert (
        spec.strategy.rolling_update.max_surge,
        spec.strategy.rolling_update.max_unavailable,
    ) == (
        before.max_surge,
        before.max_unavailable,
    ), "the stable's own strategy is back"
    assert "gpuops.io/in-place" not in t.annotations()
    record = t.history("staging")[-1]
    assert [s.get("mode") for s in record["steps"]] == ["in-place", None, "in-place"]

    # a stable pod on a cordoned node: its GPUs cannot take the new pod; refused, unchanged
    node = t.kube.core.list_namespaced_pod(t.namespace).items[0].spec.node_name
    kube_lab.core.patch_node(node, {"spec": {"unschedulable": True}})
    try:
        out, error = promote(t, d, "staging", tag="1.2.0")
    finally:
        kube_lab.core.patch_node(node, {"spec": {"unschedulable": False}})

    assert isinstance(error, GateRefused), error
    assert "not in place either" in error.message and "cordoned" in error.message
    assert error.hint is not None and "what holds the GPUs" in error.hint
    assert f"{t.namespace}/infer-" in error.hint, error.hint
    assert out.explanation is not None and out.explanation["held_by"]
    assert t.image() == progressive_images.ref("1.1.0") and canary(t) is None
    assert len(t.history("staging")) == 1

    # "all" alone in place, and it fails: the restore also runs without surge (a surge pod
    # would never be scheduled on the full class), then the stable's own strategy is back
    out, error = promote(t, d, "direct", tag="2.0.0-labfault-crashloop")

    assert isinstance(error, OperationFailed), (error, t.lines)
    assert out.rollout is not None and out.rollout.problem is not None
    assert out.rollout.problem.kind == "crash-loop"
    assert out.restore is not None and out.restore.state == "complete", out.restore
    t.wait_rolled_out()
    assert t.image() == progressive_images.ref("1.1.0") and t.deployment().spec.replicas == 4
    surge = t.deployment().spec.strategy.rolling_update
    assert (surge.max_surge, surge.max_unavailable) == (before.max_surge, before.max_unavailable)
    assert "gpuops.io/in-place" not in t.annotations()


def test_a_release_killed_mid_step_is_restored_by_the_next_release(
    kube_lab: KubeLab,
    registry_lab: RegistryLab,
    progressive_images: Images,
    tmp_path: Path,
) -> None:
    """``gpuops release promote`` (a process, as Jenkins runs it) is killed (SIGKILL, our own
    child) while it pauses in place: its canary runs, the stable is one replica short. The
    next release takes over the silent lock, removes that canary (provably its own: the
    annotations and the open record), puts the stable back, records #1 interrupted, and
    releases."""
    cls = full_class(kube_lab)

    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        strategy = {"steps": [{"replicas": 1}, {"pause_seconds": 300}], "in_place": {}}
        return {
            "staging": environment(
                ns, name, repo, node_class=cls, strategy=strategy, registry={"plain_http": True}
            ),
        }

    t = make_target(
        kube_lab, progressive_images, tmp_path, "progk", envs=envs, replicas=4, node_class=cls
    )
    was = t.image()
    env = {**os.environ, "KUBECONFIG": str(kube_lab.kubeconfig)}
    proc = subprocess.Popen(
        [
            GPUOPS,
            "release",
            "promote",
            "--config",
            str(t.config),
            "-e",
            "staging",
            "--tag",
            "1.1.0",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    said = []
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            said.append(line)
            if "step 2/2 pause:" in line:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert any("step 2/2 pause:" in line for line in said), said
    c = canary(t)
    assert c is not None and c.spec.replicas == 1
    assert t.deployment().spec.replicas == 3 and "gpuops.io/in-place" in t.annotations()
    [record] = t.history("staging")
    assert record["status"] == "pending" and record["canary"]["name"] == "infer-canary"

    # the next release of the environment, its pause shorter
    quick = {"steps": [{"replicas": 1}], "in_place": {}}
    write_config(t.config, {"staging": environment(t.namespace, "infer", t.images.repository,
                                                   node_class=cls, strategy=quick)})  # fmt: skip
    t.wait_leases_silent()  # the killed run's lock (lease 8 s) goes silent
    d = deps(kube_lab, registry_lab, t.say)
    out, error = promote(t, d, "staging", tag="1.2.0")  # the same environment: its history

    assert error is None, (error, t.lines)
    assert out.reconciled == [{"release": 1, "was": "pending", "now": "interrupted"}]
    assert any(line == f"removed the canary {t.namespace}/infer-canary" for line in t.lines)
    first = t.history("staging")[0]
    assert first["status"] == "interrupted" and "removed the canary" in first["note"]
    assert t.image() == progressive_images.ref("1.2.0") and t.image() != was
    assert canary(t) is None and t.deployment().spec.replicas == 4
    assert "gpuops.io/in-place" not in t.annotations()
    assert json.loads(json.dumps(out.lock["taken_over"]))[0]["lease"].endswith(".infer")


def gpuops(t: Target, tmp: Path, command: str, params: dict[str, Any]) -> tuple[int, Any, str]:
    """``gpuops release <command>`` as gpuopsExec runs it; (exit, document, stderr)."""
    pfile, rfile, efile = tmp / "p.json", tmp / "r.json", tmp / "e.json"
    for f in (rfile, efile):
        f.unlink(missing_ok=True)
    pfile.write_text(json.dumps({"config": str(t.config), **params}))
    env = {
        **os.environ,
        "GPUOPS_PARAMS_FILE": str(pfile),
        "GPUOPS_RESULT_FILE": str(rfile),
        "GPUOPS_ERROR_FILE": str(efile),
        "KUBECONFIG": str(t.kube.kubeconfig),
    }
    done = subprocess.run(
        [GPUOPS, "release", command],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    doc_file = rfile if done.returncode == 0 else efile
    doc = json.loads(doc_file.read_text()) if doc_file.exists() else None
    return done.returncode, doc, done.stderr


def test_an_approval_step_ends_the_cli_run_paused_and_resume_reject_restores(
    kube_lab: KubeLab, progressive_images: Images, tmp_path: Path
) -> None:
    """As Jenkins runs it: promote ends exit 0 with state paused and where it waits; the
    requester cannot answer; --reject restores the previous release (exit 3)."""

    def envs(ns: str, name: str, repo: str) -> dict[str, Any]:
        steps = [{"replicas": 1}, {"approval": {"approvers": ["release-managers"]}}]
        return {"staging": environment(ns, name, repo, registry={"plain_http": True},
                                       strategy={"steps": steps})}  # fmt: skip

    t = make_target(kube_lab, progressive_images, tmp_path, "proga", envs=envs, replicas=1)
    was = t.image()
    ask = {"environment": "staging", "requested_by": ["alice"]}

    code, doc, stderr = gpuops(t, tmp_path, "promote", {**ask, "tag": "1.1.0", "dry_run": True})
    assert code == 0, stderr
    plan = doc["result"]
    assert plan["state"] == "planned" and plan["strategy"]["mode"] == "surge"
    assert plan["strategy"]["canary"] == "infer-canary"
    assert [g["gate"] for g in plan["gates"]] == ["image", "compat", "headroom", "canary"]
    assert canary(t) is None and not t.history("staging"), "a dry run changes nothing"

    code, doc, stderr = gpuops(t, tmp_path, "promote", {**ask, "tag": "1.1.0"})

    assert code == 0, stderr
    result = doc["result"]
    assert doc["verdict"] == "ok" and result["state"] == "paused"
    assert result["paused"] == {
        "step": 1,
        "approvers": ["release-managers"],
        "timeout_minutes": 60,
        "record": 1,
    }
    assert [(s["kind"], s["state"]) for s in result["steps"]] == [
        ("replicas", "passed"),
        ("approval", "paused"),
    ]
    assert "step 2/2 approval: paused" in stderr, stderr
    assert canary(t) is not None

    code, doc, _ = gpuops(t, tmp_path, "resume", {**ask, "approved_by": "Alice"})
    assert code == 3 and "cannot approve" in doc["error"]["message"], doc
    assert canary(t) is not None, "a refused answer changes nothing"

    code, doc, stderr = gpuops(
        t, tmp_path, "resume", {**ask, "approved_by": "bob", "reject": True, "reason": "p99"}
    )

    assert code == 3, stderr
    assert doc["error"]["category"] == "gate-refused"
    assert "rejected by bob: p99" in doc["error"]["message"], doc
    assert canary(t) is None and t.image() == was
    [record] = t.history("staging")
    assert record["status"] == "failed" and record["failure"]["kind"] == "rejected"
    assert steps_of(record) == [("replicas", "passed"), ("approval", "failed")]
    code, doc, _ = gpuops(t, tmp_path, "resume", {**ask, "approved_by": "bob"})
    assert code == 3 and "no release of staging waits" in doc["error"]["message"], doc

    # a release waiting on its approval is restored by the next release of the environment
    code, doc, stderr = gpuops(t, tmp_path, "promote", {**ask, "tag": "1.2.0"})
    assert code == 0 and doc["result"]["state"] == "paused", stderr
    code, doc, stderr = gpuops(t, tmp_path, "promote", {**ask, "tag": "1.3.0"})
    assert code == 0 and doc["result"]["state"] == "paused", stderr
    assert doc["result"]["reconciled"] == [{"release": 2, "was": "pending", "now": "aborted"}]
    records = {r["number"]: r for r in t.history("staging")}
    assert "waited on its approval (step 2)" in records[2]["note"], records[2]
    assert "removed the canary" in records[2]["note"] and "paused" not in records[2]
    c = canary(t)
    assert c is not None and c.metadata.annotations["gpuops.io/release"] == "3"
    assert c.spec.template.spec.containers[0].image == progressive_images.ref("1.3.0")
    assert t.image() == was
