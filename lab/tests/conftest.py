"""Tests of the lab itself (gpuops_lab), kept beside the lab rather than among the product's.

They run under the same strict rule as every other test (``tests/python/strict_outcomes.py``,
on the path through ``pythonpath`` in pytest.ini): with ``GPUOPS_STRICT_TESTS=1``, as
``make test`` sets it, a skipped test is a failure, also when ``pytest lab/tests`` runs alone.
"""

pytest_plugins = ["strict_outcomes"]
