"""Fail-stop: when a write or an fsync of group state fails, tenure acknowledges nothing more (Kafka
instead rolls the group back and answers an error, J27/S2; tenure stops - docs/README.md).
The commit whose write failed is never answered, every client sees its connection closed, and a
restart on the data dir has every commit acknowledged before the failure and none after."""
from __future__ import annotations

import errno

import pytest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.support.wire import WireClient, create_topic

pytestmark = pytest.mark.timeout(60)


def commit(w: WireClient, offset: int):
    T = OffsetCommitRequest.fields["topics"].data_class
    P = T.fields["partitions"].data_class
    return w.call(OffsetCommitRequest(group_id="fs-g", generation_id_or_member_epoch=-1, member_id="",
                                      group_instance_id=None, topics=[T(name="fs-t", partitions=[
                                          P(partition_index=0, committed_offset=offset, committed_metadata="")])]), 8)


def fetched(w: WireClient) -> int:
    G = OffsetFetchRequest.fields["groups"].data_class
    r = w.call(OffsetFetchRequest(groups=[G(group_id="fs-g", topics=None)], require_stable=False), 8)
    return {(t.name, p.partition_index): p.committed_offset for t in r.groups[0].topics for p in t.partitions}


def offsets_log(s: ServerThread):
    return s.server.topics.get("__consumer_offsets").partitions[0]


@pytest.mark.parametrize("failure", ["write", "fsync"])
def test_a_failed_write_or_fsync_stops_acknowledging(tmp_path, failure):
    data = tmp_path / "data"
    s = ServerThread(ServerConfig(port=0, data_dir=str(data), fsync="always")).start()
    try:
        with WireClient.to(s.bootstrap) as w:
            create_topic(w, "fs-t")
            assert commit(w, 5).topics[0].partitions[0].error_code == 0          # acknowledged
            plog = offsets_log(s)
            if failure == "write":
                def append(*a, **kw):
                    raise OSError(errno.ENOSPC, "No space left on device (injected)")
                plog.append = append
            else:
                def take_sync():
                    def fsync():
                        raise OSError(errno.EIO, "Input/output error (injected)")
                    return fsync
                plog.take_sync = take_sync
            with pytest.raises((ConnectionError, OSError)):                       # never answered
                commit(w, 9)
        assert isinstance(s.server.fatal_error, OSError)
        with pytest.raises((ConnectionError, OSError)):                           # nothing more is served
            with WireClient.to(s.bootstrap, timeout=5) as w2:
                commit(w2, 11)
    finally:
        s.stop()
    with ServerThread(ServerConfig(port=0, data_dir=str(data))) as again:
        with WireClient.to(again.bootstrap) as w:
            got = fetched(w)
        # the acknowledged commit is there; the failed one was never acknowledged (with a failed fsync its
        # bytes may still have reached the file: then it is there too, but it was never answered)
        assert got[("fs-t", 0)] in ((5,) if failure == "write" else (5, 9))


class Injected(Exception):
    """A bug in the coordinator, injected."""


def _boom(*args, **kwargs):
    raise Injected("injected")


def test_a_timer_that_raises_is_fail_stop(tmp_path, monkeypatch):
    """A timer whose work raises (a coordinator bug) is not logged and forgotten: what it owed (here the
    end of the join phase a client waits for) would never happen, so the server stops as after a failed
    write - the parked client sees its connection closed and nothing more is served."""
    from tenure.coordinator.classic.rebalance import Rebalance
    from tests.support.groupwire import join
    monkeypatch.setattr(Rebalance, "join_expired", _boom)
    s = ServerThread(ServerConfig(port=0, data_dir=str(tmp_path / "data"), initial_rebalance_delay_ms=50)).start()
    try:
        with WireClient.to(s.bootstrap, timeout=20) as w:
            with pytest.raises((ConnectionError, OSError)) as closed:             # parked, then closed
                join(w, "tf-g", "", "i1", "tf-t", session_ms=10000)
        assert not isinstance(closed.value, TimeoutError), "the parked JoinGroup was left hanging"
        assert isinstance(s.server.fatal_error, Injected)
        with pytest.raises((ConnectionError, OSError)):
            with WireClient.to(s.bootstrap, timeout=5) as w2:
                commit(w2, 1)
    finally:
        s.stop()


def test_a_session_expiry_that_raises_reaches_the_caller_and_stops_the_server(monkeypatch):
    """The test controls that fire timers (expire_session, advance_clock) raise the timer's failure."""
    from tenure.coordinator.classic.members import MemberRequests
    from tests.support.groupwire import join, sync
    s = ServerThread(ServerConfig(port=0, initial_rebalance_delay_ms=0)).start()
    try:
        with WireClient.to(s.bootstrap) as w:
            r = join(w, "tf-g", "", "i1", "tf-t", session_ms=10000)
            assert r.error_code == 0
            assert sync(w, "tf-g", r.member_id, r.generation_id, "i1", {r.member_id: b""}).error_code == 0
        monkeypatch.setattr(MemberRequests, "session_expired", _boom)
        with pytest.raises(Injected):
            s.expire_session("tf-g", "i1")
        assert isinstance(s.server.fatal_error, Injected)
    finally:
        s.stop()
