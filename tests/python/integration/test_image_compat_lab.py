"""``gpuops image compat`` against the lab: the image's CUDA version from its config in the real
registry, the class's drivers from kwok node labels on the real kube-apiserver (``gpu-driver``,
GPU feature discovery's current and older labels), verdicts by NVIDIA's table."""

from __future__ import annotations

import gzip
import hashlib
import json
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from imagelab import cli_env, cuda_12_2_base, gpuops
from integration.conftest_kube import KubeLab
from integration.conftest_registry import RegistryLab, pushed_digest

from gpuops_lab import kube as labkube

pytestmark = [pytest.mark.lab, pytest.mark.timeout(600)]

RUN = uuid.uuid4().hex[:6]
CLASS = "gpuops.io/compat-class"
NEW, MIXED = f"new-{RUN}", f"mixed-{RUN}"
QUARANTINE = labkube.Taint("gpuops.io/compat-test", RUN)  # no other test's pod lands here


def _node(name: str, cls: str, driver: str, labels: tuple[str, ...]) -> labkube.NodeSpec:
    return labkube.gpu_node(
        f"cc-{RUN}-{name}",
        "h800",
        driver,
        labels={CLASS: cls, "accelerator": f"compat-{RUN}"},
        taints=(QUARANTINE,),
        driver_labels=labels,
    )


NODES = [
    _node("gfd-570", NEW, "570.133.20", ("gfd",)),
    _node("op-550", NEW, "550.90.07", ("gpu-driver",)),
    _node("old-520", MIXED, "520.61.05", ("gpu-driver", "gfd-legacy")),
    _node("legacy-535", MIXED, "535.161.08", ("gfd-legacy",)),
    _node("all-570", MIXED, "570.133.20", ("gpu-driver", "gfd", "gfd-legacy")),
    _node("unlabelled", MIXED, "550.90.07", ()),
]


@pytest.fixture(scope="module")
def nodes(kube_lab: KubeLab) -> Iterator[list[labkube.NodeSpec]]:
    labkube.create_gpu_nodes(kube_lab.api, NODES)
    try:
        yield NODES
    finally:
        for spec in NODES:
            kube_lab.core.delete_node(spec.name)


@pytest.fixture(scope="module")
def cuda_image(registry_lab: RegistryLab) -> str:
    """An image built on a CUDA 12.2.2 base made as NVIDIA makes theirs, pushed to the lab."""
    base = f"{registry_lab.url}/lab/cuda:12.2.2-compat-{RUN}"
    registry_lab.build(base, cuda_12_2_base(registry_lab.base_image))
    pushed_digest(registry_lab.push(base))
    app = f"{registry_lab.url}/test/infer-{RUN}:1"
    registry_lab.build(app, f"FROM {base}\nLABEL app=infer\n")
    pushed_digest(registry_lab.push(app))
    return app


def _compat(
    kube_lab: KubeLab, registry_lab: RegistryLab, tmp_path: Path, *args: str
) -> tuple[int, dict[str, Any], dict[str, Any], str]:
    run = gpuops(
        ["image", "compat", "--kubeconfig", str(kube_lab.kubeconfig), "--plain-http", *args],
        cli_env(registry_lab, tmp_path / "home"),
        tmp_path,
    )
    return run.returncode, run.result, run.error, run.stdout


def _verdicts(result: dict[str, Any]) -> dict[str, str]:
    return {str(n["node"]).removeprefix(f"cc-{RUN}-"): str(n["verdict"]) for n in result["nodes"]}


def test_a_class_with_new_enough_drivers_passes_listing_them(
    nodes: list[labkube.NodeSpec],
    cuda_image: str,
    kube_lab: KubeLab,
    registry_lab: RegistryLab,
    tmp_path: Path,
) -> None:
    code, result, _, text = _compat(
        kube_lab, registry_lab, tmp_path, "--image", cuda_image, "--node-selector", f"{CLASS}={NEW}"
    )
    assert code == 0
    assert result["cuda_version"] == "12.2.2"
    assert result["cuda_source"] == "env CUDA_VERSION"
    assert result["drivers"] == [
        {"driver": "550.90.07", "nodes": 1, "verdict": "ok"},
        {"driver": "570.133.20", "nodes": 1, "verdict": "ok"},
    ]
    assert _verdicts(result) == {"gfd-570": "ok", "op-550": "ok"}
    sources = {str(n["node"]): n["driver_source"] for n in result["nodes"]}
    assert sources[f"cc-{RUN}-gfd-570"] == "nvidia.com/cuda.driver-version.full"
    assert sources[f"cc-{RUN}-op-550"] == "gpu-driver"
    assert "drivers 550.90.07 (1), 570.133.20 (1)" in text


def test_a_mixed_class_is_refused_naming_each_node_and_the_minimum(
    nodes: list[labkube.NodeSpec],
    cuda_image: str,
    kube_lab: KubeLab,
    registry_lab: RegistryLab,
    tmp_path: Path,
) -> None:
    code, result, error, _ = _compat(
        kube_lab,
        registry_lab,
        tmp_path,
        "--image",
        cuda_image,
        "--node-selector",
        f'{{"{CLASS}": "{MIXED}"}}',
    )
    assert code == 3
    assert error["category"] == "gate-refused"
    assert _verdicts(result) == {
        "all-570": "ok",
        "legacy-535": "ok",
        "old-520": "too-old",
        "unlabelled": "no-driver",
    }
    assert result["min_driver"] == "525.60.13"
    assert result["offending"] == [f"cc-{RUN}-old-520", f"cc-{RUN}-unlabelled"]
    message = str(error["message"])
    assert "needs driver >= 525.60.13" in message
    assert f"cc-{RUN}-old-520 (520.61.05)" in message
    assert f"cc-{RUN}-unlabelled (no driver label)" in message


def test_minor_version_compatibility_and_strict(
    nodes: list[labkube.NodeSpec], kube_lab: KubeLab, registry_lab: RegistryLab, tmp_path: Path
) -> None:
    select = ["--node-selector", f"{CLASS}={NEW}"]
    code, result, _, _ = _compat(
        kube_lab, registry_lab, tmp_path, "--cuda-version", "12.6", *select
    )
    assert code == 0
    assert _verdicts(result) == {"gfd-570": "ok", "op-550": "minor-compat"}
    code, result, error, _ = _compat(
        kube_lab, registry_lab, tmp_path, "--cuda-version", "12.6", "--strict", *select
    )
    assert code == 3
    assert _verdicts(result) == {"gfd-570": "ok", "op-550": "too-old"}
    assert result["min_driver"] == "560.28.03"
    assert f"cc-{RUN}-op-550 (550.90.07)" in error["message"]
    code, result, _, _ = _compat(
        kube_lab, registry_lab, tmp_path, "--cuda-version", "13.0", *select
    )
    assert code == 3
    assert result["min_driver"] == "580.65.06"
    assert set(_verdicts(result).values()) == {"too-old"}


def test_an_image_without_cuda_passes_and_says_so(
    nodes: list[labkube.NodeSpec], kube_lab: KubeLab, registry_lab: RegistryLab, tmp_path: Path
) -> None:
    code, result, _, _ = _compat(
        kube_lab,
        registry_lab,
        tmp_path,
        "--image",
        registry_lab.base_image,
        "--node-selector",
        f"{CLASS}={MIXED}",
    )
    assert code == 0
    assert result["cuda_version"] == "unknown"
    assert "declares no CUDA version" in str(result["message"])
    assert {d["driver"] for d in result["drivers"]} == {
        "none",
        "520.61.05",
        "535.161.08",
        "570.133.20",
    }


def test_a_class_with_no_nodes_is_an_input_error(
    nodes: list[labkube.NodeSpec], kube_lab: KubeLab, registry_lab: RegistryLab, tmp_path: Path
) -> None:
    code, _, error, _ = _compat(
        kube_lab,
        registry_lab,
        tmp_path,
        "--cuda-version",
        "12.2",
        "--node-selector",
        f"{CLASS}=nobody-{RUN}",
    )
    assert code == 2
    assert error["field"] == "node_selector"
    assert f"{CLASS}=nobody-{RUN}" in str(error["message"])


# -- a CUDA version that is declared but cannot be read is a refusal, never "no CUDA" --------
def _push_config(registry_lab: RegistryLab, repo: str, tag: str, config: dict[str, Any]) -> str:
    """A one-layer image whose config is exactly ``config`` (what no builder makes: a crafted
    document), pushed through the registry's HTTP API; returns its reference."""
    layer = gzip.compress(b"", mtime=0)  # never unpacked: the gate reads the config only
    config_bytes = json.dumps(config).encode()
    for blob in (layer, config_bytes):
        start = registry_lab.http("POST", f"/v2/{repo}/blobs/uploads/")
        assert start.status == 202, start
        location = urllib.parse.urlsplit(str(start.headers["Location"]))
        sep = "&" if location.query else "?"
        digest = "sha256:" + hashlib.sha256(blob).hexdigest()
        put = registry_lab.http(
            "PUT",
            f"{location.path}?{location.query}{sep}digest={digest}",
            headers={"Content-Type": "application/octet-stream"},
            data=blob,
        )
        assert put.status == 201, put
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": "sha256:" + hashlib.sha256(config_bytes).hexdigest(),
            "size": len(config_bytes),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": "sha256:" + hashlib.sha256(layer).hexdigest(),
                "size": len(layer),
            }
        ],
    }
    put = registry_lab.http(
        "PUT",
        f"/v2/{repo}/manifests/{tag}",
        headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"},
        data=json.dumps(manifest).encode(),
    )
    assert put.status == 201, put
    return f"{registry_lab.url}/{repo}:{tag}"


@pytest.mark.parametrize(
    ("label", "env", "shown"),
    [
        ("12.8.0-1", "", "'12.8.0-1'"),  # no CUDA_VERSION: it passed as an image without CUDA
        ("abc", "ENV CUDA_VERSION=12.2.2\n", "'abc'"),  # it passed on CUDA_VERSION instead
        ("12.", "", "'12.'"),
    ],
)
def test_an_unreadable_cuda_label_is_refused_naming_the_value(
    nodes: list[labkube.NodeSpec],
    kube_lab: KubeLab,
    registry_lab: RegistryLab,
    tmp_path: Path,
    label: str,
    env: str,
    shown: str,
) -> None:
    image = f"{registry_lab.url}/test/badlabel-{RUN}:{uuid.uuid4().hex[:8]}"
    registry_lab.build(
        image, f"FROM {registry_lab.base_image}\n{env}LABEL com.nvidia.cuda.version={label}\n"
    )
    pushed_digest(registry_lab.push(image))
    code, result, error, text = _compat(
        kube_lab, registry_lab, tmp_path, "--image", image, "--node-selector", f"{CLASS}={NEW}"
    )
    assert code == 3, (result, error)
    assert error["category"] == "gate-refused"
    assert f"label com.nvidia.cuda.version {shown} is not a CUDA version" in error["message"]
    assert result["ok"] is False
    assert result["cuda_version"] == "unreadable"
    assert result["cuda_source"] == "label com.nvidia.cuda.version"
    assert shown in text
    # what the registry holds is shown as it is by `image inspect`, which refuses nothing
    run = gpuops(
        ["image", "inspect", "--plain-http", "--image", image],
        cli_env(registry_lab, tmp_path / "home"),
        tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert run.result["cuda_version"] == "unreadable"
    assert shown in run.result["cuda_problem"]
    assert run.result["labels"]["com.nvidia.cuda.version"] == label


def test_a_crafted_config_with_a_non_string_cuda_label_is_refused(
    nodes: list[labkube.NodeSpec], kube_lab: KubeLab, registry_lab: RegistryLab, tmp_path: Path
) -> None:
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Labels": {"com.nvidia.cuda.version": 12.8}},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "0" * 64]},
    }
    image = _push_config(registry_lab, f"test/crafted-{RUN}", "number", config)
    code, result, error, _ = _compat(
        kube_lab, registry_lab, tmp_path, "--image", image, "--node-selector", f"{CLASS}={NEW}"
    )
    assert code == 3, (result, error)  # read as "12.8" before, so it passed
    assert "label com.nvidia.cuda.version 12.8 is not a CUDA version" in error["message"]
    # any other label that is not a string: what the registry holds is not an image config
    config["config"] = {"Labels": {"app": ["x"], "com.nvidia.cuda.version": "12.2"}}
    image = _push_config(registry_lab, f"test/crafted-{RUN}", "list", config)
    code, result, error, _ = _compat(
        kube_lab, registry_lab, tmp_path, "--image", image, "--node-selector", f"{CLASS}={NEW}"
    )
    assert code == 1, (result, error)
    assert "label 'app' is not a string" in error["message"]
