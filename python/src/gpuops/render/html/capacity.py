"""The GPU capacity page, from a ``gpuops headroom check`` result.

Answers at a glance: does the asked shape fit, and if not, why. Per node class: what is
allocatable, requested, free, and free on nodes this workload may use, as bars; the reserve and
the asked shape beside them; how the free GPUs are spread over nodes (fragmentation: a pod
needs all its GPUs on one node); which nodes are out and why. Pages for thousands of nodes stay
readable: classes and histograms are aggregates, and only the worst nodes are listed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from gpuops.errors import InvalidInput
from gpuops.fsio import OutDir
from gpuops.render.html import charts, page

#: Nodes listed by name at most (the rest are counted).
WORST_NODES = 25
_REQUIRED = ("verdict", "message", "resource", "gpus_per_pod", "pods", "classes", "free_total")


def _check(result: Mapping[str, Any]) -> None:
    missing = [k for k in _REQUIRED if k not in result]
    if missing or not isinstance(result.get("classes"), list):
        raise InvalidInput(
            f"not a 'gpuops headroom check' result: missing {', '.join(missing) or 'classes'}",
            hint="pass the result (or error) document of 'gpuops headroom check --show-nodes'",
            field="input",
        )


def _class_chart(classes: Sequence[Mapping[str, Any]]) -> charts.Chart:
    import pygal  # noqa: PLC0415

    names = [c["node_class"] for c in classes]
    chart = pygal.HorizontalStackedBar(
        **charts.config(
            width=900,
            height=120 + 44 * max(1, len(names)),
            title="GPUs per node class",
            x_title="GPUs",
        )
    )
    chart.x_labels = names
    chart.add("requested", [c["requested"] for c in classes])
    chart.add("free, usable by this workload", [c["free_usable"] for c in classes])
    chart.add("free, elsewhere in the class", [c["free"] - c["free_usable"] for c in classes])
    chart.add("on unavailable nodes", [c.get("unavailable", 0) for c in classes])
    return charts.finish(chart, "classes")


def _want_chart(result: Mapping[str, Any], classes: Sequence[Mapping[str, Any]]) -> charts.Chart:
    import pygal  # noqa: PLC0415

    chart = pygal.Bar(
        **charts.config(
            width=900,
            height=340,
            title=f"Free usable vs. reserve vs. asked ({result['gpus_needed']} GPUs)",
            y_title="GPUs",
        )
    )
    chart.x_labels = [c["node_class"] for c in classes]
    chart.add("free, usable", [c["free_usable"] for c in classes])
    chart.add("reserve kept free", [c.get("reserve", 0) for c in classes])
    chart.add(
        "room for this workload (pods that fit x GPUs/pod)",
        [c["pods_placeable"] * result["gpus_per_pod"] for c in classes],
    )
    return charts.finish(chart, "asked")


def _blocks_chart(nodes: Sequence[Mapping[str, Any]], gpus_per_pod: int) -> charts.Chart | None:
    """Usable nodes by free GPUs on the node, per class: fragmentation made visible."""
    import pygal  # noqa: PLC0415

    usable = [n for n in nodes if n.get("usable")]
    if not usable:
        return None
    top = max(8, *(int(n["free"]) for n in usable))
    per_class: dict[str, Counter[int]] = {}
    for n in usable:
        per_class.setdefault(n["node_class"], Counter())[int(n["free"])] += 1
    chart = pygal.StackedBar(
        **charts.config(
            width=900,
            height=380,
            title=f"Usable nodes by free GPUs on the node (a pod needs {gpus_per_pod} on one)",
            x_title="free GPUs on the node",
            y_title="nodes",
            print_values=False,
            legend_at_bottom=False,
        )
    )
    chart.x_labels = [str(i) for i in range(top + 1)]
    for name, counts in sorted(per_class.items()):
        chart.add(name, [counts.get(i, 0) or None for i in range(top + 1)])
    return charts.finish(chart, "blocks")


def _health_reasons(n: Mapping[str, Any]) -> list[str]:
    """Reasons that say something is wrong with the node (not merely another class)."""
    return [r for r in n.get("reasons") or [] if not r.startswith("node selector/affinity")]


def _worst(nodes: Sequence[Mapping[str, Any]], gpus_per_pod: int) -> list[dict[str, Any]]:
    """Nodes holding GPUs nobody can use first (NotReady, cordoned, tainted, device plugin at
    0) among those the workload wants, then usable nodes whose free GPUs are too few for one
    pod (fragmented), then broken nodes of other classes. Nodes kept out only because the
    workload wants another class are counted above, not listed."""

    def rank(n: Mapping[str, Any]) -> tuple[int, int, str]:
        wanted = len(_health_reasons(n)) == len(n.get("reasons") or [])
        if not n.get("usable") and _health_reasons(n):
            return (0 if wanted else 2, -int(n.get("allocatable", 0)), n["name"])
        if n.get("usable") and 0 < int(n["free"]) < gpus_per_pod:
            return (1, -int(n["free"]), n["name"])
        return (3, 0, n["name"])

    ranked = [(rank(n), n) for n in nodes]
    picked = [n for key, n in sorted(ranked, key=lambda kv: kv[0]) if key[0] < 3]
    return [
        {
            "name": n["name"],
            "node_class": n["node_class"],
            "free": n["free"],
            "allocatable": n["allocatable"],
            "why": "; ".join(n.get("reasons") or []) or "usable",
            "kind": "fragmented" if n.get("usable") else "excluded",
        }
        for n in picked
    ]


def context(result: Mapping[str, Any]) -> tuple[dict[str, Any], list[charts.Chart]]:
    _check(result)
    classes = sorted(
        result["classes"], key=lambda c: (-int(c.get("allocatable", 0)), c["node_class"])
    )
    nodes = result.get("nodes") or []
    made = [_class_chart(classes), _want_chart(result, classes)] if classes else []
    blocks = _blocks_chart(nodes, int(result["gpus_per_pod"]))
    if blocks is not None:
        made.append(blocks)
    placement = result.get("placement") or {}
    selector = placement.get("node_selector") or {}
    bad = _worst(nodes, int(result["gpus_per_pod"]))
    worst = bad[:WORST_NODES]
    ctx = {
        "r": result,
        "classes": classes,
        "selector": ", ".join(f"{k}={v}" for k, v in sorted(selector.items())) or "any node",
        "excluded": sorted((result.get("excluded") or {}).items(), key=lambda kv: (-kv[1], kv[0])),
        "worst": worst,
        "nodes_listed": len(nodes),
        "worst_more": len(bad) - len(worst),
        "has_nodes": bool(nodes),
        "quotas": result.get("quotas") or [],
        "shortages": result.get("shortages") or [],
        "plan": sorted((result.get("plan") or {}).items()),
    }
    return ctx, made


def write(result: Mapping[str, Any], out_dir: OutDir) -> page.Written:
    ctx, made = context(result)
    return page.write(out_dir, "capacity", "capacity.html.j2", ctx, made)
