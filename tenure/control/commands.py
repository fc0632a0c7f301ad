"""The `tenure groups|fault|broker|coordinator|network|requests ...` subcommands: one per `Cli` of the table of controls
(tenure/control/registry.py), each a call to a running server's HTTP admin endpoint
(tenure/control/http_server.py) through tenure/control/http_client.py. tenure/tools/cli.py adds them to
its parser (`add_parser`) and runs the one parsed (`run`)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse

from tenure.config import ADMIN_TOKEN_ENV, DEFAULT_ADMIN_PORT
from tenure.control.http_client import request
from tenure.control.registry import CONTROLS, Arg, Cli, Control

TOKEN_ENV = ADMIN_TOKEN_ENV                  # `tenure serve` and `tenure groups/fault`: the bearer token
DEFAULT_ADDRESS = f"127.0.0.1:{DEFAULT_ADMIN_PORT}"
ADDRESS_ENV = "TENURE_ADMIN"                 # `tenure groups/fault`: the endpoint's H:P


def _address(text: str) -> str:
    """H:P from H:P or a URL (http://H:P/), as the server's log prints it."""
    text = text.strip()
    if "//" in text:
        text = urllib.parse.urlsplit(text).netloc
    return text.rstrip("/")


HELP = {"groups": "inspect groups or force a rebalance through a server's admin endpoint",
        "fault": "inject faults into a running server through its admin endpoint",
        "broker": "list, stop, start or slow the brokers of a cluster (--brokers N) through its admin endpoint",
        "coordinator": "move a group's coordinator to another broker through the admin endpoint",
        "network": "partition, slow, limit or reset the network between clients and brokers through the admin "
                   "endpoint",
        "requests": "the requests a server served (its request capture) through the admin endpoint",
        "users": "list, add or remove the SASL users of a running server through its admin endpoint",
        "acl": "list, add or remove ACLs (--authorizer) through the admin endpoint"}


def _cli_commands() -> dict[str, list[tuple[Cli, Control]]]:
    """{"groups": [...], "fault": [...]}: every subcommand of the registry's controls, in table order."""
    out: dict[str, list[tuple[Cli, Control]]] = {group: [] for group in HELP}
    for control in CONTROLS:
        for cli in control.cli:
            out[cli.group].append((cli, control))
    return out


def _cli_args(cli: Cli, control: Control) -> tuple[Arg, ...]:
    return cli.args if cli.args is not None else tuple(a for a in control.args if a.name not in cli.fixed)


def add_parser(sub) -> None:
    """`tenure groups ...` and `tenure fault ...`, one subcommand per registry entry's Cli."""
    common = argparse.ArgumentParser(add_help=False)    # accepted before or after the subcommand
    common.add_argument("--admin", default=argparse.SUPPRESS, metavar="H:P",
                        help=f"the server's admin endpoint (default ${ADDRESS_ENV}, else {DEFAULT_ADDRESS})")
    common.add_argument("--admin-token", default=argparse.SUPPRESS, metavar="TOKEN",
                        help=f"the endpoint's bearer token (default ${TOKEN_ENV})")
    for group, commands in _cli_commands().items():
        p = sub.add_parser(group, parents=[common], help=HELP[group])
        leaves = p.add_subparsers(dest=f"{group}_command", required=True)
        for cli, control in commands:
            x = leaves.add_parser(cli.command, parents=[common], help=cli.help)
            x.set_defaults(control=(cli, control))
            for a in _cli_args(cli, control):
                if a.option:
                    x.add_argument("--" + a.name.replace("_", "-"), dest=a.name, type=a.type, help=a.help or None)
                else:
                    x.add_argument(a.name, type=a.type, help=a.help or None,
                                   **({} if a.required else {"nargs": "?"}))
            if cli.extra is not None:
                cli.extra(x)


def _call(args, admin: str, token: str | None) -> tuple[int, object]:
    """The endpoint call of the subcommand parsed: its control's route, with the arguments given."""
    cli, control = args.control
    q = lambda text: urllib.parse.quote(text, safe="")  # noqa: E731
    given = {a.name: getattr(args, a.name) for a in _cli_args(cli, control)}
    path = control.path.format(**{a.name: q(given[a.name]) for a in control.args if a.where == "path"})
    query = {a.name: given[a.name] for a in control.args if a.where == "query" and given.get(a.name) is not None}
    if query:
        path += "?" + urllib.parse.urlencode(query)
    data = {**cli.fixed, **{a.name: given[a.name] for a in control.args
                            if a.where == "body" and given.get(a.name) is not None}}
    if cli.fill is not None:
        cli.fill(args, data)
    return request(admin, control.method, path, data or None, token)


def run(args) -> int:
    """`tenure groups ...` and `tenure fault ...`."""
    if getattr(args, "admin", None):
        admin, source = args.admin, ""
    elif os.environ.get(ADDRESS_ENV):
        admin, source = os.environ[ADDRESS_ENV], f" (from {ADDRESS_ENV})"
    else:
        admin, source = DEFAULT_ADDRESS, f" (the default; give --admin H:P or set {ADDRESS_ENV})"
    admin = _address(admin)
    token = getattr(args, "admin_token", None) or os.environ.get(TOKEN_ENV) or None
    try:
        status, body = _call(args, admin, token)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print(f"tenure: cannot reach the admin endpoint at {admin}{source}: {exc}", file=sys.stderr)
        return 1
    if status >= 300:
        err = body if isinstance(body, dict) else {}
        print(f"tenure: {err.get('error')} ({err.get('code')}): {err.get('message')}", file=sys.stderr)
        return 1
    cli, _ = args.control
    text = cli.show(body) if cli.show is not None else json.dumps(body, indent=2)
    if text:
        print(text)
    return 0
