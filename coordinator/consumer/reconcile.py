"""Reconciliation of one member towards its target assignment (Kafka's CurrentAssignmentBuilder).

keep = current & target; revoke = current - target; add = target - current, minus partitions another
member still owns (assigned or pending revocation). A member that still reports owning a partition to
revoke stays at its epoch in UNREVOKED_PARTITIONS holding only `keep`; once it no longer owns them it
moves to the target epoch, as STABLE, or as UNRELEASED_PARTITIONS while some of its target is still held
elsewhere (it gets them on a later heartbeat, once released). One partition is never given to two members.
"""
from __future__ import annotations

from collections.abc import Callable

from .group import (
    STABLE_MEMBER,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    ConsumerMember,
    Partitions,
    from_pairs,
    pairs,
)


def reconcile(m: ConsumerMember, target: Partitions, target_epoch: int, owned: set | None,
              owned_elsewhere: Callable[[tuple], bool]) -> ConsumerMember:
    """The member after this heartbeat. `owned`: the partitions the member reports owning ((topic id,
    partition) pairs), None when the heartbeat did not say (then it is taken to still own everything)."""
    def owns_any(ps: set) -> bool:
        return owned is None or bool(ps & owned)

    if m.state == STABLE_MEMBER and m.member_epoch == target_epoch:
        return m
    if m.state == UNREVOKED_PARTITIONS and owns_any(pairs(m.pending_revocation)):
        return m
    cur, tgt = pairs(m.assigned), pairs(target)
    keep, revoke = cur & tgt, cur - tgt
    want = tgt - cur
    add = {tp for tp in want if not owned_elsewhere(tp)}
    if revoke and owns_any(revoke):
        return m.replace(state=UNREVOKED_PARTITIONS, previous_member_epoch=m.member_epoch,
                         assigned=from_pairs(keep), pending_revocation=from_pairs(revoke))
    return m.replace(state=UNRELEASED_PARTITIONS if add != want else STABLE_MEMBER,
                     previous_member_epoch=m.member_epoch, member_epoch=target_epoch,
                     assigned=from_pairs(keep | add), pending_revocation={})
