"""The executor-side reader on a live server's newest segment, while commits are appended: every read
gives sound records in offset order and never a damage row (a batch caught mid-write is re-read, or at
worst reported as a torn tail)."""
import threading
import time

from confluent_kafka import Consumer, TopicPartition

from tenure.audit import listing, read
from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.support.wire import WireClient, create_topic


def test_reading_while_a_server_appends(tmp_path):
    with ServerThread(ServerConfig(port=0, data_dir=str(tmp_path), fsync="never")) as s:
        with WireClient.to(s.bootstrap) as w:
            create_topic(w, "t")
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "live", "enable.auto.commit": False})
        stop = threading.Event()
        done = []

        def commit():
            i = 0
            while not stop.is_set():
                i += 1
                c.commit(offsets=[TopicPartition("t", 0, i, metadata="x" * (i % 500))], asynchronous=False)
            done.append(i)

        t = threading.Thread(target=commit)
        t.start()
        try:
            reads, deadline = 0, time.monotonic() + 3
            while time.monotonic() < deadline:
                for unit in listing.list_units(str(tmp_path)):
                    rows = list(read.read_unit(unit))
                    errors = [r for k, r in rows if k == "E"]
                    assert all(e[4] == read.TORN_TAIL for e in errors), errors
                    offsets = [r[1] for k, r in rows if k == "R"]
                    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
                    reads += 1
        finally:
            stop.set()
            t.join(10)
            c.close()
    assert reads > 3 and done and done[0] > 10
