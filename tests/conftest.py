import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread


@pytest.fixture
def tenure_server():
    """A fresh in-process server on 127.0.0.1:0, on its own event-loop thread."""
    with ServerThread(ServerConfig(port=0)) as s:
        yield s


@pytest.fixture
def wire(tenure_server):
    from tests.support.wire import WireClient
    c = WireClient.to(tenure_server.bootstrap)
    yield c
    c.close()
