"""Session fixture for the release tests: the versions of one application, built for real
through the lab's Podman API and pushed to the lab registry (``releaselab.TAGS``).

Wire it from tests/python/conftest.py: ``pytest_plugins = [..., "integration.conftest_release"]``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from integration.conftest_registry import RegistryLab
from integration.releaselab import PROGRESSIVE_TAGS, Images, push_images, remove_made


@pytest.fixture(scope="session")
def release_images(registry_lab: RegistryLab) -> Images:
    return push_images(registry_lab)


@pytest.fixture(scope="session")
def progressive_images(registry_lab: RegistryLab, release_images: Images) -> Images:
    """The release versions and the lab-fault versions of issue 20's tests, one repository."""
    more = push_images(registry_lab, PROGRESSIVE_TAGS)
    return Images(release_images.repository, {**release_images.digests, **more.digests})


@pytest.fixture(autouse=True)
def _remove_release_namespaces() -> Iterator[None]:
    """After each test, the namespaces releaselab made for it go, with their pods' GPUs."""
    yield
    remove_made()
