"""gpu-ops: one safe release path for GPU clusters."""

__version__ = "0.1.0"
