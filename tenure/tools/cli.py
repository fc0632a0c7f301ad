"""Command line: `tenure serve ...`. `main(argv) -> int` so tests can run it in-process."""
from __future__ import annotations

from tenure import gcpause

# what `tenure serve` imports makes long-lived objects (modules, classes, kafka-python's schema classes): imported
# with automatic collection held off, as `import tenure.server` is (tenure/server/__init__.py, tenure/gcpause.py;
# ~40 young-generation collections otherwise, ~3-5 ms)
with gcpause.gc_paused():
    import argparse
    import asyncio
    import contextlib
    import json
    import logging
    import os
    import signal
    import sys

    from tenure.config import (
        ADMIN_TOKEN_ENV,
        DEFAULT_ADMIN_PORT,
        ServerConfig,
        add_serve_flags,
        check_settings,
        flag_settings,
    )
    from tenure.deferred import deferred
    from tenure.server import Server, StartupError, eventloop, raise_fd_limit, reopen

log = logging.getLogger("tenure")
# the data dir's errors `tenure serve` names (a server in memory never imports the data dir's modules; a server
# that raised one of them has)
datadir = deferred("tenure.storage.datadir")
recovery = deferred("tenure.storage.recovery")


def _parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser (the whole of it without `argv`). For a command line whose first word is `serve`
    only the serve command's part is built: it prints and parses as the whole parser does, since the top level has
    no option but -h, which is then not given; the other commands' parsers and their modules (the admin HTTP
    client, the log tool, the synthesizer) stay unbuilt and unimported."""
    only_serve = argv is not None and argv[:1] == ["serve"]
    p = argparse.ArgumentParser(prog="tenure", description="A Kafka-compatible test server built around "
                                "static group membership (KIP-345).")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the server until SIGINT/SIGTERM")
    add_serve_flags(s)                      # one flag per ServerConfig setting (tenure/config.py)
    s.add_argument("--no-admin", action="store_true", help="no admin endpoint (as --admin-port -1; default: on, see --admin-port)")
    s.add_argument("--ready-file", default=None, metavar="PATH",
                   help='when ready, write {"bootstrap": "H:P", "admin": "H:P" or null, "pid": N, "listeners": '
                        '{"NAME": "H:P,..."}, "ca_file": PATH or null} here (as JSON, before the ready line; removed '
                        "at exit; default: none)")
    s.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR: the least level of the lines "
                   "logged to stderr (default INFO)")
    s.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="stderr log lines as text (default) or as one JSON object per line (time, level, "
                        "logger, message and any extra fields)")
    if only_serve:
        # the top level's own errors (an argument serve leaves over) show the whole parser's usage
        p.error = lambda message: _parser().error(message)  # type: ignore[method-assign]
        return p
    a = sub.add_parser("apis", help="print the served API/version table (Markdown), generated from the code")
    a.add_argument("--update", metavar="FILE", default=None,
                   help="rewrite the table between the generated-table markers of FILE (e.g. docs/apis.md), "
                        "keeping the rest of the file")
    d = sub.add_parser("demo", help="static membership in a minute: consumers restart with no rebalance, the "
                       "server restarts with nothing lost, the audit reports (kafka-python consumers)")
    d.add_argument("--members", type=int, default=3, help="static consumers (default 3)")
    d.add_argument("--partitions", type=int, default=6, help="partitions of the demo topic (default 6)")
    d.add_argument("--dir", default=None, help="where the data dir and the audit report go (default: a new "
                   "temporary dir)")
    d.add_argument("--no-audit", dest="audit", action="store_false", help="skip the Spark audit")
    d.add_argument("--log-level", default="WARNING", help="the server's log level on stderr (default WARNING)")
    from tenure.control import commands
    from tenure.tools import logtool
    logtool.add_parser(sub)
    commands.add_parser(sub)
    _audit_parser(sub)
    return p


def _audit_parser(sub) -> None:
    a = sub.add_parser("audit", help="Spark job: the static members' history from a data dir's "
                       "__consumer_offsets (needs the `audit` extra; see docs/audit.md)")
    a.add_argument("dir", help="the server's --data-dir (read only; safe while a server appends); with "
                   "--instance also an audit's --out")
    a.add_argument("--out", default=None, help="directory for the Parquet tables and report.html (required "
                   "unless --instance)")
    a.add_argument("--instance", default=None, metavar="G/I",
                   help="query: which member id held instance id I of group G at --at, since when and why "
                        "(exit 1 if none did)")
    a.add_argument("--at", default=None, help="with --instance: the time (ms since the epoch or ISO 8601)")
    a.add_argument("--format", choices=("text", "json"), default="text", help="with --instance: the answer's form")
    a.add_argument("--master", default="local[*]", help="Spark master (default local[*], embedded)")
    a.add_argument("--group", default=None, help="only this group")
    a.add_argument("--since", default=None, help="keep rows at or after this time (ms since the epoch or ISO 8601)")
    a.add_argument("--until", default=None, help="keep rows before this time (ms since the epoch or ISO 8601)")
    a.add_argument("--storm-k", type=int, default=5, help="a rebalance storm is more than K rebalances ...")
    a.add_argument("--storm-window", type=int, default=60000, help="... within this many ms (default 60000)")
    a.add_argument("--expiry-n", type=int, default=2, help="flag instances expiring at least N times (default 2)")
    a.add_argument("--churn-n", type=int, default=4, help="flag instances with at least N member ids (default 4)")
    a.add_argument("--no-report", dest="report", action="store_false", help="skip report.html and the plots")
    a.add_argument("--python-env", default=None,
                   help="with a cluster --master: a packed Python environment for the executors "
                        "(`python -m tenure.audit.pack OUT.tar.gz`), shipped with spark.archives; `none`: the "
                        "workers' Python has the dependencies (default: one packed once and cached in "
                        "~/.cache/tenure)")
    a.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting, e.g. spark.executor.memory=2g (repeatable)")
    a.add_argument("--spark-log", action="store_true",
                   help="show Spark's and the JVM's own warnings and errors on stderr as they come (default: "
                        "kept in a file the progress lines name, shown when the audit fails)")


def _time_ms(text: str | None) -> int | None:
    if text is None:
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    from datetime import UTC, datetime
    t = datetime.fromisoformat(text)
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return int(t.timestamp() * 1000)


def _audit_module(name: str):
    """tenure.audit.<name>, or None after saying that the audit extra is missing."""
    import importlib
    try:
        return importlib.import_module(f"tenure.audit.{name}")
    except ImportError as exc:
        from tenure.audit import INSTALL_HINT
        print(f"tenure audit: {exc}; {INSTALL_HINT}", file=sys.stderr)
        return None


def _audit(args: argparse.Namespace) -> int:
    if not os.path.isdir(args.dir):
        print(f"tenure audit: {args.dir}: no such directory", file=sys.stderr)
        return 2
    try:
        since, until = _time_ms(args.since), _time_ms(args.until)
    except ValueError as exc:
        print(f"tenure audit: bad --since/--until: {exc}", file=sys.stderr)
        return 2
    if args.instance is not None:
        return _audit_query(args)
    if args.out is None:
        print("tenure audit: --out is required (unless --instance)", file=sys.stderr)
        return 2
    conf = {}
    for item in args.conf:
        key, eq, value = item.partition("=")
        if not eq or not key:
            print(f"tenure audit: bad --conf {item!r}: expected KEY=VALUE", file=sys.stderr)
            return 2
        conf[key] = value
    python_env = args.python_env
    if python_env == "none":                         # the workers' own Python has the dependencies
        python_env = None
    elif python_env is not None and "://" not in python_env and not os.path.isfile(python_env):
        print(f"tenure audit: --python-env {python_env}: no such file", file=sys.stderr)
        return 2
    job = _audit_module("job")                       # pyspark is imported only here
    if job is None:
        return 2
    if args.python_env is None and not args.master.startswith("local"):
        # a cluster's executors need tenure's third-party dependencies: packed once and cached, then shipped
        pack = _audit_module("pack")
        if pack is None:
            return 2
        try:
            python_env = str(pack.cached(note=lambda msg: print(f"audit: {msg}", file=sys.stderr, flush=True)))
        except Exception as exc:
            print(f"tenure audit: --master {args.master} needs the executors' Python environment and packing one "
                  f"failed ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); run `python -m "
                  "tenure.audit.pack audit-env.tar.gz` and pass --python-env audit-env.tar.gz (or --python-env "
                  "none if the workers' Python has kafka-python, crc32c and pyarrow)", file=sys.stderr)
            return 2
    code, _ = job.run(job.Options(args.dir, args.out, master=args.master, group=args.group, since=since,
                                  until=until, storm_k=args.storm_k, storm_window_ms=args.storm_window,
                                  expiry_n=args.expiry_n, churn_n=args.churn_n, report=args.report,
                                  python_env=python_env, conf=conf, spark_log=args.spark_log))
    return code


def _audit_query(args: argparse.Namespace) -> int:
    if "/" not in args.instance or args.at is None:
        print("tenure audit: --instance takes GROUP/INSTANCE and needs --at TIME", file=sys.stderr)
        return 2
    try:
        at = _time_ms(args.at)
    except ValueError as exc:
        print(f"tenure audit: bad --at: {exc}", file=sys.stderr)
        return 2
    query = _audit_module("query")                   # pyarrow (and, on a data dir, pyspark) only here
    if query is None:
        return 2
    code, out = query.run(args.dir, args.instance, at, args.format, args.master)
    print(out)
    return code


def api_table_markdown() -> str:
    """The served table (each API's versions, Kafka 4.3's, the first flexible one, why tenure stops short of 4.3
    where it does), then the newest version tenure serves presenting each Kafka release (`--kafka-version`)."""
    from tenure.protocol.apis import SHORT_OF_NEWEST, SUPPORTED, served_apis
    from tenure.protocol.releases import NEWEST, RELEASES
    lines = [f"| key | API | versions | Kafka {NEWEST.name} | flexible from | short of {NEWEST.name} because |",
             "|---:|---|---|---|---|---|"]
    for key in sorted(SUPPORTED):
        s = SUPPORTED[key]
        flex = next((v for v in range(s.min_version, s.max_version + 1) if s.flexible(v)), None)
        lo, hi = NEWEST.api_versions[key]
        lines.append(f"| {key} | {s.name} | {s.min_version}-{s.max_version} | {lo}-{hi} | "
                     f"{'-' if flex is None else flex} | {SHORT_OF_NEWEST.get(key, '')} |")
    names = list(RELEASES)
    served = {n: served_apis(n).specs for n in names}
    lines += ["", "The newest version served with `--kafka-version` (- : the API is not served as that release):", "",
              "| API | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for key in sorted(SUPPORTED):
        cells = [str(served[n][key].max_version) if key in served[n] else "-" for n in names]
        lines.append(f"| {SUPPORTED[key].name} | " + " | ".join(cells) + " |")
    return "\n".join(lines + ["", "What else follows from the release (protocol/releases.py):", ""]
                     + release_behaviour_rows()) + "\n"


def release_behaviour_rows() -> list[str]:
    """The release table's behaviour rows: what a client sees change from one release to the next."""
    from tenure.config import ServerConfig
    from tenure.protocol.releases import (
        BROKER_CONFIG_DEFAULTS,
        BROKER_CONFIG_SINCE,
        KAFKA_INITIAL_REBALANCE_DELAY_MS,
        RELEASES,
    )
    releases = list(RELEASES.values())

    def yes(flag: bool) -> str:
        return "yes" if flag else "-"

    rows = [
        ("consumer protocol (KIP-848: ConsumerGroupHeartbeat)", [yes(r.consumer_group_protocol) for r in releases]),
        ("share groups (KIP-932; 4.1: announced, refused with 35)",
         [yes(r.share_groups) if not r.refuses(76) else "35" for r in releases]),
        ("transaction.version finalized (2: KIP-890 transactions v2)", [str(r.transaction_version) for r in releases]),
        ("metadata.version finalized", [str(r.features["metadata.version"].finalized)
                                        if "metadata.version" in r.features else "-" for r in releases]),
        *[(f"{name} announced: supported / finalized (- : not listed)", [_feature_cell(r, name) for r in releases])
          for name in ("kraft.version", "group.version", "eligible.leader.replicas.version", "share.version",
                       "streams.version")],
        ("Produce v0-2 (message formats v0/v1)",
         ["served" if 0 not in r.announced_only else "announced, refused" for r in releases]),
        (f"group.initial.rebalance.delay.ms: Kafka's default (tenure's: {ServerConfig().initial_rebalance_delay_ms})",
         [str(KAFKA_INITIAL_REBALANCE_DELAY_MS)] * len(releases)),
        *[(f"broker config `{name}` (DescribeConfigs)", [yes(r.reports_broker_config(name)) for r in releases])
          for name in BROKER_CONFIG_SINCE],
        *[(f"`{name}`: Kafka's default", [r.broker_config_default(name, None) or "-"
                                          if r.reports_broker_config(name) else "-" for r in releases])
          for name in BROKER_CONFIG_DEFAULTS],
    ]
    out = ["| | " + " | ".join(r.name for r in releases) + " |", "|---|" + "---|" * len(releases)]
    return out + [f"| {what} | " + " | ".join(cells) + " |" for what, cells in rows]


def _feature_cell(r, name: str) -> str:
    """A feature as the release's ApiVersions lists it: "min-max / finalized level" ("-" when not listed)."""
    supported, finalized = r.announced_features()
    if name not in supported:
        return "-"
    lo, hi = supported[name]
    return f"{lo}-{hi} / {finalized.get(name, (0, 0))[1]}"


TABLE_BEGIN = "<!-- begin: generated by `tenure apis` -->\n"
TABLE_END = "<!-- end: generated by `tenure apis` -->\n"


def update_api_table(text: str) -> str:
    """`text` with the part between the generated-table markers replaced by the current table."""
    head, begin, rest = text.partition(TABLE_BEGIN)
    _, end, tail = rest.partition(TABLE_END)
    if not begin or not end:
        raise ValueError(f"no generated-table markers ({TABLE_BEGIN.strip()} ... {TABLE_END.strip()})")
    return head + TABLE_BEGIN + api_table_markdown() + TABLE_END + tail


def _config(args: argparse.Namespace) -> ServerConfig:
    values = {f.name: getattr(args, f.name) for f in flag_settings()}
    try:
        check_settings(values)
    except ValueError as exc:
        raise SystemExit(f"tenure: {exc}") from None
    if (args.offsets_partitions or (1 if args.brokers == 1 else 8)) > min(args.max_partitions_per_topic, args.max_partitions):
        raise SystemExit("tenure: --offsets-partitions must fit --max-partitions-per-topic and --max-partitions")
    if args.admin_port is not None and not -1 <= args.admin_port <= 65535:
        raise SystemExit("tenure: --admin-port must be a port (0 picks a free one) or -1 (off)")
    if args.no_admin or args.admin_port == -1:
        admin_port, fallback = None, False
    elif args.admin_port is None:              # the default: 9644, or a free port when --port 0 or it is taken
        admin_port, fallback = (0 if args.port == 0 else DEFAULT_ADMIN_PORT), True
    else:
        admin_port, fallback = args.admin_port, False
    # the flag as given (an empty one is refused below); else the environment, where empty means unset
    token = args.admin_token if args.admin_token is not None else os.environ.get(ADMIN_TOKEN_ENV) or None
    try:
        return ServerConfig(**{**values, "admin_port": admin_port, "admin_port_fallback": fallback,
                               "admin_token": token})
    except ValueError as exc:
        raise SystemExit(f"tenure: {exc}") from None


def _write_ready_file(path: str, server: Server) -> None:
    """{"bootstrap", "admin", "pid"} as JSON, replaced atomically (a reader never sees half of it)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"bootstrap": server.bootstrap, "admin": server.admin_address, "pid": os.getpid(),
                   "listeners": server.listener_bootstrap(), "ca_file": server.ca_file}, f)
        f.write("\n")
    os.replace(tmp, path)


async def _serve(config: ServerConfig, ready_file: str | None = None) -> int:
    limits = raise_fd_limit()
    if limits is not None and limits[0] != limits[1]:
        log.info("descriptor limit (RLIMIT_NOFILE) raised from %d to %d", *limits)
    try:
        server = Server(config)
    except (ValueError, OSError) as exc:              # e.g. a certificate file that does not load
        raise SystemExit(f"tenure: {exc}") from None
    try:
        await server.start()
    except BaseException:
        await server.close()
        raise
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        log.info("at most %d client connection(s) at once (descriptor limit %s)", server.max_connections,
                 limits[1] if limits is not None else "none")
        if ready_file:
            try:
                _write_ready_file(ready_file, server)
            except OSError as exc:
                await server.close()
                raise StartupError(exc, f"cannot write the ready file {ready_file} (--ready-file)") from exc
        gcpause.freeze_started()             # what start-up made: out of the later collections (gcpause.py)
        print(f"tenure listening on {server.bootstrap}", flush=True)
        log.info("serving on %s:%d (advertised %s)", config.host, server.port, server.bootstrap)
        if config.admin_port is None:
            log.info("admin endpoint off (--no-admin): `tenure groups/fault` cannot reach this server")
        return await _run(server, stop)
    finally:
        if ready_file:
            with contextlib.suppress(FileNotFoundError):
                os.remove(ready_file)


async def _run(server: Server, stop: asyncio.Event) -> int:
    while True:                              # until a signal or a fatal storage error; restarts on request
        waits = {asyncio.ensure_future(e.wait()): e
                 for e in (stop, server.stop_requested, server.restart_requested)}
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for t in pending:
            t.cancel()
        if stop.is_set() or server.stop_requested.is_set():
            break
        log.info("restart requested through the admin endpoint")
        server = await reopen(server)
        gcpause.freeze_started()
    log.info("shutting down")
    await server.close()
    if server.fatal_error is not None:
        log.critical("stopped after a storage failure: %s", server.fatal_error)
        return 3
    return 0


def _configure_logging(level: int, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        from pythonjsonlogger.json import JsonFormatter
        handler.setFormatter(JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s",
                                           rename_fields={"asctime": "time", "levelname": "level",
                                                          "name": "logger"}))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(handler)
        root.setLevel(level)


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    args = _parser(words).parse_args(words)
    level = getattr(args, "log_level", "INFO")
    _configure_logging(getattr(logging, str(level).upper(), logging.INFO), getattr(args, "log_format", "text"))
    if args.command == "demo":
        from tenure.tools.demo import run as demo
        return demo(members=args.members, partitions=args.partitions, data_dir=args.dir, audit=args.audit)
    if args.command == "apis":
        if args.update is None:
            sys.stdout.write(api_table_markdown())
            return 0
        from pathlib import Path
        path = Path(args.update)
        try:
            path.write_text(update_api_table(path.read_text()))
        except (OSError, ValueError) as exc:
            print(f"tenure apis: {path}: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.command == "audit":
        return _audit(args)
    if args.command == "log":
        from tenure.tools import logtool
        return logtool.run(args)
    if args.command != "serve":                      # groups, fault, broker, coordinator, network, requests, users, acl
        from tenure.control import commands
        return commands.run(args) if args.command in commands.HELP else 2
    try:
        config = _config(args)
        try:
            new_loop = eventloop.loop_factory(config.event_loop)
        except ValueError as exc:
            print(f"tenure: {exc} (--event-loop)", file=sys.stderr)
            return 2
        with asyncio.Runner(loop_factory=new_loop) as runner:
            return runner.run(_serve(config, args.ready_file))
    except recovery.CorruptLogError as exc:
        print(f"tenure: {exc}; run `tenure log verify {args.data_dir}` for the full report",
              file=sys.stderr)
        return 4
    except datadir.DataDirLocked as exc:
        print(f"tenure: {exc} (--data-dir): stop that process or give another --data-dir", file=sys.stderr)
        return 1
    except StartupError as exc:                # names what failed, the value and the flag
        print(f"tenure: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"tenure: start-up failed: {exc}", file=sys.stderr)
        return 1


def entry() -> None:
    sys.exit(main())
