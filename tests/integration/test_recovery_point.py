"""`tenure serve` keeps Kafka's recovery points while it runs: a segment roll flushes the rolled segment
(even with --fsync never), writes its index files and checkpoints `recovery-point-offset-checkpoint`, which
is also written every --log-flush-offset-checkpoint-interval-ms. After a SIGKILL the next start trusts the
segments below the checkpointed recovery point and verifies the rest, cutting a torn tail; confluent-kafka
reads back every record and its group's committed offset."""
from __future__ import annotations

import os
import re
import time

from tests.support.clients import create_topic
from tests.support.procs import TenureProcess

OPENED = re.compile(r"opened (\d+) log\(s\) after a(n unclean| clean) stop: (\d+) segment\(s\) verified batch by "
                    r"batch, (\d+) trusted")
N = 9000                                   # ~4.7 MiB: rolled segments over 1 MiB (index files), and an active one
SEGMENT = 1_600_000


def _produce(bootstrap: str, topic: str, start: int, n: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 65536, "log_level": 0})
    for i in range(start, start + n):
        p.produce(topic, key=f"k{i}".encode(), value=b"v" * 500 + str(i).encode())
    assert p.flush(30) == 0


def _consumer(bootstrap: str):
    from confluent_kafka import Consumer
    return Consumer({"bootstrap.servers": bootstrap, "group.id": "rp-group", "enable.auto.commit": False,
                     "log_level": 0})


def _commit(bootstrap: str, topic: str, offsets: range) -> None:
    from confluent_kafka import TopicPartition
    c = _consumer(bootstrap)
    try:
        for o in offsets:
            c.commit(offsets=[TopicPartition(topic, 0, o)], asynchronous=False)
    finally:
        c.close()


def _committed(bootstrap: str, topic: str) -> int:
    from confluent_kafka import TopicPartition
    c = _consumer(bootstrap)
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=20)[0].offset
    finally:
        c.close()


def _read(bootstrap: str, topic: str) -> list[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rp-read", "enable.auto.commit": False,
                  "log_level": 0})
    try:
        expect = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[bytes] = []
        idle = 0
        while len(out) < expect and idle < 20:
            msgs = c.consume(500, 0.5)
            idle = 0 if msgs else idle + 1
            out += [m.key() for m in msgs if m.error() is None]
        return out
    finally:
        c.close()


def _checkpoint(data) -> dict[str, int]:
    try:
        lines = (data / "recovery-point-offset-checkpoint").read_text().splitlines()[2:]
    except FileNotFoundError:
        return {}
    return {t + "-" + p: int(o) for t, p, o in (line.split(" ") for line in lines)}


def _wait_checkpoint(data, name: str, at_least: int, timeout: float = 15) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = _checkpoint(data).get(name, -1)
        if got >= at_least:
            return got
        time.sleep(0.05)
    raise AssertionError(f"{name} never checkpointed at {at_least} or more: {_checkpoint(data)}")


def _opened(srv: TenureProcess) -> tuple[str, int, int]:
    m = OPENED.findall(srv.stderr())
    assert len(m) == 1, srv.stderr()
    return m[0][1].strip(), int(m[0][2]), int(m[0][3])


def test_after_a_sigkill_only_what_is_past_the_checkpointed_recovery_point_is_verified(tmp_path):
    data = tmp_path / "data"
    keys = [f"k{i}".encode() for i in range(N)]
    with TenureProcess(data, fsync="never", segment_bytes=SEGMENT,
                       extra=("--log-flush-offset-checkpoint-interval-ms", "200")) as srv:
        srv.start()
        create_topic(srv.bootstrap, "rp")
        _produce(srv.bootstrap, "rp", 0, N)
        _commit(srv.bootstrap, "rp", range(1, 41))
        segments = sorted((data / "rp-0").glob("*.log"))
        assert len(segments) >= 3, segments
        active_base = int(segments[-1].stem)
        # --fsync never: only the rolls flushed, and the checkpoint names exactly the last roll's base offset
        assert _wait_checkpoint(data, "rp-0", active_base) == active_base
        for seg in segments[:-1]:
            assert seg.with_suffix(".index").exists() and seg.with_suffix(".timeindex").exists()
        assert not segments[-1].with_suffix(".index").exists()
        srv.kill()                                            # SIGKILL: no marker, no flush of the active one

        with open(segments[-1], "r+b") as f:                  # and its last batch torn
            f.truncate(os.path.getsize(segments[-1]) - 30)
        srv.fsync = "batch"
        srv.start()
        kind, scanned, trusted = _opened(srv)
        assert kind == "n unclean" and trusted == len(segments) - 1, srv.stderr()   # rp-0's rolled segments
        # rp-0's active segment, __consumer_offsets-0 (never flushed with --fsync never): verified in full
        assert scanned == 2, srv.stderr()
        assert "recovery cut" in srv.stderr() and segments[-1].name in srv.stderr()
        got = _read(srv.bootstrap, "rp")
        assert N - 200 <= len(got) < N and got == keys[:len(got)]      # the torn batch only
        assert _committed(srv.bootstrap, "rp") == 40

        # with --fsync batch every group commit raises the recovery point; the periodic checkpoint follows
        before = _checkpoint(data).get("__consumer_offsets-0", 0)
        _commit(srv.bootstrap, "rp", range(41, 61))
        assert _wait_checkpoint(data, "__consumer_offsets-0", before + 20) >= before + 20
        srv.kill()
        srv.start()
        assert _committed(srv.bootstrap, "rp") == 60
        assert srv.terminate() == 0, srv.stderr()


def _produce_kafka_python(bootstrap: str, topic: str, n: int) -> None:
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, acks=1)
    try:
        for i in range(n):
            p.send(topic, key=f"k{i}".encode(), value=b"v" * 100)
        p.flush(30)
    finally:
        p.close()


def test_the_periodic_checkpoint_follows_group_commits_and_0_leaves_it_to_the_rolls(tmp_path):
    """kafka-python produces (acks=1, --fsync batch: each answer after its group commit); the recovery point
    of the partition follows, and the checkpoint file with it every interval; with the interval 0 it is only
    written at rolls (none here), as the flag says."""
    from tenure.config import ServerConfig
    from tenure.server.thread import ServerThread

    data = tmp_path / "periodic"
    with ServerThread(ServerConfig(port=0, data_dir=str(data), fsync="batch",
                                   log_flush_offset_checkpoint_interval_ms=100)) as st:
        create_topic(st.bootstrap, "p")
        _produce_kafka_python(st.bootstrap, "p", 50)
        assert _wait_checkpoint(data, "p-0", 50) == 50
        _produce_kafka_python(st.bootstrap, "p", 30)
        assert _wait_checkpoint(data, "p-0", 80) == 80

    data = tmp_path / "rolls-only"
    with ServerThread(ServerConfig(port=0, data_dir=str(data), fsync="batch",
                                   log_flush_offset_checkpoint_interval_ms=0)) as st:
        create_topic(st.bootstrap, "p")
        _produce_kafka_python(st.bootstrap, "p", 50)
        time.sleep(0.5)
        assert "p-0" not in _checkpoint(data)
    assert _checkpoint(data)["p-0"] == 50                          # the clean stop writes it
