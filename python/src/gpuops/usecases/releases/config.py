"""Reading an application's release environments file (YAML) into the core's model."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from gpuops import fsio
from gpuops.core import headroom, releaseconfig
from gpuops.core.releaseconfig import ReleaseConfig
from gpuops.core.values import shown, yaml_problem
from gpuops.errors import InvalidInput
from gpuops.usecases.cluster import Cluster

#: Largest environments file accepted: it is configuration, not data.
MAX_BYTES = 1 << 20


def load(path: str) -> ReleaseConfig:
    """The environments of ``path``; every defect is an input error naming the file (and,
    from the core, the environment and key)."""
    return load_with_document(path)[0]


def load_with_document(path: str) -> tuple[ReleaseConfig, Any]:
    """:func:`load`, and the parsed YAML document (its other sections: ``jenkins``)."""
    import yaml  # noqa: PLC0415 - only when a release command runs

    if not os.path.lexists(path):
        raise InvalidInput(
            f"release environments file {shown(path, 200)} does not exist",
            hint=f"pass --config PATH (default {releaseconfig.DEFAULT_FILE} in the current "
            "directory: the application's repository)",
            field="config",
        )
    text = fsio.read_text(path, cap=MAX_BYTES, what="release environments file", option="config")
    try:
        doc = yaml.safe_load(text)
    except RecursionError:
        raise InvalidInput(f"{path}: nested too deeply", field="config") from None
    except yaml.YAMLError as exc:  # the parser's words only, never a piece of the file
        raise InvalidInput(f"{path}: not valid YAML {yaml_problem(exc)}", field="config") from None
    return releaseconfig.parse(doc, path), doc


@dataclass(frozen=True)
class HeadroomSettings:
    """What a release environment of ``gpuops-release.yaml`` says about headroom: its
    namespace, its node class as a node selector (``group_by: node_class``), its reserve,
    and how to reach its cluster (the given kubeconfig and context first)."""

    namespace: str
    node_selector: dict[str, str]
    policy: headroom.Policy
    cluster: Cluster


def headroom_settings(path: str, name: str, cluster: Cluster) -> HeadroomSettings:
    """The headroom settings of environment ``name`` of the release file ``path`` (the same
    values the release's own headroom gate uses); a bad file or name is an input error."""
    env = load(path).environment(name)
    return HeadroomSettings(
        namespace=env.namespace,
        node_selector={env.group_by: env.node_class} if env.node_class else {},
        policy=headroom.Policy(env.reserve, dict(env.reserve_per_class), env.group_by),
        cluster=Cluster(cluster.kubeconfig or env.kubeconfig, cluster.context or env.context),
    )
