"""The KIP-345 draft's options with no shipped wire equivalent (opt-in, CoordinatorConfig): the
registration timeout (offline static members are kept until the earliest has been gone this long, then
one rebalance removes all of them) and the expansion timeout (new static members joining a Stable group
within the window share one rebalance; the window is opened in JoinRequests._add_and_rebalance)."""
from __future__ import annotations

from tenure.protocol import records as rec
from tenure.protocol.errors import ErrorCode as E

from ..result import Result
from ..timers import RegistrationKey
from .group import STABLE, ClassicGroup
from .rebalance import Rebalance


class DraftOptions(Rebalance):
    def _registration_timeout(self) -> int:
        """The registration timeout, asked for only where it is on (members go offline only then)."""
        timeout = self.config.static_registration_timeout_ms
        assert timeout is not None, "the registration timeout is off"
        return timeout

    def _arm_registration(self, res: Result, g: ClassicGroup) -> None:
        if g.offline_since:
            earliest = min(g.offline_since.values())
            res.set_timer(RegistrationKey(g.group_id), earliest + self._registration_timeout())
        else:
            res.cancel_timer(RegistrationKey(g.group_id))

    def _registration_expired(self, gid: str, now_ms: int) -> Result:
        res = Result()
        live = self.classic_group(gid)
        if live is None or not live.offline_since:
            return res
        g = live.copy()
        if min(g.offline_since.values()) + self._registration_timeout() > now_ms:
            self._arm_registration(res, g)
            return res
        for mid in sorted(g.offline_since):              # ONE rebalance removes all offline now
            self._remove_member(res, g, mid, E.UNKNOWN_MEMBER_ID, rec.REGISTRATION_EXPIRED, now_ms)
        self._rebalance_or_complete(res, g, now_ms, "registration_expired")
        res.install(g.group_id, g)
        return res

    def _expansion_expired(self, gid: str, now_ms: int) -> Result:
        res = Result()
        live = self.classic_group(gid)
        if live is None:
            return res
        g = live.copy()
        g.expansion_deadline = None                      # the window is over (and its timer fired)
        if g.state != STABLE:
            if live.expansion_deadline is not None:
                res.install(g.group_id, g)
            return res
        self._prepare_rebalance(res, g, now_ms, "expansion_timeout")
        res.install(g.group_id, g)
        return res
