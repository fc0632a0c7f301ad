"""tenure has no transaction coordinator: a transactional producer must fail at once with an error that
names the cause, not retry COORDINATOR_NOT_AVAILABLE until its own timeout (10-60 s).

FindCoordinator for a transactional id (key type 1) is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED
with an error message: every client (Java kafka-clients too) treats that code as fatal (librdkafka
shows the message), where
COORDINATOR_NOT_AVAILABLE is retried by all and UNSUPPORTED_VERSION / INVALID_REQUEST by librdkafka.
The server logs it once."""
from __future__ import annotations

import asyncio
import logging
import time

import pytest

pytestmark = pytest.mark.timeout(120)

REFUSAL = "tenure does not serve transactions (no transaction coordinator)"
FAST = 10.0        # seconds: every client used to take at least its 10 s retry budget


def _refusal_logs(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "tenure.broker" and "transaction" in r.getMessage()]


def test_confluent_kafka_transactional_producer_fails_fast_naming_the_cause(tenure_server, caplog):
    from confluent_kafka import KafkaException, Producer
    caplog.set_level(logging.WARNING, logger="tenure.broker")
    p = Producer({"bootstrap.servers": tenure_server.bootstrap, "transactional.id": "tx-ck"})
    t0 = time.monotonic()
    with pytest.raises(KafkaException) as exc:
        p.init_transactions(60)
    assert time.monotonic() - t0 < FAST
    err = exc.value.args[0]
    assert err.fatal() and err.name() == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    assert REFUSAL in err.str()
    assert len(_refusal_logs(caplog)) == 1


def test_kafka_python_transactional_producer_fails_fast(tenure_server, caplog):
    from kafka import KafkaProducer
    from kafka.errors import TransactionalIdAuthorizationFailedError
    caplog.set_level(logging.WARNING, logger="tenure.broker")
    p = KafkaProducer(bootstrap_servers=tenure_server.bootstrap, transactional_id="tx-kp", max_block_ms=60000)
    try:
        t0 = time.monotonic()
        with pytest.raises(TransactionalIdAuthorizationFailedError):
            p.init_transactions()
        assert time.monotonic() - t0 < FAST
    finally:
        p.close(timeout=5)
    [line] = _refusal_logs(caplog)
    assert "tx-kp" in line.getMessage() and REFUSAL in line.getMessage()


def test_aiokafka_transactional_producer_fails_fast_and_the_server_logs_once(tenure_server, caplog):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import TransactionalIdAuthorizationFailed
    caplog.set_level(logging.WARNING, logger="tenure.broker")

    async def start_one(tid: str) -> None:
        p = AIOKafkaProducer(bootstrap_servers=tenure_server.bootstrap, transactional_id=tid)
        try:
            await asyncio.wait_for(p.start(), 60)
        finally:
            await p.stop()

    for tid in ("tx-aio-1", "tx-aio-2"):
        t0 = time.monotonic()
        with pytest.raises(TransactionalIdAuthorizationFailed):
            asyncio.run(start_one(tid))
        assert time.monotonic() - t0 < FAST
    assert len(_refusal_logs(caplog)) == 1          # once per server, not once per request


@pytest.mark.java
def test_java_transactional_producer_fails_fast(tenure_server):
    from tests.support.java import run_java
    [line] = run_java("TxnInit", tenure_server.bootstrap, "tx-java", timeout=120)
    assert line["type"] == "refused", line
    assert line["exception"] == "org.apache.kafka.common.errors.TransactionalIdAuthorizationException", line
    assert line["ms"] < FAST * 1000
