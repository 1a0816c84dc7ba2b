"""What the lab is made of: the fleet's hosts, their GPU models and driver versions."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class GpuHost:
    """One lab GPU node: an SSH host in its own namespaces and a kwok node of the same name."""

    name: str
    model: str  # a key of gpuops_lab.gpus.MODELS, e.g. "a100-80g"
    driver: str  # installed NVIDIA driver version, e.g. "535.161.08"
    group: str  # inventory group, e.g. "gpu_a100"
    gpus: int = 8
    faulty: bool = False  # one card with uncorrected ECC errors and a high temperature

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: The default fleet (issue 3): 2 x A100-80GB, 2 x H800, 1 x L40S, 1 A100 with a faulty card.
_PATTERN: tuple[tuple[str, str, str, str, bool], ...] = (
    ("gpu-a100", "a100-80g", "535.161.08", "gpu_a100", False),
    ("gpu-a100", "a100-80g", "535.161.08", "gpu_a100", False),
    ("gpu-h800", "h800", "550.90.07", "gpu_h800", False),
    ("gpu-h800", "h800", "550.90.07", "gpu_h800", False),
    ("gpu-l40s", "l40s", "550.90.07", "gpu_l40s", False),
    ("gpu-a100", "a100-80g", "535.161.08", "gpu_a100", True),
)

DEFAULT_HOSTS = len(_PATTERN)


def default_fleet(size: int = DEFAULT_HOSTS) -> list[GpuHost]:
    """``size`` hosts following the default pattern, numbered per model (gpu-a100-01, ...)."""
    if size < 1:
        raise ValueError(f"fleet size must be at least 1, not {size}")
    counters: dict[str, int] = {}
    hosts = []
    for i in range(size):
        prefix, model, driver, group, faulty = _PATTERN[i % len(_PATTERN)]
        counters[prefix] = counters.get(prefix, 0) + 1
        hosts.append(
            GpuHost(
                name=f"{prefix}-{counters[prefix]:02d}",
                model=model,
                driver=driver,
                group=group,
                faulty=faulty,
            )
        )
    return hosts
