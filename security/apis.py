"""The security APIs the broker answers (owner `broker` in protocol/apis.py): SaslHandshake and SaslAuthenticate
outside a SASL exchange (after authentication, or on a listener without SASL) answer ILLEGAL_SASL_STATE as
Kafka's KafkaApis does; DescribeUserScramCredentials and AlterUserScramCredentials read and change the user store
(AlterUserScramCredentials carries the salted password the client computed, never the password)."""
from __future__ import annotations

from typing import Any

from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.error_responses import sasl_authenticate_error, sasl_handshake_error
from tenure.protocol.errors import ErrorCode

from .users import MAX_ITERATIONS, SCRAM_MECHANISMS, ScramCredential, UserStore, mechanism_of_type

SASL_HANDSHAKE, SASL_AUTHENTICATE, DESCRIBE_SCRAM, ALTER_SCRAM = 17, 36, 50, 51


def handlers(users: UserStore) -> dict[int, Any]:
    """The security APIs' handlers by API key (merged into the broker's table by tenure/server/build.py)."""
    return {SASL_HANDSHAKE: sasl_handshake, SASL_AUTHENTICATE: sasl_authenticate,
            DESCRIBE_SCRAM: lambda req, ctx: describe_scram(req, ctx, users),
            ALTER_SCRAM: lambda req, ctx: alter_scram(req, ctx, users)}


async def sasl_handshake(req: Request, ctx: RequestContext) -> Any:
    return sasl_handshake_error(ErrorCode.ILLEGAL_SASL_STATE)


async def sasl_authenticate(req: Request, ctx: RequestContext) -> Any:
    return sasl_authenticate_error(ErrorCode.ILLEGAL_SASL_STATE,
                                   "SaslAuthenticate request received after successful authentication")


async def describe_scram(req: Request, ctx: RequestContext, users: UserStore) -> Any:
    R = req.spec.response
    Result = R.fields["results"].data_class
    Info = Result.fields["credential_infos"].data_class
    known = users.describe()
    asked = [u.name for u in req.body.users] if req.body.users is not None else list(known)
    results = []
    for name in dict.fromkeys(asked):
        if asked.count(name) > 1:
            results.append(Result(user=name, error_code=ErrorCode.DUPLICATE_RESOURCE, credential_infos=[],
                                  error_message=f"Cannot describe SCRAM credentials for the same user twice in a "
                                                f"single request: {name}"))
        elif name not in known:
            results.append(Result(user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND, credential_infos=[],
                                  error_message=f"Attempt to describe a user credential that does not exist: {name}"))
        else:
            results.append(Result(user=name, error_code=0, error_message=None, credential_infos=[
                Info(mechanism=SCRAM_MECHANISMS[m][0], iterations=i) for m, i in known[name]]))
    return R(throttle_time_ms=0, error_code=0, error_message=None, results=results)


def _check(name: str, type_id: int, iterations: int | None) -> tuple[int, str | None]:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    mechanism = mechanism_of_type(type_id)
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if iterations is not None and iterations < SCRAM_MECHANISMS[mechanism][2]:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if iterations is not None and iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return 0, None


async def alter_scram(req: Request, ctx: RequestContext, users: UserStore) -> Any:
    """Every alteration of a user is checked first; a user with any refused alteration gets that error and none of
    its alterations is applied (Kafka's per-user answer)."""
    R = req.spec.response
    Result = R.fields["results"].data_class
    body = req.body
    per_user: dict[str, list[tuple[str, int, Any]]] = {}
    for d in body.deletions or []:
        per_user.setdefault(d.name, []).append(("delete", d.mechanism, d))
    for u in body.upsertions or []:
        per_user.setdefault(u.name, []).append(("upsert", u.mechanism, u))
    results = []
    for name, changes in per_user.items():
        code, message = 0, None
        mechanisms = [m for _, m, _ in changes]
        if len(set(mechanisms)) != len(mechanisms):
            code, message = ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
        for kind, type_id, item in changes:
            if code:
                break
            code, message = _check(name, type_id, item.iterations if kind == "upsert" else None)
            mechanism = mechanism_of_type(type_id)
            if not code and kind == "delete" and users.credential(name, mechanism or "") is None:
                code, message = ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
            if not code and kind == "upsert" and (not item.salt or not item.salted_password):
                code, message = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
        if not code:
            for kind, type_id, item in changes:
                mechanism = mechanism_of_type(type_id)
                assert mechanism is not None
                if kind == "delete":
                    users.remove(name, mechanism)
                else:
                    users.upsert(name, mechanism, ScramCredential.from_salted_password(
                        mechanism, bytes(item.salt), item.iterations, bytes(item.salted_password)))
        results.append(Result(user=name, error_code=code, error_message=message))
    return R(throttle_time_ms=0, results=results)
