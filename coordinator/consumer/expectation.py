"""`expect_group` for a KIP-848 consumer group: a test says the group starts with N members, and the first target
assignment is computed once, for all N, so no member is given partitions it must then give up.

Without an expectation, members subscribing together arrive one by one: each arrival bumps the group epoch and
the target assignment is computed again, so the members that came first are given partitions, then must revoke
some of them at their next heartbeat before the others get them. With an expectation of N, a new group holds its
target assignment while fewer than N members are there: its first member's epoch (1) gets an empty target
assignment, and every member that joins before the N-th is reconciled toward it - member epoch 1, no partitions,
a legal answer (Kafka 4.3 answers a member joining within `group.consumer.assignment.interval.ms` of the last
assignment the same way: the epoch of the current target assignment, and nothing it does not hold). The group
epoch still goes up once per member joining, and the members that wait are told to heartbeat every 100 ms at most
(the interval is the coordinator's to choose in every answer). When the N-th member joins, the assignor runs once
at the group epoch then, and every member takes its final partitions at its next heartbeat, with nothing to
revoke; from then on the group's own interval applies.

A member beyond the expectation joins as in any group (one epoch bump, and the others revoke what it gets). Too
few members: the hold ends when the initial rebalance delay (`initial_rebalance_delay_ms`, the classic group's,
as Kafka 4.3's streams groups hold their first assignment for `group.streams.initial.rebalance.delay.ms`) has run
from the last member's join (armed at the first, re-armed at each arrival, as a classic group's initial delay is):
the target is then computed for the members there (one group epoch bump if no member joined since the empty
target), and the log says so. A delay of 0 holds nothing. The hold is soft state
as the expectation is (never written): the empty target assignment at epoch 1 is Kafka's own records; a
coordinator that loads the group with the expectation still set arms the delay again.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from tenure.protocol.consumer_group_records import TargetAssignmentMemberRecord, TargetAssignmentMetadataRecord

from ..result import Result
from ..timers import ConsumerHoldKey
from .group import ConsumerGroup, ConsumerMember, Partitions, freeze

if TYPE_CHECKING:
    from .heartbeat import ConsumerGroups

HOLD_EPOCH = 1          # the epoch of the empty target assignment a held group's members are reconciled to
HOLD_INTERVAL_MS = 100  # the heartbeat interval a held group's members are told (at most): their shares come soon


class Expectation:
    """The consumer kind's part that holds a new group's first target assignment (module doc)."""

    def __init__(self, groups: ConsumerGroups) -> None:
        self.kind = groups

    def _delay(self) -> int:
        return self.kind.config.initial_rebalance_delay_ms

    @staticmethod
    def holding(g: ConsumerGroup) -> bool:
        """The group still reconciles its members toward the empty target of its first epoch."""
        return g.assignment_epoch == HOLD_EPOCH and not any(g.targets.values())

    def hold(self, res: Result, g: ConsumerGroup, members: dict[str, ConsumerMember], group_epoch: int,
             now_ms: int) -> int | None:
        """During a heartbeat that made `members` the group's members at `group_epoch`: the target assignment
        epoch to reconcile toward while the group waits for its expected members, or None (compute as usual)."""
        n = self.kind.expected_members(g.group_id)
        if n is None or len(members) >= n or self._delay() <= 0:
            return None
        if g.group_epoch == 0 and g.assignment_epoch == 0:           # a new group: an empty target, held
            res.emit(TargetAssignmentMetadataRecord(g.group_id, group_epoch))
            res.set_timer(ConsumerHoldKey(g.group_id), now_ms + self._delay())
            res.notes.append((g.group_id, f"expecting {n} member(s): the target assignment waits for them (at most "
                                          f"the initial rebalance delay, {self._delay()} ms)"))
            return group_epoch
        if not self.holding(g):
            return None
        if len(members) > len(g.members):            # one more member: the delay runs again from its join
            res.set_timer(ConsumerHoldKey(g.group_id), now_ms + self._delay())
        return g.assignment_epoch

    @staticmethod
    def interval(interval_ms: int) -> int:
        """The heartbeat interval told to a member of a held group: the group's, at most HOLD_INTERVAL_MS."""
        return min(interval_ms, HOLD_INTERVAL_MS)

    def computed(self, res: Result, g: ConsumerGroup, members: dict[str, ConsumerMember]) -> None:
        """The target assignment was just computed for `members`: if the group was holding it, the hold ends."""
        if self.kind.expected_members(g.group_id) is None or not self.holding(g):
            return                  # (a withdrawn expectation's timer finds nothing held when it fires)
        res.cancel_timer(ConsumerHoldKey(g.group_id))
        res.notes.append((g.group_id, f"the {len(members)} expected member(s) joined: the target assignment is "
                                      f"computed once for all of them"))

    def expired(self, g: ConsumerGroup, now_ms: int) -> Result:
        """The delay ran out with fewer members than expected: the target assignment for those there."""
        res = Result()
        if not self.holding(g):
            return res
        n = self.kind.expected_members(g.group_id)
        epoch = g.group_epoch
        if epoch == g.assignment_epoch:          # nobody joined since the empty target: one bump to carry the new one
            epoch += 1
            for r in self.kind.epoch_records(g, epoch, g.subscribed_topics()):
                res.emit(r)
            res.rebalances.append((g.group_id, "consumer expected members did not all join"))
        targets: dict[str, Partitions] = self.kind.assign(g.members, dict(g.targets), g.regexes)
        for mid in sorted(targets):
            if targets[mid]:
                res.emit(TargetAssignmentMemberRecord(g.group_id, mid, freeze(targets[mid])))
        res.emit(TargetAssignmentMetadataRecord(g.group_id, epoch))
        expected = f"expected {n} member(s)" if n is not None else "the expectation was withdrawn"
        res.notes.append((g.group_id, f"{expected}, {len(g.members)} joined within the initial rebalance delay "
                                      f"({self._delay()} ms): the target assignment is computed for them"))
        return res

    def loaded(self, res: Result, g: ConsumerGroup, now_ms: int) -> None:
        """After a load: a group still holding its target waits the delay again, if the expectation is set."""
        if self.holding(g) and self.kind.expected_members(g.group_id) is not None and self._delay() > 0:
            res.set_timer(ConsumerHoldKey(g.group_id), now_ms + self._delay())
