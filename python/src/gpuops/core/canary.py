"""The canary of a progressive release (S-22), pure: its Deployment's body from the stable's,
the proof that a canary is gpuops' own, and the schedule of a replacement in place.

A progressive release of Deployment ``D`` runs its new version first in a Deployment of its
own, ``D-canary``, made from ``D``'s pod template with the new image (and model version): the
same labels plus ``gpuops.io/track: canary``, so that the Service, which selects on ``D``'s
labels, sends it its share of the requests, while its ReplicaSet never adopts ``D``'s pods
(its selector has the track label too). A Deployment of its own gives exact replica counts
(``kubectl get deploy`` shows ``D-canary 1/1``); a paused partial rollout of ``D`` itself does
not (the deployment controller moves ``maxSurge``/``maxUnavailable`` pods at a time, and a
pause stops it wherever it stands).

gpuops deletes or scales only a canary it can prove is its own: the annotations it put there
(``gpuops.io/canary-of: D`` and ``gpuops.io/release: <n>``), with the uid it created, or for a
run that stopped half way, with the number of a release its history still holds open.

When the GPUs are full (the headroom gate finds no room for surge pods) and the environment
allows it, pods are replaced in place: the stable gives back ``max_unavailable`` pods, then
the canary takes their GPUs; :func:`moves` is that schedule. While gpuops has scaled the
stable down, the stable carries :data:`IN_PLACE_ANNOTATION`: what it had before (its
replicas and rollout strategy), so that the next run can put it back if this one stops.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuops.core.explain import filter_node
from gpuops.core.kubemodel import Node, NodeUsage, Pod, node_class, usage_by_node
from gpuops.core.releaseconfig import ModelMount
from gpuops.core.releasehistory import CHANGE_CAUSE, RELEASE_ANNOTATION
from gpuops.core.releasepatch import MODEL_ANNOTATION, Content
from gpuops.core.releasestrategy import canary_name

TRACK_LABEL = "gpuops.io/track"
CANARY_TRACK = "canary"
CANARY_OF = "gpuops.io/canary-of"
#: On the stable Deployment while gpuops replaces it in place: its replicas and strategy before.
IN_PLACE_ANNOTATION = "gpuops.io/in-place"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def with_content(
    template: Mapping[str, Any], container: str, mount: ModelMount | None, new: Content
) -> dict[str, Any]:
    """A copy of the pod template running ``new`` (the container's image and the model
    version where the environment mounts it), as the release patch would leave it."""
    out = copy.deepcopy(dict(template))
    spec = out.setdefault("spec", {})
    for c in spec.get("containers") or ():
        if c.get("name") != container:
            continue
        c["image"] = new.image
        if mount is not None and mount.kind == "env":
            env = [e for e in c.get("env") or () if e.get("name") != mount.name]
            if new.model is not None:
                env.append({"name": mount.name, "value": new.model})
            c["env"] = env
    if mount is not None and mount.kind != "env":
        key = mount.name if mount.kind == "annotation" else MODEL_ANNOTATION
        notes = dict((out.setdefault("metadata", {}).get("annotations")) or {})
        if new.model is None:
            notes.pop(key, None)
        else:
            notes[key] = new.model
        out["metadata"]["annotations"] = notes
    return out


def canary_body(
    stable: Mapping[str, Any],
    *,
    container: str,
    mount: ModelMount | None,
    new: Content,
    release: int,
    replicas: int,
    change_cause: str,
) -> dict[str, Any]:
    """The canary Deployment of ``stable``: its pod template running ``new``, ``replicas``
    pods, the track label on its selector and pods, gpuops' annotations."""
    meta, spec = _meta(stable), _spec(stable)
    name = str(meta.get("name", ""))
    template = with_content(spec.get("template") or {}, container, mount, new)
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = {**(tmeta.get("labels") or {}), TRACK_LABEL: CANARY_TRACK}
    selector = copy.deepcopy(dict(spec.get("selector") or {}))
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), TRACK_LABEL: CANARY_TRACK}
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": canary_name(name),
            "namespace": meta.get("namespace"),
            "labels": {**(meta.get("labels") or {}), TRACK_LABEL: CANARY_TRACK},
            "annotations": {
                CANARY_OF: name,
                RELEASE_ANNOTATION: str(release),
                CHANGE_CAUSE: change_cause,
            },
        },
        "spec": {
            "replicas": replicas,
            "selector": selector,
            "template": template,
            # one pod at a time, never a surge: the canary's size is what gpuops sets
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
            },
            "revisionHistoryLimit": 1,
        },
    }
    for key in ("minReadySeconds", "progressDeadlineSeconds"):
        if key in spec:
            body["spec"][key] = spec[key]
    return body


def canary_release(obj: Mapping[str, Any], deployment: str) -> int | None:
    """The release number a canary of ``deployment`` carries, or None when ``obj`` is not a
    canary gpuops made for it (no ``canary-of: deployment``, no release number)."""
    notes = _meta(obj).get("annotations") or {}
    if notes.get(CANARY_OF) != deployment:
        return None
    value = notes.get(RELEASE_ANNOTATION)
    if not isinstance(value, str) or not value.isdigit() or len(value) > 10:
        return None
    return int(value)


def is_ours(
    obj: Mapping[str, Any], deployment: str, releases: set[int], uid: str | None = None
) -> bool:
    """Whether ``obj`` is provably a canary gpuops made: its annotations name ``deployment``
    and one of ``releases`` (the release that made it, or the releases its history holds
    open), and, when known, it is the very object gpuops created (``uid``)."""
    number = canary_release(obj, deployment)
    if number is None or number not in releases:
        return False
    return uid is None or _meta(obj).get("uid") == uid


def replicas_of(obj: Mapping[str, Any]) -> int:
    value = _spec(obj).get("replicas")
    return 1 if value is None else int(value)


def strategy_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(dict(_spec(obj).get("strategy") or {}))


def in_place_strategy(max_unavailable: int) -> dict[str, Any]:
    """The stable's rollout while pods are replaced in place: no surge pod, at most
    ``max_unavailable`` down."""
    return {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": max_unavailable},
    }


def in_place_note(release: int, replicas: int, strategy: Mapping[str, Any]) -> str:
    """The value of :data:`IN_PLACE_ANNOTATION`: what the stable had before."""
    return json.dumps(
        {"release": release, "replicas": replicas, "strategy": dict(strategy)},
        separators=(",", ":"),
        sort_keys=True,
    )


def read_in_place_note(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The stable's :data:`IN_PLACE_ANNOTATION` as gpuops wrote it, or None (absent, or not
    in gpuops' shape: then gpuops does not act on it)."""
    value = (_meta(obj).get("annotations") or {}).get(IN_PLACE_ANNOTATION)
    if not isinstance(value, str):
        return None
    try:
        doc = json.loads(value)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    release, replicas, strategy = doc.get("release"), doc.get("replicas"), doc.get("strategy")
    if type(release) is not int or type(replicas) is not int or replicas < 0:
        return None
    if not isinstance(strategy, dict):
        return None
    return doc


def moves(now: int, target: int, max_unavailable: int) -> list[int]:
    """Replacing in place, the canary going from ``now`` to ``target`` pods: the batches,
    each at most ``max_unavailable`` pods (the stable gives back a batch's GPUs, then the
    canary takes them). Negative batches move pods back to the stable."""
    if max_unavailable < 1:
        raise ValueError("max_unavailable must be at least 1")
    step = 1 if target >= now else -1
    left = abs(target - now)
    out = []
    while left > 0:
        size = min(left, max_unavailable)
        out.append(step * size)
        left -= size
    return out


@dataclass(frozen=True)
class InPlaceFit:
    """Whether a pod of the new template can take the GPUs a stable pod gives back."""

    fits: bool
    message: str
    #: stable pods whose place the new pod could not take: pod -> why (its node's reasons)
    blocked: Mapping[str, str] = field(default_factory=dict)
    #: when it does not fit: what holds the GPUs of the nodes the pod may run on
    holders: tuple[str, ...] = ()


def in_place_fit(
    pod: Pod,
    nodes: Sequence[Node],
    bound: Sequence[Pod],
    stable: Sequence[str],
    group_by: str,
    resource: str = "nvidia.com/gpu",
) -> InPlaceFit:
    """Can ``pod`` (the new template: the stable's, another image) take the place of any
    stable pod (``stable``: their ``namespace/name``)? The ReplicaSet controller, not gpuops,
    picks which pod goes when the stable is scaled down, so every stable pod's node must
    take it once that pod is gone (the scheduler's filters: cordon, taints, selector and
    affinity, resources; :func:`gpuops.core.explain.filter_node`)."""
    by_name = {n.name: n for n in nodes}
    placed = [p for p in bound if p.key in set(stable) and p.node_name and not p.terminal]
    if not placed:
        return InPlaceFit(
            False,
            "the stable Deployment has no running pod whose GPUs the canary could take",
            holders=gpu_holders(pod, nodes, bound, group_by, resource),
        )
    usage = usage_by_node(bound)
    blocked: dict[str, str] = {}
    for p in placed:
        node = by_name.get(p.node_name)
        if node is None:
            blocked[p.key] = f"its node {p.node_name} is gone"
            continue
        mine = usage.get(node.name, NodeUsage())
        without = NodeUsage(
            {k: v - p.requests.get(k, 0) for k, v in mine.requested.items()},
            [q for q in mine.pods if q.key != p.key],
        )
        fit = filter_node(pod, node, without, group_by)
        if not fit.fits:
            why = "; ".join(f"{k}: {v}" for k, v in fit.failures.items())
            blocked[p.key] = f"on {node.name}: {why}"
    if blocked:
        first = next(iter(blocked.items()))
        return InPlaceFit(
            False,
            f"{len(blocked)} of the stable's {len(placed)} pods sit where the new pod cannot "
            f"take their place ({first[0]} {first[1]})",
            blocked,
            gpu_holders(pod, nodes, bound, group_by, resource),
        )
    nodes_of = sorted({p.node_name for p in placed})
    return InPlaceFit(
        True,
        f"each of the stable's {len(placed)} pods (on {', '.join(nodes_of[:5])}"
        f"{' ...' if len(nodes_of) > 5 else ''}) frees a place the new pod fits",
    )


def gpu_holders(
    pod: Pod,
    nodes: Sequence[Node],
    bound: Sequence[Pod],
    group_by: str,
    resource: str = "nvidia.com/gpu",
    limit: int = 12,
) -> tuple[str, ...]:
    """What holds ``resource`` on the nodes ``pod`` may run on (its selector and affinity):
    per node, its pods and how many each holds, the biggest first."""
    out: list[str] = []
    usage = usage_by_node(bound)
    for node in sorted(nodes, key=lambda n: n.name):
        if not node.offers(resource) or pod.placement.selector_mismatch(node):
            continue
        held = sorted(
            (p for p in usage.get(node.name, NodeUsage()).pods if p.requests.get(resource, 0)),
            key=lambda p: (-p.requests.get(resource, 0), p.key),
        )
        total = node.allocatable.get(resource, 0)
        used = sum(p.requests.get(resource, 0) for p in held)
        pods = ", ".join(f"{p.key} ({p.requests.get(resource, 0)})" for p in held[:6])
        more = f" and {len(held) - 6} more" if len(held) > 6 else ""
        out.append(
            f"{node.name} ({node_class(node, group_by)}): {used}/{total} held by "
            f"{pods or 'nothing'}{more}"
        )
        if len(out) >= limit:
            break
    return tuple(out)
