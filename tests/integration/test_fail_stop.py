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
