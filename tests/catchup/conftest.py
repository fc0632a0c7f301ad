import itertools

import pytest
from confluent_kafka import Producer

_names = itertools.count()


@pytest.fixture
def topic(tenure_server):
    """A fresh one-partition topic on the server."""
    name = f"catchup-{next(_names)}"
    tenure_server.call(lambda: tenure_server.server.topics.create(name, 1))
    return name


def produce(bootstrap: str, topic: str, n: int, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    errors = []
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=partition,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(30) == 0 and not errors, errors
