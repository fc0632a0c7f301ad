"""Each real client creates a topic, produces keyed records with headers, and reads them back by
manual assignment; keys, values, headers and offsets must match exactly."""
import asyncio
import json
import shutil
import subprocess
import time

import pytest

from tests.support.clients import RECORDS, by_partition_offsets, confluent_round_trip, expected_records

PARTS = 3


def _check(produced, consumed, n=RECORDS, partitions=PARTS):
    """produced: (partition, offset, key); consumed: (partition, offset, key, value, headers)."""
    assert len(produced) == n and len(consumed) == n
    expected = {f"k{i}".encode(): (p, v, h) for i, (p, k, v, h) in enumerate(expected_records(n, partitions))}
    offsets = {}
    for part, off, key in produced:
        assert expected[key][0] == part
        offsets[key] = (part, off)
    for part, off, key, value, headers in consumed:
        ep, ev, eh = expected[key]
        assert (part, value, [(k, bytes(v)) for k, v in headers]) == (ep, ev, eh)
        assert offsets[key] == (part, off), "consumed offset differs from the acknowledged one"
    per = by_partition_offsets(consumed)
    assert per == {p: list(range(len(per[p]))) for p in range(partitions)}


def test_confluent_kafka(tenure_server):
    produced, consumed = confluent_round_trip(tenure_server.bootstrap, "ck-topic", PARTS)
    _check(produced, consumed)


def test_kafka_python(tenure_server):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    bs = tenure_server.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bs)
    admin.create_topics([NewTopic("kp-topic", PARTS, 1)])
    assert "kp-topic" in admin.list_topics()
    admin.close()
    prod = KafkaProducer(bootstrap_servers=bs, acks="all")
    futures = [(k, prod.send("kp-topic", key=k, value=v, partition=p, headers=h))
               for p, k, v, h in expected_records(RECORDS, PARTS)]
    produced = []
    for k, f in futures:
        md = f.get(15)
        produced.append((md.partition, md.offset, k))
    prod.close()
    cons = KafkaConsumer(bootstrap_servers=bs, consumer_timeout_ms=10000, enable_auto_commit=False)
    cons.assign([TopicPartition("kp-topic", p) for p in range(PARTS)])
    cons.seek_to_beginning()
    consumed = []
    for r in cons:
        consumed.append((r.partition, r.offset, r.key, r.value, r.headers))
        if len(consumed) == RECORDS:
            break
    cons.close()
    _check(produced, consumed)


def test_aiokafka(tenure_server):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    bs = tenure_server.bootstrap

    async def run():
        admin = AIOKafkaAdminClient(bootstrap_servers=bs)
        await admin.start()
        await admin.create_topics([NewTopic("aio-topic", PARTS, 1)])
        await admin.close()
        prod = AIOKafkaProducer(bootstrap_servers=bs, enable_idempotence=True)
        await prod.start()
        produced = []
        try:
            for p, k, v, h in expected_records(RECORDS, PARTS):
                md = await prod.send_and_wait("aio-topic", key=k, value=v, partition=p, headers=h)
                produced.append((md.partition, md.offset, k))
        finally:
            await prod.stop()
        cons = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, auto_offset_reset="earliest")
        await cons.start()
        consumed = []
        try:
            cons.assign([TopicPartition("aio-topic", p) for p in range(PARTS)])
            await cons.seek_to_beginning()
            deadline = time.time() + 30
            while len(consumed) < RECORDS and time.time() < deadline:
                batch = await cons.getmany(timeout_ms=500)
                for msgs in batch.values():
                    consumed += [(m.partition, m.offset, m.key, m.value, list(m.headers)) for m in msgs]
        finally:
            await cons.stop()
        return produced, consumed

    _check(*asyncio.run(run()))


@pytest.mark.kcat
def test_kcat(tenure_server):
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed (apt-get install kcat)"
    bs = tenure_server.bootstrap
    # kcat has no admin API: creating via metadata auto-creation at the configured partition count
    tenure_server.call(lambda: tenure_server.server.topics.create("kc-topic", PARTS))
    produced = []
    for p in range(PARTS):
        recs = [(k, v, h) for (pp, k, v, h) in expected_records(RECORDS, PARTS) if pp == p]
        for k, v, h in recs:
            # one kcat process per record keeps headers per record; -X dr_cb prints delivery offsets
            hdr_args = []
            for hk, hv in h:
                assert b"\x00" not in hv or hk == "h2"
            out = subprocess.run([kcat, "-b", bs, "-P", "-t", "kc-topic", "-p", str(p), "-k", k.decode(),
                                  "-H", f"h1={h[0][1].decode()}", "-v"],
                                 input=v, capture_output=True, timeout=30)
            assert out.returncode == 0, out.stderr
            produced.append((p, k))
    res = subprocess.run([kcat, "-b", bs, "-C", "-t", "kc-topic", "-o", "beginning", "-e", "-J", "-q"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    msgs = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    assert len(msgs) == RECORDS
    expected = {k.decode(): (p, v.decode(), h[0][1].decode()) for p, k, v, h in expected_records(RECORDS, PARTS)}
    per = {}
    for m in msgs:
        p, v, h1 = expected[m["key"]]
        assert (m["partition"], m["payload"]) == (p, v)
        assert m["headers"] == ["h1", h1]
        per.setdefault(m["partition"], []).append(m["offset"])
    assert {p: sorted(o) for p, o in per.items()} == {p: list(range(RECORDS // PARTS)) for p in range(PARTS)}


@pytest.mark.java
def test_java_kafka_clients(tenure_server):
    from tests.support.java import run_java

    lines = run_java("ProduceConsume", tenure_server.bootstrap, "java-topic", str(PARTS), str(RECORDS))
    assert lines[0]["type"] == "topic_created"
    produced = [(ln["partition"], ln["offset"], ln["key"].encode()) for ln in lines if ln["type"] == "produced"]
    consumed = [(ln["partition"], ln["offset"], ln["key"].encode(), ln["value"].encode(),
                 [(h["key"], bytes.fromhex(h["value"])) for h in ln["headers"]])
                for ln in lines if ln["type"] == "consumed"]
    _check(produced, consumed)
    assert lines[-1]["type"] == "done"


@pytest.mark.java
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_java_compressed_batches_round_trip(tenure_server, codec):
    from tests.support.java import run_java

    lines = run_java("ProduceConsume", tenure_server.bootstrap, f"java-{codec}", "2", "200",
                     f"producer.compression.type={codec}", "producer.linger.ms=20")
    consumed = [ln for ln in lines if ln["type"] == "consumed"]
    assert len(consumed) == 200
    assert {(c["partition"], c["offset"]) for c in consumed} == {(i % 2, i // 2) for i in range(200)}
