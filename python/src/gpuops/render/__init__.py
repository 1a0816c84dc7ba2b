"""Renderers: typed results from the use cases turned into text (and, later, HTML reports)."""
