"""The release environments file: what it accepts, and errors that name file, environment, key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuops.core import releaseconfig
from gpuops.errors import InvalidInput
from gpuops.usecases.releases import config

GOOD = """\
image: harbor.example.com/ai/infer
environments:
  staging:
    namespace: ai-staging
    deployment: infer
    node_class: nvidia-h800
    registry_tag: staging
  production:
    namespace: ai
    deployments: [infer, infer-canary]
    container: server
    image: harbor.example.com/ai/infer-prod
    approval: {approvers: [release-managers, alice], timeout_minutes: 30}
    cluster: {context: prod}
    registry: {ca_file: /etc/pki/harbor-ca.crt}
    model: {configmap: model-config, key: version}
    rollout: {unschedulable_seconds: 20, ready_seconds: 120}
    headroom: {reserve: 2, reserve_per_class: {nvidia-h800: 2}}
    lock: {lease_seconds: 30}
    history: {keep: 50}
"""


def test_a_full_file(tmp_path: Path) -> None:
    path = tmp_path / "gpuops-release.yaml"
    path.write_text(GOOD)
    cfg = config.load(str(path))
    staging = cfg.environment("staging")
    assert staging.image == "harbor.example.com/ai/infer" and staging.container == "infer"
    assert staging.deployments == ("infer",) and not staging.approval.required
    assert staging.registry_tag == "staging" and staging.node_class == "nvidia-h800"
    prod = cfg.environment("production")
    assert prod.deployments == ("infer", "infer-canary") and prod.container == "server"
    assert prod.approval == releaseconfig.Approval(True, ("release-managers", "alice"), 30)
    assert prod.context == "prod" and prod.model == releaseconfig.ModelMount(
        "configmap", "model-config", "version"
    )
    assert (prod.registry_ca_file, prod.registry_plain_http) == ("/etc/pki/harbor-ca.crt", False)
    assert prod.rollout.unschedulable_s == 20 and prod.rollout.ready_s == 120
    assert prod.rollout.timeout_s == releaseconfig.RolloutPolicy().timeout_s
    assert (prod.reserve, dict(prod.reserve_per_class), prod.lease_s, prod.keep) == (
        2,
        {"nvidia-h800": 2},
        30,
        50,
    )
    assert prod.history_name == "gpuops-releases-production"


def _env(**body: Any) -> dict[str, Any]:
    base = {"namespace": "ai", "deployment": "infer", "image": "h.example.com/ai/infer"}
    return {"environments": {"prod": {**base, **body}}}


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        (_env(namespace="AI"), "environments.prod.namespace: namespace 'AI' is not a valid name"),
        (_env(namespce="ai"), "environments.prod.namespce: is not a known key"),
        (_env(image="infer"), "environments.prod.image: image repository 'infer'"),
        (_env(image="h.example.com/ai/infer:1.0"), "environments.prod.image"),
        (_env(deployments=["a", "a"]), "environments.prod.deployment: give either"),
        (
            {
                "environments": {
                    "prod": {"namespace": "ai", "deployments": ["a", "a"], "image": "h.x/a"}
                }
            },
            "environments.prod.deployments: names a Deployment twice",
        ),
        (
            _env(registry_tag="-bad"),
            "environments.prod.registry_tag: tag '-bad' is not a valid tag",
        ),
        (
            _env(approval={"required": "yes"}),
            "environments.prod.approval.required: must be true or false",
        ),
        (
            _env(rollout={"ready_seconds": 0}),
            "environments.prod.rollout.ready_seconds: must be a whole number from 1",
        ),
        (_env(rollout={"ready_seconds": True}), "environments.prod.rollout.ready_seconds"),
        (
            _env(model={"env": "MODEL", "annotation": "x"}),
            "environments.prod.model: must name exactly one",
        ),
        (_env(model={"configmap": "m"}), "environments.prod.model.key: is required"),
        (
            _env(model={"env": "1BAD"}),
            "environments.prod.model.env: '1BAD' is not an environment variable",
        ),
        (
            _env(headroom={"reserve_per_class": {"x": -1}}),
            "environments.prod.headroom.reserve_per_class.x",
        ),
        (
            {"environments": {"Prod": {}}},
            "environments.Prod: environment name 'Prod' is not a valid name",
        ),
        ({"environments": {}}, "environments: must map at least one environment"),
        ({"environment": {}}, "environment: is not a known key"),
        ([1, 2], ": must be a mapping, not a list"),
        (
            {"environments": {"prod": {"namespace": "ai", "deployment": "infer"}}},
            "environments.prod.image: is required",
        ),
    ],
)
def test_errors_name_the_file_the_environment_and_the_key(doc: Any, where: str) -> None:
    with pytest.raises(InvalidInput) as info:
        releaseconfig.parse(doc, "app/gpuops-release.yaml")
    assert info.value.message.startswith("app/gpuops-release.yaml: "), info.value.message
    assert where in info.value.message, info.value.message
    assert info.value.field == "config"


def test_an_unknown_environment_lists_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(GOOD)
    with pytest.raises(
        InvalidInput, match=r"no environment 'prod' \(environments: production, staging\)"
    ) as info:
        config.load(str(path)).environment("prod")
    assert info.value.field == "environment"


def test_file_problems_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="does not exist") as info:
        config.load(str(tmp_path / "missing.yaml"))
    assert info.value.field == "config"
    bad = tmp_path / "bad.yaml"
    bad.write_text("environments:\n  prod: [unclosed\n")
    with pytest.raises(InvalidInput, match=r"bad.yaml: not valid YAML at line \d+ column \d+"):
        config.load(str(bad))


def test_model_versions_are_checked() -> None:
    assert releaseconfig.check_model_version("llama-3.1-70b+q4") == "llama-3.1-70b+q4"
    for bad in ("", "-x", "a b", "x" * 129, "v1\n"):
        with pytest.raises(InvalidInput):
            releaseconfig.check_model_version(bad)
