"""Typed logic of gpuops: pure functions over small models; never imports click."""
