"""Session fixtures shared by every Python test.

Each lab component's fixtures live in a plugin module beside the tests that use them; they
are loaded here (pytest only honours ``pytest_plugins`` in the top-level conftest).
"""

pytest_plugins = [
    "integration.conftest_registry",
    "integration.conftest_agent",
    "integration.conftest_kube",
    "integration.conftest_release",
]
