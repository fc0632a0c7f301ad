"""Fixtures for the tests that need a Docker engine (marker `docker`): skipped, with the reason, only where
no engine answers; the images are built once per session and removed at its end."""
from __future__ import annotations

import uuid

import pytest

from tests.support.docker import Images, engine_missing


@pytest.fixture(scope="session")
def docker_engine() -> None:
    why = engine_missing()
    if why:
        pytest.skip(f"Docker tests need a Docker engine: {why}")


@pytest.fixture(scope="session")
def docker_images(docker_engine) -> Images:
    images = Images.build(f"tenure-test-{uuid.uuid4().hex[:10]}")
    yield images
    images.remove()
