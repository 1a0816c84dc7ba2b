"""Text renderings of headroom checks and explanations, for a terminal and a build log.

Renderers take the core's typed results and return text; they decide nothing.
"""

from __future__ import annotations

from gpuops.core.explain import ExplainResult
from gpuops.core.headroom import HeadroomResult, excluded_reasons


def headroom_table(result: HeadroomResult, *, with_nodes: bool = False) -> str:
    """The class table, what kept nodes out, and the verdict, for a terminal."""
    header = (
        f"{'CLASS':<24} {'NODES u/h/t':>12} {'ALLOC':>6} {'REQ':>6} {'FREE':>6} "
        f"{'USABLE':>6} {'BLOCK':>6} {'RESERVE':>7} {'PODS':>5}"
    )
    lines = [f"resource {result.shape.resource}, grouped by {result.policy.group_by}", header]
    for c in result.classes:
        counts = f"{c.nodes_usable}/{c.nodes_healthy}/{c.nodes}"
        lines.append(
            f"{c.node_class:<24} {counts:>12} {c.allocatable:>6} {c.requested:>6} {c.free:>6} "
            f"{c.free_usable:>6} {c.largest_free_block:>6} {c.reserve:>7} {c.pods_placeable:>5}"
        )
    if not result.classes:
        lines.append(f"(no node offers {result.shape.resource})")
    if with_nodes:
        lines.append(f"{'NODE':<32} {'CLASS':<24} {'FREE':>5} {'PODS':>5}  WHY")
        for n in result.nodes:
            why = "; ".join(n.reasons) or "usable"
            lines.append(f"{n.name:<32} {n.node_class:<24} {n.free:>5} {n.slots:>5}  {why}")
    kinds = excluded_reasons(result.nodes)
    if kinds:
        lines.append("excluded nodes: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
    for q in result.quotas:
        lines.append(f"quota {q.quota}: {q.resource} {q.used}/{q.hard} used, {q.left} left")
    lines.append(result.message)
    return "\n".join(lines)


def explanation(result: ExplainResult, *, all_nodes: bool = False) -> str:
    lines = [
        f"pod {result.pod.key} requests "
        + ", ".join(f"{k}={v}" for k, v in sorted(result.pod.requests.items()))
    ]
    shown = [f for f in result.nodes if all_nodes or not f.fits]
    for f in shown[: None if all_nodes else 50]:
        why = "; ".join(f"{k}: {v}" for k, v in f.failures.items()) or "fits"
        lines.append(f"  {f.name:<28} {f.node_class:<20} {why}")
    if len(shown) > 50 and not all_nodes:
        lines.append(f"  ... {len(shown) - 50} more nodes (see --output json)")
    lines.append(result.summary)
    if result.event_message:
        agree = result.agrees_with(result.event_message)
        mark = {True: "agrees", False: "DIFFERS", None: "not comparable"}[agree]
        lines.append(f"scheduler said ({mark}): {result.event_message}")
    lines.extend(f"fix: {fix}" for fix in result.fixes)
    return "\n".join(lines)
