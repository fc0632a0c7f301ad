"""`tenure serve` after a clean stop (SIGTERM) trusts its segments instead of verifying every batch, and
after a SIGKILL verifies everything again, cutting a torn tail; real clients read back every record each
time (confluent-kafka produces, kafka-python and confluent-kafka consume)."""
from __future__ import annotations

import os
import re

from tests.support.clients import create_topic
from tests.support.procs import TenureProcess

OPENED = re.compile(r"opened (\d+) log\(s\) after a(n unclean| clean) stop: (\d+) segment\(s\) verified batch by "
                    r"batch, (\d+) trusted")
N = 3000                                   # ~1.5 MiB: the segment is large enough for index files


def _produce(bootstrap: str, topic: str, start: int, n: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
    for i in range(start, start + n):
        p.produce(topic, key=f"k{i}".encode(), value=b"v" * 500 + str(i).encode())
    assert p.flush(30) == 0


def _read_kafka_python(bootstrap: str, topic: str) -> list[bytes]:
    """Every record up to the end offset (the iteration gives up after 10 s without one)."""
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000)
    try:
        tp = TopicPartition(topic, 0)
        end = c.end_offsets([tp])[tp]
        c.assign([tp])
        c.seek_to_beginning(tp)
        out: list[bytes] = []
        for m in c:
            out.append(m.key)
            if m.offset + 1 >= end:
                break
        return out
    finally:
        c.close()


def _read_confluent(bootstrap: str, topic: str) -> list[bytes]:
    """Every record up to the high watermark."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "cs", "enable.auto.commit": False, "log_level": 0})
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


def _opened(srv: TenureProcess) -> tuple[str, int, int]:
    m = OPENED.findall(srv.stderr())
    assert len(m) == 1, srv.stderr()
    return m[0][1].strip(), int(m[0][2]), int(m[0][3])


def test_a_clean_restart_skips_the_scan_and_a_kill_does_not(tmp_path):
    data = tmp_path / "data"
    keys = [f"k{i}".encode() for i in range(N + 1000)]
    with TenureProcess(data, fsync="batch") as srv:
        srv.start()
        create_topic(srv.bootstrap, "cs")
        _produce(srv.bootstrap, "cs", 0, N)
        assert srv.terminate() == 0, srv.stderr()
        assert (data / ".kafka_cleanshutdown").exists()
        assert f"cs 0 {N}" in (data / "recovery-point-offset-checkpoint").read_text()

        srv.start()                                           # after a clean stop: nothing verified in full
        kind, scanned, trusted = _opened(srv)
        assert (kind, scanned) == ("clean", 0) and trusted >= 1, srv.stderr()
        assert not (data / ".kafka_cleanshutdown").exists()   # taken at start: a crash now is unclean
        assert _read_kafka_python(srv.bootstrap, "cs") == keys[:N]
        _produce(srv.bootstrap, "cs", N, 1000)
        srv.kill()                                            # SIGKILL: no marker

        seg = sorted((data / "cs-0").glob("*.log"))[-1]
        with open(seg, "r+b") as f:                           # and the last batch torn
            f.truncate(os.path.getsize(seg) - 30)
        srv.start()
        kind, scanned, trusted = _opened(srv)
        assert kind == "n unclean" and scanned >= 1 and trusted == 0, srv.stderr()
        assert "recovery cut" in srv.stderr() and seg.name in srv.stderr()
        got = _read_confluent(srv.bootstrap, "cs")
        assert N <= len(got) < N + 1000 and got == keys[:len(got)]
        assert srv.terminate() == 0, srv.stderr()

        srv.start()                                           # clean again after a full recovery
        assert _opened(srv)[:2] == ("clean", 0), srv.stderr()
        assert _read_kafka_python(srv.bootstrap, "cs") == got
