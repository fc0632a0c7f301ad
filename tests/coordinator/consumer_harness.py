"""The coordinator harness for KIP-848 consumer groups: a topic table, ConsumerGroupHeartbeat and
ConsumerGroupDescribe requests, and readers of what the group holds (by topic name)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from tenure.protocol.consumer_group import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest

from .harness import CONSUMER_DESCRIBE, CONSUMER_HEARTBEAT, Harness

REBALANCE_TIMEOUT = 300000
SESSION = 45000        # CoordinatorConfig's consumer_session_timeout_ms default


@dataclass
class FakeTopic:
    name: str
    topic_id: uuid.UUID
    partitions: list = field(default_factory=list)


class Topics:
    """A topic table: `get(name)`, `by_id(id)`, `all()`; ids are derived from names so runs are reproducible;
    its watchers (`watch`) are told of every change, as the broker's table tells them."""

    def __init__(self, **counts: int) -> None:
        self._by_name: dict[str, FakeTopic] = {}
        self._watchers: list = []
        for name, n in counts.items():
            self.create(name, n)

    def watch(self, watcher) -> None:
        self._watchers.append(watcher)

    def _changed(self, name: str) -> None:
        for w in self._watchers:
            w.topics_changed([name])

    def create(self, name: str, n: int) -> FakeTopic:
        t = FakeTopic(name, uuid.uuid5(uuid.NAMESPACE_OID, name), list(range(n)))
        self._by_name[name] = t
        self._changed(name)
        return t

    def delete(self, name: str) -> None:
        del self._by_name[name]
        self._changed(name)

    def all(self) -> list[FakeTopic]:
        return list(self._by_name.values())

    def add_partitions(self, name: str, total: int) -> None:
        t = self._by_name[name]
        t.partitions = list(range(total))
        self._changed(name)

    def get(self, name: str):
        return self._by_name.get(name)

    def by_id(self, topic_id):
        return next((t for t in self._by_name.values() if t.topic_id == topic_id), None)

    def tid(self, name: str) -> uuid.UUID:
        """The topic's id (derived from its name, so a deleted topic's is still known)."""
        return uuid.uuid5(uuid.NAMESPACE_OID, name)


class ConsumerHarness(Harness):
    def __init__(self, config=None, *, auto_check: bool = True, topics: Topics | None = None) -> None:
        super().__init__(config, auto_check=auto_check, topics=topics if topics is not None else Topics(t=6))

    def hb(self, member_id: str = "", epoch: int = 0, *, group_id: str = "g", instance_id: str | None = None,
           topics: list[str] | None = None, owned: dict[str, list[int]] | None = None,
           rebalance_timeout: int = -1, assignor: str | None = None, rack: str | None = None,
           regex: str | None = None, version: int = 1, client_id: str = "client") -> int:
        """A ConsumerGroupHeartbeat. On epoch 0 the first-request fields default as a client sends them
        (the rebalance timeout, owned = [], topics = ["t"] unless given)."""
        T = ConsumerGroupHeartbeatRequest.TopicPartitions
        if epoch == 0:
            rebalance_timeout = REBALANCE_TIMEOUT if rebalance_timeout == -1 else rebalance_timeout
            owned = {} if owned is None else owned
            topics = ["t"] if topics is None else topics
        body = ConsumerGroupHeartbeatRequest(
            group_id=group_id, member_id=member_id, member_epoch=epoch, instance_id=instance_id, rack_id=rack,
            rebalance_timeout_ms=rebalance_timeout, subscribed_topic_names=topics, subscribed_topic_regex=regex,
            server_assignor=assignor,
            topic_partitions=None if owned is None else [T(topic_id=self.topics.tid(n), partitions=ps)
                                                         for n, ps in owned.items()])
        return self.send(CONSUMER_HEARTBEAT, version, body, client_id=client_id)

    def describe_consumer(self, *group_ids: str, version: int = 1) -> int:
        return self.send(CONSUMER_DESCRIBE, version,
                         ConsumerGroupDescribeRequest(group_ids=list(group_ids), include_authorized_operations=False))

    # ---- readers
    def assignment_of(self, token: int) -> dict[str, list[int]] | None:
        """The Assignment of a heartbeat answer by topic name (None when the answer carries none)."""
        a = self.responses[token]["assignment"]
        if a is None:
            return None
        return {self.topics.by_id(t["topic_id"]).name: sorted(t["partitions"]) for t in a["topic_partitions"]}

    def owned(self, member_id: str, group_id: str = "g") -> dict[str, list[int]]:
        m = self.group[group_id].members[member_id]
        return {self.topics.by_id(tid).name: sorted(ps) for tid, ps in m.assigned.items()}

    def target(self, member_id: str, group_id: str = "g") -> dict[str, list[int]]:
        return {self.topics.by_id(tid).name: sorted(ps)
                for tid, ps in self.group[group_id].targets.get(member_id, {}).items()}

    def epoch(self, group_id: str = "g") -> int:
        return self.group[group_id].group_epoch

    def cjoin(self, member_id: str, instance_id: str | None = None, **kw) -> dict:
        """A member joins (epoch 0) and heartbeats until it is stable; its last answer."""
        t = self.hb(member_id, 0, instance_id=instance_id, **kw)
        r = self.responses[t]
        assert r["error_code"] == 0, r
        return r

    def settle(self, members: dict[str, str | None], rounds: int = 6) -> None:
        """Every member heartbeats with the partitions it owns, round after round, until no one changes."""
        for _ in range(rounds):
            changed = False
            for mid, iid in members.items():
                m = self.group["g"].members[mid]
                before = (m.member_epoch, m.state, m.assigned)
                t = self.hb(mid, m.member_epoch, instance_id=iid, owned=self.owned(mid))
                assert self.responses[t]["error_code"] == 0, self.responses[t]
                m = self.group["g"].members[mid]
                changed |= (m.member_epoch, m.state, m.assigned) != before
            if not changed:
                return
        raise AssertionError("the group did not settle")
