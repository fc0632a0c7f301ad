"""The audit of a KIP-848 static group of Java kafka-clients 4.3 consumers (`group.protocol=consumer`): two
members join, one is restarted (its JVM closed - a static leave, epoch -2 - and a new JVM with the same
group.instance.id takes its place): member_map_history shows each instance's member ids as the server had
them, of kind `consumer`, the restarted one's two joined at one `replaced` event, and generations are the
group's epochs as the server reports them."""
# ruff: noqa: F811 - the test takes the java_members fixture imported from test_static_java
from __future__ import annotations

import time

import pytest

from tenure.audit import job
from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.integration.test_static_java import java_members  # noqa: F401 - java_members: fixture

pytestmark = [pytest.mark.java, pytest.mark.timeout(240)]
CONSUMER = {"group_protocol": "consumer"}


def settled(st: ServerThread, n: int, timeout: float = 60):
    deadline = time.monotonic() + timeout
    v = None
    while time.monotonic() < deadline:
        v = st.group("g")
        if (v is not None and v.kind == "consumer" and v.state == "Stable" and len(v.members) == n
                and sorted(p for m in v.members for p in (m.assignment or {}).get("t", [])) == [0, 1, 2, 3]):
            return v
        time.sleep(0.2)
    raise AssertionError(f"group not settled: {v}")


def test_a_java_consumer_protocol_static_group_restarted(spark, tmp_path, java_members):
    data, out = tmp_path / "data", tmp_path / "out"
    cfg = ServerConfig(port=0, data_dir=str(data), consumer_heartbeat_interval_ms=300, initial_rebalance_delay_ms=0)
    with ServerThread(cfg) as st:
        st.call(st.server.topics.create, "t", 4)
        members = {i: java_members(f"{i}-a", st.bootstrap, "g", "t", i, **CONSUMER) for i in ("i0", "i1")}
        first = settled(st, 2)
        assert members["i0"].close() == 0
        members["i0"] = java_members("i0-b", st.bootstrap, "g", "t", "i0", **CONSUMER)
        deadline = time.monotonic() + 60
        while settled(st, 2).member("i0").member_id == first.member("i0").member_id:
            assert time.monotonic() < deadline, "i0 never came back with a new member id"
            time.sleep(0.2)
        last = settled(st, 2)
        for m in members.values():
            assert m.close() == 0
    ids = {i: [first.member(i).member_id, last.member(i).member_id] for i in ("i0", "i1")}
    assert ids["i0"][0] != ids["i0"][1] and ids["i1"][0] == ids["i1"][1]

    code, summary = job.run(job.Options(str(data), str(out), report=False), spark=spark)
    assert code == 0 and summary["errors"] == 0
    hist = [r.asDict() for r in spark.read.parquet(str(out / "member_map_history")).collect()]
    i0 = sorted((r for r in hist if r["instance_id"] == "i0"), key=lambda r: r["valid_from_offset"])
    assert [(r["member_id"], r["start_cause"], r["group_type"]) for r in i0] == [
        (ids["i0"][0], "joined", "consumer"), (ids["i0"][1], "replaced", "consumer")]
    assert i0[0]["end_cause"] == "replaced" and i0[0]["valid_to_offset"] == i0[1]["valid_from_offset"]
    i1 = [r for r in hist if r["instance_id"] == "i1"]
    assert [(r["member_id"], r["start_cause"], r["group_type"]) for r in i1] == [(ids["i1"][0], "joined", "consumer")]
    # both members closed as static members (epoch -2: they will come back): still mapped at the end
    assert [r["valid_to_offset"] for r in i0[1:] + i1] == [None, None]
    gens = sorted((r.asDict() for r in spark.read.parquet(str(out / "generations")).collect()),
                  key=lambda r: r["log_offset"])
    assert {r["group_type"] for r in gens} == {"consumer"} and gens[-1]["generation"] == last.generation
    assert gens[0]["trigger"] == "joined" and [r["generation"] for r in gens] == sorted({r["generation"] for r in gens})
