"""Use cases: one module per capability (headroom now; nodes, images, releases next).

A use case takes typed input, calls adapters and the pure core, and returns a typed result.
It neither parses command-line options nor renders; the CLI does both around it.
"""
