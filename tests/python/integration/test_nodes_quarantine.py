"""``gpuops nodes inspect --quarantine`` on the lab fleet and its Kubernetes, for real: the
faulty host (the lab's fake nvidia-smi shows its hot card with uncorrected ECC errors) is
tainted ``gpuops.io/gpu-unhealthy`` as setter ``quarantine``; a second critical host of the
same class opens the class's circuit breaker (not tainted, exit 3, the result says so) until
``gpuops nodes quarantine-reset``; a healthy host is released after N inspections in a row.
The state is the ConfigMap the test reads back. The metrics go to a textfile and to the lab's
real Pushgateway, and the lab's real Prometheus answers a query for them.

One test on purpose: the session labs (``nodes_lab``: fleet and kube; ``metrics_lab``:
Pushgateway and Prometheus) are reused and each inspection of the three A100 hosts costs
about a second; the steps build on each other's state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from integration.conftest_metrics import MetricsLab
from integration.conftest_nodes import NodesLab
from kubernetes import client
from kubernetes.client import V1Namespace, V1ObjectMeta
from kubernetes.client.exceptions import ApiException

from gpuops.adapters.kube import KubeClient
from gpuops.core import disruption
from gpuops.core import quarantine as q
from gpuops.usecases.nodes import quarantine
from gpuops_lab import gpus, hoststate

pytestmark = pytest.mark.timeout(600)
FAULTY = "gpu-a100-03"  # the lab's faulty host: GPU 5 at 92 C, 3 uncorrected ECC errors
OTHER = "gpu-a100-01"
NAMESPACE = "gpuops-system"
TAINT = "gpuops.io/gpu-unhealthy"
CLAIMS = "gpuops.io/gpu-unhealthy-by"


def _taints(nodes_lab: NodesLab, node: str) -> list[tuple[str, str, str]]:
    spec = nodes_lab.node(node).spec
    return [(t.key, t.value or "", t.effect) for t in spec.taints or () if t.key == TAINT]


def _claims(nodes_lab: NodesLab, node: str) -> dict[str, Any]:
    annotations = nodes_lab.node(node).metadata.annotations or {}
    return dict(json.loads(annotations[CLAIMS])) if CLAIMS in annotations else {}


def _state(nodes_lab: NodesLab) -> dict[str, Any]:
    cm = nodes_lab.kube.core.read_namespaced_config_map("gpuops-quarantine", NAMESPACE)
    return dict(json.loads(cm.data["state.json"]))


def _clean(nodes_lab: NodesLab) -> None:
    product = nodes_lab.node(FAULTY).metadata.labels["nvidia.com/gpu.product"]
    leases = client.CoordinationV1Api(nodes_lab.kube.api)
    for delete in (
        lambda: nodes_lab.kube.core.delete_namespaced_config_map("gpuops-quarantine", NAMESPACE),
        lambda: leases.delete_namespaced_lease(disruption.lease_name(product), NAMESPACE),
    ):
        try:
            delete()
        except ApiException as exc:
            if exc.status != 404:
                raise
    for node in (FAULTY, OTHER):
        taints = [t for t in nodes_lab.node(node).spec.taints or () if t.key != TAINT]
        nodes_lab.kube.core.patch_node(
            node,
            {
                "spec": {"taints": taints or None, "unschedulable": None},
                "metadata": {"annotations": {CLAIMS: None, "gpuops.io/cordoned-by": None}},
            },
        )


def test_quarantine_breaker_release_and_metrics_in_prometheus(
    nodes_lab: NodesLab, metrics_lab: MetricsLab, tmp_path: Path
) -> None:
    inv = nodes_lab.fleet.facts["inventory"]
    own = ("index", "name", "uuid", "serial", "pci_bus_id")  # its identity: never changed

    def card(host: str, index: int) -> dict[str, Any]:
        found = hoststate.gpu_state(nodes_lab.lab, host)["gpus"][index]
        return {k: v for k, v in found.items() if k not in own}

    faulty_card, healthy_card = card(FAULTY, gpus.FAULTY_INDEX), card(FAULTY, 0)
    other_card = card(OTHER, 0)
    prom_file = tmp_path / "textfile" / "gpuops_inspect.prom"
    prom_file.parent.mkdir()
    base = ["nodes", "inspect", "-i", inv, "-l", "gpu_a100", "--quarantine"]

    # the state's namespace must exist: exit 2 before anything is inspected or written
    missing = nodes_lab.gpuops(*base, "--quarantine-namespace", "no-such-ns", tmp=tmp_path)
    assert missing.rc == 2 and "no-such-ns" in missing.stderr, missing.stderr
    assert _taints(nodes_lab, FAULTY) == []
    refused = nodes_lab.gpuops("nodes", "inspect", "-i", inv, "--drain", tmp=tmp_path)
    assert refused.rc == 2 and "--quarantine" in refused.stderr
    no_budget = nodes_lab.gpuops(*base, "--drain", tmp=tmp_path)
    assert no_budget.rc == 2 and "--budget-max-unavailable" in no_budget.stderr

    try:
        nodes_lab.kube.core.create_namespace(V1Namespace(metadata=V1ObjectMeta(name=NAMESPACE)))
    except ApiException as exc:
        if exc.status != 409:  # made by another test (the budget's Leases live there too)
            raise
    _clean(nodes_lab)
    try:
        _quarantined_and_pushed(nodes_lab, metrics_lab, base, tmp_path, prom_file)
        _breaker(nodes_lab, base, tmp_path)
        _released(nodes_lab, base, tmp_path, healthy_card, other_card)
    finally:
        hoststate.set_card(nodes_lab.lab, FAULTY, gpus.FAULTY_INDEX, **faulty_card)
        hoststate.set_card(nodes_lab.lab, OTHER, 0, **other_card)
        _clean(nodes_lab)


def _quarantined_and_pushed(
    nodes_lab: NodesLab, metrics_lab: MetricsLab, base: list[str], tmp_path: Path, prom_file: Path
) -> None:
    # 1. the faulty host is quarantined and drained (its share of the disruption budget taken
    # while it drains, given back after); the metrics go to the textfile and the Pushgateway
    run = nodes_lab.gpuops(
        *base,
        "--drain", "--budget-max-unavailable", "1",
        "--metrics-file", str(prom_file),
        "--pushgateway", metrics_lab.pushgateway_url,
        tmp=tmp_path,
    )  # fmt: skip
    assert run.rc == 3, run.stderr  # critical findings stay a refused gate
    q = run.doc["result"]["quarantine"]  # type: ignore[index]
    assert q["newly"] == [FAULTY] and q["quarantined"] == [FAULTY], q
    assert q["drained"] == [FAULTY] and q["not_drained"] == {}, q
    node = nodes_lab.node(FAULTY)
    assert node.spec.unschedulable is True
    assert node.metadata.annotations["gpuops.io/cordoned-by"] == "gpuops nodes inspect --quarantine"
    product = node.metadata.labels["nvidia.com/gpu.product"]
    lease = client.CoordinationV1Api(nodes_lab.kube.api).read_namespaced_lease(
        disruption.lease_name(product), NAMESPACE
    )
    # made by this take (the test removed it first), every claim given back
    holders = (lease.metadata.annotations or {}).get(disruption.HOLDERS_ANNOTATION, "[]")
    assert json.loads(holders) == [], lease
    assert q["limits"] == {"gpu_a100": 1} and q["breakers_open"] == {}
    assert _taints(nodes_lab, FAULTY) == [(TAINT, "quarantine", "NoSchedule")]
    assert "quarantine" in _claims(nodes_lab, FAULTY)
    assert _taints(nodes_lab, OTHER) == []
    state = _state(nodes_lab)
    assert state["nodes"][FAULTY]["quarantined"] is True and state["breakers"] == {}
    text = prom_file.read_text()
    assert (
        f'gpuops_node_quarantined{{environment="test",host="{FAULTY}",group="gpu_a100"}} 1' in text
    )
    assert (
        f'gpuops_node_health_status{{environment="test",host="{OTHER}",group="gpu_a100"}} 0' in text
    )
    metrics = run.doc["result"]["metrics"]  # type: ignore[index]
    assert metrics["file"] == str(prom_file) and "pushgateway" in metrics, metrics
    # the lab's Prometheus scrapes the Pushgateway: the pushed series, with its grouping
    samples = metrics_lab.wait_query(
        f'gpuops_node_quarantined{{host="{FAULTY}"}}',
        lambda s: len(s) == 1 and s[0][1] == 1.0,
        "the pushed quarantine metric in Prometheus",
    )
    labels = samples[0][0]
    assert labels["job"] == "gpuops_nodes_inspect" and labels["environment"] == "test"
    assert labels["scope"] == "gpu_a100" and labels["group"] == "gpu_a100", labels


def _breaker(nodes_lab: NodesLab, base: list[str], tmp_path: Path) -> None:
    # 2. a second critical A100 at once: the class's breaker opens, the host is not tainted
    hoststate.set_card(nodes_lab.lab, OTHER, 0, temperature=95)
    tripped = nodes_lab.gpuops(*base, tmp=tmp_path)
    assert tripped.rc == 3, tripped.stderr
    assert "circuit breaker open for class(es) gpu_a100" in tripped.stderr
    q = tripped.doc["result"]["quarantine"]  # type: ignore[index]
    assert q["tripped"] == ["gpu_a100"] and list(q["held"]) == [OTHER], q
    assert q["breakers_open"]["gpu_a100"]["nodes"] == [OTHER]
    assert _taints(nodes_lab, OTHER) == [] and q["quarantined"] == [FAULTY]
    breaker_alert = [a for a in tripped.doc["result"]["alerts"] if a["host"] == "class:gpu_a100"]  # type: ignore[index]
    assert len(breaker_alert) == 1, tripped.doc["result"]["alerts"]  # type: ignore[index]


def _released(
    nodes_lab: NodesLab,
    base: list[str],
    tmp_path: Path,
    healthy_card: dict[str, Any],
    other_card: dict[str, Any],
) -> None:
    # 3. both repaired: the breaker stays open (exit 3) until reset, while the quarantined host
    # counts its healthy inspections; --release-after 2 releases it on the second
    hoststate.set_card(nodes_lab.lab, OTHER, 0, **other_card)
    hoststate.set_card(nodes_lab.lab, FAULTY, gpus.FAULTY_INDEX, **healthy_card)
    first = nodes_lab.gpuops(*base, "--release-after", "2", tmp=tmp_path)
    assert first.rc == 3 and "circuit breaker open for class(es) gpu_a100" in first.stderr
    q = first.doc["result"]["quarantine"]  # type: ignore[index]
    assert q["healthy_streak"] == {FAULTY: 1} and q["held"] == {}, q
    assert _taints(nodes_lab, FAULTY) == [(TAINT, "quarantine", "NoSchedule")]
    assert "gpu_a100" in _state(nodes_lab)["breakers"]
    reset = nodes_lab.gpuops("nodes", "quarantine-reset", "--class", "gpu_a100", tmp=tmp_path)
    assert reset.rc == 0, reset.stderr
    assert reset.result["closed"] == ["gpu_a100"] and reset.result["still_open"] == []
    assert reset.result["quarantined"] == [FAULTY] and _state(nodes_lab)["breakers"] == {}
    second = nodes_lab.gpuops(*base, "--release-after", "2", tmp=tmp_path)
    assert second.rc == 0, second.stderr
    assert second.result["quarantine"]["released"] == [FAULTY]
    assert second.result["quarantine"]["quarantined"] == []
    assert _taints(nodes_lab, FAULTY) == [] and _claims(nodes_lab, FAULTY) == {}
    assert _state(nodes_lab)["nodes"] == {}
    assert not nodes_lab.node(FAULTY).spec.unschedulable  # the cordon --drain made is undone


def test_a_concurrent_write_of_the_state_makes_the_writer_read_and_plan_again(
    nodes_lab: NodesLab,
) -> None:
    """The state's writes are conditional: another inspection writing between our read and our
    write (here: on the real API server, inside our first planning) makes our PUT a 409, and
    we plan again on its state, so its quarantined node counts against the breaker and both
    nodes cannot be quarantined past the class's limit of one."""
    try:
        nodes_lab.kube.core.create_namespace(V1Namespace(metadata=V1ObjectMeta(name=NAMESPACE)))
    except ApiException as exc:
        if exc.status != 409:
            raise
    _clean(nodes_lab)
    kube = KubeClient.connect(str(nodes_lab.kube.kubeconfig))
    store = quarantine.Store(kube, NAMESPACE)
    assert store.update(lambda st: (st, "nothing")) == "nothing"  # nothing to remember:
    assert store.read()[0] is None  # no ConfigMap made (quarantine-reset on a fresh cluster)
    empty = {quarantine.KEY: q.encode(q.State())}
    nodes_lab.kube.core.create_namespaced_config_map(
        NAMESPACE, {"metadata": {"name": quarantine.CONFIGMAP}, "data": empty}
    )
    seen: list[list[str]] = []

    def plan(state: q.State) -> tuple[q.State, q.Plan]:
        seen.append(state.quarantined())
        if len(seen) == 1:  # the other inspection quarantines OTHER meanwhile
            other = q.plan(state, [q.Seen(OTHER, "gpu_a100", "critical", "other run")],
                           {"gpu_a100": 3}, share_pct=10, release_after=3, now="T0")  # fmt: skip
            cm = nodes_lab.kube.core.read_namespaced_config_map(quarantine.CONFIGMAP, NAMESPACE)
            cm.data = {quarantine.KEY: q.encode(other.state)}
            nodes_lab.kube.core.replace_namespaced_config_map(quarantine.CONFIGMAP, NAMESPACE, cm)
        p = q.plan(state, [q.Seen(FAULTY, "gpu_a100", "critical", "this run")],
                   {"gpu_a100": 3}, share_pct=10, release_after=3, now="T1")  # fmt: skip
        return p.state, p

    try:
        result: q.Plan = store.update(plan)
        assert seen == [[], [OTHER]], seen  # read again after the 409: the other's write seen
        assert result.tripped == ["gpu_a100"] and result.quarantine == []
        state = _state(nodes_lab)
        assert [n for n, s in state["nodes"].items() if s["quarantined"]] == [OTHER]
        assert state["breakers"]["gpu_a100"]["nodes"] == [FAULTY]
    finally:
        kube.close()
        _clean(nodes_lab)
