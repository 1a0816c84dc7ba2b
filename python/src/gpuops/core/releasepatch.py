"""What a release changes on a Deployment, as a strategic merge patch, pure.

A release sets the container's image by digest (``repository:tag@sha256:...``: the digest is
what runs, the tag is for people) and, for a model release (S-22), the model version where the
environment mounts it. Everything that identifies the release (its number, the change cause
``kubectl rollout history`` shows) goes on the Deployment's own annotations, never on its pod
template: rolling back must give back exactly the old template, so that Kubernetes scales the
old ReplicaSet up again instead of starting new pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuops.core.releaseconfig import ModelMount
from gpuops.core.releasehistory import CHANGE_CAUSE, RELEASE_ANNOTATION, ROLLED_BACK_ANNOTATION

#: With a ConfigMap model mount, this pod-template annotation carries the version too, so that
#: a new version rolls the pods (as ``kubectl rollout restart`` does with its own annotation).
MODEL_ANNOTATION = "gpuops.io/model-version"


@dataclass(frozen=True)
class Content:
    """What runs: the container's image and the model version (None: not set)."""

    image: str
    model: str | None = None


def image_ref(repository: str, tag: str, digest: str) -> str:
    return f"{repository}:{tag}@{digest}"


def split_image(image: str) -> tuple[str, str | None, str | None]:
    """``repo[:tag][@digest]`` -> (repo, tag, digest)."""
    name, _, digest = image.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = None
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
    return name, tag, digest or None


def model_value(
    deployment: Mapping[str, Any], container: str, mount: ModelMount | None
) -> str | None:
    """The model version the Deployment's template carries now."""
    if mount is None:
        return None
    template = (deployment.get("spec") or {}).get("template") or {}
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    if mount.kind == "annotation":
        return annotations.get(mount.name)
    if mount.kind == "configmap":
        return annotations.get(MODEL_ANNOTATION)
    for c in (template.get("spec") or {}).get("containers") or ():
        if c.get("name") == container:
            for e in c.get("env") or ():
                if e.get("name") == mount.name:
                    value = e.get("value")
                    return str(value) if value is not None else None
    return None


def content_patch(
    container: str, mount: ModelMount | None, old: Content, new: Content
) -> dict[str, Any]:
    """The template part of the patch taking ``old`` to ``new`` (only what differs)."""
    c: dict[str, Any] = {"name": container}
    template_annotations: dict[str, str | None] = {}
    if new.image != old.image:
        c["image"] = new.image
    if mount is not None and new.model != old.model:
        if mount.kind == "env":
            c["env"] = [
                {"name": mount.name, "value": new.model}
                if new.model is not None
                else {"name": mount.name, "$patch": "delete"}
            ]
        else:
            key = mount.name if mount.kind == "annotation" else MODEL_ANNOTATION
            template_annotations[key] = new.model
    template: dict[str, Any] = {}
    if len(c) > 1:
        template["spec"] = {"containers": [c]}
    if template_annotations:
        template["metadata"] = {"annotations": template_annotations}
    return {"spec": {"template": template}} if template else {}


def release_patch(
    container: str,
    mount: ModelMount | None,
    old: Content,
    new: Content,
    *,
    release: int | None,
    change_cause: str,
    rolled_back: int | None = None,
) -> dict[str, Any]:
    """The whole patch: the template change and the Deployment's release annotations."""
    patch = content_patch(container, mount, old, new)
    patch["metadata"] = {
        "annotations": {
            RELEASE_ANNOTATION: str(release) if release is not None else None,
            CHANGE_CAUSE: change_cause,
            ROLLED_BACK_ANNOTATION: str(rolled_back) if rolled_back is not None else None,
        }
    }
    return patch


def change_cause(text: str, limit: int = 512) -> str:
    """One line, at most ``limit`` characters, as ``kubectl rollout history`` prints it."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
