"""What `__share_group_state` says after a Java kafka-clients 4.3 KafkaShareConsumer releases, rejects and
accepts records (explicit mode): each record's last state batch in the log, in log order, is how it ended - as
Kafka's share partition writes it: an accepted record ACKNOWLEDGED, a rejected one ARCHIVED, the poison record
released at the delivery limit ARCHIVED, each with its delivery count - not only the start offset moving past."""
from __future__ import annotations

import time

from tenure.coordinator.loader import iter_batches
from tenure.protocol import share_state_records
from tenure.storage.reader import batch_records
from tests.integration.test_share_groups import done, produce, setup, wait_for
from tests.integration.test_share_groups_java import jvms, server  # noqa: F401 (fixtures)

ACKNOWLEDGED, ARCHIVED = 2, 4


def last_shown(st, group: str, topic: str) -> dict[int, tuple[int, int]]:
    """Every record's (state, delivery count) in the last state batch of __share_group_state naming it."""
    def read() -> list:
        runtime = st.server.parts.share_state.runtime
        tid = st.server.topics.get(topic).topic_id
        plog = runtime.offsets_topic.partitions[runtime.partition_of_key((group, tid, 0))]
        return [share_state_records.decode(r.key, r.value) for h, raw in iter_batches(plog)
                for r in batch_records(h, raw)]
    out: dict[int, tuple[int, int]] = {}
    for rec in st.call(read):
        if rec.group_id == group and not rec.tombstone:
            for first, last, state, count in rec.batches:
                for off in range(first, last + 1):
                    out[off] = (state, count)
    return out


def test_java_consumers_acceptance_rejection_and_poison_record_are_written_as_they_ended(server, jvms):  # noqa: F811
    st, topic, group = server, "jw", "jw-g"
    setup(st, topic, group)
    produce(st, topic, ["again", "bad", "poison", "fine"])
    m = jvms(st, group, topic, "x", ack="accept", release_until=3, reject_offsets=1, release_offsets=2)
    try:
        wait_for(lambda: done(st, group, topic, 4), timeout=90, what="every record done")
    except AssertionError:
        raise AssertionError(m.dump()) from None
    time.sleep(0.5)
    m.close()
    assert not m.errors()
    assert last_shown(st, group, topic) == {0: (ACKNOWLEDGED, 3), 1: (ARCHIVED, 3), 2: (ARCHIVED, 5),
                                            3: (ACKNOWLEDGED, 3)}
