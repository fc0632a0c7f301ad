"""Heartbeats of real clients through the hot path's shortcuts (docs/benchmarks.md, "The profile of 1,000
heartbeating members"): a member's heartbeat repeats its bytes but for the correlation id, so the server reuses what
its header's decode and the decoding limits' walk made of them (protocol/codec.py, REPEATING_APIS) and kafka-python's
encoding of an answer of the same numbers (codec.encode_body); the request capture keeps the exchange at once
(Capture.keep). confluent-kafka (librdkafka) and kafka-python static members heartbeat every 100 ms through a
rebalance: every heartbeat is answered by its own correlation id with what the coordinator decided for that member
and generation (NONE, then REBALANCE_IN_PROGRESS while the group rebalances, then NONE in the next generation), and
the capture decodes each as the client sent it."""
from __future__ import annotations

import time

import pytest

from tenure.server import ServerThread
from tests.support.groups import GroupMember, wait_for

HEARTBEAT = 12


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_static_members_heartbeats_are_answered_each_for_its_member_and_generation_through_a_rebalance(client):
    with ServerThread(port=0) as server:
        server.create_topics({"hb-hot": 2})
        first = GroupMember(client, server.bootstrap, "hb-hot-g", "hb-hot", "first", heartbeat_interval_ms=100,
                            session_timeout_ms=6000, rebalance_timeout_ms=6000).start()
        second = None
        try:
            wait_for(lambda: first.assignment == frozenset({0, 1}), 30, "the first member to own both partitions")
            time.sleep(1.0)                                        # ~10 heartbeats of one generation
            second = GroupMember(client, server.bootstrap, "hb-hot-g", "hb-hot", "second",
                                 heartbeat_interval_ms=100, session_timeout_ms=6000, rebalance_timeout_ms=6000).start()
            wait_for(lambda: len(first.assignment) == 1 and len(second.assignment) == 1, 30,
                     "the two members to own a partition each")
            time.sleep(1.0)                                        # heartbeats of the next generation
        finally:
            for m in (first, second):
                if m is not None:
                    m.stop()
        beats = [e for e in server.requests(api=HEARTBEAT, group="hb-hot-g")]
        assert not first.errors and (second is None or not second.errors)
    assert len(beats) >= 6
    by_member: dict[str, list] = {}
    for e in beats:
        req, resp = e.request, e.response
        assert e.outcome == "answered" and resp.error_code == e.error
        assert req.group_id == "hb-hot-g" and req.group_instance_id in ("first", "second")
        by_member.setdefault(req.group_instance_id, []).append((e.connection, e.correlation_id, req.generation_id,
                                                                req.member_id, e.error_name))
    firsts = by_member["first"]
    assert len({(conn, cid) for conn, cid, *_ in firsts}) == len(firsts)      # each answered by its own id
    assert len({mid for *_, mid, _ in firsts}) == 1                           # the same member throughout
    generations = sorted({gen for _, _, gen, _, _ in firsts})
    assert len(generations) >= 2, firsts                                      # the repeated bytes changed with it
    names = [name for *_, name in firsts]
    assert names[0] == "NONE" and names[-1] == "NONE" and set(names) <= {"NONE", "REBALANCE_IN_PROGRESS"}
    old = [name for _, _, gen, _, name in firsts if gen == generations[0]]
    if "REBALANCE_IN_PROGRESS" in names:      # a heartbeat of the old generation while the group rebalanced
        assert "REBALANCE_IN_PROGRESS" in old
    assert all(name == "NONE" for _, _, gen, _, name in firsts if gen == generations[-1])
    assert {name for *_, name in by_member["second"]} == {"NONE"}
