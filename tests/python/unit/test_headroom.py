"""Pure logic of gpuops headroom: the model, the check, and explain (no cluster)."""

from __future__ import annotations

from collections import Counter

import pytest

from gpuops.adapters.kube.decode import label_selector, node_from_api, pod_from_api
from gpuops.core import explain as ex
from gpuops.core.headroom import Policy, QuotaLimit, Shape, check
from gpuops.core.kubeinput import (
    parse_class_counts,
    parse_node_affinity,
    parse_node_selector,
    parse_tolerations,
)
from gpuops.core.kubemodel import (
    Container,
    Node,
    NodeSelectorTerm,
    Placement,
    Pod,
    Requirement,
    Taint,
    Toleration,
    parse_quantity,
    pod_requests,
)
from gpuops.errors import InvalidInput
from gpuops.render.headroom import headroom_table as render

GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"


def node(name: str, cls: str = "nvidia-a100-80g", gpus: int = 8, **kw: object) -> Node:
    alloc = {GPU: gpus, "cpu": 64000, "memory": 512 << 30, "pods": 110}
    alloc.update(kw.pop("alloc", {}))  # type: ignore[call-overload]
    return Node(
        name=name,
        labels={"accelerator": cls, **kw.pop("labels", {})},  # type: ignore[dict-item]
        allocatable=alloc,
        capacity=dict(alloc),
        **kw,  # type: ignore[arg-type]
    )


def pod(name: str, on: str, gpus: int, *, res: str = GPU, phase: str = "Running") -> Pod:
    return Pod("infer", name, node_name=on, phase=phase, requests={res: gpus}, owner="ReplicaSet/x")


def shape(gpus: int, pods: int = 1, **kw: object) -> Shape:
    return Shape(gpus_per_pod=gpus, pods=pods, **kw)  # type: ignore[arg-type]


# -- the check ---------------------------------------------------------------------------
def test_fragmentation_free_gpus_that_no_pod_can_use() -> None:
    nodes = [node(f"n{i}") for i in range(3)]
    used = [pod(f"p{i}", f"n{i}", 7) for i in range(3)]
    r = check(nodes, used, shape(2))
    assert not r.fits
    assert r.free_total == 3
    (c,) = r.classes
    assert (c.free, c.free_usable, c.largest_free_block, c.pods_placeable) == (3, 3, 1, 0)
    assert "only 0 of 1 pod(s) fit" in r.message
    assert "class nvidia-a100-80g" in r.message and "largest block 1, need 2 per pod" in r.message
    assert all("fragmented: 1 free" in n.reasons[0] for n in r.nodes)


def test_pods_spread_over_nodes_and_plan() -> None:
    nodes = [node("a"), node("b")]
    used = [pod("x", "a", 4), pod("y", "b", 4)]
    r = check(nodes, used, shape(4, pods=2))
    assert r.fits and r.pods_placeable == 2
    assert r.plan == {"a": 1, "b": 1}
    assert r.to_dict()["verdict"] == "fits"
    assert not check(nodes, used, shape(4, pods=3)).fits


def test_cordoned_node_is_excluded_unless_tolerated() -> None:
    nodes = [node("a", unschedulable=True), node("b")]
    used = [pod("x", "b", 8)]
    r = check(nodes, used, shape(1))
    assert not r.fits
    assert r.nodes[0].reasons == ["cordoned (spec.unschedulable)"]
    assert r.classes[0].nodes_healthy == 1 and r.classes[0].unavailable == 8
    tol = Placement(tolerations=(Toleration("node.kubernetes.io/unschedulable", "Exists"),))
    r2 = check(nodes, used, shape(1, placement=tol))
    assert r2.nodes[0].usable and r2.pods_placeable == 8


@pytest.mark.parametrize(
    ("taint", "tolerations", "usable"),
    [
        (Taint("dedicated", "training", "NoSchedule"), (), False),
        (Taint("dedicated", "training", "NoExecute"), (), False),
        (Taint("dedicated", "training", "PreferNoSchedule"), (), True),
        (Taint("dedicated", "training"), (Toleration("dedicated", "Equal", "training"),), True),
        (Taint("dedicated", "training"), (Toleration("dedicated", "Equal", "infer"),), False),
        (Taint("dedicated", "training"), (Toleration("dedicated", "Exists"),), True),
        (
            Taint("dedicated", "training"),
            (Toleration("dedicated", "Exists", effect="NoExecute"),),
            False,
        ),
        (Taint("anything", "x", "NoExecute"), (Toleration(operator="Exists"),), True),
    ],
)
def test_taints_and_tolerations(
    taint: Taint, tolerations: tuple[Toleration, ...], usable: bool
) -> None:
    place = Placement(tolerations=tolerations)
    r = check([node("a", taints=(taint,))], [], shape(1, placement=place))
    assert r.nodes[0].usable is usable and r.fits is usable
    if not usable:
        assert r.nodes[0].reasons == [f"untolerated taint: {taint}"]


def test_not_ready_node_is_excluded() -> None:
    r = check(
        [node("a", ready=False, not_ready_reason="KubeletNotReady"), node("b")],
        [pod("x", "b", 8)],
        shape(1),
    )
    assert not r.fits
    assert r.nodes[0].reasons[0] == "NotReady (KubeletNotReady)"
    assert r.to_dict()["excluded"] == {"NotReady": 1}
    assert "1 NotReady" in render(r)


def test_device_plugin_reporting_zero_gpus() -> None:
    dead = node("a", gpus=0)
    cpu_only = Node("cpu-1", allocatable={"cpu": 8000})
    r = check([dead, cpu_only], [], shape(1))
    assert [n.name for n in r.nodes] == ["a"]  # a CPU node is no GPU class member
    assert r.nodes[0].reasons == [f"device plugin reports 0 {GPU}"]
    assert r.nodes_total == 2 and not r.fits
    assert "1 device plugin reports 0 nvidia.com/gpu" in r.message


def test_total_reserve() -> None:
    nodes = [node("a")]
    assert check(nodes, [], shape(2, pods=3), Policy(reserve=2)).fits
    r = check(nodes, [], shape(2, pods=3), Policy(reserve=3))
    # the nodes take 4, but only 2 keep the reserve of 3 free (8 - 2 x 2 = 4 >= 3)
    assert not r.fits and r.pods_placeable == 2 and r.pods_placeable_on_nodes == 4
    assert r.shortages == [
        f"total reserve: 8 {GPU} free, 6 needed would leave 2, below the reserve of 3"
    ]


def test_reserve_per_class_limits_only_that_class() -> None:
    nodes = [node("a1", "a100"), node("h1", "h800")]
    policy = Policy(reserve_per_class={"a100": 6})
    r = check(nodes, [], shape(2, pods=5), policy)
    by = {c.node_class: c for c in r.classes}
    assert by["a100"].pods_placeable == 1 and by["h800"].pods_placeable == 4
    assert r.fits and r.plan == {"a1": 1, "h1": 4}
    assert not check(nodes, [], shape(2, pods=6), policy).fits


def test_resource_quota() -> None:
    q = [QuotaLimit("gpu-quota", f"requests.{GPU}", hard=4, used=2)]
    r = check([node("a")], [], shape(2, pods=2, namespace="train"), quotas=q)
    assert not r.fits
    assert r.shortages == [
        f"ResourceQuota gpu-quota in namespace train: 2 of 4 requests.{GPU} left (2 used), 4 needed"
    ]
    assert check([node("a")], [], shape(2, pods=1), quotas=q).fits
    pods_q = [QuotaLimit("count", "pods", hard=10, used=10)]
    assert "0 of 10 pods left" in check([node("a")], [], shape(1), quotas=pods_q).message


def test_mig_resource_and_several_resources_on_one_node() -> None:
    n = node("a", gpus=4, alloc={MIG: 14})
    used = [pod("full", "a", 4), pod("m", "a", 5, res=MIG)]
    assert not check([n], used, shape(1)).fits
    r = check([n], used, shape(3, pods=3, resource=MIG))
    assert r.fits and r.classes[0].free == 9 and r.pods_placeable == 3
    assert not check([n], used, shape(3, pods=4, resource=MIG)).fits


def test_terminal_and_unbound_pods_hold_nothing() -> None:
    used = [
        pod("done", "a", 8, phase="Succeeded"),
        pod("failed", "a", 8, phase="Failed"),
        pod("pending", "", 8, phase="Pending"),
    ]
    assert check([node("a")], used, shape(8)).fits


def test_pod_count_capacity() -> None:
    n = node("a", alloc={"pods": 2})
    used = [Pod("kube-system", f"ds{i}", node_name="a", phase="Running") for i in range(2)]
    r = check([n], used, shape(1))
    assert not r.fits and "pod capacity full: 2/2 pods" in r.nodes[0].reasons


def test_selector_and_affinity_operators() -> None:
    labels = {"accelerator": "h800", "gpu.memory": "81920", "zone": "b"}
    n = node("a", "h800", labels=labels)

    def fits(**placement: object) -> bool:
        return check([n], [], shape(1, placement=Placement(**placement))).fits  # type: ignore[arg-type]

    def term(*reqs: Requirement) -> tuple[NodeSelectorTerm, ...]:
        return (NodeSelectorTerm(reqs),)

    assert fits(node_selector={"accelerator": "h800"})
    assert not fits(node_selector={"accelerator": "a100"})
    assert fits(affinity=term(Requirement("accelerator", "In", ("a100", "h800"))))
    assert not fits(affinity=term(Requirement("accelerator", "NotIn", ("h800",))))
    assert fits(affinity=term(Requirement("rack", "NotIn", ("r1",))))
    assert fits(affinity=term(Requirement("zone", "Exists")))
    assert not fits(affinity=term(Requirement("zone", "DoesNotExist")))
    assert fits(affinity=term(Requirement("gpu.memory", "Gt", ("40000",))))
    assert not fits(affinity=term(Requirement("gpu.memory", "Lt", ("40000",))))
    assert not fits(affinity=term(Requirement("accelerator", "Gt", ("1",))))  # not a number
    assert fits(
        affinity=(
            NodeSelectorTerm((Requirement("zone", "In", ("a",)),)),
            *term(Requirement("zone", "In", ("b",))),
        )
    )  # terms are ORed
    assert not fits(affinity=())  # required affinity without terms matches nothing
    assert not fits(affinity=(NodeSelectorTerm(),))
    assert fits(affinity=(NodeSelectorTerm(fields=(Requirement("metadata.name", "In", ("a",)),)),))
    r = check([n], [], shape(1, placement=Placement({"accelerator": "a100"})))
    assert r.nodes[0].reasons == ["node selector/affinity mismatch: wants accelerator=a100"]


def test_pod_requests_like_the_scheduler() -> None:
    # limits stand in for absent requests; init containers run alone, sidecars alongside
    assert pod_requests([Container(limits={GPU: 2}), Container(requests={GPU: 1})]) == {GPU: 3}
    assert pod_requests([Container({GPU: 1})], [Container({GPU: 4})]) == {GPU: 4}
    sidecar = Container({"cpu": 100}, restart_policy="Always")
    init = Container({"cpu": 500})
    assert pod_requests([Container({"cpu": 200})], [sidecar, init]) == {"cpu": 600}
    assert pod_requests([Container({"cpu": 200})], [init, sidecar]) == {"cpu": 500}
    assert pod_requests([Container({GPU: 1})], overhead={"cpu": 10}) == {GPU: 1, "cpu": 10}


def test_quantities() -> None:
    assert parse_quantity("8") == 8
    assert parse_quantity("500m", milli=True) == 500
    assert parse_quantity("1.5", milli=True) == 1500
    assert parse_quantity("1Gi") == 1 << 30
    assert parse_quantity("1e3") == 1000
    assert parse_quantity("100m") == 1  # Value() rounds up
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity("eight")


def test_render_table() -> None:
    r = check([node("a"), node("b", "h800")], [pod("x", "a", 6)], shape(2, pods=2))
    text = render(r)
    assert "CLASS" in text and "nvidia-a100-80g" in text and "h800" in text
    assert text.splitlines()[-1].startswith("fits: 2 pod(s) x 2 nvidia.com/gpu (4 in all)")
    assert "NODE " not in text
    rows = render(r, with_nodes=True)
    assert "NODE " in rows and "usable" in rows
    assert r.to_dict()["nodes"] is None
    assert [n["name"] for n in r.to_dict(with_nodes=True)["nodes"]] == ["a", "b"]


# -- explain -----------------------------------------------------------------------------
def eight_nodes() -> tuple[list[Node], list[Pod]]:
    nodes = [node(f"h800-{i}", "nvidia-h800") for i in range(7)] + [node("a100-0")]
    used = [pod(f"infer-{i}", f"h800-{i}", 7) for i in range(7)]
    return nodes, used


def test_explain_matches_scheduler_message_format() -> None:
    nodes, used = eight_nodes()
    want = Pod(
        "train", "job-0", requests={GPU: 2}, placement=Placement({"accelerator": "nvidia-h800"})
    )
    r = ex.explain(want, nodes, used)
    assert r.scheduler_message == (
        "0/8 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "7 Insufficient nvidia.com/gpu."
    )
    assert r.summary == (
        "0/8 nodes are available: 1 node(s) didn't match Pod's node affinity/selector "
        "(accelerator=nvidia-h800), 7 Insufficient nvidia.com/gpu (most free: 1, need 2)"
    )
    assert "relax the node selector/affinity: class nvidia-a100-80g would fit it now on a100-0" in (
        r.fixes
    )
    held = next(f for f in r.fixes if "held by" in f)
    assert held.startswith(
        "nvidia.com/gpu on the matching nodes is held by infer/ReplicaSet/x "
        "(49 in 7 pod(s)); pods: infer/infer-0 (7 on h800-0, ReplicaSet/x), "
        "infer/infer-1 (7 on h800-1"
    )
    assert r.agrees_with(
        "0/8 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "7 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are available: 1 Preemption is "
        "not helpful for scheduling, 7 No preemption victims found for incoming pod."
    )
    assert not r.agrees_with("0/8 nodes are available: 8 Insufficient nvidia.com/gpu.")


def test_explain_first_failing_filter_wins_like_the_scheduler() -> None:
    nodes = [
        node("cordoned", unschedulable=True, taints=(Taint("node.kubernetes.io/unschedulable"),)),
        node(
            "notready",
            ready=False,
            not_ready_reason="NodeStatusUnknown",
            taints=(Taint("node.kubernetes.io/not-ready", "", "NoSchedule"),),
        ),
        node("dead", gpus=0),
        node("wrong", "l40s"),
    ]
    want = Pod("t", "p", requests={GPU: 1}, placement=Placement({"accelerator": "nvidia-a100-80g"}))
    r = ex.explain(want, nodes, [])
    by = {f.name: f for f in r.nodes}
    assert by["cordoned"].scheduler_reasons == [ex.UNSCHEDULABLE]
    assert by["notready"].scheduler_reasons == [ex.UNTOLERATED_TAINT]
    assert by["notready"].failures == {
        "not-ready": "NotReady (NodeStatusUnknown); node.kubernetes.io/not-ready:NoSchedule"
    }
    assert by["wrong"].failures == {
        "affinity": "wants accelerator=nvidia-a100-80g; has accelerator=l40s"
    }
    assert by["dead"].scheduler_reasons == [f"Insufficient {GPU}"]
    assert by["wrong"].scheduler_reasons == [ex.AFFINITY]
    assert r.scheduler_message == (
        "0/4 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's "
        "node affinity/selector, 1 node(s) had untolerated taint(s), "
        "1 node(s) were unschedulable."
    )
    assert "node.kubernetes.io/not-ready:NoSchedule" in r.summary
    assert any("uncordon cordoned" in f for f in r.fixes)
    assert any("dead report no allocatable" in f for f in r.fixes)


def test_histogram_sorts_as_strings_and_parses_old_taint_format() -> None:
    msg = ex.scheduler_message(12, Counter({"Insufficient cpu": 2, ex.AFFINITY: 10}))
    assert msg == (
        "0/12 nodes are available: 10 node(s) didn't match Pod's node "
        "affinity/selector, 2 Insufficient cpu."
    )
    parsed = ex.parse_scheduler_message(
        "0/3 nodes are available: 1 node(s) had untolerated taint {gpu: reserved}, "
        "2 Too many pods. preemption: 0/3 nodes are available: 3 Preemption is not helpful."
    )
    assert parsed == (3, Counter({ex.UNTOLERATED_TAINT: 1, ex.TOO_MANY_PODS: 2}))
    assert ex.parse_scheduler_message("pod has unbound immediate PersistentVolumeClaims") is None


def test_explain_fits_now_and_tolerate_fix() -> None:
    nodes = [node("free"), node("tainted", taints=(Taint("gpu", "reserved"),))]
    want = Pod("t", "p", requests={GPU: 8})
    r = ex.explain(want, nodes, [])
    assert r.fits_now == ["free"]
    assert r.summary.startswith("1/2 nodes are available")
    assert r.fixes[0].startswith("the pod fits now on free")
    assert any(f.startswith("tolerate gpu=reserved:NoSchedule") for f in r.fixes)


# -- input parsing -----------------------------------------------------------------------
def test_parse_node_selector() -> None:
    assert parse_node_selector("accelerator=nvidia-h800, zone=b") == {
        "accelerator": "nvidia-h800",
        "zone": "b",
    }
    assert parse_node_selector('{"nvidia.com/gpu.product": "H800"}') == {
        "nvidia.com/gpu.product": "H800"
    }
    assert parse_node_selector({"a": "b"}) == {"a": "b"}
    for bad in ("accelerator", "=x", "a=b,a=c", "a=b c", "-bad=x", '{"a": 1}', "{oops"):
        with pytest.raises(InvalidInput):
            parse_node_selector(bad)


def test_parse_tolerations() -> None:
    assert parse_tolerations("gpu=reserved:NoSchedule,maint:NoExecute,*") == (
        Toleration("gpu", "Equal", "reserved", "NoSchedule"),
        Toleration("maint", "Exists", "", "NoExecute"),
        Toleration("", "Exists"),
    )
    assert parse_tolerations('[{"key": "gpu", "operator": "Exists"}]') == (
        Toleration("gpu", "Exists"),
    )
    for bad in (
        "gpu=x:Sometimes",
        '[{"key": "gpu", "operator": "Exists", "value": "x"}]',
        '[{"operator": "Equal", "value": "x"}]',
        '[{"key": "k", "color": "red"}]',
        '[{"key": "k", "operator": "Gt", "value": "1"}]',
        ":NoSchedule",
    ):
        with pytest.raises(InvalidInput):
            parse_tolerations(bad)


def test_parse_node_affinity_and_class_counts() -> None:
    terms = parse_node_affinity(
        '{"nodeSelectorTerms": [{"matchExpressions": '
        '[{"key": "accelerator", "operator": "In", "values": ["a", "b"]}]}]}'
    )
    assert terms == (NodeSelectorTerm((Requirement("accelerator", "In", ("a", "b")),)),)
    for bad in (
        "accelerator=a",
        '[{"matchExpressions": [{"key": "a", "operator": "In"}]}]',
        '[{"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]}]',
        '[{"matchExpressions": [{"key": "a", "operator": "Near"}]}]',
    ):
        with pytest.raises(InvalidInput):
            parse_node_affinity(bad)
    assert parse_class_counts("a100=2,h800=0", "reserve") == {"a100": 2, "h800": 0}
    assert parse_class_counts({"a100": 2}, "reserve") == {"a100": 2}
    for bad_counts in ("a100=-1", "a100=two", '{"a100": 1.5}'):
        with pytest.raises(InvalidInput):
            parse_class_counts(bad_counts, "reserve")


# -- decoding API JSON -------------------------------------------------------------------
def test_decode_node_and_pod_json() -> None:
    n = node_from_api(
        {
            "metadata": {"name": "gpu-1", "labels": {"accelerator": "h800"}},
            "spec": {
                "unschedulable": True,
                "taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}],
            },
            "status": {
                "capacity": {GPU: "8", "cpu": "64", "memory": "512Gi", "pods": "110"},
                "allocatable": {GPU: "0", "cpu": "63500m", "memory": "500Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}],
            },
        }
    )
    assert n.unschedulable and not n.ready and n.not_ready_reason == "KubeletNotReady"
    assert n.allocatable == {GPU: 0, "cpu": 63500, "memory": 500 << 30, "pods": 110}
    assert n.taints == (Taint("node.kubernetes.io/not-ready", "", "NoSchedule"),)
    p = pod_from_api(
        {
            "metadata": {
                "namespace": "t",
                "name": "p",
                "ownerReferences": [{"kind": "Job", "name": "train", "controller": True}],
            },
            "spec": {
                "nodeName": "gpu-1",
                "containers": [
                    {"resources": {"limits": {GPU: "2"}}},
                    {"resources": {"requests": {"cpu": "1"}}},
                ],
                "initContainers": [{"resources": {"requests": {GPU: "4"}}}],
                "nodeSelector": {"accelerator": "h800"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "zone", "operator": "In", "values": ["a"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
            },
            "status": {"phase": "Running"},
        },
        with_placement=True,
    )
    assert p.requests == {GPU: 4, "cpu": 1000}
    assert p.owner == "Job/train" and p.node_name == "gpu-1" and p.phase == "Running"
    assert p.placement.node_selector == {"accelerator": "h800"}
    assert p.placement.tolerations == (Toleration("gpu", "Exists", "", "NoSchedule"),)
    assert p.placement.affinity == (NodeSelectorTerm((Requirement("zone", "In", ("a",)),)),)
    assert (
        label_selector(
            {
                "matchLabels": {"app": "x"},
                "matchExpressions": [
                    {"key": "tier", "operator": "NotIn", "values": ["a", "b"]},
                    {"key": "gone", "operator": "DoesNotExist"},
                ],
            }
        )
        == "app=x,tier notin (a,b),!gone"
    )


def test_decoding_only_some_resources_keeps_their_sums() -> None:
    """``headroom check`` decodes only its resource and ``pods``: the sums it gets must be the
    full decode's, for every mix of containers, empty ones, sidecars, init containers and
    overhead; cpu/memory are not even read then (a bad cpu quantity only fails a full decode)."""
    import random

    from gpuops.core.kubemodel import usage_by_node
    from gpuops.errors import OperationFailed

    rng = random.Random(7)
    keep = frozenset({GPU, "pods"})

    def container(sidecar: bool = False) -> dict[str, object]:
        res: dict[str, dict[str, str]] = {}
        for part in ("requests", "limits"):
            amounts = {
                r: q
                for r, q in ((GPU, str(rng.randint(0, 4))), ("cpu", "250m"), ("memory", "1Gi"))
                if rng.random() < 0.4
            }
            if amounts or rng.random() < 0.3:
                res[part] = amounts
        return {"resources": res, **({"restartPolicy": "Always"} if sidecar else {})}

    pods = []
    for i in range(400):
        spec: dict[str, object] = {
            "nodeName": f"n{i % 7}",
            "containers": [container() for _ in range(rng.randint(0, 3))],
            "initContainers": [container(rng.random() < 0.5) for _ in range(rng.randint(0, 3))],
        }
        if rng.random() < 0.2:
            spec["overhead"] = {GPU: "1", "cpu": "10m"}
        obj = {"metadata": {"namespace": "t", "name": f"p{i}"}, "spec": spec}
        full, part = pod_from_api(obj), pod_from_api(obj, resources=keep)
        assert part.requests == {k: v for k, v in full.requests.items() if k in keep}, obj
        pods.append((full, part))
    assert any(full.requests.get(GPU) for full, _ in pods)
    full_use = usage_by_node(f for f, _ in pods)
    part_use = usage_by_node(p for _, p in pods)
    assert full_use.keys() == part_use.keys()
    for name, u in full_use.items():
        assert part_use[name].requested.get(GPU, 0) == u.requested.get(GPU, 0)
        assert len(part_use[name].pods) == len(u.pods)

    bad = {
        "metadata": {"namespace": "t", "name": "bad"},
        "spec": {"containers": [{"resources": {"requests": {GPU: "1", "cpu": "lots"}}}]},
    }
    assert pod_from_api(bad, resources=keep).requests == {GPU: 1}
    with pytest.raises(OperationFailed, match="pod t/bad: cannot read quantity 'lots' of cpu"):
        pod_from_api(bad)
    bad["spec"] = {"containers": [{"resources": {"limits": {GPU: "two"}}}]}
    with pytest.raises(OperationFailed, match="cannot read quantity 'two' of nvidia"):
        pod_from_api(bad, resources=keep)

    n = node_from_api(
        {
            "metadata": {"name": "g"},
            "status": {
                "capacity": {GPU: "8", "cpu": "64", "pods": "110"},
                "allocatable": {GPU: "0", "cpu": "x", "pods": "110"},
            },
        },
        resources=keep,
    )
    assert n.allocatable == {GPU: 0, "pods": 110} and n.capacity == {GPU: 8, "pods": 110}
    assert n.offers(GPU) and not n.offers(MIG)


def test_continue_token_is_read_from_the_page_head_only() -> None:
    from gpuops.adapters.kube.pager import _continue_token

    page = (
        b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9",'
        b'"continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ","remainingItemCount":3},'
        b'"items":[{"metadata":{"annotations":{"x":"\\"continue\\":\\"fake\\""}}}]}'
    )
    assert _continue_token(page) == "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"
    last = b'{"kind":"PodList","metadata":{"resourceVersion":"9"},"items":[{"continue":"no"}]}'
    assert _continue_token(last) == ""


def test_pods_placeable_honours_the_quota_as_the_api_server_admits() -> None:
    """Issue 8: 4 GPUs of quota left, 16 free, 2 x 4 asked: refused, and 1 pod placeable
    (the API server admits 1), not 4; the per-class numbers still say what the nodes hold."""
    nodes = [node("a"), node("b")]
    q = [QuotaLimit("gpus", f"requests.{GPU}", hard=4, used=0)]
    r = check(nodes, [], shape(4, pods=2), quotas=q)
    assert not r.fits
    assert r.pods_placeable == 1
    assert r.to_dict()["pods_placeable_on_nodes"] == 4
    assert r.classes[0].pods_placeable == 4
    pods_q = [QuotaLimit("count", "pods", hard=5, used=3)]
    assert check(nodes, [], shape(1, pods=3), quotas=pods_q).pods_placeable == 2
    both = [*q, *pods_q]
    assert check(nodes, [], shape(1, pods=3), quotas=both).pods_placeable == 2
    assert check(nodes, [], shape(2, pods=3), quotas=both).pods_placeable == 2
    assert check(nodes, [], shape(4, pods=1), quotas=q).fits


def test_pods_placeable_honours_the_total_reserve() -> None:
    nodes = [node("a"), node("b")]  # 16 free
    r = check(nodes, [], shape(4, pods=3), Policy(reserve=8))
    assert not r.fits and r.pods_placeable == 2  # 16 - 2 x 4 = 8 stay free
    assert check(nodes, [], shape(4, pods=2), Policy(reserve=8)).fits
    assert check(nodes, [], shape(4, pods=1), Policy(reserve=20)).pods_placeable == 0
