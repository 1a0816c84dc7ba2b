"""What gpuops left on a Deployment and whose change it is (pure: Deployment objects as the
API server returns them, managed fields included; the lab tests make the changes for real in
tests/python/integration/test_release_foreign_lab.py)."""

from __future__ import annotations

import copy
from typing import Any

from gpuops.core.releaseconfig import Environment
from gpuops.core.releasehistory import CHANGE_CAUSE, RELEASE_ANNOTATION
from gpuops.usecases.releases import guard

ENV = Environment("staging", "r.yaml", "ai", ("infer",), "infer", "reg/ai/infer")
OURS = "reg/ai/infer:1.2.0@sha256:" + "2" * 64
THEIRS = "reg/ai/infer:1.3.0"
CONTAINER = 'k:{"name":"infer"}'


def _entry(manager: str, time: str, fields: dict[str, Any], subresource: str = "") -> Any:
    e = {"manager": manager, "operation": "Update", "time": time, "fieldsV1": fields}
    return {**e, "subresource": subresource} if subresource else e


def _image_fields() -> dict[str, Any]:
    return {"f:spec": {"f:template": {"f:spec": {"f:containers": {CONTAINER: {"f:image": {}}}}}}}


def _deployment() -> dict[str, Any]:
    """As gpuops left it after its patch of release #2."""
    return {
        "metadata": {
            "name": "infer",
            "generation": 4,
            "resourceVersion": "100",
            "annotations": {RELEASE_ANNOTATION: "2", CHANGE_CAUSE: "gpuops #2 promote"},
            "managedFields": [
                _entry("gpuops", "2026-12-01T08:00:00Z", _image_fields()),
                _entry(
                    "kube-controller-manager",
                    "2026-12-01T08:00:01Z",
                    {"f:status": {"f:replicas": {}}},
                    "status",
                ),
            ],
        },
        "spec": {
            "replicas": 2,
            "template": {"spec": {"containers": [{"name": "infer", "image": OURS}]}},
        },
        "status": {"observedGeneration": 4, "replicas": 2},
    }


def test_a_status_update_is_nobodys_change() -> None:
    left = guard.left_of(_deployment(), ENV)
    now = _deployment()
    now["metadata"]["resourceVersion"] = "117"
    now["status"] = {"observedGeneration": 4, "replicas": 2, "readyReplicas": 2}
    now["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = "3"
    assert guard.foreign_change(left, now, ENV) is None


def test_kubectl_set_image_is_named_with_its_time_and_what_runs() -> None:
    left = guard.left_of(_deployment(), ENV)
    now = _deployment()
    now["metadata"]["generation"] = 5
    now["spec"]["template"]["spec"]["containers"][0]["image"] = THEIRS
    now["metadata"]["managedFields"] = [
        _entry("gpuops", "2026-12-01T08:00:00Z", {"f:metadata": {}}),
        _entry("kubectl-set", "2026-12-01T08:00:07Z", _image_fields()),
    ]
    foreign = guard.foreign_change(left, now, ENV)
    assert foreign is not None
    assert foreign.changed == ("image", "generation")
    assert (foreign.manager, foreign.time, foreign.image) == (
        "kubectl-set",
        "2026-12-01T08:00:07Z",
        THEIRS,
    )
    assert foreign.message("ai") == (
        "Deployment ai/infer was changed by kubectl-set at 2026-12-01T08:00:07Z "
        f"(image, generation): it runs {THEIRS} now"
    )


def test_a_new_generation_through_the_scale_subresource_names_its_writer() -> None:
    """``kubectl scale`` / an autoscaler write spec.replicas through /scale: a new generation
    whose writer is in a managed-fields entry of subresource ``scale``."""
    left = guard.left_of(_deployment(), ENV)
    now = copy.deepcopy(_deployment())
    now["metadata"]["generation"] = 5
    now["spec"]["replicas"] = 3
    now["metadata"]["managedFields"].append(
        _entry("scaler", "2026-12-01T08:00:09Z", {"f:spec": {"f:replicas": {}}}, "scale")
    )
    foreign = guard.foreign_change(left, now, ENV)
    assert foreign is not None and foreign.changed == ("generation",)
    assert (foreign.manager, foreign.time) == ("scaler", "2026-12-01T08:00:09Z"), foreign


def test_a_change_without_managed_fields_is_someones() -> None:
    left = guard.left_of(_deployment(), ENV)
    now = _deployment()
    now["metadata"]["annotations"][CHANGE_CAUSE] = "edited"
    del now["metadata"]["managedFields"]
    foreign = guard.foreign_change(left, now, ENV)
    assert foreign is not None and foreign.changed == (CHANGE_CAUSE,)
    assert foreign.manager is None and "someone" in foreign.who
