"""Fixtures for the tests that need a Docker engine (marker `docker`): skipped, with the reason, only where
no engine answers. The images are built once per session, in the background from the end of collection,
while the Docker tests are moved to the end of the run: the build overlaps the other tests."""
from __future__ import annotations

import threading
import uuid

import pytest

from tests.support.docker import DockerError, Images, engine_missing, kill_running


class _Prebuild:
    """Images.build on a thread of its own; result() waits for it."""

    def __init__(self) -> None:
        self.why: str | None = None
        self.images: Images | None = None
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.why = engine_missing()
        if self.why is None:
            self.thread = threading.Thread(target=self._build, name="docker-image-build", daemon=True)
            self.thread.start()

    def _build(self) -> None:
        try:
            self.images = Images.build(f"tenure-test-{uuid.uuid4().hex[:10]}")
        except BaseException as e:     # reported by the fixture, in the test that needs the images
            self.error = e

    def result(self) -> Images:
        if self.thread is None:
            self.start()
        if self.why:
            pytest.skip(f"Docker tests need a Docker engine: {self.why}")
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.images

    def close(self) -> None:
        if self.thread is not None and self.thread.is_alive():
            kill_running()          # the session ended before the Docker tests needed the images
            self.thread.join(60)
        if self.images is not None:
            try:
                self.images.remove()
            except DockerError as e:     # the engine went away: nothing to untag
                print(f"docker images of this session not removed: {e}")


_prebuild = _Prebuild()


def pytest_collection_modifyitems(session, config, items):
    docker_items = [item for item in items if item.get_closest_marker("docker")]
    if docker_items:
        items[:] = [item for item in items if not item.get_closest_marker("docker")] + docker_items


def pytest_collection_finish(session):
    if not session.config.option.collectonly and any(i.get_closest_marker("docker") for i in session.items):
        _prebuild.start()


def pytest_sessionfinish(session):
    _prebuild.close()


@pytest.fixture(scope="session")
def docker_images() -> Images:
    return _prebuild.result()
