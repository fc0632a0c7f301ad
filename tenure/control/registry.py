"""The controls of a running server, each written once: its name, its arguments (with types), what it
does, and the function that runs it on the server's loop. From this one table come

- the `ServerThread` methods (`server.expire_session("g", "i-1")`, run on the server's loop),
- the HTTP admin endpoint's routes (tenure/control/http_server.py: path parameters, JSON fields, query
  parameters, errors as {"error", "code", "message"}),
- the `tenure groups ...` / `tenure fault ...` subcommands (tenure/control/commands.py, which call those routes).

A new control is one `Control(...)` in CONTROLS below (see docs/README.md, "where a change goes").

A control's `run(server, **args)` returns what the ServerThread method returns; `respond` turns that
into the endpoint's JSON (default: the same value). Refusals: `AdminError` (coordinator/config.py, imported
from tenure.coordinator; 404 for an unknown group or member, 409 otherwise), `TooManyRules` (409),
`ValueError` (400). `check` runs before `run` on the endpoint only: where the method answers False, the
endpoint answers 404.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tenure.protocol.errors import AdminError, ErrorCode


@dataclass(frozen=True)
class Arg:
    name: str                         # the keyword of run(), the JSON field / path or query parameter, the CLI's
    type: type = str                  # str or int (JSON numbers are checked by run; the CLI converts)
    help: str = ""
    where: str = "body"               # "path" | "body" | "query"
    required: bool = True
    example: str = ""                 # shown when a required body field is missing


@dataclass(frozen=True)
class Cli:
    """One subcommand calling a control: `tenure GROUP COMMAND ARGS`. `fixed` adds JSON fields of its own
    (e.g. the fault action); `args` (default: the control's, minus the fixed ones) become positionals,
    the optional ones `nargs="?"`; `extra(parser)` adds options and `fill(args, body)` reads them."""
    group: str                        # "groups" | "fault" | "broker" | "coordinator"
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
        return (404 if exc.code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNKNOWN_MEMBER_ID) else 409), exc.code
    if isinstance(exc, TooManyRules):
        return 409, ErrorCode.POLICY_VIOLATION
    return 400, ErrorCode.INVALID_REQUEST


# ---------------------------------------------------------------------- the controls
def _groups(server) -> list:
    from tenure.control.views import groups_view
    return groups_view(server)


def _group_lines(groups: list[dict]) -> str:
    lines = []
    for g in groups:
        static = sum(1 for m in g["members"] if m["group_instance_id"] is not None)
        lines.append(f"{g['group_id']}\t{g['state']}\tgeneration {g['generation']}\t"
                     f"{len(g['members'])} member(s), {static} static\trebalances {g['rebalances']}")
    return "\n".join(lines)


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
    delay_ms = _int("delay_ms", delay_ms)
    if delay_ms < 0:
        raise ValueError("delay_ms: 0 (off) or more")
    server.cluster.brokers[_broker(server, broker)].slow_ms = delay_ms


def _set_unreachable(server, broker, unreachable) -> None:
    if not isinstance(unreachable, bool):
        raise ValueError(f"unreachable: want true or false, not {unreachable!r}")
    server.cluster.brokers[_broker(server, broker)].unreachable = unreachable


def _to(parser) -> None:
    parser.add_argument("--to", type=int, metavar="ID", help="the broker to coordinate the group (required: the "
                                                           "endpoint refuses a move naming none)")


_API = Arg("api", help="API name (JoinGroup, OffsetCommit, ...) or key, or '*' for every API")
_GROUP = Arg("group", where="path")
_ONCE, _UNTIL_CLEARED = _counted(False), _counted(True)     # a rule's --count default: 1, or until cleared

CONTROLS: tuple[Control, ...] = (
    Control("groups", "every group: state, generation, members, assignments, offsets, rebalances",
            "GET", "/groups", _groups, respond=lambda server, views: [v.to_dict() for v in views],
            cli=(Cli("groups", "list", "one line per group: id, state, generation, members", show=_group_lines),)),
    Control("group", "one group (404 if unknown)", "GET", "/groups/{group}", _group, (_GROUP,),
            respond=lambda server, view, group: _known_group(server, group).to_dict() if view is None
            else view.to_dict(),
            cli=(Cli("groups", "describe", "one group as JSON"),)),
    Control("force_rebalance", "one rebalance of a static group now (KIP-345 draft forceStaticRebalance)",
            "POST", "/groups/{group}/force-rebalance", _force_rebalance, (_GROUP,), respond=_rebalancing,
            cli=(Cli("groups", "force-rebalance", "start one rebalance of a static group now "
                     "(KIP-345 draft forceStaticRebalance)"),)),
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
