"""Start-up to ready of `tenure serve --port 0`.

Spawns `python -m tenure serve --port 0` --runs times and times each from just before the spawn until
the line `tenure listening on HOST:PORT` is read from its stdout; then sends SIGTERM and times the
exit (reporting exit codes). For context it also times, in fresh interpreters, a bare interpreter
start-up (`python -c pass`) and `import tenure.server`, and lists the top-level packages (kafka-python's
by subpackage) that `python -X importtime` charges that import to. It prints the commit and the load
average at the start and the end, for the figures in docs/benchmarks.md.

Two bytecode settings are measured, interleaved run by run:
  env     the environment as inherited. If it sets PYTHONDONTWRITEBYTECODE (as this repository's
          sandbox does) and no __pycache__ exists next to the sources, tenure's own modules are
          compiled from source at every start.
  cached  PYTHONDONTWRITEBYTECODE unset and PYTHONPYCACHEPREFIX pointed at a temporary directory,
          warmed once: what a developer's machine with a normal bytecode cache sees. Nothing is
          written into the source tree.

    .venv/bin/python bench/startup.py [--runs 15] [--baseline TREE] [--settings env,cached] [--profile 30]

Both `tenure serve` and the imports run through bench/trees.py's launcher (tenure from a given source tree), this
tree's too, so a --baseline tree (a `git worktree` of main) is timed the same way, interleaved run by run. It also
times ServerThread(port=0).start() in a fresh interpreter that has imported tenure: the first server of the process
and a second one (and, beside the import's CPU time, the import with `from tenure.server import ServerThread`: a
tree that imports ServerThread's module at the first use of the name pays it there); and what the command line adds to that import for `tenure serve` (the CPU time of importing
tenure.tools.cli, of building its parser and parsing a serve command line, and the modules the import adds); and `tenure serve`'s own path in-process,
the command line imported first, to a started server, at the CPU clock's resolution; and the dataclasses the import
builds with the CPU their builds take).

Prints figures only; it never asserts timings.
"""
from __future__ import annotations

import argparse
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trees import python_argv, serve_argv, tree_label  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
READY = re.compile(r"^tenure listening on (\S+):(\d+)$")
READY_TIMEOUT_S = 20.0
EXIT_TIMEOUT_S = 10.0
SLOW_MS = 500.0


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, -(-len(s) * p // 100) - 1))
    return s[int(k)]


def summary(values: list[float]) -> str:
    return (f"min {min(values):6.0f}  median {statistics.median(values):6.0f}  "
            f"p90 {pct(values, 90):6.0f}  max {max(values):6.0f} ms")


def process_cpu_ms(pid: int) -> float:
    """CPU time (user + system) a live process has used so far, from /proc (clock-tick resolution, 10 ms on
    Linux); NaN where /proc is not there."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def one_start(tree: Path, env: dict) -> tuple[float, float, int, float]:
    """Return (ms from spawn to the ready line, ms from SIGTERM to exit, exit code, CPU ms the server process had
    used when its ready line came: unlike the wall time, it barely moves with the machine's load)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(serve_argv(tree, "serve", "--port", "0", "--log-level", "WARNING"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, env=env)
    try:
        buf = b""
        deadline = t0 + READY_TIMEOUT_S
        ready_ms = None
        while ready_ms is None:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise RuntimeError(f"no ready line within {READY_TIMEOUT_S:.0f}s (stdout so far: {buf!r})")
            r, _, _ = select.select([proc.stdout], [], [], left)
            if not r:
                continue
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                err = proc.stderr.read().decode(errors="replace")
                raise RuntimeError(f"tenure exited (rc={proc.wait()}) before the ready line; stderr:\n{err}")
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if READY.match(line.decode(errors="replace").strip()):
                    ready_ms = (time.perf_counter() - t0) * 1000.0
                    ready_cpu = process_cpu_ms(proc.pid)
                    break
        # Popen.wait(timeout) polls with a back-off of up to 50 ms, which would quantise the exit time;
        # a blocking wait (waitpid) with a watchdog that kills a hung server measures it exactly.
        watchdog = threading.Timer(EXIT_TIMEOUT_S, proc.kill)
        watchdog.start()
        t1 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait()
        stop_ms = (time.perf_counter() - t1) * 1000.0
        watchdog.cancel()
        return ready_ms, stop_ms, rc, ready_cpu
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def time_cmd(argv: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    return (time.perf_counter() - t0) * 1000.0


def timed_import(tree: Path, env: dict) -> tuple[float, float, float]:
    """(wall ms, CPU ms) of `import tenure.server` in a fresh interpreter: the CPU time (user + system of the
    process) moves much less than the wall time when other work loads the machine; and the CPU ms that
    `from tenure.server import ServerThread` adds after it (a tree that imports ServerThread's module on first use
    pays it there: what a test's process pays in all is the sum)."""
    out = subprocess.run(
        python_argv(tree, "import time; t, c = time.perf_counter(), time.process_time(); import tenure.server; "
                          "w, c2 = (time.perf_counter() - t) * 1000.0, time.process_time()\n"
                          "from tenure.server import ServerThread\n"
                          "print(w, (c2 - c) * 1000.0, (time.process_time() - c2) * 1000.0)"),
        check=True, capture_output=True, text=True, env=env)
    wall, cpu, thread_cpu = out.stdout.split()
    return float(wall), float(cpu), float(thread_cpu)


# an in-process server: ServerThread(port=0).start() after tenure is imported, the first one of the process and
# then a second one (what each further test's fixture costs); printed as "first second" in ms
THREAD_START = """
import time
from tenure.server import ServerThread
out = []
for _ in range(2):
    t = time.perf_counter()
    st = ServerThread(port=0).start()
    out.append((time.perf_counter() - t) * 1000.0)
    st.stop()
print(*out)
"""


# what the command line adds to `import tenure.server` for `tenure serve`: the CPU ms of importing tenure.tools.cli,
# of building its parser and parsing a serve command line, and how many modules the import added; printed as
# "import parse modules" (CPU time at the clock's resolution, unlike /proc's 10 ms ticks)
CLI_COST = """
import sys, time
import tenure.server
before = len(sys.modules)
c = time.process_time()
from tenure.tools import cli
imported = time.process_time() - c
words = ["serve", "--port", "0", "--log-level", "WARNING"]
c = time.process_time()
try:
    parser = cli._parser(words)             # a tree whose parser builds only what the command line needs
except TypeError:
    parser = cli._parser()
parser.parse_args(words)
parsed = time.process_time() - c
print(imported * 1000.0, parsed * 1000.0, len(sys.modules) - before)
"""


# `tenure serve`'s own path in a fresh interpreter, timed at the CPU clock's resolution (the spawn's /proc figure
# counts 10 ms ticks): the command line imported first (as `python -m tenure` does: its imports come before the
# server's), its parser built and a serve command line parsed, the config, the event loop, Server(...).start();
# printed as "import started" (CPU ms of the import alone, and from before the import until started)
SERVE_CPU = """
import time
c0 = time.process_time()
from tenure.tools import cli
c1 = time.process_time()
words = ["serve", "--port", "0", "--log-level", "WARNING", "--no-admin"]
try:
    parser = cli._parser(words)
except TypeError:
    parser = cli._parser()
config = cli._config(parser.parse_args(words))
from tenure.server import Server, eventloop
loop = eventloop.loop_factory(config.event_loop)()
async def started():
    server = Server(config)
    await server.start()
    c2 = time.process_time()
    await server.close()
    return c2
c2 = loop.run_until_complete(started())
loop.close()
print((c1 - c0) * 1000.0, (c2 - c0) * 1000.0)
"""


def serve_cpu(tree: Path, env: dict) -> tuple[float, float]:
    out = subprocess.run(python_argv(tree, SERVE_CPU), check=True, capture_output=True, text=True, env=env,
                         timeout=60)
    imported, started = out.stdout.split()[-2:]
    return float(imported), float(started)


# the dataclasses `import tenure.server` builds and the CPU ms their builds take (each one's methods are generated and
# compiled then: docs/benchmarks.md, "Start-up to ready"); printed as "count ms"
DATACLASSES = """
import dataclasses, time
process = dataclasses._process_class
spent = [0, 0.0]
def timed(cls, *args):
    c = time.process_time()
    try:
        return process(cls, *args)
    finally:
        spent[0] += 1
        spent[1] += time.process_time() - c
dataclasses._process_class = timed
import tenure.server
print(spent[0], spent[1] * 1000.0)
"""


def dataclass_builds(tree: Path, env: dict) -> tuple[int, float]:
    out = subprocess.run(python_argv(tree, DATACLASSES), check=True, capture_output=True, text=True, env=env,
                         timeout=60)
    count, ms = out.stdout.split()[-2:]
    return int(count), float(ms)


def cli_cost(tree: Path, env: dict) -> tuple[float, float, int]:
    out = subprocess.run(python_argv(tree, CLI_COST), check=True, capture_output=True, text=True, env=env,
                         timeout=60)
    imported, parsed, modules = out.stdout.split()[-3:]
    return float(imported), float(parsed), int(modules)


def thread_starts(tree: Path, env: dict) -> tuple[float, float]:
    out = subprocess.run(python_argv(tree, THREAD_START), check=True, capture_output=True, text=True, env=env,
                         timeout=60)
    first, second = out.stdout.split()[-2:]
    return float(first), float(second)


def importtime_breakdown(tree: Path, env: dict, top: int = 12) -> tuple[float, list[tuple[str, float]]]:
    """Cumulative ms of `import tenure.server` and self time per top-level package (kafka-python's
    per subpackage)."""
    argv = python_argv(tree, "import tenure.server")
    out = subprocess.run([argv[0], "-X", "importtime", *argv[1:]],
                         check=True, capture_output=True, text=True, env=env).stderr
    total = 0.0
    per_pkg: dict[str, float] = {}
    for line in out.splitlines():
        m = re.match(r"import time:\s+(\d+)\s*\|\s*(\d+)\s*\|(\s*)(\S+)", line)
        if not m:
            continue
        self_us, cum_us, name = int(m.group(1)), int(m.group(2)), m.group(4)
        if name == "tenure.server":
            total = cum_us / 1000.0
        parts = name.split(".")
        # kafka-python by subpackage: tenure needs kafka.protocol and kafka.record; kafka/__init__.py
        # also imports the client (kafka.admin, kafka.net, kafka.consumer, kafka.producer, ...)
        root = ".".join(parts[:2]) if parts[0] == "kafka" and len(parts) > 1 else parts[0]
        per_pkg[root] = per_pkg.get(root, 0.0) + self_us / 1000.0
    ranked = sorted(per_pkg.items(), key=lambda kv: kv[1], reverse=True)[:top]
    return total, ranked


# `tenure serve` until ready under cProfile, after its imports (`tenure.tools.cli`, timed apart): the CLI's parser,
# config, logging set-up, data dir, listeners; SIGTERM once the ready file is there
PROFILE_SERVE = """
import cProfile, os, pstats, signal, sys, tempfile, threading, time
t = time.process_time()
from tenure.tools import cli
imported = (time.process_time() - t) * 1000.0
ready_file = os.path.join(tempfile.mkdtemp(), "ready")
def stop_when_ready():
    while not os.path.exists(ready_file):
        time.sleep(0.001)
    os.kill(os.getpid(), signal.SIGTERM)
threading.Thread(target=stop_when_ready, daemon=True).start()
profile = cProfile.Profile()
profile.enable()
try:
    cli.main(["serve", "--port", "0", "--ready-file", ready_file, "--log-level", "WARNING"])
except SystemExit:
    pass
profile.disable()
print(f"import tenure.tools.cli: {imported:.0f} ms CPU; then, profiled, until ready and stopped:")
pstats.Stats(profile).sort_stats("cumulative").print_stats(TOP)
"""


def profile_serve(tree: Path, env: dict, top: int) -> str:
    out = subprocess.run(python_argv(tree, PROFILE_SERVE.replace("TOP", str(top))), capture_output=True, text=True,
                         env=env, timeout=120)
    return out.stdout if out.returncode == 0 else f"profile failed (rc {out.returncode}):\n{out.stderr}"


def load_average() -> str:
    try:
        return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        return "unknown"


def commit() -> str:
    """The repository's HEAD, with "+dirty" when the tree has uncommitted changes."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                               check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15, help="server starts to time per setting (default 15)")
    ap.add_argument("--baseline", action="append", default=[], metavar="TREE",
                    help="also time `tenure serve` from this source tree (e.g. a `git worktree` of main), its runs "
                    "interleaved with this tree's; repeatable")
    ap.add_argument("--settings", default="env,cached", help="the bytecode settings to time (env, cached)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also print the N largest cumulative entries of a cProfile of `tenure serve` (this tree) "
                    "from after its imports until ready")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    py = sys.executable

    cache_dir = tempfile.mkdtemp(prefix="tenure-bench-pycache-")
    env_as_is = dict(os.environ)
    env_cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env_cached["PYTHONPYCACHEPREFIX"] = cache_dir
    envs = {"env": env_as_is, "cached": env_cached}
    trees = {tree_label(REPO): REPO, **{f"{tree_label(t)} baseline": Path(t).resolve() for t in args.baseline}}
    # each setting: a tree and a bytecode setting; both trees run through the same launcher (bench/trees.py)
    modes = {(f"{label} {e}" if len(trees) > 1 else e): (tree, envs[e])
             for label, tree in trees.items() for e in args.settings.split(",")}
    dont_write = os.environ.get("PYTHONDONTWRITEBYTECODE")
    print(f"python: {py} ({sys.version.split()[0]}), cpus: {os.cpu_count()}, runs: {args.runs} per setting")
    print(f"commit: {commit()}, load average (1/5/15 min) at start: {load_average()}")
    for label, tree in trees.items():
        print(f"tree:   {label} = {tree}")
    print(f"env:    the inherited environment (PYTHONDONTWRITEBYTECODE={dont_write or 'unset'})")
    print(f"cached: bytecode cache in {cache_dir} (PYTHONPYCACHEPREFIX), warmed once")
    try:
        # untimed warm-up: fills the page cache and the cached setting's bytecode cache
        for tree, env in modes.values():
            one_start(tree, env)
            timed_import(tree, env)

        # runs interleave the settings and the measurements, so drift in machine load hits all alike
        m: dict = {k: {"ready": [], "ready_cpu": [], "stop": [], "rc": [], "bare": [], "imp": [], "imp_cpu": [], "imp_thread": [],
                       "thread1": [],
                       "thread2": [], "cli_imp": [], "cli_parse": [], "cli_mods": [], "serve_imp": [], "serve_cpu": [],
                       "dc_count": [], "dc_ms": []}
                   for k in modes}
        for _ in range(args.runs):
            for k, (tree, env) in modes.items():
                r, s, rc, cpu = one_start(tree, env)
                m[k]["ready"].append(r)
                m[k]["ready_cpu"].append(cpu)
                m[k]["stop"].append(s)
                m[k]["rc"].append(rc)
                m[k]["bare"].append(time_cmd([py, "-c", "pass"], env))
                wall, cpu, thread_cpu = timed_import(tree, env)
                m[k]["imp"].append(wall)
                m[k]["imp_cpu"].append(cpu)
                m[k]["imp_thread"].append(cpu + thread_cpu)
                first, second = thread_starts(tree, env)
                m[k]["thread1"].append(first)
                m[k]["thread2"].append(second)
                imported, parsed, modules = cli_cost(tree, env)
                m[k]["cli_imp"].append(imported)
                m[k]["cli_parse"].append(parsed)
                m[k]["cli_mods"].append(modules)
                imported, started = serve_cpu(tree, env)
                m[k]["serve_imp"].append(imported)
                m[k]["serve_cpu"].append(started)
                count, ms = dataclass_builds(tree, env)
                m[k]["dc_count"].append(count)
                m[k]["dc_ms"].append(ms)
        breakdown = {k: importtime_breakdown(tree, env) for k, (tree, env) in modes.items()}
        profiled = profile_serve(REPO, next(iter(modes.values()))[1], args.profile) if args.profile else ""
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)

    for k in modes:
        x = m[k]
        print()
        print(f"[{k}] tenure serve --port 0, spawn -> ready line : {summary(x['ready'])}")
        print(f"[{k}]   the server process's CPU time until ready: {summary(x['ready_cpu'])}")
        print(f"[{k}] SIGTERM -> process exit                    : {summary(x['stop'])}  "
              f"exit codes {sorted(set(x['rc']))}")
        print(f"[{k}] where start-up goes (each in a fresh interpreter):")
        print(f"[{k}]   python -c pass (interpreter start-up)      : {summary(x['bare'])}")
        print(f"[{k}]   import tenure.server (timed in-process)    : {summary(x['imp'])}")
        print(f"[{k}]   import tenure.server, its CPU time         : {summary(x['imp_cpu'])}")
        print(f"[{k}]   the same + from tenure.server import ServerThread, CPU: {summary(x['imp_thread'])}")
        print(f"[{k}] ServerThread(port=0).start(), first in its process: {summary(x['thread1'])}")
        print(f"[{k}] ServerThread(port=0).start(), the next one        : {summary(x['thread2'])}")
        print(f"[{k}]   the command line after import tenure.server, CPU: import tenure.tools.cli "
              f"{summary(x['cli_imp'])} (+{statistics.median(x['cli_mods']):.0f} modules); its parser built and a "
              f"serve command line parsed {summary(x['cli_parse'])}")
        print(f"[{k}]   tenure serve's path in-process, CPU: import tenure.tools.cli first {summary(x['serve_imp'])}; "
              f"to a started server {summary(x['serve_cpu'])}")
        print(f"[{k}]   the dataclasses import tenure.server builds: {statistics.median(x['dc_count']):.0f}, "
              f"their builds' CPU {summary(x['dc_ms'])}")
        rest = statistics.median(x["ready"]) - statistics.median(x["bare"]) - statistics.median(x["imp"])
        print(f"[{k}]   remainder (cli, bind, event loop, print)   : {rest:6.0f} ms  (median ready minus the "
              f"two medians above; a difference of noisy figures)")
        total, ranked = breakdown[k]
        print(f"[{k}] python -X importtime: import tenure.server {total:.0f} ms cumulative (one run, inflated by "
              f"the tracing); self time by top-level package:")
        print(f"[{k}]   " + ", ".join(f"{name} {ms:.0f}" for name, ms in ranked) + " (ms)")

    if profiled:
        print()
        print(f"[profile] load average (1/5/15 min): {load_average()}")
        print("\n".join(line for line in profiled.splitlines() if line.strip()))
    print()
    print(f"load average (1/5/15 min) at end: {load_average()}")
    for k in modes:
        med = statistics.median(m[k]["ready"])
        verdict = (f"ABOVE {SLOW_MS:.0f} ms: start-up is slow" if med > SLOW_MS
                   else f"under {SLOW_MS:.0f} ms")
        print(f"[{k}] median start-up to ready: {med:.0f} ms ({verdict})")
        if any(rc != 0 for rc in m[k]["rc"]):
            print(f"[{k}] NOTE: tenure did not exit 0 on SIGTERM in every run: exit codes {m[k]['rc']}")
    if len(trees) > 1:
        this = tree_label(REPO)
        for k in modes:
            if not k.startswith(this + " "):
                continue
            setting = k[len(this) + 1:]
            for b in (k2 for k2 in modes if k2.endswith(" baseline " + setting)):
                med = lambda key, kk: statistics.median(m[kk][key])  # noqa: E731
                print(f"[{setting}] this tree against {b}: spawn to ready {med('ready', k):.0f} vs "
                      f"{med('ready', b):.0f} ms = {med('ready', k) / med('ready', b):.2f}x, its CPU "
                      f"{med('ready_cpu', k):.0f} vs {med('ready_cpu', b):.0f} ms = "
                      f"{med('ready_cpu', k) / med('ready_cpu', b):.2f}x; import "
                      f"{med('imp', k):.0f} vs {med('imp', b):.0f} ms, its CPU {med('imp_cpu', k):.0f} vs "
                      f"{med('imp_cpu', b):.0f} ms = {med('imp_cpu', k) / med('imp_cpu', b):.2f}x (with ServerThread's "
                      f"class {med('imp_thread', k):.0f} vs {med('imp_thread', b):.0f} ms = "
                      f"{med('imp_thread', k) / med('imp_thread', b):.2f}x); the command line's CPU "
                      f"(import + parser) {med('cli_imp', k) + med('cli_parse', k):.1f} vs "
                      f"{med('cli_imp', b) + med('cli_parse', b):.1f} ms, +{med('cli_mods', k):.0f} vs "
                      f"+{med('cli_mods', b):.0f} modules; tenure serve's path in-process, CPU: import "
                      f"{med('serve_imp', k):.1f} vs {med('serve_imp', b):.1f} ms, to started {med('serve_cpu', k):.1f} "
                      f"vs {med('serve_cpu', b):.1f} ms = {med('serve_cpu', k) / med('serve_cpu', b):.2f}x; ServerThread start {med('thread1', k):.1f} vs "
                      f"{med('thread1', b):.1f} ms (next {med('thread2', k):.1f} vs {med('thread2', b):.1f} ms); "
                      f"dataclasses built at import {med('dc_count', k):.0f} vs {med('dc_count', b):.0f}, their CPU "
                      f"{med('dc_ms', k):.1f} vs {med('dc_ms', b):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
