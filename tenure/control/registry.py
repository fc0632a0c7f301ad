"""The controls of a running server, each written once: its name, its arguments (with types), what it
does, and the function that runs it on the server's loop. From this one table come

- the `ServerThread` methods (`server.expire_session("g", "i-1")`, run on the server's loop),
- the HTTP admin endpoint's routes (tenure/control/http_server.py: path parameters, JSON fields, query
  parameters, errors as {"error", "code", "message"}),
- the `tenure groups ...` / `tenure fault ...` subcommands (tenure/control/commands.py, which call those routes).

A new control is one `Control(...)` in CONTROLS below (see docs/README.md, "where a change goes").

A control's `run(server, **args)` returns what the ServerThread method returns; `respond` turns that
into the endpoint's JSON (default: the same value). Refusals: `AdminError` (coordinator/config.py, imported
from tenure.coordinator; 404 for an unknown group, member or user, 409 otherwise), `TooManyRules` (409),
`ValueError` (400). `check` runs before `run` on the endpoint only: where the method answers False, the
endpoint answers 404.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tenure.control.faults import MAX_DELAY_MS
from tenure.deferred import deferred
from tenure.protocol.errors import AdminError, ErrorCode

if TYPE_CHECKING:
    from tenure.security.acls import AclBinding

acls = deferred("tenure.security.acls")       # the ACLs' text form: at the first ACL a control names


@dataclass(frozen=True)
class Arg:
    name: str                         # the keyword of run(), the JSON field / path or query parameter, the CLI's
    type: type = str                  # str or int (JSON numbers are checked by run; the CLI converts)
    help: str = ""
    where: str = "body"               # "path" | "body" | "query"
    required: bool = True
    example: str = ""                 # shown when a required body field is missing
    option: bool = False              # the CLI offers it as --name (default: a positional)


@dataclass(frozen=True)
class Cli:
    """One subcommand calling a control: `tenure GROUP COMMAND ARGS`. `fixed` adds JSON fields of its own
    (e.g. the fault action); `args` (default: the control's, minus the fixed ones) become positionals,
    the optional ones `nargs="?"`; `extra(parser)` adds options and `fill(args, body)` reads them."""
    group: str                        # "groups" | "fault" | "broker" | "coordinator" | "acl"
    command: str
    help: str
    fixed: dict = field(default_factory=dict)
    args: tuple[Arg, ...] | None = None
    extra: Callable | None = None
    fill: Callable | None = None
    show: Callable[[Any], str] | None = None      # the answer (JSON) as text (default: indented JSON)


@dataclass(frozen=True)
class Control:
    name: str                         # the ServerThread method
    summary: str                      # the endpoint index's description
    method: str                       # HTTP method ...
    path: str                         # ... and route (path parameters in braces)
    run: Callable[..., Any]           # run(server, **args), on the server's loop
    args: tuple[Arg, ...] = ()
    status: int = 200
    respond: Callable[..., Any] | None = None     # respond(server, result, **args) -> JSON value
    check: Callable[..., None] | None = None      # check(server, **args): the endpoint's 404s
    error_prefix: str = ""            # put before a ValueError's text (e.g. "ms: ")
    cli: tuple[Cli, ...] = ()
    thread: bool = True               # a ServerThread method (restart is the thread's own)

    def arg_names(self, where: str) -> tuple[str, ...]:
        return tuple(a.name for a in self.args if a.where == where)


def status_of(exc: Exception) -> tuple[int, int]:
    """(HTTP status, Kafka error code) of a control's refusal."""
    from tenure.control.faults import TooManyRules
    if isinstance(exc, AdminError):
        return (404 if exc.code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNKNOWN_MEMBER_ID,
                                    ErrorCode.RESOURCE_NOT_FOUND) else 409), exc.code
    if isinstance(exc, TooManyRules):
        return 409, ErrorCode.POLICY_VIOLATION
    return 400, ErrorCode.INVALID_REQUEST


# ---------------------------------------------------------------------- the controls
def _groups(server) -> list:
    from tenure.control.views import groups_view
    return groups_view(server)


def _group_lines(groups: list[dict]) -> str:
    """A table with a header row, columns aligned (as kafka-consumer-groups.sh prints its tables); nothing when
    there is no group (as its --list prints nothing)."""
    if not groups:
        return ""
    rows = [("GROUP", "KIND", "STATE", "GENERATION", "#MEMBERS", "#STATIC", "REBALANCES")]
    for g in groups:
        static = sum(1 for m in g["members"] if m["group_instance_id"] is not None)
        rows.append((g["group_id"], g["kind"], g["state"], str(g["generation"]), str(len(g["members"])),
                     str(static), str(g["rebalances"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _group(server, group: str):
    from tenure.control.views import group_view
    return group_view(server, group)


def _known_group(server, group: str):
    view = _group(server, group)
    if view is None:
        raise AdminError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group!r} is unknown")
    return view


def _force_rebalance(server, group: str) -> None:
    server.runtime.force_rebalance(group)


def _rebalancing(server, result, group: str) -> dict:
    view = _group(server, group)
    return {"group": group, "state": view.state, "generation": view.generation}


def _check_member(server, group: str, member: str) -> None:
    view = _known_group(server, group)
    if member not in view.static_members and not any(m.member_id == member for m in view.members):
        raise AdminError(ErrorCode.UNKNOWN_MEMBER_ID, f"group {group!r} has no member or instance {member!r}")


def _expect_group(server, group: str, members: int | None = None) -> None:
    server.runtime.expect_group(group, members)


def _expire_session(server, group: str, member: str) -> bool:
    return server.runtime.expire_session(group, member)


def _expired(server, expired: bool, group: str, member: str) -> dict:
    view = _group(server, group)
    return {"group": group, "member": member, "expired": expired,
            "generation": view.generation if view is not None else None}


def _advance_clock(server, ms: int) -> list[str]:
    return server.runtime.advance_clock(ms)


def _advanced(server, fired: list[str], ms: int) -> dict:
    return {"advanced_ms": ms, "offset_ms": server.runtime.clock_offset_ms, "fired": fired}


def _faults_list(server) -> list:
    return server.faults.rules()


def _faults_add(server, **spec):
    return server.faults.add(spec)


def _faults_clear(server, api: str | None = None) -> int:
    return server.faults.clear(api)


def _restart(server) -> None:
    server.restart_requested.set()      # the process's host (tenure serve, ServerThread) restarts it


def _count(text: str) -> int:
    import argparse

    from tenure.control.faults import MAX_COUNT
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"want a whole number of requests from 1 to {MAX_COUNT}, not {text!r} "
                                         "(--until-cleared keeps a rule until it is cleared)")
    return n


def _counted(until_cleared_default: bool):
    def extra(parser) -> None:
        how = parser.add_mutually_exclusive_group()
        how.add_argument("--count", type=_count, default=None,
                         help="apply to this many requests, then go (default "
                              f"{'every one until cleared' if until_cleared_default else '1'})")
        how.add_argument("--until-cleared", action="store_true",
                         help="stay until `tenure fault clear` (every matching request)")

    def fill(args, body: dict) -> None:
        if args.count is not None:
            body["count"] = args.count
        elif args.until_cleared or until_cleared_default:
            body["count"] = None
    return extra, fill


def _int(name: str, value) -> int:
    """A whole number from JSON or a path parameter ("2"); ValueError naming `name` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{name}: want a whole number, not {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}: want a whole number, not {value!r}") from None


def _brokers(server) -> list[dict]:
    return [b.to_dict() for b in server.cluster.brokers.values()]


def _kafka_version(server) -> dict:
    """The Kafka release the server presents (--kafka-version), its features and the API versions it serves."""
    served = server.served
    supported, finalized = served.release.announced_features()
    return {"kafka_version": served.name, "explicit": served.explicit,
            "transaction_version": served.release.transaction_version,
            "features": {"supported": {k: list(v) for k, v in supported.items()},
                         "finalized": {k: v[1] for k, v in finalized.items()}},
            "apis": {s.name: [s.min_version, s.max_version] for _, s in sorted(served.specs.items())}}


def _broker(server, broker) -> int:
    return server.cluster.known_broker(_int("broker", broker))


def _stop_broker(server, broker) -> object:
    return server.stop_broker(_broker(server, broker))


def _start_broker(server, broker) -> object:
    return server.start_broker(_broker(server, broker))


def _broker_state(server, _, broker, **kw) -> dict:
    return server.cluster.brokers[_int("broker", broker)].to_dict()


def _move_coordinator(server, group: str, broker) -> object:
    return server.move_coordinator(group, _broker(server, broker))


def _moved(server, partition: int, group: str, broker) -> dict:
    return {"group": group, "partition": partition, "broker": server.coordinator_of(group)}


def _move_leader(server, topic: str, partition, broker) -> object:
    return server.move_leader(topic, _int("partition", partition), _broker(server, broker))


def _leader(server, topic: str, partition) -> int:
    partition = _int("partition", partition)
    if server.topics.partition(topic, partition) is None:
        raise AdminError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic-partition {topic}-{partition}")
    return server.cluster.leader_of(topic, partition)


def _set_slow(server, broker, delay_ms) -> None:
    delay_ms = _int("delay_ms", delay_ms)              # bounded as a delay rule is (Kafka's int32 timeouts)
    if not 0 <= delay_ms <= MAX_DELAY_MS:
        raise ValueError(f"delay_ms: want a whole number of milliseconds from 0 (off) to {MAX_DELAY_MS}")
    server.cluster.brokers[_broker(server, broker)].slow_ms = delay_ms


def _set_unreachable(server, broker, unreachable) -> None:
    if not isinstance(unreachable, bool):
        raise ValueError(f"unreachable: want true or false, not {unreachable!r}")
    server.cluster.brokers[_broker(server, broker)].unreachable = unreachable


def _to(parser) -> None:
    parser.add_argument("--to", type=int, metavar="ID", help="the broker to coordinate the group (required: the "
                                                           "endpoint refuses a move naming none)")


def _authorizer(server):
    if server.authorizer is None:
        raise AdminError(ErrorCode.SECURITY_DISABLED, "no authorizer: start the server with --authorizer")
    return server.authorizer


def _acls_list(server) -> list[str]:
    return [b.text() for b in _authorizer(server).bindings()]


def _acl_of(acl) -> AclBinding:
    if not isinstance(acl, str):
        raise ValueError(f"want an ACL as text, not {acl!r}")
    return acls.parse_acl(acl)          # AclError is a ValueError: 400 with its message


def _acls_add(server, acl) -> str:
    binding = _acl_of(acl)
    [why] = _authorizer(server).create([binding])
    if why is not None:
        raise AdminError(ErrorCode.POLICY_VIOLATION, why)
    return binding.text()


def _acls_remove(server, acl) -> list[str]:
    """Remove the one binding the text names (its exact resource, principal, host, operation, permission)."""
    b = _acl_of(acl)
    f = acls.AclFilter(b.resource_type, b.name, b.pattern_type, b.principal, b.host, b.operation, b.permission)
    [gone] = _authorizer(server).delete([f])
    return [x.text() for x in gone or []]


_ACL = Arg("acl", help="'allow|deny PRINCIPAL OPERATION TYPE:[prefixed:]NAME [from HOST]' (one argument: quote it)",
           example='{"acl": "allow User:alice read topic:orders"}')
_API = Arg("api", help="API name (JoinGroup, OffsetCommit, ...) or key, or '*' for every API")
_GROUP = Arg("group", where="path")
_ONCE, _UNTIL_CLEARED = _counted(False), _counted(True)     # a rule's --count default: 1, or until cleared

CONTROLS: tuple[Control, ...] = (
    Control("groups", "every group: state, generation, members, assignments, offsets, rebalances",
            "GET", "/groups", _groups, respond=lambda server, views: [v.to_dict() for v in views],
            cli=(Cli("groups", "list", "a header row, then one row per group: id, kind, state, generation, members, rebalances", show=_group_lines),)),
    Control("group", "one group (404 if unknown)", "GET", "/groups/{group}", _group, (_GROUP,),
            respond=lambda server, view, group: _known_group(server, group).to_dict() if view is None
            else view.to_dict(),
            cli=(Cli("groups", "describe", "one group as JSON"),)),
    Control("force_rebalance", "one rebalance of a static group now (KIP-345 draft forceStaticRebalance)",
            "POST", "/groups/{group}/force-rebalance", _force_rebalance, (_GROUP,), respond=_rebalancing,
            cli=(Cli("groups", "force-rebalance", "start one rebalance of a static group now "
                     "(KIP-345 draft forceStaticRebalance)"),)),
    Control("expect_group", '{"members": N}: the group starts with N members - its first rebalance ends as soon '
            'as N have joined, with no initial delay; a consumer group\'s first target assignment is computed once, '
            'for all N ({"members": null}: forget it)', "POST",
            "/groups/{group}/expect", _expect_group,
            (_GROUP, Arg("members", int, "how many members the test starts", required=False,
                         example='{"members": 4}')),
            respond=lambda server, _, group, members=None: {"group": group, "members": members},
            error_prefix="members: ",
            cli=(Cli("groups", "expect", "say how many members a group starts with: its first rebalance ends "
                     "as soon as they have joined"),)),
    Control("expire_session", "expire a member's session now (member id or group.instance.id)",
            "POST", "/groups/{group}/members/{member}/expire", _expire_session,
            (_GROUP, Arg("member", where="path", help="member id or group.instance.id")),
            respond=_expired, check=_check_member,
            cli=(Cli("fault", "expire", "expire a member's session now"),)),
    Control("faults_list", "the fault rules left", "GET", "/faults", _faults_list,
            respond=lambda server, rules: [r.to_dict() for r in rules], thread=False,
            cli=(Cli("fault", "list", "the rules left"),)),
    Control("faults_add", 'add a rule: {"action": "fail"|"close"|"delay", "api": NAME|"*", "error": NAME|CODE '
            '(fail), "ms": N (delay), "count": N|null (null: until cleared)}', "POST", "/faults", _faults_add,
            tuple(Arg(name, required=False) for name in ("action", "api", "error", "ms", "count")),
            status=201, respond=lambda server, rule, **spec: rule.to_dict(), thread=False,
            cli=(Cli("fault", "fail", "answer the next COUNT requests of API with a Kafka error", {"action": "fail"},
                     (_API, Arg("error", help="Kafka error name (NOT_COORDINATOR) or code (16)")), *_ONCE),
                 Cli("fault", "close", "close the connection instead of answering the next COUNT requests",
                     {"action": "close"}, (Arg("api"),), *_ONCE),
                 Cli("fault", "delay", "add MS of latency to requests of API (every one until cleared, or COUNT)",
                     {"action": "delay"}, (Arg("api"), Arg("ms", int)), *_UNTIL_CLEARED))),
    Control("faults_clear", "remove every rule, or those of one API (?api=NAME)", "DELETE", "/faults",
            _faults_clear, (Arg("api", where="query", required=False),),
            respond=lambda server, removed, api=None: {"removed": removed}, thread=False,
            cli=(Cli("fault", "clear", "remove every rule, or those of one API"),)),
    Control("advance_clock", '{"ms": N}: move the coordinator\'s clock ahead; due timers fire now',
            "POST", "/clock/advance", _advance_clock, (Arg("ms", int, example='{"ms": 30000}'),),
            respond=_advanced, error_prefix="ms: ",
            cli=(Cli("fault", "advance-clock", "move the coordinator's clock ahead; due timers fire now"),)),
    Control("acls", "the ACLs (--authorizer), one text line each", "GET", "/acls", _acls_list,
            cli=(Cli("acl", "list", "the ACLs, one per line", show="\n".join),)),
    Control("add_acl", '{"acl": "allow User:alice read topic:orders"}: create an ACL (kept in the data dir)',
            "POST", "/acls", _acls_add, (_ACL,), status=201, respond=lambda server, text, acl: {"acl": text},
            cli=(Cli("acl", "add", "create an ACL"),)),
    Control("remove_acl", '{"acl": "..."}: remove the ACL the text names', "POST", "/acls/remove", _acls_remove,
            (_ACL,), respond=lambda server, removed, acl: {"removed": removed},
            cli=(Cli("acl", "remove", "remove the ACL the text names"),)),
    Control("restart", "restart on the same data dir and ports", "POST", "/restart", _restart, status=202,
            respond=lambda server, _: {"restarting": True, "port": server.port}, thread=False,
            cli=(Cli("fault", "restart", "restart the server on its data dir and ports"),)),
)

def _share_partition(server, group: str, topic: str, partition) -> dict | None:
    return server.broker.share_partition_view(group, topic, _int("partition", partition))


def _known_share_partition(server, group: str, topic: str, partition) -> None:
    if _share_partition(server, group, topic, partition) is None:
        raise AdminError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group!r} has no share partition {topic}-{partition}")


def _expire_share_locks(server, group: str) -> int:
    return server.broker.expire_share_locks(group)


CONTROLS += (
    Control("share_partition", "a share group's share partition: start and end offsets, every in-flight record "
            "(offset, state, delivery count, holder, lock deadline)", "GET",
            "/groups/{group}/share-partitions/{topic}/{partition}", _share_partition,
            (_GROUP, Arg("topic", where="path"), Arg("partition", where="path")), check=_known_share_partition,
            cli=(Cli("groups", "share-partition", "a share partition's in-flight records as JSON"),)),
    Control("expire_share_locks", "expire every acquisition lock of a share group now (its records are "
            "released, archived at the delivery limit)", "POST", "/groups/{group}/share-locks/expire",
            _expire_share_locks, (_GROUP,), respond=lambda server, held, group: {"group": group, "released": held},
            cli=(Cli("fault", "expire-share-locks", "expire a share group's acquisition locks now"),)),
)

_BROKER = Arg("broker", where="path", help="broker (node) id")
_TO = Arg("broker", int, "the broker id to move to", example='{"broker": 1}')
CONTROLS += (
    Control("brokers", "the cluster's brokers: id, host, port, rack, up, slow_ms, unreachable", "GET", "/brokers",
            _brokers, cli=(Cli("broker", "list", "the brokers (id, address, rack, up)"),)),
    Control("kafka_version", "the Kafka release presented (--kafka-version), its features and API versions",
            "GET", "/kafka-version", _kafka_version,
            cli=(Cli("broker", "kafka-version", "the Kafka release presented, its features and API versions"),)),
    Control("stop_broker", "stop a broker: its listener closes, its connections drop, its leaderships and "
            "coordinators move to another in-sync replica", "POST", "/brokers/{broker}/stop", _stop_broker,
            (_BROKER,), respond=_broker_state, cli=(Cli("broker", "stop", "stop a broker"),)),
    Control("start_broker", "start a stopped broker again on its port (it rejoins the ISRs)", "POST",
            "/brokers/{broker}/start", _start_broker, (_BROKER,), respond=_broker_state,
            cli=(Cli("broker", "start", "start a stopped broker again"),)),
    Control("set_broker_slow", '{"delay_ms": N}: each answer of a broker waits N ms more (0: off)', "POST",
            "/brokers/{broker}/slow", _set_slow, (_BROKER, Arg("delay_ms", int, example='{"delay_ms": 500}')),
            respond=_broker_state, cli=(Cli("broker", "slow", "delay each answer of a broker (0: off)"),)),
    Control("set_broker_unreachable", '{"unreachable": true|false}: a broker closes new connections at once',
            "POST", "/brokers/{broker}/unreachable", _set_unreachable,
            (_BROKER, Arg("unreachable", bool, example='{"unreachable": true}')), respond=_broker_state),
    Control("coordinator_of", "the broker coordinating a group now", "GET", "/coordinators/{group}",
            lambda server, group: server.coordinator_of(group), (_GROUP,),
            respond=lambda server, broker, group: {"group": group, "broker": broker,
                                                   "partition": server.runtime.partition_of(group)}),
    Control("move_coordinator", '{"broker": ID}: move a group\'s coordinator (its offsets partition) to a broker; '
            "answers once it is loaded there", "POST", "/coordinators/{group}/move", _move_coordinator,
            (_GROUP, _TO), respond=_moved,
            cli=(Cli("coordinator", "move", "move a group's coordinator to a broker", args=(_GROUP,), extra=_to,
                     fill=lambda args, body: body.update({} if args.to is None else {"broker": args.to})),)),
    Control("leader_of", "the broker leading a partition now", "GET", "/partitions/{topic}/{partition}/leader",
            _leader, (Arg("topic", where="path"), Arg("partition", where="path")),
            respond=lambda server, leader, topic, partition: {"topic": topic, "partition": int(partition),
                                                              "leader": leader}),
    Control("move_leader", '{"broker": ID}: move a partition\'s leadership to a broker (epoch bumps)', "POST",
            "/partitions/{topic}/{partition}/move", _move_leader,
            (Arg("topic", where="path"), Arg("partition", where="path"), _TO),
            respond=lambda server, _, topic, partition, broker: {
                "topic": topic, "partition": int(partition), "leader": server.cluster.leader_of(topic, int(partition))}),
)



def _requests(server, **filters) -> list:
    for name in ("broker", "connection", "since"):
        if filters.get(name) is not None:
            filters[name] = _int(name, filters[name])
    bodies = filters.pop("bodies", None)
    if bodies not in (None, "true", "false", True, False):
        raise ValueError(f"bodies: want true or false, not {bodies!r}")
    return [e.to_dict(bodies in ("true", True)) for e in server.capture.query(**filters)]


def _network_add(server, **spec):
    return server.network.add({k: v for k, v in spec.items() if v is not None or k == "count"})


def _network_heal(server, rule: str | None = None) -> int:
    return server.network.heal(None if rule is None else _int("rule", rule))


def _request_lines(rows: list[dict]) -> str:
    """One line per request, a header first; with their bodies (--bodies true): the JSON."""
    if any("request" in r for r in rows):
        return json.dumps(rows, indent=2)
    lines = ["seq\tapi\tversion\tclient id\tconnection\tbroker\terror\tms\tsummary"]
    for r in rows:
        lines.append(f"{r['seq']}\t{r['api']}\tv{r['version']}\t{r['client_id']}\t{r['connection']}\t{r['broker']}\t"
                     f"{r['error_name']}\t{r['duration_ms']:.1f}\t{json.dumps(r['summary'], sort_keys=True)}")
    return "\n".join(lines)


def _rule_lines(rules: list[dict]) -> str:
    return "\n".join(json.dumps(r, sort_keys=True) for r in rules)


def _where(parser, direction: bool = False) -> None:
    """--client-id / --port / --broker (and --direction) of a network fault."""
    parser.add_argument("--client-id", help="only the connections whose requests carry this client id")
    parser.add_argument("--port", type=int, help="only the connection from this source port")
    parser.add_argument("--broker", type=int, help="only the connections to this broker (node id)")
    if direction:
        parser.add_argument("--direction", choices=("in", "out", "both"), default=None,
                            help="requests (in), answers (out) or both (default both)")


def _where_fill(args, body: dict) -> None:
    for name in ("client_id", "port", "broker", "direction"):
        if getattr(args, name, None) is not None:
            body[name] = getattr(args, name)


def _reset_extra(parser) -> None:
    _where(parser, direction=True)
    parser.add_argument("--count", type=int, help="reset this many connections at most (default every one)")


def _reset_fill(args, body: dict) -> None:
    _where_fill(args, body)
    if args.count is not None:
        body["count"] = args.count


def _net(fault: str, help: str, args: tuple[Arg, ...] = (), direction: bool = True, extra=None, fill=None) -> Cli:
    return Cli("network", fault, help, {"fault": fault}, args, extra=extra or (lambda p: _where(p, direction)),
               fill=fill or _where_fill)


_FILTERS = tuple(Arg(name, where="query", required=False, option=True, help=help) for name, help in (
    ("api", "of this API (name or key)"), ("group", "naming this group"), ("client_id", "from this client id"),
    ("topic", "naming this topic"), ("broker", "to this broker (node id)"), ("connection", "on this connection id"),
    ("error", "answered with this error (name or code)"), ("since", "after this sequence number"),
    ("bodies", "true: with the decoded request and answer, as JSON")))
CONTROLS += (
    Control("requests", "the requests served, oldest first, with their answers (?api=NAME&group=G&client_id=C"
            "&topic=T&broker=B&connection=N&error=NAME&since=SEQ&bodies=true): API, version, client id, "
            "connection, broker, timing, error, a summary", "GET", "/requests", _requests, _FILTERS, thread=False,
            cli=(Cli("requests", "list", "the requests the server served (its capture), oldest first; "
                     "--bodies true: as JSON with the decoded request and answer", show=_request_lines),)),
    Control("requests_clear", "forget the requests captured so far", "DELETE", "/requests",
            lambda server: server.capture.clear(), respond=lambda server, removed: {"removed": removed},
            thread=False, cli=(Cli("requests", "clear", "forget the requests captured so far"),)),
    Control("network_rules", "the network fault rules", "GET", "/network",
            lambda server: server.network.rules(), respond=lambda server, rules: [r.to_dict() for r in rules],
            thread=False, cli=(Cli("network", "list", "the network fault rules, one JSON object a line",
                                   show=_rule_lines),)),
    Control("network_add", 'add a network fault: {"fault": "partition"|"loss"|"delay"|"bandwidth"|"reset", '
            '"client_id"?, "port"?, "broker"?, "direction": "in"|"out"|"both", "ms" (delay), "bytes_per_s" '
            '(bandwidth), "after_bytes", "count"? (reset)}', "POST", "/network", _network_add,
            tuple(Arg(name, required=False) for name in ("fault", "client_id", "port", "broker", "direction", "ms",
                                                         "bytes_per_s", "after_bytes", "count")),
            status=201, respond=lambda server, rule, **spec: rule.to_dict(), thread=False,
            cli=(_net("partition", "no bytes either way between the matched clients and brokers until healed",
                      direction=False),
                 Cli("network", "loss", "one-way loss: the matched requests (in) or answers (out) are dropped",
                     {"fault": "loss"}, (Arg("direction", help="in or out"),), extra=_where, fill=_where_fill),
                 _net("delay", "add MS of latency to each matched request and/or answer", (Arg("ms", int),)),
                 _net("bandwidth", "at most BYTES_PER_S bytes a second each way", (Arg("bytes_per_s", int),)),
                 _net("reset", "reset (RST) each matched connection once AFTER_BYTES bytes passed it",
                      (Arg("after_bytes", int),), extra=_reset_extra, fill=_reset_fill))),
    Control("network_heal", "heal the network: every rule, or one (?rule=ID)", "DELETE", "/network", _network_heal,
            (Arg("rule", where="query", required=False),),
            respond=lambda server, removed, rule=None: {"removed": removed}, thread=False,
            cli=(Cli("network", "heal", "remove every network fault rule, or the one RULE (its id)"),)),
)


def _user_lines(users: list[dict]) -> str:
    return "\n".join(f"{u['name']}\t" + ", ".join(f"{c['mechanism']} ({c['iterations']} iterations)"
                                                 for c in u["credentials"]) for u in users)


def _add_user(server, name: str, password: str) -> None:
    if not isinstance(name, str) or not name or not isinstance(password, str) or not password:
        raise ValueError("a user needs a name and a password")
    server.add_user(name, password)


def _remove_user(server, name: str) -> bool:
    if not server.remove_user(name):
        raise AdminError(ErrorCode.RESOURCE_NOT_FOUND, f"no user {name!r}")
    return True


CONTROLS += (
    Control("users", "the SASL users: name, SCRAM mechanisms and iterations (never a secret)", "GET", "/users",
            lambda server: server.list_users(), cli=(Cli("users", "list", "the SASL users", show=_user_lines),)),
    Control("add_user", '{"name": N, "password": P}: add a SASL user (or set its password): both SCRAM '
            "credentials, PLAIN checks against them", "POST", "/users", _add_user,
            (Arg("name", example='{"name": "alice", "password": "secret"}'),
             Arg("password", example='{"name": "alice", "password": "secret"}')),
            status=201, respond=lambda server, _, name, password: {"name": name},
            cli=(Cli("users", "add", "add a SASL user (or set its password)"),)),
    Control("remove_user", "remove a SASL user (404 if unknown)", "DELETE", "/users/{name}", _remove_user,
            (Arg("name", where="path"),), respond=lambda server, _, name: {"removed": name},
            cli=(Cli("users", "remove", "remove a SASL user"),)),
    Control("connections", "the open client connections: id, broker, listener, protocol, principal, address",
            "GET", "/connections", lambda server: server.connections()),
)

BY_NAME = {c.name: c for c in CONTROLS}


def thread_method(control: Control):
    """The ServerThread method of a control: its run(server, *args) on the server's loop."""
    def method(self, *args, **kwargs):
        return self.call(lambda: control.run(self.server, *args, **kwargs))     # awaited if a coroutine
    method.__name__ = control.name
    method.__doc__ = f"{control.summary[0].upper()}{control.summary[1:]} (on the server's loop; the admin " \
                     f"endpoint's {control.method} {control.path})."
    return method


def add_thread_methods(cls):
    """Class decorator: a method per control (those the class does not define itself)."""
    for control in CONTROLS:
        if control.thread and control.name not in vars(cls):
            setattr(cls, control.name, thread_method(control))
    return cls
