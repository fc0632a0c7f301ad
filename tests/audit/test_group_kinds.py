"""The audit of the other group kinds, on data dirs written by real servers with real clients:

- a static group of confluent-kafka 2.16 consumers rolled member by member from the classic protocol to the
  KIP-848 consumer protocol (the server's online upgrade) and back (its downgrade): each instance id has one
  continuous history in member_map_history - one interval per member id, consecutive ones joined at one
  `replaced` event, each with the group kind it started in -, the two conversions are history rows, the
  generations are the server's, and `tenure audit --instance` answers for a member id of the consumer kind;
- a share group (confluent-kafka's ShareConsumer) whose first record is released at every delivery until the
  delivery limit: share_deliveries shows it with its offset and 5 deliveries, a record released once and then
  accepted with 2, nothing else; its generations are its members joining and leaving; report.html's share
  section names the poison record.

The truth is the server's own (its group views after each step, the clients' own delivery counts), not the log.
"""
from __future__ import annotations

import json
import time
from html import escape as html_escape

import pytest

from tenure.audit import job, query
from tenure.config import ServerConfig
from tenure.server import ServerThread

pytestmark = pytest.mark.timeout(240)


def read(spark, out, name: str) -> list[dict]:
    return [r.asDict(recursive=True) for r in spark.read.parquet(str(out / name)).collect()]


def test_a_static_group_rolled_to_the_consumer_protocol_and_back_has_one_history_per_instance(spark, tmp_path):
    from tests.integration.test_consumer_migration import Member, settled
    from tests.integration.test_consumer_migration_java import PARTITIONS

    data, out = tmp_path / "data", tmp_path / "out"
    ids: dict[str, list[tuple[str, str]]] = {"i0": [], "i1": []}     # instance -> [(member id, kind)] in order
    kinds, gens = [], []
    cfg = ServerConfig(port=0, data_dir=str(data), consumer_heartbeat_interval_ms=300, initial_rebalance_delay_ms=0)
    with ServerThread(cfg) as st:
        st.call(st.server.topics.create, "t", PARTITIONS)
        members = {i: Member(st.bootstrap, "classic", i, f"{i}-classic") for i in ids}

        def note(kind: str) -> None:
            gen, _ = settled(st, list(members.values()), kind)
            v = st.group("g")
            for i in ids:
                mid = v.member(i).member_id
                if not ids[i] or ids[i][-1][0] != mid:
                    ids[i].append((mid, kind))
            kinds.append(v.kind)
            gens.append(gen)

        try:
            note("classic")
            # roll to the consumer protocol: i0 first (the upgrade), then i1; and back: i0, then i1 (the downgrade)
            for instance, protocol, kind in (("i0", "consumer", "consumer"), ("i1", "consumer", "consumer"),
                                             ("i0", "classic", "consumer"), ("i1", "classic", "classic")):
                members[instance].close()
                members[instance] = Member(st.bootstrap, protocol, instance, f"{instance}-{protocol}")
                note(kind)
        finally:
            for m in members.values():
                m.close()
        end = int(time.time() * 1000)
    assert kinds == ["classic", "consumer", "consumer", "consumer", "classic"]
    # each instance had three member ids: classic, consumer, then classic again (inside a consumer group first)
    assert [len(v) for v in ids.values()] == [3, 3]

    code, summary = job.run(job.Options(str(data), str(out)), spark=spark)
    assert code == 0 and summary["errors"] == 0
    assert (summary["conversions"], summary["instances"], summary["member_ids"]) == (2, 2, 6)
    assert summary["events_by_cause"] == {"joined": 2, "replaced": 4}
    hist = read(spark, out, "member_map_history")
    for instance, expected in ids.items():
        rows = sorted((r for r in hist if r["instance_id"] == instance), key=lambda r: r["valid_from_offset"])
        assert [r["member_id"] for r in rows] == [m for m, _ in expected]
        # the kind each member id started in: i0's last one joined the consumer group as a classic member, so
        # it started in a consumer group; i1's last one was the downgrade's
        assert rows[0]["start_cause"] == "joined" and rows[0]["group_type"] == "classic"
        assert [r["start_cause"] for r in rows[1:]] == ["replaced", "replaced"]
        assert [r["end_cause"] for r in rows] == ["replaced", "replaced", None]
        for a, b in zip(rows, rows[1:]):        # one continuous history: each ends where the next starts
            assert a["valid_to_offset"] == b["valid_from_offset"] and a["valid_to_time"] == b["valid_from_time"]
        assert rows[1]["group_type"] == "consumer"
        # the generations: the classic generation, then the member epochs (the group's epoch, unchanged)
        assert [(r["from_generation"], r["to_generation"]) for r in rows][1:] == [(gens[0], gens[0]), (gens[0], None)]
        assert rows[0]["to_generation"] == gens[0]
    assert [r["group_type"] for r in sorted((r for r in hist if r["instance_id"] == "i0"),
                                            key=lambda r: r["valid_from_offset"])] == ["classic", "consumer", "consumer"]
    conversions = sorted((r for r in hist if r["start_cause"] == "converted"), key=lambda r: r["valid_from_offset"])
    assert [(r["end_cause"], r["group_type"], r["instance_id"], r["member_id"]) for r in conversions] == [
        ("to_consumer", "consumer", None, None), ("to_classic", "classic", None, None)]
    # the generations: the roll cost no rebalance (Kafka's rules for static members with the same subscription:
    # the group epoch is the classic generation, and stays), so the last is the one the classic group settled in
    # (one or two: the two classic members may have joined in one rebalance or in two)
    assert set(gens) == {gens[0]}
    g = sorted(read(spark, out, "generations"), key=lambda r: r["log_offset"])
    assert summary["generations"] == len(g) and g[-1]["generation"] == gens[0]
    assert [(r["group_type"], r["trigger"]) for r in g] == [("classic", "joined")] * len(g)
    assert sorted((m["member_id"], m["instance_id"]) for m in g[-1]["members"]) == sorted((ids[i][0][0], i) for i in ids)
    anomalies = read(spark, out, "anomalies")
    assert [a for a in anomalies if a["kind"] in ("concurrent_member_ids", "log_damage", "log_gap")] == []

    html = (out / "report.html").read_text()
    assert "Group g (classic, consumer group)" in html and "group conversions (classic &lt;-&gt; consumer)" in html
    for i in ids:                               # each instance's lane table lists its three member ids
        assert all(f"<td><code>{html_escape(mid)}</code></td>" in html for mid, _ in ids[i])

    # the query mode, for a member id of the consumer kind (i0's second) at the middle of its interval
    rows = sorted((r for r in hist if r["instance_id"] == "i0"), key=lambda r: r["valid_from_offset"])
    mid = (rows[1]["valid_from_time"] + rows[1]["valid_to_time"]) // 2
    code, text = query.run(str(out), "g/i0", mid, fmt="json")
    a = json.loads(text)
    assert code == 0 and [h["member_id"] for h in a["held_by"]] == [ids["i0"][1][0]]
    assert a["previous"]["member_id"] == ids["i0"][0][0] and a["next"]["member_id"] == ids["i0"][2][0]
    # on the data dir (the member map built with Spark, this session): the same answer
    assert query.answer(query.intervals(str(data), "g", "i0", spark=spark), "g", "i0", mid) == a
    code, text = query.run(str(out), "g/i1", end, fmt="json")
    assert code == 0 and [h["member_id"] for h in json.loads(text)["held_by"]] == [ids["i1"][2][0]]


def test_a_share_groups_poison_record_shows_with_its_offset_and_deliveries(spark, tmp_path):
    from tests.integration.test_share_groups import ACCEPT, RELEASE, Sharer, done, produce, setup, wait_for

    data, out = tmp_path / "data", tmp_path / "out"
    group, topic = "poison-g", "poison"

    def decide(m) -> int:
        if m.offset() == 0 or (m.offset() == 2 and m.delivery_count() == 1):
            return RELEASE
        return ACCEPT
    cfg = ServerConfig(port=0, data_dir=str(data), share_heartbeat_interval_ms=200, initial_rebalance_delay_ms=0)
    with ServerThread(cfg) as st:
        setup(st, topic, group)
        produce(st, topic, ["poison", "fine", "once", "fine too"])
        s = Sharer(st, group, topic, "x", decide)
        try:
            wait_for(lambda: done(st, group, topic, 4), what="every record done")
            member = st.group(group).members[0].member_id
        finally:
            s.close()
        wait_for(lambda: not st.group(group).members, what="the member gone")
    got = s.got()
    assert [n for _, o, n, _ in got if o == 0] == [1, 2, 3, 4, 5]
    assert [n for _, o, n, _ in got if o == 2] == [1, 2]

    code, summary = job.run(job.Options(str(data), str(out)), spark=spark)
    assert code == 0 and summary["errors"] == 0 and summary["share_deliveries"] == 2
    rows = sorted(read(spark, out, "share_deliveries"), key=lambda r: r["offset"])
    assert [(r["group"], r["topic"], r["partition"], r["offset"], r["delivery_count"]) for r in rows] == [
        (group, topic, 0, 0, 5), (group, topic, 0, 2, 2)]
    # the writes name each record's new state as Kafka's share partition writes them: offset 2's acceptance,
    # and offset 0 archived at the delivery limit with its delivery count (5), each done at that write
    assert [r["final_state"] for r in rows] == ["archived", "acknowledged"]
    assert all(r["first_time"] <= r["last_time"] == r["done_time"] for r in rows)
    gens = sorted((r for r in read(spark, out, "generations") if r["group"] == group), key=lambda r: r["log_offset"])
    assert [(r["generation"], r["group_type"], r["trigger"], r["joined"], r["left"], r["member_count"])
            for r in gens] == [(1, "share", "initial", [member], [], 1),
                               (2, "share", "dynamic_membership", [], [member], 0)]
    assert not [r for r in read(spark, out, "member_map_history") if r["group"] == group]
    # the share partition's anomaly: its records that came back, the most delivered named
    anomalies = read(spark, out, "anomalies")
    assert [(a["kind"], a["group"], a["instance_id"], a["count"], a["detail"]) for a in anomalies] == [
        ("share_redelivery", group, None, 2, f"topic {topic} partition 0: most delivered offset 0 (5 deliveries, "
                                             "archived); 1 of them archived or done after redeliveries")]
    assert anomalies[0]["first_time"] == rows[0]["first_time"] and anomalies[0]["last_time"] == max(
        r["last_time"] for r in rows)
    html = (out / "report.html").read_text()
    assert ("a record that keeps coming back is a poison message its consumers cannot handle. "
            "<a href=\"#share-groups\">") in html
    section = html[html.index('id="share-groups"'):]
    assert f"The most delivered: offset 0 of {topic}-0 in share group {group}, delivered 5 times, archived" in section
    assert "<td>poison-g</td><td>poison-0</td><td>2</td><td>2</td><td>acknowledged</td>" in section
    assert f"Group {group} (share group)" in html
