"""What the server log says about groups: one INFO line per rebalance (with its cause) and per
static-member event (joined, replaced, fenced, expired, ...), one DEBUG line per group request; the
JSON log format carries the same facts as fields."""
from __future__ import annotations

import json
import logging

import pytest

from tests.support.groups import GroupMember, wait_for
from tests.support.procs import TenureProcess

pytestmark = pytest.mark.timeout(120)


def lines(caplog, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "tenure.coordinator" and getattr(r, "event", None) == event]


@pytest.mark.tenure(topics={"lg-t": 2})
def test_info_lines_for_every_rebalance_and_static_event(tenure_server, caplog):
    caplog.set_level(logging.INFO, logger="tenure.coordinator")
    a = GroupMember("confluent", tenure_server.bootstrap, "lg-g", "lg-t", "a").start()
    b = GroupMember("confluent", tenure_server.bootstrap, "lg-g", "lg-t", "b").start()
    try:
        wait_for(lambda: a.assignment and b.assignment and len(a.assignment | b.assignment) == 2, 30, "two members")
        tenure_server.wait_for_group("lg-g", members=2)
        a.stop()                                    # static: no LeaveGroup; then back as a replacement
        a = GroupMember("confluent", tenure_server.bootstrap, "lg-g", "lg-t", "a").start()
        wait_for(lambda: a.assignment, 30, "a back")
        b_id = tenure_server.group("lg-g").static_members["b"]
        assert tenure_server.expire_session("lg-g", "b")
        tenure_server.wait_for_group("lg-g", members=2)
    finally:
        a.stop(), b.stop()
    static = [(r.group, r.instance_id, r.cause) for r in lines(caplog, "static_member")]
    assert static[:2] == [("lg-g", "a", "joined"), ("lg-g", "b", "joined")] or \
        static[:2] == [("lg-g", "b", "joined"), ("lg-g", "a", "joined")]
    assert ("lg-g", "a", "replaced") in static and ("lg-g", "b", "expired") in static
    expired = next(r for r in lines(caplog, "static_member") if r.cause == "expired")
    assert expired.old_member_id == b_id and expired.new_member_id is None
    assert f"group lg-g: static member b expired (member {b_id} removed, generation " in expired.getMessage()
    joined = next(r for r in lines(caplog, "static_member") if r.cause == "joined")
    assert f"joined (member {joined.new_member_id}, generation " in joined.getMessage()
    # no Python None in any line the coordinator logged
    assert not [r.getMessage() for r in caplog.records if r.name == "tenure.coordinator"
                and "None" in r.getMessage()]
    rebalances = lines(caplog, "rebalance")
    assert len(rebalances) == tenure_server.rebalances("lg-g")       # one line per rebalance
    causes = [r.cause for r in rebalances]
    assert causes[0] == "member_joined" and "session_expired" in causes
    assert all(r.levelno == logging.INFO and r.group == "lg-g" for r in rebalances)
    assert "rebalance started (cause session_expired" in next(
        r for r in rebalances if r.cause == "session_expired").getMessage()
    # every rebalance says the generation it leaves, and each one that ended says so with the generation it made
    assert rebalances[0].generation == 0 and "from generation 0, " in rebalances[0].getMessage()
    done = lines(caplog, "rebalance_done")
    assert done and all(r.state == "Stable" and r.took_ms >= 0 for r in done)
    assert [d.getMessage() for d in done[:2]] == [
        f"group lg-g: Stable (generation 1, took {done[0].took_ms} ms)",              # formed
        f"group lg-g: Stable again (generation 2, took {done[1].took_ms} ms)"]        # after b's expiry
    for started in rebalances:               # the first Stable line after each start is one generation on
        after = next(d for d in done if d.created >= started.created)
        assert after.generation == started.generation + 1, (started.getMessage(), after.getMessage())
    assert done[-1].generation == tenure_server.group("lg-g").generation


@pytest.mark.tenure(topics={"lq-t": 1})
def test_a_debug_line_per_group_request(tenure_server, caplog):
    caplog.set_level(logging.DEBUG, logger="tenure.coordinator")
    a = GroupMember("confluent", tenure_server.bootstrap, "lq-g", "lq-t", "a").start()
    try:
        wait_for(lambda: a.assignment, 30, "a member")
        wait_for(lambda: any(r.api == "Heartbeat" for r in lines(caplog, "request")), 30, "a heartbeat")
    finally:
        a.stop()
    requests = lines(caplog, "request")
    assert {"JoinGroup", "SyncGroup", "Heartbeat"} <= {r.api for r in requests}
    join = next(r for r in requests if r.api == "JoinGroup")
    assert (join.levelno, join.group, join.instance_id) == (logging.DEBUG, "lq-g", "a")
    assert join.getMessage().startswith(f"JoinGroup v{join.api_version} from ")


def test_the_json_log_carries_the_same_fields(tmp_path):
    with TenureProcess(tmp_path / "data", extra=("--log-format", "json", "--log-level", "DEBUG")) as srv:
        srv.start()
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": srv.bootstrap})
        admin.create_topics([NewTopic("lj-t", 1)])["lj-t"].result(30)
        m = GroupMember("confluent", srv.bootstrap, "lj-g", "lj-t", "a").start()
        try:
            wait_for(lambda: m.assignment, 30, "a member")
        finally:
            m.stop()
        assert srv.terminate() == 0
        objs = [json.loads(line) for line in srv.stderr().splitlines() if line.startswith("{")]
    by_event = {}
    for o in objs:
        by_event.setdefault(o.get("event"), []).append(o)
    [joined] = by_event["static_member"]
    assert {k: joined[k] for k in ("level", "logger", "group", "instance_id", "cause", "old_member_id")} == \
        {"level": "INFO", "logger": "tenure.coordinator", "group": "lj-g", "instance_id": "a", "cause": "joined",
         "old_member_id": None}
    assert joined["new_member_id"].startswith("a-") and joined["message"].startswith("group lj-g: static member a")
    [rebalance] = by_event["rebalance"]
    assert (rebalance["group"], rebalance["cause"], rebalance["level"]) == ("lj-g", "member_joined", "INFO")
    assert {"JoinGroup", "SyncGroup"} <= {o["api"] for o in by_event["request"] if o["group"] == "lj-g"}
