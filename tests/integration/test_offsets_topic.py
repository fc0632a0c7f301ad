"""Real clients read `__consumer_offsets` with Fetch, as on Kafka: the group's own records (GroupMetadata
with group_instance_id, OffsetCommit, the project's static-member events) come back and decode."""
from __future__ import annotations

import time

import pytest

from tenure.config import ServerConfig
from tenure.protocol import records as rec
from tenure.server import ServerThread
from tests.support.groups import GroupMember, commit_offsets, member_id

pytestmark = pytest.mark.timeout(120)


def read_offsets_topic(bootstrap: str, until) -> list:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-unused", "enable.auto.commit": False,
                  "log_level": 3})
    c.assign([TopicPartition("__consumer_offsets", 0, 0)])
    out: list = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and not until(out):
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out.append((m.offset(), rec.decode(m.key(), m.value())))
    finally:
        c.close()
    return out


@pytest.mark.parametrize("data_dir", [False, True], ids=["memory", "disk"])
def test_a_consumer_fetches_and_decodes_the_groups_records(tmp_path, data_dir):
    cfg = ServerConfig(port=0, min_session_timeout_ms=1000, data_dir=str(tmp_path / "d") if data_dir else None)
    with ServerThread(cfg) as s:
        s.call(lambda: s.server.topics.create("ot", 2))
        m = GroupMember("confluent", s.bootstrap, "ot-g", "ot", "inst-1", session_timeout_ms=6000).start()
        try:
            m.wait_assigned(30)
            commit_offsets(m, {0: 5, 1: 7})
            mid = member_id(m)
        finally:
            m.stop()

        def complete(got):
            recs = [r for _, r in got]
            return (any(isinstance(r, rec.OffsetCommitRecord) and r.partition == 1 for r in recs)
                    and any(isinstance(r, rec.StaticMemberEventRecord) for r in recs))
        got = read_offsets_topic(s.bootstrap, complete)
    offsets = [o for o, _ in got]
    assert offsets == list(range(len(got))), "offsets are contiguous from 0"
    records = [r for _, r in got]
    stable = [r for r in records if isinstance(r, rec.GroupMetadataRecord) and r.members]
    assert stable and stable[-1].group_id == "ot-g" and stable[-1].protocol == "range"
    assert [(x.member_id, x.group_instance_id) for x in stable[-1].members] == [(mid, "inst-1")]
    commits = {(r.topic, r.partition): r.offset for r in records if isinstance(r, rec.OffsetCommitRecord)}
    assert commits == {("ot", 0): 5, ("ot", 1): 7}
    joined = [r for r in records if isinstance(r, rec.StaticMemberEventRecord)]
    assert joined[0].cause == rec.JOINED and joined[0].group_instance_id == "inst-1"
    assert joined[0].new_member_id == mid and joined[0].old_member_id is None
