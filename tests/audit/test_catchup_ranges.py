"""The catch-up consumer's range tokens in the audit: the catchup_ranges table, the catchup_unfinished
anomaly and the report's section - on a crafted log (exact rows), and end to end on the seed's example
(a real CatchUpConsumer against a tenure server on a data dir, its first process killed)."""
from __future__ import annotations

import time

import pytest

from tenure.audit import job
from tenure.audit.report import write_report
from tenure.config import ServerConfig
from tenure.protocol import records as rec
from tenure.server import ServerThread

from .logs import T0, Writer

G, TOPIC = "app.catchup", "t"


def ck(w: Writer, partition: int, ranges: str, ts: int, instance: str = "w1", commit_ts: int | None = None,
       group: str = G, offset: int = 0, nul: bool = False) -> None:
    """A companion-group checkpoint, as the catch-up consumer writes it (`nul`: with the trailing NUL
    confluent-kafka's commits carry)."""
    md = f"tenure.catchup/1 instance={instance} ranges={ranges}" + ("\x00" if nul else "")
    w.add(rec.OffsetCommitRecord(group, TOPIC, partition, offset, -1, md, ts if commit_ts is None else commit_ts),
          ts)


def crafted(w: Writer) -> None:
    # partition 0: 70-120 opens, progresses; a second crash opens 140-190; 70-120 is processed; a third
    # crash reopens [190, 260) touching 140-190's owed span: merged into 140-260, which is left owing 200..259
    ck(w, 0, "70-120:70", T0 + 10, offset=70)
    ck(w, 0, "70-120:85", T0 + 20, offset=85)
    ck(w, 0, "70-120:85,140-190:140", T0 + 30, offset=85)
    ck(w, 0, "140-190:140", T0 + 40, offset=140)
    ck(w, 0, "140-260:150", T0 + 50, offset=150)
    ck(w, 0, "140-260:200", T0 + 60, offset=200)
    # partition 1, another instance: 0-10 opens (no commit timestamp: the record's time stands in), is done
    ck(w, 1, "0-10:0", T0 + 15, instance="w2", commit_ts=-1, nul=True)
    ck(w, 1, "", T0 + 25, instance="w2", offset=10, nul=True)
    # not checkpoints: the main group's markers, a plain commit, a malformed token, a deleted offset
    w.add(rec.OffsetCommitRecord("app", TOPIC, 0, 260, -1, "tenure.catchup/1 running instance=w1", T0 + 51),
          T0 + 51)
    w.add(rec.OffsetCommitRecord("other", TOPIC, 0, 5, -1, "", T0 + 52), T0 + 52)
    w.add(rec.OffsetCommitRecord("bad.catchup", TOPIC, 0, 5, -1, "tenure.catchup/1 instance=x ranges=9-3:1",
                                 T0 + 53), T0 + 53)
    w.add(rec.OffsetCommitRecord(G, TOPIC, 2, tombstone=True), T0 + 54)


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("catchup-ranges")
    w = Writer(tmp, 0)
    crafted(w)
    w.close()
    return tmp, job.build(spark, job.Options(str(tmp), str(tmp / "out")))[0]


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_ranges_open_progress_merge_and_one_left_open(tables):
    _, t = tables
    assert t["catchup_ranges"].columns == ["group", "topic", "partition", "lo", "hi", "opened", "closed",
                                           "processed", "merged_into", "owed_from", "owed_to", "instance_id",
                                           "last_checkpoint", "log_partition"]
    assert _rows(t["catchup_ranges"]) == sorted([
        (G, TOPIC, 0, 70, 120, T0 + 10, T0 + 40, T0 + 40, None, None, None, "w1", T0 + 60, 0),
        (G, TOPIC, 0, 140, 190, T0 + 30, T0 + 50, None, "140-260", None, None, "w1", T0 + 60, 0),
        (G, TOPIC, 0, 140, 260, T0 + 50, None, None, None, 200, 260, "w1", T0 + 60, 0),
        (G, TOPIC, 1, 0, 10, T0 + 15, T0 + 25, T0 + 25, None, None, None, "w2", T0 + 25, 0),
    ])
    assert t["errors"].count() == 0


def test_a_range_still_owing_at_the_end_is_an_anomaly(tables):
    _, t = tables
    assert [r.asDict() for r in t["anomalies"].collect()] == [{
        "kind": "catchup_unfinished", "group": G, "instance_id": "w1", "count": 60, "first_time": T0 + 50,
        "last_time": T0 + 60, "detail": "topic t partition 0: range 140-260, offsets 200..259 never committed"}]


def test_since_until_keep_the_ranges_overlapping_the_window(spark, tables):
    tmp, _ = tables
    t = job.build(spark, job.Options(str(tmp), str(tmp / "out"), since=T0 + 41, until=T0 + 50))[0]
    assert sorted((r["lo"], r["hi"]) for r in t["catchup_ranges"].collect()) == [(140, 190)]
    assert t["anomalies"].count() == 0


def test_the_report_tables_the_ranges_and_says_what_is_owed(tables, tmp_path):
    _, t = tables
    write_report(t, job.summarize(t), tmp_path)
    page = (tmp_path / "report.html").read_text()
    section = page[page.index('<h2 id="catchup-ranges">'):]
    section = section[:section.index("</table>")]
    assert ("<td>app.catchup</td><td>w1</td><td>t-0</td><td>70-120</td><td>2023-11-14T22:13:20.010Z</td>"
            "<td>2023-11-14T22:13:20.040Z</td><td>30 ms</td><td>-</td>") in section
    assert "<td>merged into 140-260 at 2023-11-14T22:13:20.050Z</td>" in section
    assert "<td>140-260</td><td>2023-11-14T22:13:20.050Z</td><td>not by the end of the log</td><td>-</td>" \
           "<td>200..259 (60)</td>" in section
    assert "still owed 60 offset(s) at the end of the log" in page
    assert '<a href="#catchup-ranges">' in page


def test_no_ranges_is_a_sentence(spark, tmp_path):
    w = Writer(tmp_path, 0)
    w.add(rec.OffsetCommitRecord("g", TOPIC, 0, 1, -1, "", T0), T0)
    w.close()
    t = job.build(spark, job.Options(str(tmp_path), str(tmp_path / "out")))[0]
    assert t["catchup_ranges"].count() == 0
    write_report(t, job.summarize(t), tmp_path)
    assert "No catch-up ranges" in (tmp_path / "report.html").read_text()


@pytest.mark.timeout(180)
def test_the_seed_example_end_to_end(spark, tmp_path):
    """70 committed, the worker killed at 100, the log at 120 on recovery: the recovered CatchUpConsumer
    replays [70, 120) and commits; the audit of the server's data dir shows that range, opened after the
    recovery started and processed before the commit returned, owing nothing."""
    from confluent_kafka import TopicPartition

    from tests.catchup.conftest import produce
    from tests.catchup.test_seed_example import _consumer, _crash_at_100, _pump

    data, group, topic = tmp_path / "data", "audit-seed", "audit-catchup"
    with ServerThread(ServerConfig(port=0, data_dir=str(data))) as s:
        s.call(lambda: s.server.topics.create(topic, 1))
        produce(s.bootstrap, topic, 100)
        _crash_at_100(s.bootstrap, topic, group)
        produce(s.bootstrap, topic, 20)
        recovered = int(time.time() * 1000)
        c = _consumer(s.bootstrap, group, "on")
        try:
            delivered: list[int] = []
            c.subscribe([topic])
            _pump(c, delivered, lambda: set(range(70, 120)) <= set(delivered), "the range [70, 120)")
            c.commit(asynchronous=False)
            assert c.committed([TopicPartition(topic, 0)])[0].offset == 120
            done = int(time.time() * 1000)
        finally:
            c.close()
    t = job.build(spark, job.Options(str(data), str(tmp_path / "out")))[0]
    rows = [r.asDict() for r in t["catchup_ranges"].collect()]
    assert [(r["group"], r["topic"], r["partition"], r["lo"], r["hi"], r["merged_into"], r["owed_from"],
             r["instance_id"]) for r in rows] == [(f"{group}.catchup", topic, 0, 70, 120, None, None, "worker-1")]
    r = rows[0]
    assert recovered <= r["opened"] <= r["processed"] == r["closed"] <= done, (recovered, r, done)
    assert t["anomalies"].filter("kind = 'catchup_unfinished'").count() == 0
    write_report(t, job.summarize(t), tmp_path)
    assert "<td>70-120</td>" in (tmp_path / "report.html").read_text()
