"""``gpuops release rollback --with-nodes`` (S-24): a release and the node change made in its
build go back together, the nodes first, then the image.

1. The plan, changing nothing: the release to restore (chosen as a plain rollback chooses it),
   its node change record, the drivers the nodes will run once that record is restored (the
   node history's ``target_pins``), and the image rollback's gates as a dry run, with the
   compat gate judging those drivers instead of today's node labels. The approval the
   environment requires is checked here too: nothing may change before it is given.
2. The nodes: the node history's ``rollback_to`` (canary, batches, headroom, validation, the
   downgrade gate), recorded in the node history as a rollback record. When it does not
   succeed the image is not touched, and the error says so.
3. The image: the ordinary rollback (lock, gates again on what the nodes now run, rollout
   watch, history); its record names the node change record the rollback just wrote.

A target release without a node change record is refused (exit 3) before anything changes:
gpuops does not know which drivers ran with it, and restoring the image alone while the
operator asked for the nodes too would leave them on the drivers the later release brought.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gpuops.adapters.kube import KubeClient
from gpuops.core.inventory import Inventory
from gpuops.core.nodestate import DriverPin
from gpuops.core.releasehistory import Release
from gpuops.errors import GateRefused, GpuOpsError, InternalError, OperationFailed
from gpuops.usecases.cluster import Cluster
from gpuops.usecases.outcome import Outcome
from gpuops.usecases.releases import model as m
from gpuops.usecases.releases.engine import Context, Deps, approval_refusal, cluster_of, run
from gpuops.usecases.releases.gates import Gate

if TYPE_CHECKING:
    from gpuops.core.releaseconfig import Environment
    from gpuops.usecases.nodes.records import Rollout
    from gpuops.usecases.nodes.update import UpdateRequest

#: Picks the release a rollback restores from the history (as ``rollback`` does).
Pick = Callable[[Context], Release]
#: Connects to a cluster (the release's own, lent): what the node use cases take.
Connect = Callable[[Cluster], KubeClient]


@dataclass(frozen=True)
class NodeSide:
    """What a release rollback needs of the node change history (``usecases.nodes.history``):
    the pins a record restores, and the rollback to it. A field each, so a test can say what
    the history answers."""

    load: Callable[[m.NodesScope], Inventory]
    target_pins: Callable[[KubeClient, Inventory, str], dict[str, DriverPin]]
    rollback_to: Callable[[UpdateRequest, str, Connect | None], Outcome[Rollout]]
    request: Callable[[m.NodesScope, Cluster, Environment], UpdateRequest]

    @staticmethod
    def default() -> NodeSide:
        from gpuops.core.inventory import DEFAULT_PATTERN  # noqa: PLC0415
        from gpuops.usecases.images.registryops import RegistryAccess  # noqa: PLC0415
        from gpuops.usecases.nodes import common, history  # noqa: PLC0415 - Ansible on use
        from gpuops.usecases.nodes.drain import DrainPolicy  # noqa: PLC0415
        from gpuops.usecases.nodes.update import UpdateRequest  # noqa: PLC0415

        def request(scope: m.NodesScope, cluster: Cluster, env: Environment) -> UpdateRequest:
            drain = DrainPolicy(
                gpu_pods_timeout_s=scope.gpu_pods_timeout_s, on_timeout=scope.on_timeout
            )
            return UpdateRequest(
                inventory=scope.inventory,
                limit=scope.limit,
                drain=drain,
                cluster=cluster,
                artifacts_dir=scope.artifacts_dir,
                known_hosts=scope.known_hosts,
                # the downgrade gate reads images as the environment's registry is reached,
                # and leaves the environment's own pods to the image rollback that follows
                registry=RegistryAccess(env.registry_plain_http, env.registry_ca_file),
                replaced=tuple((env.namespace, d) for d in env.deployments),
            )

        return NodeSide(
            load=lambda s: common.load(s.inventory, s.limit, DEFAULT_PATTERN),
            target_pins=history.target_pins,
            rollback_to=history.rollback_to,
            request=request,
        )


@dataclass
class _Plan:
    """What the plan found: the release to restore, its node record, the drivers to come."""

    source: Release | None = None
    drivers: dict[str, str] = dataclasses.field(default_factory=dict)


def _no_record(source: Release) -> Gate:
    return Gate(
        "nodes",
        False,
        f"release #{source.number} ({source.tag}) has no node change record: gpuops does not "
        "know which drivers ran with it, so it cannot put them back",
        hint="roll back the image alone (without --with-nodes), or choose the node record "
        "yourself: gpuops nodes history, then gpuops nodes rollback --to <record>",
    )


def _nodes_doc(
    scope: m.NodesScope, record: str, drivers: dict[str, str], state: str, message: str
) -> m.NodesRollbackDocument:
    return {
        "record": record,
        "inventory": scope.inventory,
        "limit": scope.limit,
        "state": state,
        "drivers": dict(sorted(drivers.items())),
        "new_record": None,
        "message": message,
    }


def rollback(
    env: Environment,
    request: m.RollbackRequest,
    deps: Deps,
    pick: Pick,
    side: NodeSide | None = None,
) -> Outcome[m.ReleaseOutcome]:
    """Nodes first, then the image; see the module's docstring."""
    scope = request.with_nodes
    if scope is None:
        raise InternalError("rollback --with-nodes ran without its nodes")
    side = side or NodeSide.default()
    inv = side.load(scope)
    plan = _Plan()
    plan_out = _plan(env, request, deps, pick, side, inv, plan)
    said_no = approval_refusal(env, request.who, request.dry_run)
    if plan_out.ok and said_no is not None:  # before the nodes change, not after
        plan_out.result.state = m.REFUSED
        plan_out = Outcome(plan_out.result, said_no)
    source = plan.source
    if not plan_out.ok or source is None or source.node_change is None:
        return plan_out
    record = source.node_change
    if plan_out.result.state == m.UNCHANGED:  # the image is the target's: nothing was planned
        return plan_out
    doc = _nodes_doc(scope, record, plan.drivers, m.PLANNED, _planned_message(record, plan))
    plan_out.result.nodes = doc
    if request.dry_run:
        return plan_out
    # 2. the nodes
    deps.say(f"restoring the nodes to record {record}, then the image of release #{source.number}")
    cluster = cluster_of(env, request.target)
    nodes = side.rollback_to(side.request(scope, cluster, env), record, deps.connect)
    ro = nodes.result
    new_record = getattr(ro, "record", None)
    _rollout_facts(doc, ro)
    doc["new_record"] = new_record
    if not nodes.ok:
        return _nodes_failed(plan_out.result, doc, nodes, source)
    doc["state"] = m.SUCCEEDED
    doc["message"] = f"the nodes run record {record}'s drivers again" + (
        f" (node record {new_record})" if new_record else ""
    )
    # 3. the image, its record naming the node change just made
    who = replace(request.who, node_change=new_record or request.who.node_change)

    def choose_again(ctx: Context) -> tuple[m.Wanted | None, list[Gate]]:
        # the nodes run the record's drivers now; their labels may lag (GPU feature discovery
        # relabels a node minutes later), so the compat gate judges the drivers again
        wanted, gates = _image(env, ctx, deps, pick, expect=source.number)
        return (replace(wanted, drivers=dict(plan.drivers)) if wanted else None), gates

    image = run(env, "rollback", request.target, who, False, choose_again, deps)
    image.result.nodes = doc
    if not image.ok:
        image.result.notes.append(
            f"the nodes were restored to record {record}; the image rollback did not succeed: "
            "roll the image back again (the nodes need not change again)"
        )
    return image


def _planned_message(record: str, plan: _Plan) -> str:
    versions = sorted(set(plan.drivers.values()))
    return (
        f"restores node record {record}: {len(plan.drivers)} node(s) to driver "
        f"{', '.join(versions) or '(none in scope)'}"
    )


def _image(
    env: Environment, ctx: Context, deps: Deps, pick: Pick, expect: int | None
) -> tuple[m.Wanted | None, list[Gate]]:
    """The image rollback's choice and its image gate (as a plain rollback makes them)."""
    from gpuops.core.releasepatch import image_ref  # noqa: PLC0415
    from gpuops.usecases.releases.gates import digest_gate  # noqa: PLC0415

    source = pick(ctx)
    if expect is not None and source.number != expect:
        raise OperationFailed(
            f"the release history of {env.name} changed while the nodes rolled back: the "
            f"rollback now restores release #{source.number}, not #{expect}",
            hint="see gpuops release history, then roll back the image alone",
        )
    assert source.tag is not None and source.digest is not None  # noqa: S101 - candidates have both
    gate = digest_gate(deps.registry, env, source.tag, source.digest)
    image = image_ref(env.image, source.tag, source.digest)
    return m.Wanted(source.tag, source.digest, image, source.model, source), [gate]


def _plan(
    env: Environment,
    request: m.RollbackRequest,
    deps: Deps,
    pick: Pick,
    side: NodeSide,
    inv: Inventory,
    plan: _Plan,
) -> Outcome[m.ReleaseOutcome]:
    """The image rollback's dry run, with the node gate: the record exists and the compat gate
    judges the drivers it restores."""

    def choose(ctx: Context) -> tuple[m.Wanted | None, list[Gate]]:
        wanted, gates = _image(env, ctx, deps, pick, expect=None)
        assert wanted is not None and wanted.source is not None  # noqa: S101 - _image always has one
        source = plan.source = wanted.source
        if source.node_change is None:
            return None, [*gates, _no_record(source)]
        pins = side.target_pins(ctx.kube, inv, source.node_change)
        plan.drivers = {inv.host(h).node_name: p.version for h, p in pins.items()}
        gate = Gate(
            "nodes",
            True,
            _planned_message(source.node_change, plan),
            {"record": source.node_change, "drivers": dict(sorted(plan.drivers.items()))},
        )
        return replace(wanted, drivers=dict(plan.drivers)), [*gates, gate]

    return run(env, "rollback", request.target, request.who, True, choose, deps)


def _rollout_facts(doc: m.NodesRollbackDocument, ro: Any) -> None:
    """What the release document keeps of the nodes rollback's own result."""
    facts = ro.to_dict()
    doc["summary"] = dict(facts.get("summary") or {})
    doc["failed"] = [
        h for key in ("failed", "rolled_back", "rollback_failed") for h in facts.get(key) or []
    ]
    doc["stopped"] = str(facts.get("stopped") or "")
    doc["artifacts"] = dict(facts.get("artifacts") or {})


def _nodes_failed(
    out: m.ReleaseOutcome,
    doc: m.NodesRollbackDocument,
    nodes: Outcome[Any],
    source: Release,
) -> Outcome[m.ReleaseOutcome]:
    """The nodes did not go back: the image is not touched; the error says both."""
    problem = nodes.problem
    assert problem is not None  # noqa: S101 - a failed outcome has its error
    refused = isinstance(problem, GateRefused)
    doc["state"] = m.REFUSED if refused else m.FAILED
    doc["message"] = (
        f"the nodes rollback to record {doc['record']} "
        + ("was refused" if refused else "failed")
        + f": {problem.message}"
    )
    out.state = m.REFUSED if refused else m.FAILED
    out.notes.append(
        f"the image was not touched: {out.env.name} still runs what it ran before "
        f"(the rollback to release #{source.number} stopped at its nodes)"
    )
    message = (
        f"{doc['message']}; the image was not touched (release #{source.number} was not restored)"
    )
    # the same kind of error (its exit code: refused 3, failed 1, unreachable 4, input 2)
    error: GpuOpsError = type(problem)(message, hint=problem.hint, field=problem.field)
    return Outcome(out, error, partial=nodes.partial and not refused)
