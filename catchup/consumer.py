"""CatchUpConsumer: the KIP-333 catch-up mode over confluent-kafka's Consumer.

With `enable.parallel.rebalance` off (the default) it is a plain confluent_kafka.Consumer: every call goes
straight to one. With it on there are two librdkafka consumers:

- the main one, in the application's group, with its config (group.instance.id included): it serves
  fresh data. On an assignment after a crash (a commit behind the log end without the clean marker) it
  starts at the log end, not at the commit;
- the secondary one, in the companion group (`catchup.group.id`, default `<group.id>.catchup`), with a
  manual assignment: it replays the owed ranges [committed, end) of the partitions the main one owns,
  one token after another, and checkpoints its progress and the open tokens as that group's commit
  (offset + metadata, see ranges.py). It is created at the first assignment, kept afterwards (on standby
  when nothing is owed), and restarted from its checkpoint if it fails.

Both are driven from the caller's thread inside poll()/consume(); see docs/catchup.md.
"""
from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, Message, TopicPartition

from tenure.catchup import ranges as R
from tenure.catchup.commits import Commits

log = logging.getLogger("tenure.catchup")

OPTION = "enable.parallel.rebalance"
COMPANION = "catchup.group.id"
SLICE = 0.005                   # s: how long poll() blocks on one consumer while the other may have data
# Settings of the application's group membership that the secondary (a manual assignment in another
# group) must not carry.
_MEMBERSHIP_KEYS = {"group.id", "group.instance.id", "group.protocol", "group.remote.assignor",
                    "partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms",
                    "max.poll.interval.ms", "enable.auto.commit", "auto.commit.interval.ms",
                    "enable.auto.offset.store", "enable.partition.eof", "auto.offset.reset",
                    "on_commit", "client.id", "group.protocol.type"}


def _truthy(v) -> bool:
    if isinstance(v, bool):
        return v
    return str(v).strip().lower() in ("true", "1", "yes", "on")


def _timeout(t) -> float:
    return -1 if t is None else t


class CatchUpConsumer(Commits):
    """confluent_kafka.Consumer plus `enable.parallel.rebalance` (KIP-333). Methods as Consumer's;
    anything not listed here goes to the main consumer."""

    def __init__(self, config: dict):
        config = dict(config)
        self._on = _truthy(config.pop(OPTION, False))
        companion = config.pop(COMPANION, None)
        if not self._on:
            self._plain = Consumer(config)
            return
        group = config.get("group.id")
        if not group:
            raise ValueError(f"{OPTION}=true needs group.id: the catch-up state lives in the group's commits")
        self._companion = companion or f"{group}.catchup"
        self._instance = str(config.get("group.instance.id") or config.get("client.id") or "")
        self._auto_commit = _truthy(config.get("enable.auto.commit", True))
        self._auto_interval = int(config.get("auto.commit.interval.ms", 5000)) / 1000.0
        self._next_auto = time.monotonic() + self._auto_interval
        self._cooperative = "cooperative" in str(config.get("partition.assignment.strategy", ""))
        self._main = Consumer({**config, "enable.auto.commit": False})
        client = config.get("client.id", "rdkafka")
        self._sec_config = {**{k: v for k, v in config.items() if k not in _MEMBERSHIP_KEYS},
                            "group.id": self._companion, "client.id": f"{client}-catchup",
                            "enable.auto.commit": False, "enable.partition.eof": True,
                            "auto.offset.reset": "earliest"}
        self._sec: Consumer | None = None
        self._sec_started = False       # it has had a range to work on (the seed's "thread started")
        self._sec_assigned: set = set()
        self._sec_token: dict = {}      # tp -> (lo, hi) of the token the secondary is assigned on
        self._sec_topics: set = set()   # topics whose metadata the secondary has asked for
        self._held = False              # pause_secondary()
        self._paused: set = set()       # pause() by the application
        self._owned: set = set()        # the main consumer's assignment
        self._work: dict = {}           # tp -> [Token]: the secondary's delivery progress
        self._durable: dict = {}        # tp -> [Token]: as last checkpointed (or being checkpointed)
        self._last_hi: dict = {}        # tp -> hi of the last token seen (the checkpoint's offset when none is open)
        self._main_next: dict = {}      # tp -> 1 + last offset the main consumer delivered
        self._main_committed: dict = {} # tp -> the main group's offset as this instance last wrote it
        self._delivered_before: tuple = ({}, {})   # (main_next, work) as of the previous poll: auto-commit
        self._user_cbs: dict = {}
        self._toggle = False
        self._closing = False
        self._closed = False

    # ---- the plain mode ------------------------------------------------------------------------------

    def __getattr__(self, name):
        # Only reached for names this class does not define: the plain consumer, or the main one.
        target = self.__dict__.get("_plain") or self.__dict__.get("_main")
        if target is None:
            raise AttributeError(name)
        return getattr(target, name)

    # ---- membership: main consumer only --------------------------------------------------------------

    def subscribe(self, topics, on_assign=None, on_revoke=None, on_lost=None):
        if not self._on:
            kw = {k: v for k, v in (("on_assign", on_assign), ("on_revoke", on_revoke), ("on_lost", on_lost)) if v}
            return self._plain.subscribe(topics, **kw)
        self._user_cbs = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}
        return self._main.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                                    on_lost=self._on_lost)

    def unsubscribe(self):
        if not self._on:
            return self._plain.unsubscribe()
        return self._main.unsubscribe()       # the revocation callback gives the partitions up

    def assign(self, partitions):
        if not self._on:
            return self._plain.assign(partitions)
        self._give_up(list(self._owned), clean=True)
        self._main.assign(self._take(partitions))

    def unassign(self):
        if not self._on:
            return self._plain.unassign()
        self._give_up(list(self._owned), clean=True)
        return self._main.unassign()

    def position(self, partitions):
        return (self._plain if not self._on else self._main).position(partitions)

    def assignment(self):
        return (self._plain if not self._on else self._main).assignment()

    def child_consumer_is_alive(self) -> bool:
        """True once the secondary consumer has been started on a catch-up range, until close()."""
        return self._on and self._sec is not None and self._sec_started and not self._closed

    def pause_secondary(self) -> None:
        """Hold the catch-up back (fresh data keeps flowing): e.g. at peak load, or in a test showing
        that fresh records do not wait for the catch-up."""
        if self._on:
            self._held = True
            if self._sec is not None and self._sec_assigned:
                self._sec.pause(self._tps(self._sec_assigned))

    def resume_secondary(self) -> None:
        if self._on:
            self._held = False
            active = self._sec_assigned - self._paused
            if self._sec is not None and active:
                self._sec.resume(self._tps(active))

    # ---- the rebalance callbacks of the main consumer ------------------------------------------------

    def _on_assign(self, consumer, partitions):
        if self._closed or self._closing:       # an assignment still queued when close() began
            return
        taken = self._take(partitions)
        (self._main.incremental_assign if self._cooperative else self._main.assign)(taken)
        if self._user_cbs.get("assign"):
            self._user_cbs["assign"](self, taken)

    def _on_revoke(self, consumer, partitions):
        if self._closed:
            return
        if not self._closing:
            if self._auto_commit:
                self._commit_delivered(self._delivered_before, {(p.topic, p.partition) for p in partitions})
            self._give_up([(p.topic, p.partition) for p in partitions], clean=True)
        if self._cooperative:
            self._main.incremental_unassign(partitions)
        if self._user_cbs.get("revoke"):
            self._user_cbs["revoke"](self, partitions)

    def _on_lost(self, consumer, partitions):
        if self._closed:
            return
        # Lost (session expired, fenced): no commit would be accepted and none is owed; the next owner
        # sees the commit without the clean marker and catches up.
        self._give_up([(p.topic, p.partition) for p in partitions], clean=False)
        cb = self._user_cbs.get("lost") or self._user_cbs.get("revoke")
        if cb:
            cb(self, partitions)

    # ---- taking and giving up partitions --------------------------------------------------------------

    @staticmethod
    def _tps(keys, offsets: dict | None = None):
        return [TopicPartition(t, p, offsets[(t, p)]) if offsets else TopicPartition(t, p) for t, p in sorted(keys)]

    def _secondary(self) -> Consumer:
        if self._sec is None:
            self._sec = Consumer(self._sec_config)
            self._sec_assigned, self._sec_token, self._sec_topics = set(), {}, set()
        return self._sec

    def _take(self, partitions) -> list[TopicPartition]:
        """Decide where the main consumer starts on each newly assigned partition and what the secondary
        owes there: read both commit logs and the log end; after a crash, open a token [committed, end),
        checkpoint it, then move the main group's commit to the end."""
        keys = [(p.topic, p.partition) for p in partitions]
        explicit = {(p.topic, p.partition): p.offset for p in partitions if p.offset >= 0}
        if not keys:
            return []
        main_c = {(c.topic, c.partition): c for c in self._main.committed(self._tps(keys), timeout=30)}
        sec_c = {(c.topic, c.partition): c for c in self._secondary().committed(self._tps(keys), timeout=30)}
        start, checkpoint, main_commit = {}, [], []
        for tp in keys:
            tokens = R.decode(sec_c[tp].metadata) or []
            if tokens:
                self._last_hi[tp] = max(t.hi for t in tokens)
            c = main_c[tp]
            committed = c.offset if c.offset >= 0 else None
            if tp in explicit:
                start[tp] = explicit[tp]
            elif committed is not None and R.is_crash_marker(c.metadata):
                _, end = self._main.get_watermark_offsets(TopicPartition(*tp), timeout=30, cached=False)
                if committed < end:
                    tokens = R.add(tokens, committed, end)
                    self._last_hi[tp] = max(self._last_hi.get(tp, end), end)
                    checkpoint.append(tp)
                    log.info("catch-up: %s[%d] crash range %d-%d, main consumer starts at %d",
                             tp[0], tp[1], committed, end, end)
                    committed = end
                start[tp] = committed
            else:
                start[tp] = committed if committed is not None else OFFSET_INVALID
            if committed is not None and tp not in explicit:
                main_commit.append(TopicPartition(tp[0], tp[1], committed, metadata=R.marker(R.RUNNING, self._instance)))
                self._main_committed[tp] = committed
            self._durable[tp] = tokens
            self._work[tp] = R.copy(tokens)
            self._owned.add(tp)
        # The token is durable before the main group's commit moves past it: a crash in between reopens
        # the same range next time (duplicates, never a gap).
        if checkpoint:
            try:
                self._checkpoint(checkpoint, asynchronous=False)
            except KafkaException as e:     # the token is not durable: resume at the commit, as a plain consumer
                log.warning("catch-up: range checkpoint failed (%s): resuming at the commit instead", e)
                for tp in checkpoint:
                    start[tp] = self._main_committed[tp] = main_c[tp].offset
                    self._durable[tp] = R.decode(sec_c[tp].metadata) or []
                    self._work[tp] = R.copy(self._durable[tp])
                main_commit = [p for p in main_commit if (p.topic, p.partition) not in checkpoint]
        if main_commit:
            try:
                self._main.commit(offsets=main_commit, asynchronous=False)
            except KafkaException as e:     # e.g. the generation is already gone: the next owner sees the old commit
                log.warning("catch-up: main group commit at assignment failed (%s)", e)
        self._sync_secondary()
        return [TopicPartition(t, p, start[(t, p)]) for t, p in keys]

    def _give_up(self, keys, clean: bool) -> None:
        if clean:
            marks = [TopicPartition(t, p, self._main_committed[(t, p)], metadata=R.marker(R.CLEAN, self._instance))
                     for t, p in keys if (t, p) in self._main_committed]
            if marks:
                try:
                    self._main.commit(offsets=marks, asynchronous=False)
                except KafkaException as e:   # e.g. fenced: then the next owner catches up, as after a crash
                    log.warning("catch-up: clean-shutdown marker not written (%s)", e)
        for tp in keys:
            self._owned.discard(tp)
            for d in (self._work, self._durable, self._main_next, self._main_committed, self._last_hi):
                d.pop(tp, None)
        self._sync_secondary()

    def _sync_secondary(self) -> None:
        """Assign the secondary exactly the owned partitions that owe something, at their first owed
        offset (a partition whose token changed is reassigned there)."""
        want = {tp: self._work[tp][0] for tp in self._owned if self._work.get(tp)}
        if self._sec is None and not want:
            return
        sec = self._secondary()
        drop = [tp for tp in self._sec_assigned
                if tp not in want or self._sec_token.get(tp) != (want[tp].lo, want[tp].hi)]
        if drop:
            sec.incremental_unassign(self._tps(drop))
            self._sec_assigned.difference_update(drop)
        add = {tp: tok.next for tp, tok in want.items() if tp not in self._sec_assigned}
        if add:
            # A manually assigned topic librdkafka has no metadata for waits for its next 1 s metadata
            # tick before the first fetch: ask for it now.
            for topic in sorted({t for t, _ in add} - self._sec_topics):
                sec.list_topics(topic, timeout=10)
                self._sec_topics.add(topic)
            sec.incremental_assign(self._tps(add, add))
            self._sec_assigned.update(add)
            self._sec_started = True
            hold = [tp for tp in add if self._held or tp in self._paused]
            if hold:
                sec.pause(self._tps(hold))
        self._sec_token = {tp: (want[tp].lo, want[tp].hi) for tp in self._sec_assigned}

    # ---- poll -----------------------------------------------------------------------------------------

    def poll(self, timeout=None):
        if not self._on:
            return self._plain.poll(_timeout(timeout))
        self._maybe_auto_commit()
        t = _timeout(timeout)
        deadline = None if t < 0 else time.monotonic() + t
        first_main = self._toggle
        self._toggle = not self._toggle
        while True:
            order = (self._from_main, self._from_secondary) if first_main else (self._from_secondary, self._from_main)
            for source in order:
                m = source(0)
                if m is not None:
                    return m
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            if self._sec_assigned and not self._held:
                # block a slice on one of the two, alternating: neither waits more than SLICE for the other
                wait_on = self._from_main if first_main else self._from_secondary
                first_main = not first_main
                m = wait_on(SLICE if left is None else min(SLICE, left))
            else:
                m = self._from_main(-1 if left is None else left)
                if m is None and not self._sec_assigned:
                    return None
            if m is not None:
                return m

    def consume(self, num_messages=1, timeout=None):
        if not self._on:
            return self._plain.consume(num_messages, _timeout(timeout))
        t = _timeout(timeout)
        deadline = None if t < 0 else time.monotonic() + t
        out: list[Message] = []
        while len(out) < num_messages:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            m = self.poll(left)
            if m is None:
                break
            out.append(m)
        return out

    def _from_main(self, timeout):
        m = self._main.poll(timeout)
        if m is not None and m.error() is None:
            offset = m.offset()
            if offset is not None:      # a record has its offset
                self._main_next[(m.topic(), m.partition())] = offset + 1
        return m

    def _from_secondary(self, timeout):
        if self._sec is None or not self._sec_assigned:
            return None
        m = self._sec.poll(timeout)
        if m is None:
            return None
        tp = (m.topic(), m.partition())
        err, o = m.error(), m.offset()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                # read up to the log end (the event's offset): the token is done
                if tp in self._sec_assigned and self._work.get(tp) and o is not None:
                    self._advance(tp, o)
                return None
            if err.fatal():
                log.warning("catch-up: secondary consumer failed (%s): restarting from its checkpoint", err)
                self._restart_secondary()
                return None
            return m
        tokens = self._work.get(tp)
        if tp not in self._sec_assigned or not tokens or o is None:     # a record has its offset
            return None
        tok = tokens[0]
        if o < tok.next:            # fetched before a reassignment
            return None
        if o >= tok.hi:             # the main consumer's territory: this token is done
            self._advance(tp, o)
            return None
        tok.next = o + 1
        if tok.next >= tok.hi:
            self._advance(tp, tok.next)
        return m

    def _advance(self, tp, reached: int) -> None:
        tokens = self._work[tp]
        tokens[0].next = max(tokens[0].next, reached)
        if tokens[0].next >= tokens[0].hi:
            tokens.pop(0)
        self._sync_secondary()

    def _restart_secondary(self) -> None:
        """The secondary failed: drop it without committing and start a new one from its checkpoint."""
        if self._sec is not None:
            try:
                self._sec.close()
            except (KafkaException, RuntimeError):
                pass
        self._sec, self._sec_assigned, self._sec_token = None, set(), {}
        owned = sorted(self._owned)
        if owned:
            sec_c = self._secondary().committed(self._tps(owned), timeout=30)
            for c in sec_c:
                tp = (c.topic, c.partition)
                self._durable[tp] = R.decode(c.metadata) or []
                self._work[tp] = R.copy(self._durable[tp])
        self._sync_secondary()

    # ---- pause, resume, close: both ------------------------------------------------------------------

    def pause(self, partitions):
        if not self._on:
            return self._plain.pause(partitions)
        self._main.pause(partitions)
        keys = {(p.topic, p.partition) for p in partitions}
        self._paused |= keys
        if self._sec is not None and keys & self._sec_assigned:
            self._sec.pause(self._tps(keys & self._sec_assigned))

    def resume(self, partitions):
        if not self._on:
            return self._plain.resume(partitions)
        self._main.resume(partitions)
        keys = {(p.topic, p.partition) for p in partitions}
        self._paused -= keys
        if self._sec is not None and not self._held and keys & self._sec_assigned:
            self._sec.resume(self._tps(keys & self._sec_assigned))

    def close(self):
        if not self._on:
            return self._plain.close()
        if self._closed:
            return None
        self._closing = True
        try:
            if self._auto_commit:
                try:
                    self._commit_delivered((self._main_next, self._work), None, asynchronous=False)
                except KafkaException as e:
                    log.warning("catch-up: final commit failed (%s)", e)
            self._give_up(list(self._owned), clean=True)
            # An assignment still queued for the application would be served inside librdkafka's close,
            # which can then wait forever (seen with confluent-kafka 2.16 for a static member): serve it
            # here, ignored. A record this returns was never delivered, so never committed: not lost.
            self._main.poll(0)
            self._main.close()
        finally:
            self._closed = True
            if self._sec is not None:
                self._sec.close()
        return None

    def _abandon(self):
        """Stop as a crash would (tests): from now on nothing is committed, no clean marker written, no
        callback run; the group keeps the member until its session expires or its instance id comes
        back. The two librdkafka handles are released on a thread of their own (a close can wait for a
        JoinGroup parked at the coordinator), which is returned."""
        self._closed = True
        handles = [c for c in (self._main, self._sec) if c is not None]

        def release() -> None:
            self._main.poll(0)                                   # see close()
            for c in handles:
                c.close()
        t = threading.Thread(target=release, name="catchup-abandoned", daemon=True)
        t.start()
        return t
