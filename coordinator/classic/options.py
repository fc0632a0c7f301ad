"""The KIP-345 draft's options with no shipped wire equivalent (opt-in, CoordinatorConfig): the
registration timeout (offline static members are kept until the earliest has been gone this long, then
one rebalance removes all of them) and the expansion timeout (new static members joining a Stable group
within the window share one rebalance; `expansion_window` opens it when JoinGroup adds such a member).

`DraftOptions` is one part of the classic group kind, over the rebalance machinery it is handed."""
from __future__ import annotations

from tenure.protocol import records as rec
from tenure.protocol.errors import ErrorCode as E

from ..result import Result
from ..timers import ExpansionKey, HeartbeatKey, RegistrationKey
from .group import STABLE, ClassicGroup, Member
from .rebalance import Rebalance


class DraftOptions:
    def __init__(self, rebalance: Rebalance) -> None:
        self.rebalance = rebalance

    def _registration_timeout(self) -> int:
        """The registration timeout, asked for only where it is on (members go offline only then)."""
        timeout = self.rebalance.config.static_registration_timeout_ms
        assert timeout is not None, "the registration timeout is off"
        return timeout

    def arm_registration(self, res: Result, g: ClassicGroup) -> None:
        """The registration timer of the earliest offline member (cancelled when none is offline)."""
        if g.offline_since:
            earliest = min(g.offline_since.values())
            res.set_timer(RegistrationKey(g.group_id), earliest + self._registration_timeout())
        else:
            res.cancel_timer(RegistrationKey(g.group_id))

    def expansion_window(self, res: Result, g: ClassicGroup, member: Member, now_ms: int) -> bool:
        """A member just added by JoinGroup: with the expansion timeout on, a new static member of a Stable
        group is parked for the window (opened by the first such member) instead of starting a rebalance.
        True if it was."""
        window = self.rebalance.config.static_expansion_timeout_ms
        if window is None or not member.is_static or g.state != STABLE:
            return False
        # expansion timeout: batch new static members into one rebalance, counted from the first
        deadline = g.expansion_deadline
        if deadline is None:
            deadline = g.expansion_deadline = now_ms + window
            res.set_timer(ExpansionKey(g.group_id), deadline)
        # a member parked for the window must outlive it
        res.set_timer(HeartbeatKey(g.group_id, member.member_id),
                      deadline + self.rebalance.config.new_member_join_timeout_ms)
        return True

    def registration_expired(self, gid: str, now_ms: int) -> Result:
        res = Result()
        rb = self.rebalance
        live = rb.group(gid)
        if live is None or not live.offline_since:
            return res
        g = live.copy()
        if min(g.offline_since.values()) + self._registration_timeout() > now_ms:
            self.arm_registration(res, g)
            return res
        for mid in sorted(g.offline_since):              # ONE rebalance removes all offline now
            rb.remove_member(res, g, mid, E.UNKNOWN_MEMBER_ID, rec.REGISTRATION_EXPIRED, now_ms)
        rb.rebalance_or_complete(res, g, now_ms, "registration_expired")
        res.install(g.group_id, g)
        return res

    def expansion_expired(self, gid: str, now_ms: int) -> Result:
        res = Result()
        live = self.rebalance.group(gid)
        if live is None:
            return res
        g = live.copy()
        g.expansion_deadline = None                      # the window is over (and its timer fired)
        if g.state != STABLE:
            if live.expansion_deadline is not None:
                res.install(g.group_id, g)
            return res
        self.rebalance.prepare_rebalance(res, g, now_ms, "expansion_timeout")
        res.install(g.group_id, g)
        return res
