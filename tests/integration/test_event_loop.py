"""Real clients against a server on each event loop (tenure/server/eventloop.py): uvloop's, the default when
installed, and asyncio's (--event-loop asyncio). confluent-kafka over SASL_SSL (SCRAM: TLS and SASL on the loop's
transports), aiokafka over SSL with a client certificate and kafka-python in plaintext each produce, consume in a
static group and commit; kafka-python does it again through an injected network delay (the loop's timers)."""
from __future__ import annotations

import asyncio
import time

import pytest

from tenure.server import eventloop

N = 5
LOOPS = [pytest.param(kind, marks=pytest.mark.tenure(
    event_loop=kind, listeners=["PLAINTEXT", "SASL_SSL", "SSL"], users={"alice": "alice-secret"},
    ssl_client_auth="requested", initial_rebalance_delay_ms=0, default_partitions=1), id=kind)
    for kind in ("uvloop", "asyncio")]


def check(server, kind, group, instance, topic):
    assert eventloop.describe(server.loop).startswith(kind)
    g = server.group(group)
    assert g is not None and g.member(instance) is not None and g.member(instance).is_static
    assert g.offset(topic, 0) == N


@pytest.mark.parametrize("kind", LOOPS)
def test_confluent_kafka_over_sasl_ssl(tenure_server, kind):
    from confluent_kafka import Consumer, Producer
    conf = tenure_server.client_settings("SASL_SSL", "alice").confluent()
    topic, group = f"cf-{kind}", f"cf-g-{kind}"
    p = Producer({**conf, "enable.idempotence": True})
    for i in range(N):
        p.produce(topic, f"v{i}".encode())
    assert p.flush(15) == 0
    c = Consumer({**conf, "group.id": group, "group.instance.id": "cf-1", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline = [], time.time() + 30
    while len(got) < N and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m.value())
    c.commit(asynchronous=False)
    check(tenure_server, kind, group, "cf-1", topic)
    c.close()
    assert got == [f"v{i}".encode() for i in range(N)]


@pytest.mark.parametrize("kind", LOOPS)
def test_aiokafka_over_ssl_with_a_client_certificate(tenure_server, kind):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    s = tenure_server.client_settings("SSL", cert="alice")
    topic, group = f"ak-{kind}", f"ak-g-{kind}"

    async def run():
        p = AIOKafkaProducer(**s.aiokafka())
        await p.start()
        try:
            for i in range(N):
                await p.send_and_wait(topic, f"v{i}".encode())
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, **s.aiokafka(), group_id=group, group_instance_id="ak-1",
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        try:
            got = []
            async with asyncio.timeout(30):
                async for m in c:
                    got.append(m.value)
                    if len(got) == N:
                        break
            await c.commit()
            await asyncio.to_thread(check, tenure_server, kind, group, "ak-1", topic)
        finally:
            await c.stop()
        return got
    assert asyncio.run(run()) == [f"v{i}".encode() for i in range(N)]


@pytest.mark.parametrize("kind", LOOPS)
def test_kafka_python_through_a_network_delay(tenure_server, kind):
    from kafka import KafkaConsumer, KafkaProducer
    kw = tenure_server.client_settings("PLAINTEXT").kafka_python()
    topic, group = f"kp-{kind}", f"kp-g-{kind}"
    p = KafkaProducer(**kw)
    for i in range(N):
        p.send(topic, value=f"v{i}".encode()).get(15)
    p.close()
    tenure_server.network.delay(ms=50)               # every answer held 50 ms on the loop's timers
    try:
        c = KafkaConsumer(topic, **kw, group_id=group, group_instance_id="kp-1", auto_offset_reset="earliest",
                          enable_auto_commit=False, consumer_timeout_ms=15000)
        got = []
        t0 = time.monotonic()
        for m in c:
            got.append(m.value)
            if len(got) == N:
                break
        c.commit()
        assert time.monotonic() - t0 >= 0.05
        check(tenure_server, kind, group, "kp-1", topic)
        c.close()
    finally:
        tenure_server.network.heal()
    assert got == [f"v{i}".encode() for i in range(N)]
