"""The authorizer: Kafka's StandardAuthorizer rules over the ACLs tenure keeps (security/acls.py).

`authorize(principal, host, operation, resource_type, name)`:
- a super user (`--super-user`) may do anything;
- else the bindings that apply to the resource are those of its type whose pattern covers its name (the
  literal name, the literal "*", every PREFIXED prefix of it) and whose principal is the request's or
  "User:*" and whose host is the client's address or "*";
- a DENY binding for the operation (or ALL) refuses, whatever allows it (deny wins); an ALLOW binding for the
  operation (or ALL) allows; an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and one of
  ALTER_CONFIGS also allows DESCRIBE_CONFIGS (implied operations; a DENY implies nothing);
- no binding of any principal on the resource at all: allowed only with `--allow-everyone-if-no-acl`
  (Kafka's allow.everyone.if.no.acl.found); bindings on it, none allowing: refused.

`authorize_any` is Kafka's authorizeByResourceType (an idempotent producer may write to some topic).
CreateAcls, DescribeAcls and DeleteAcls, the admin endpoint and the flags change and read the same table, kept
in the data dir's acls.json across a restart (in memory without a data dir).
"""
from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from tenure.protocol.acl import ALL, ALTER, ALTER_CONFIGS, DELETE, DESCRIBE, DESCRIBE_CONFIGS, READ, SUPPORTED, WRITE

from . import acls
from .acls import ALLOW, DENY, LITERAL, MATCH, MAX_ACLS, PREFIXED, WILDCARD, WILDCARD_PRINCIPAL, AclBinding, AclFilter

log = logging.getLogger("tenure.security")

IMPLIES_DESCRIBE = frozenset({DESCRIBE, READ, WRITE, DELETE, ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({DESCRIBE_CONFIGS, ALTER_CONFIGS})
MAX_WORK = 2_000_000         # bindings one DeleteAcls may look at (its filters together)
MAX_LISTED = 200_000         # bindings one DeleteAcls may list as deleted (its filters together)


def principal_name(name: str) -> str:
    """A principal as ACLs name it: "User:alice"; a bare "alice" is User:alice."""
    return name if ":" in name else f"User:{name}"


def _result(b: AclBinding, principals: tuple[str, str], host: str, operation: int) -> int | None:
    """ALLOW or DENY if the binding decides the action (its resource already known to match), else None."""
    if b.principal not in principals or (b.host != WILDCARD and b.host != host):
        return None
    if b.operation != ALL:
        if b.permission == ALLOW:
            if operation == DESCRIBE:
                if b.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation == DESCRIBE_CONFIGS:
                if b.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != b.operation:
                return None
        elif operation != b.operation:
            return None
    return b.permission


class Authorizer:
    """The ACL table and its rules. `data_dir`: where acls.json is kept (None: in memory)."""

    def __init__(self, *, super_users: Iterable[str] = (), allow_if_no_acl: bool = False,
                 data_dir: Path | None = None, initial: Iterable[AclBinding] = ()) -> None:
        self.super_users = frozenset(principal_name(u) for u in super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.data_dir = data_dir
        self._acls: set[AclBinding] = set(acls.load(data_dir) if data_dir is not None else ())
        # by resource type: literal name -> bindings, prefix -> bindings
        self._literal: dict[int, dict[str, list[AclBinding]]] = defaultdict(lambda: defaultdict(list))
        self._prefixed: dict[int, dict[str, list[AclBinding]]] = defaultdict(lambda: defaultdict(list))
        self._by_name: dict[str, list[AclBinding]] = defaultdict(list)
        self._prefix_lengths: dict[int, set[int]] = defaultdict(set)     # by resource type
        self._index()
        fresh = [b for b in initial if b not in self._acls]
        if fresh:
            self._change(add=fresh)

    # ---------------------------------------------------------------- the rules
    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        principals = (principal, WILDCARD_PRINCIPAL)
        found = allowed = False
        literal, prefixed = self._literal.get(resource_type), self._prefixed.get(resource_type)
        candidates: list[list[AclBinding]] = []
        if literal:
            candidates += [literal.get(name, []), literal.get(WILDCARD, [])] if name != WILDCARD \
                else [literal.get(name, [])]
        if prefixed:     # only the lengths some prefix has: a long name costs no more than the table's prefixes
            candidates += [prefixed[name[:n]] for n in self._prefix_lengths[resource_type]
                           if n <= len(name) and name[:n] in prefixed]
        for group in candidates:
            for b in group:
                found = True
                result = _result(b, principals, host, operation)
                if result == DENY:
                    return False
                allowed = allowed or result == ALLOW
        if allowed:
            return True
        return not found and self.allow_if_no_acl

    def authorize_any(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Kafka's Authorizer.authorizeByResourceType: allowed on some resource of the type - a super user, an
        action allowed on a name no binding names, a wildcard ALLOW, or an ALLOW no DENY of the same literal
        name or of a prefix of it covers."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allows: list[AclBinding] = []
        for b in self._acls:
            if b.resource_type != resource_type or (b.host != WILDCARD and b.host != host):
                continue
            if b.principal not in (principal, WILDCARD_PRINCIPAL) or b.operation not in (operation, ALL):
                continue
            if b.permission == DENY:
                if b.pattern_type == LITERAL and b.name == WILDCARD:
                    return False
                (deny_literal if b.pattern_type == LITERAL else deny_prefixed).add(b.name)
            elif b.pattern_type == LITERAL and b.name == WILDCARD:
                return True
            else:
                allows.append(b)
        for b in allows:
            if b.pattern_type == LITERAL and b.name in deny_literal:
                continue
            if not any(b.name[:i] in deny_prefixed for i in range(1, len(b.name) + 1)):
                return True
        return False

    def operations(self, principal: str, host: str, resource_type: int, name: str) -> frozenset[int]:
        """The operations the resource type supports that the principal may perform on it."""
        return frozenset(op for op in SUPPORTED[resource_type]
                         if self.authorize(principal, host, op, resource_type, name))

    # ---------------------------------------------------------------- the table
    def bindings(self, flt: AclFilter = acls.MATCH_ALL) -> list[AclBinding]:
        """The bindings the filter matches, sorted (resource type, name, pattern, principal, ...)."""
        return sorted(b for b in self._acls if flt.matches(b))

    def create(self, bindings: list[AclBinding]) -> list[str | None]:
        """Add bindings (an existing one is kept as it is); per binding: None, or why it is refused (AclError's
        message). Raises OSError if the data dir cannot keep them (nothing changed)."""
        out: list[str | None] = []
        fresh: dict[AclBinding, None] = {}          # ordered, and a set
        for b in bindings:
            try:
                acls.check_binding(b)
            except acls.AclError as exc:
                out.append(str(exc))
                continue
            if b not in self._acls and b not in fresh:
                if len(self._acls) + len(fresh) >= MAX_ACLS:
                    out.append(f"tenure keeps at most {MAX_ACLS} ACLs")
                    continue
                fresh[b] = None
            out.append(None)
        if fresh:
            self._change(add=fresh)
        return out

    def delete(self, filters: list[AclFilter]) -> list[list[AclBinding] | None]:
        """Remove what each filter matches; per filter the bindings it removed (a binding two filters match is
        listed under both, as Kafka lists it), or None for a filter past the request's work bound (MAX_WORK
        bindings looked at, MAX_LISTED listed: nothing removed for it). Raises OSError if the data dir cannot
        keep it (nothing changed)."""
        out: list[list[AclBinding] | None] = []
        seen: dict[AclFilter, list[AclBinding]] = {}
        work = listed = 0
        for f in filters:
            if f not in seen:
                candidates = self._candidates(f)
                work += len(candidates)
                if work > MAX_WORK:
                    out.append(None)
                    continue
                seen[f] = sorted(b for b in candidates if f.matches(b))
            listed += len(seen[f])
            out.append(seen[f] if listed <= MAX_LISTED else None)
        gone = {b for matched in out if matched is not None for b in matched}
        if gone:
            self._change(remove=gone)
        return out

    def _candidates(self, f: AclFilter) -> list[AclBinding]:
        """The bindings a filter can match: by name where it names one (with MATCH: the name, "*" and its
        prefixes), else all."""
        if f.name is None:
            return list(self._acls)
        names = [f.name]
        if f.pattern_type == MATCH:          # the literal "*" and the prefixes the table has
            lengths = set().union(*self._prefix_lengths.values())
            names += [WILDCARD] + [f.name[:n] for n in lengths if n < len(f.name)]
        return [b for n in dict.fromkeys(names) for b in self._by_name.get(n, ())]

    def __len__(self) -> int:
        return len(self._acls)

    def _change(self, add: Iterable[AclBinding] = (), remove: Iterable[AclBinding] = ()) -> None:
        new = (self._acls | set(add)) - set(remove)
        if self.data_dir is not None:
            acls.save(self.data_dir, sorted(new))    # durable first: a failed write changes nothing
        self._acls = new
        self._index()

    def _index(self) -> None:
        self._literal.clear()
        self._prefixed.clear()
        self._prefix_lengths.clear()
        self._by_name = defaultdict(list)
        for b in self._acls:
            self._by_name[b.name].append(b)
            if b.pattern_type == PREFIXED:
                self._prefix_lengths[b.resource_type].add(len(b.name))
            table = self._literal if b.pattern_type == LITERAL else self._prefixed
            if b.pattern_type in (LITERAL, PREFIXED):
                table[b.resource_type][b.name].append(b)
