"""CreateAcls, DescribeAcls and DeleteAcls, answered from the authorizer's table (security/authorizer.py) as
Kafka's AclApis answers them: with no authorizer (no --authorizer) SECURITY_DISABLED (54); a binding Kafka
refuses (a filter value for a binding, an empty name, a CLUSTER not named kafka-cluster, a principal without
"Type:") INVALID_REQUEST (42) with Kafka's message, the others created; a request holding a code Kafka does not
know (or UNKNOWN) closes the connection, as Kafka fails to parse it. The cluster permissions these need (ALTER,
DESCRIBE) are checked before (security/access.py)."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.errors import ErrorCode, MalformedRequest

from .acls import LITERAL, AclBinding, AclFilter
from .authorizer import Authorizer

log = logging.getLogger("tenure.security")

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
NO_AUTHORIZER = "No Authorizer is configured on the broker"
TOO_MUCH = ("this DeleteAcls' filters together look at or match too many ACLs; nothing was "
            "deleted for this filter")


def _filter(item: Any, version: int, names: tuple[str, ...]) -> AclFilter:
    rtype, name, pattern, principal, host, op, perm = (getattr(item, n) for n in names)
    f = AclFilter(rtype, name, pattern if version >= 1 else LITERAL, principal, host, op, perm)
    if f.unknown():
        raise MalformedRequest(f"an ACL filter with an unknown code: {f}")
    return f


_DESCRIBE_FIELDS = ("resource_type_filter", "resource_name_filter", "pattern_type_filter", "principal_filter",
                    "host_filter", "operation", "permission_type")


class AclApis:
    """The three handlers over `authorizer` (None: --authorizer is off)."""

    def __init__(self, authorizer: Authorizer | None) -> None:
        self.authorizer = authorizer

    def handlers(self) -> dict[int, Callable[[Request, RequestContext], Any]]:
        return {DESCRIBE_ACLS: self.describe_acls, CREATE_ACLS: self.create_acls, DELETE_ACLS: self.delete_acls}

    async def describe_acls(self, req: Request, ctx: RequestContext) -> Any:
        R = SUPPORTED[DESCRIBE_ACLS].response
        flt = _filter(req.body, req.api_version, _DESCRIBE_FIELDS)
        if self.authorizer is None:
            return R(throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER,
                     resources=[])
        Res = R.fields["resources"].data_class
        D = Res.fields["acls"].data_class
        by_resource: dict[tuple[int, str, int], list] = {}
        for b in self.authorizer.bindings(flt):
            by_resource.setdefault((b.resource_type, b.name, b.pattern_type), []).append(
                D(principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission))
        return R(throttle_time_ms=0, error_code=0, error_message=None, resources=[
            Res(resource_type=t, resource_name=n, pattern_type=p, acls=entries)
            for (t, n, p), entries in by_resource.items()])

    async def create_acls(self, req: Request, ctx: RequestContext) -> Any:
        R = SUPPORTED[CREATE_ACLS].response
        C = R.fields["results"].data_class
        bindings = []
        for c in req.body.creations:
            b = AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                           c.operation, c.permission_type)
            if AclFilter(*(getattr(b, f) for f in ("resource_type", "name", "pattern_type", "principal", "host",
                                                   "operation", "permission"))).unknown():
                raise MalformedRequest(f"an ACL binding with an unknown code: {b}")
            bindings.append(b)
        if self.authorizer is None:
            return R(throttle_time_ms=0, results=[
                C(error_code=ErrorCode.SECURITY_DISABLED, error_message="No Authorizer is configured.")
                for _ in bindings])
        try:
            results = self.authorizer.create(bindings)
        except OSError as exc:
            log.error("CreateAcls: cannot keep the ACLs in the data dir: %s", exc)
            return R(throttle_time_ms=0, results=[
                C(error_code=ErrorCode.KAFKA_STORAGE_ERROR, error_message=f"cannot keep the ACLs: {exc}")
                for _ in bindings])
        for b, why in zip(bindings, results, strict=True):
            if why is None:
                log.info("ACL created by %s: %s", ctx.principal, b.text())
        return R(throttle_time_ms=0, results=[
            C(error_code=0, error_message=None) if why is None else
            C(error_code=ErrorCode.INVALID_REQUEST, error_message=why) for why in results])

    async def delete_acls(self, req: Request, ctx: RequestContext) -> Any:
        R = SUPPORTED[DELETE_ACLS].response
        F = R.fields["filter_results"].data_class
        M = F.fields["matching_acls"].data_class
        filters = [_filter(f, req.api_version, _DESCRIBE_FIELDS) for f in req.body.filters]
        if self.authorizer is None:
            return R(throttle_time_ms=0, filter_results=[
                F(error_code=ErrorCode.SECURITY_DISABLED, error_message="No Authorizer is configured.",
                  matching_acls=[]) for _ in filters])
        try:
            removed = self.authorizer.delete(filters)
        except OSError as exc:
            log.error("DeleteAcls: cannot keep the ACLs in the data dir: %s", exc)
            return R(throttle_time_ms=0, filter_results=[
                F(error_code=ErrorCode.KAFKA_STORAGE_ERROR, error_message=f"cannot keep the ACLs: {exc}",
                  matching_acls=[]) for _ in filters])
        for b in {b for matched in removed if matched is not None for b in matched}:
            log.info("ACL deleted by %s: %s", ctx.principal, b.text())
        return R(throttle_time_ms=0, filter_results=[
            F(error_code=ErrorCode.POLICY_VIOLATION, error_message=TOO_MUCH, matching_acls=[]) if matched is None
            else F(error_code=0, error_message=None, matching_acls=[
                M(error_code=0, error_message=None, resource_type=b.resource_type, resource_name=b.name,
                  pattern_type=b.pattern_type, principal=b.principal, host=b.host, operation=b.operation,
                  permission_type=b.permission) for b in matched]) for matched in removed])
