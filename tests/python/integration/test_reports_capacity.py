"""The GPU capacity page, from real ``gpuops headroom check`` results on the lab's cluster,
opened in headless Chromium under Jenkins' default CSP (issue 12).

Checked as a person sees it: no console errors, no CSP violations, nothing fetched from
outside its folder, the key numbers in the DOM equal to the JSON result, a screenshot kept in
reports/screenshots/. Edge cases (an empty fleet, 2,000 nodes, hostile strings) are rendered
from results of the same pure core the command uses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from integration.browser import open_page
from integration.conftest_kube import KubeLab

from gpuops.cli.main import run
from gpuops.core.headroom import Policy, Shape, check
from gpuops.core.kubemodel import Node, Placement, Pod
from gpuops.render.html import capacity

pytestmark = pytest.mark.timeout(600)


def _check(lab: KubeLab, tmp: Path, *args: str) -> tuple[int, dict[str, Any], Path]:
    out = tmp / "report"
    doc_file = tmp / "doc.json"
    code = run(
        [
            "--result-file",
            str(doc_file),
            "--error-file",
            str(doc_file),
            "headroom",
            "check",
            "--kubeconfig",
            str(lab.kubeconfig),
            "--report-dir",
            str(out),
            *args,
        ]
    )
    return code, json.loads(doc_file.read_text()), out


def _assert_numbers_match(seen: Any, result: dict[str, Any]) -> None:
    assert seen.one("verdict") == result["verdict"]
    assert seen.one("message") == result["message"]
    for key in ("pods", "gpus_per_pod", "gpus_needed", "pods_placeable", "reserve"):
        assert seen.one(key) == str(result[key]), key
    for key in ("free_total", "free_usable", "nodes_total"):
        assert seen.one(key).replace(",", "") == str(result[key]), key
    classes = sorted(result["classes"], key=lambda c: (-c["allocatable"], c["node_class"]))
    assert seen.data.get("class", []) == [c["node_class"] for c in classes]
    for dom, field in (
        ("class-allocatable", "allocatable"),
        ("class-requested", "requested"),
        ("class-free", "free"),
        ("class-free-usable", "free_usable"),
        ("class-pods", "pods_placeable"),
    ):
        assert [v.replace(",", "") for v in seen.data.get(dom, [])] == [
            str(c[field]) for c in classes
        ], dom


def test_capacity_page_of_a_fitting_check(kube_lab: KubeLab, tmp_path: Path) -> None:
    code, doc, out = _check(
        kube_lab,
        tmp_path,
        "--gpus-per-pod",
        "4",
        "--pods",
        "2",
        "--node-selector",
        "accelerator=nvidia-h800",
        "--show-nodes",
    )
    assert code == 0, doc
    result = doc["result"]
    assert result["report"]["status"] == "written"
    assert {Path(f).name for f in result["report"]["files"]} == {"capacity.html", "report.css"}
    seen = open_page(out, "capacity.html", "capacity-lab-fits")
    seen.assert_clean()
    _assert_numbers_match(seen, result)
    assert seen.one("verdict") == "fits"


def test_capacity_page_of_a_refused_check_carries_the_reasons(
    kube_lab: KubeLab, tmp_path: Path
) -> None:
    code, doc, out = _check(
        kube_lab,
        tmp_path,
        "--gpus-per-pod",
        "8",
        "--pods",
        "40",
        "--reserve",
        "4",
    )
    assert code == 3, doc
    result = doc["result"]  # the refusal's numbers: the same object a success has
    seen = open_page(out, "capacity.html", "capacity-lab-shortage")
    seen.assert_clean()
    _assert_numbers_match(seen, result)
    assert seen.one("verdict") == "shortage"
    assert seen.data["shortage"] == result["shortages"]


def _render(result: dict[str, Any], tmp: Path, name: str) -> Any:
    capacity.write(result, tmp)
    return open_page(tmp, "capacity.html", name)


def test_an_empty_fleet_says_so(tmp_path: Path) -> None:
    result = check([], [], Shape(gpus_per_pod=1, pods=1)).to_dict(with_nodes=True)
    seen = _render(result, tmp_path, "capacity-empty")
    seen.assert_clean()
    assert "No node offers nvidia.com/gpu" in seen.one("empty")
    assert seen.one("verdict") == "shortage"


def _fleet(size: int) -> tuple[list[Node], list[Pod]]:
    nodes, pods = [], []
    for i in range(size):
        cls = ("nvidia-a100", "nvidia-h800", "nvidia-l40s")[i % 3]
        nodes.append(
            Node(
                name=f"gpu-{i:05d}",
                labels={"accelerator": cls},
                allocatable={"nvidia.com/gpu": 8, "pods": 110},
                capacity={"nvidia.com/gpu": 8, "pods": 110},
                ready=i % 41 != 0,
                not_ready_reason="" if i % 41 else "KubeletNotReady",
                unschedulable=i % 53 == 0,
            )
        )
        used = (0, 2, 5, 7, 8)[i % 5]
        if used:
            pods.append(Pod("ai", f"p{i}", f"gpu-{i:05d}", "Running", {"nvidia.com/gpu": used}))
    return nodes, pods


def test_two_thousand_nodes_stay_readable(tmp_path: Path) -> None:
    nodes, pods = _fleet(2000)
    shape = Shape(gpus_per_pod=4, pods=3, placement=Placement({"accelerator": "nvidia-h800"}))
    result = check(nodes, pods, shape, Policy(reserve=8)).to_dict(with_nodes=True)
    seen = _render(result, tmp_path, "capacity-2000-nodes")
    seen.assert_clean()
    _assert_numbers_match(seen, result)
    # aggregated: three class rows, and only the worst nodes by name
    assert len(seen.data["class"]) == 3
    assert 0 < len(seen.data["worst-node"]) <= capacity.WORST_NODES
    assert (tmp_path / "capacity.html").stat().st_size < 400_000


HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(2)>',
    "</style><style>body{display:none}</style>",
    "{{ 7*7 }} ${7*7}",
    "x\u202eevil",
]


def test_hostile_strings_are_shown_never_executed(tmp_path: Path) -> None:
    nodes, pods = _fleet(30)
    result = check(nodes, pods, Shape(gpus_per_pod=4, pods=2)).to_dict(with_nodes=True)
    for i, cls in enumerate(result["classes"]):
        cls["node_class"] = HOSTILE[i % len(HOSTILE)]
    for i, node in enumerate(result["nodes"]):
        node["name"] = HOSTILE[i % len(HOSTILE)] + str(i)
        node["node_class"] = HOSTILE[(i + 1) % len(HOSTILE)]
        node["reasons"] = [HOSTILE[(i + 2) % len(HOSTILE)]]
        node["usable"] = False
    result["message"] = HOSTILE[0] + HOSTILE[3]
    result["excluded"] = {HOSTILE[1]: 3}
    seen = _render(result, tmp_path, "capacity-hostile")
    seen.assert_clean()
    assert seen.one("message") == HOSTILE[0] + HOSTILE[3]  # shown as typed: not run, not templated
    assert set(seen.data["class"]) <= set(HOSTILE)
    assert seen.data["excluded-reason"] == [HOSTILE[1]]
    html = (tmp_path / "capacity.html").read_text()
    assert "<script>" not in html and "<img src=x" not in html


def test_the_checker_sees_what_the_csp_blocks(tmp_path: Path) -> None:
    """The browser check can fail: an inline style, an inline script and a remote image
    are each reported."""
    (tmp_path / "bad.html").write_text(
        "<!doctype html><html><head><title>t</title><style>p{color:red}</style></head>"
        '<body><p style="color:blue">x</p><script>1</script>'
        '<img src="http://192.0.2.1/x.png"></body></html>'
    )
    seen = open_page(tmp_path, "bad.html", "checker-negative-control")
    texts = " ".join(m["text"] for m in seen.console)
    assert "Content Security Policy" in texts
    assert "sandboxed" in texts
    assert seen.scripts == 1
    with pytest.raises(AssertionError):
        seen.assert_clean()
