"""``gpuops image compat`` against the lab: the image's CUDA version from its config in the real
registry, the class's drivers from kwok node labels on the real kube-apiserver (``gpu-driver``,
GPU feature discovery's current and older labels), verdicts by NVIDIA's table."""

from __future__ import annotations

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
