"""Where a `CatchUpConsumer`'s commits go (a base class of it): an offset inside an open catch-up token goes to
the secondary's checkpoint - the companion group's commit, its metadata the open tokens (ranges.py) -, any
other to the application's group, with the running marker; auto-commit, the commit of what was delivered,
and `committed` (what is processed) read both. The state is the consumer's (consumer.py, `__init__`)."""
from __future__ import annotations

import logging
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from tenure.catchup import ranges as R

log = logging.getLogger("tenure.catchup")


class Commits:
    """The commit side of `CatchUpConsumer` (see the module docstring)."""

    # the consumer's state these methods read and write (set by CatchUpConsumer.__init__)
    _on: bool
    _plain: Consumer
    _main: Consumer
    _instance: str
    _auto_commit: bool
    _auto_interval: float
    _next_auto: float
    _owned: set
    _work: dict
    _durable: dict
    _last_hi: dict
    _main_next: dict
    _main_committed: dict
    _delivered_before: tuple

    def _secondary(self) -> Consumer:
        raise NotImplementedError        # CatchUpConsumer's: the secondary consumer, created on first use

    def commit(self, message=None, offsets=None, asynchronous=True):
        """As Consumer.commit; offsets inside an open catch-up token go to the secondary's checkpoint,
        the rest to the application's group."""
        if not self._on:
            kw = {"asynchronous": asynchronous}
            if message is not None:
                kw["message"] = message
            if offsets is not None:
                kw["offsets"] = offsets
            return self._plain.commit(**kw)
        if message is not None:
            offsets = [TopicPartition(message.topic(), message.partition(), message.offset() + 1)]
        if offsets is None:
            return self._commit_delivered((self._main_next, self._work), None, asynchronous, must=True)
        main, sec = [], []
        for p in offsets:
            tp = (p.topic, p.partition)
            if R.owed_at(self._durable.get(tp, []), p.offset):
                self._durable[tp] = R.processed_below(self._durable[tp], p.offset)
                sec.append(tp)
            else:
                main.append(TopicPartition(p.topic, p.partition, p.offset, metadata=R.marker(R.RUNNING, self._instance)))
        return self._send(main, sec, asynchronous)

    def _commit_delivered(self, delivered, only, asynchronous=False, must=False):
        """Commit what was delivered (`delivered`: main_next and work as of some moment) on the owned
        partitions (or `only` those); `must`: nothing to commit is an error, as Consumer.commit()."""
        main_next, work = delivered
        main = [TopicPartition(t, p, n, metadata=R.marker(R.RUNNING, self._instance))
                for (t, p), n in main_next.items() if (t, p) in self._owned and (only is None or (t, p) in only)
                and n != self._main_committed.get((t, p))]
        sec = []
        for tp, tokens in work.items():
            if tp in self._owned and (only is None or tp in only) and tp in self._durable:
                done = R.copy(tokens)
                if [str(t) for t in done] != [str(t) for t in self._durable[tp]]:
                    self._durable[tp] = done
                    sec.append(tp)
        if not main and not sec:
            if must:
                raise KafkaException(KafkaError(KafkaError._NO_OFFSET))
            return None
        return self._send(main, sec, asynchronous)

    def _send(self, main, sec, asynchronous):
        done: list[TopicPartition] = []
        if sec:
            r = self._checkpoint(sec, asynchronous)
            done += r or []
        if main:
            r = self._main.commit(offsets=main, asynchronous=asynchronous)
            for p in main:
                self._main_committed[(p.topic, p.partition)] = p.offset
            done += r or []
        return None if asynchronous else done

    def _checkpoint(self, keys, asynchronous):
        offs = []
        for t, p in keys:
            tokens = self._durable.get((t, p), [])
            at = R.low(tokens)
            offs.append(TopicPartition(t, p, self._last_hi.get((t, p), 0) if at is None else at,
                                       metadata=R.encode(tokens, self._instance)))
        return self._secondary().commit(offsets=offs, asynchronous=asynchronous)

    def _maybe_auto_commit(self) -> None:
        if not self._auto_commit:
            return
        if time.monotonic() >= self._next_auto:
            self._next_auto = time.monotonic() + self._auto_interval
            try:
                self._commit_delivered(self._delivered_before, None, asynchronous=True)
            except KafkaException as e:
                log.warning("catch-up: auto-commit failed (%s)", e)
        # What the application has had back from poll() so far counts as processed at the next poll.
        self._delivered_before = (dict(self._main_next), {tp: R.copy(t) for tp, t in self._work.items()})

    def committed(self, partitions, timeout=None):
        """The offset below which everything is processed: the secondary's checkpoint while it owes an
        offset below the main group's commit, the main group's commit otherwise."""
        if not self._on:
            return self._plain.committed(partitions, **({} if timeout is None else {"timeout": timeout}))
        kw = {} if timeout is None else {"timeout": timeout}
        main = self._main.committed(partitions, **kw)
        sec = self._secondary().committed(partitions, **kw)
        out = []
        for m, s in zip(main, sec, strict=True):           # one each per partition asked
            owed = R.low(R.decode(s.metadata) or [])
            if owed is not None and (m.offset < 0 or owed < m.offset):
                out.append(TopicPartition(m.topic, m.partition, owed, metadata=s.metadata))
            else:
                out.append(m)
        return out
