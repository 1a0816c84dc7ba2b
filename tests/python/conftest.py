"""Session fixtures shared by every Python test.

Each lab component's fixtures live in a plugin module beside the tests that use them; they
are loaded here (pytest only honours ``pytest_plugins`` in the top-level conftest), with
``strict_outcomes``: under ``make test`` a skipped test fails the run, and
``result_documents``: every result and error document a test produces matches its schema.
"""

pytest_plugins = [
    "strict_outcomes",
    "result_documents",
    "integration.conftest_registry",
    "integration.conftest_agent",
    "integration.conftest_kube",
    "integration.conftest_metrics",
    "integration.conftest_nodes",
    "integration.conftest_release",
]
