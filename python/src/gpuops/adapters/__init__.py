"""Wrappers around third-party clients; they raise only gpuops.errors exceptions."""
