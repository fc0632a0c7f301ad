"""Each real client creates a topic, produces keyed records with headers, and reads them back by
manual assignment; keys, values, headers and offsets must match exactly."""
import asyncio
import json
import re
import shutil
import subprocess
import time

import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread
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
def test_kcat():
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed (apt-get install kcat)"
    # argv strings cannot carry a NUL byte, so kcat's binary header h2 is b"\x01\x02\xfe" plus one byte
    # >= 0x80 per record (not UTF-8; no NUL, "," or "=") instead of the other clients' b"\x00\x01\x02"
    records = [(p, k, v, [h[0], ("h2", b"\x01\x02\xfe" + bytes([0x80 + i]))])
               for i, (p, k, v, h) in enumerate(expected_records(RECORDS, PARTS))]
    # kcat has no admin API: its first produce creates the topic, by Metadata auto-creation at the
    # server's default partition count (PARTS here)
    with ServerThread(ServerConfig(port=0, default_partitions=PARTS)) as server:
        bs = server.bootstrap
        acked = {}
        for p, k, v, h in records:
            # one kcat process per record, as -H headers apply to every record of a run; "-v -v" prints
            # the delivery report with the offset the server acknowledged
            out = subprocess.run([kcat, "-b", bs, "-P", "-t", "kc-topic", "-p", str(p), "-k", k,
                                  *[arg for hk, hv in h for arg in ("-H", hk.encode() + b"=" + hv)], "-v", "-v"],
                                 input=v, capture_output=True, timeout=30)
            assert out.returncode == 0, out.stderr
            reports = re.findall(rb"Message delivered to partition (\d+) \(offset (-?\d+)\)", out.stderr)
            assert len(reports) == 1, out.stderr
            acked[k] = (int(reports[0][0]), int(reports[0][1]))
        # records were acknowledged at consecutive offsets per partition, in the order they were sent
        expected_offsets = {}
        for p, k, _, _ in records:
            expected_offsets[k] = (p, sum(1 for q, _ in expected_offsets.values() if q == p))
        assert acked == expected_offsets

        meta = subprocess.run([kcat, "-b", bs, "-L", "-J", "-t", "kc-topic"], capture_output=True, timeout=30)
        assert meta.returncode == 0, meta.stderr
        (topic,) = json.loads(meta.stdout)["topics"]
        assert topic["topic"] == "kc-topic"
        assert sorted(p["partition"] for p in topic["partitions"]) == list(range(PARTS))

        res = subprocess.run([kcat, "-b", bs, "-C", "-t", "kc-topic", "-o", "beginning", "-e", "-J", "-q"],
                             capture_output=True, timeout=60)
        assert res.returncode == 0, res.stderr
    # kcat's JSON carries header bytes >= 0x80 raw (and escapes control bytes): read it byte for byte
    msgs = [json.loads(line.decode("latin-1")) for line in res.stdout.split(b"\n") if line.strip()]
    assert len(msgs) == RECORDS
    expected = {k: (p, v, h) for p, k, v, h in records}
    for m in msgs:
        key = m["key"].encode("latin-1")
        hs = m["headers"]
        headers = [(hs[i], hs[i + 1].encode("latin-1")) for i in range(0, len(hs), 2)]
        assert (m["partition"], m["payload"].encode("latin-1"), headers) == expected[key]
        assert (m["partition"], m["offset"]) == acked[key], "consumed offset differs from the acknowledged one"
    assert sorted((m["partition"], m["offset"]) for m in msgs) == sorted(acked.values())


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
