"""Audit: `tenure audit` (PySpark) against a single-process replay of the same __consumer_offsets log.

For each size in --records (default 1000000,10000000):

1. generate   A realistic log of that many records with tenure/tools/synth.py (`tenure log synth`: static groups
              committing, restarting, rebalancing, expiring, leaving, removed, fenced, deleted; the
              project's own write path), in a child process bounded by the time left. With --keep DIR
              it goes to DIR/records-N and is reused by later runs with the same parameters.
2. replay     Two single-process baselines, each in a fresh interpreter (its own peak memory):
              a. load: open the data dir as the server does (DataDir + TopicRegistry.load: the segment
                 scan checks every batch's CRC-32C) and CoordinatorRuntime.load() on a fresh
                 GroupShard - the server's start-up path (decodes only the latest record per key);
              b. full replay: the same open, then every record of every batch in offset order decoded
                 (tenure.protocol.records.decode) and applied with GroupShard.replay - what the
                 audit has to do too, since it reads every record.
3. audit      The real command, in a child process: `python -m tenure audit DIR --out OUT --master
              local[2]` (Parquet tables and, unless --no-report, report.html). Timed from spawn to exit
              (JVM start included); its own `done in X s` line is shown too. Memory: the Python driver's
              peak RSS (exact, from wait4's rusage), the JVM's VmHWM and the peak of the whole process
              tree's summed RSS (both sampled every 0.2 s from /proc).

Prints, per size: log bytes, records, batches; each figure with its wall time; the ratios audit /
replay; peak memories. Page cache: warm (the log was just written or read) unless --cold, which drops
the segment files' pages (posix_fadvise after fsync) before each measured step. The audit runs last
and is bounded by --max-seconds for the whole run (each child is killed when the time is up; a killed
step prints no figure). If `tenure audit` does not exist in this tree the audit step says so and prints
no audit figure. Prints figures only; it never asserts timings.

    .venv/bin/python bench/audit.py [--records 1000000,10000000] [--master local[2]] [--keep DIR]
                                    [--max-seconds 5400] [--cold] [--no-report] [--groups 2000] ...

10M records are ~1.2 GB of log and take ~15-20 min to generate on one core; use --keep.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchcommon import drop_cache, mib, proc_status, tree_version

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tenure.protocol.internal_topics import OFFSETS_TOPIC  # noqa: E402

MANIFEST = "bench-audit.json"


# ------------------------------------------------------------------------------------------ helpers
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """user + system CPU seconds a process has used so far (Linux /proc); None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, ValueError, IndexError):
        return None


def descendants(root: int) -> list[int]:
    """Every live descendant of `root` (from /proc/*/stat parent pids)."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
            parent[int(d)] = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    kids: dict[int, list[int]] = {}
    for pid, pp in parent.items():
        kids.setdefault(pp, []).append(pid)
    out, todo = [], [root]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def run_child(cmd: list[str], timeout: float, cwd: Path | None = None, env: dict | None = None) -> dict:
    """Run a child in its own session; sample its tree's memory; kill the session if `timeout` passes.
    Returns exit code, wall seconds, stdout, stderr, the child's own peak RSS (rusage) and sampled peaks."""
    if timeout <= 0:
        return {"timed_out": True, "wall_s": 0.0, "returncode": None, "stdout": "", "stderr": ""}
    out_f, err_f = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out_f, stderr=err_f, cwd=cwd, env=env, start_new_session=True)
    pid0 = proc.pid
    hwm: dict[int, tuple[str, int]] = {}
    cpu: dict[int, tuple[str, float]] = {}
    tree_peak = 0
    timed_out = False
    status, rusage = None, None
    while True:
        pid, st, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            status, rusage = st, ru
            break
        total = 0
        for p in [proc.pid] + descendants(proc.pid):
            s = proc_status(p)
            if s:
                total += s.get("VmRSS", 0)                # comm read each time: a script may exec java
                hwm[p] = (comm(p), max(hwm.get(p, ("", 0))[1], s.get("VmHWM", 0)))
                c = cpu_seconds(p)
                if c is not None:
                    cpu[p] = (hwm[p][0], c)
        tree_peak = max(tree_peak, total)
        if time.perf_counter() - t0 > timeout:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)       # the session this child leads (its own tree)
            except ProcessLookupError:
                pass
            _, status, rusage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    out_f.seek(0)
    err_f.seek(0)
    return {"returncode": proc.returncode, "pid": pid0, "wall_s": wall, "timed_out": timed_out,
            "stdout": out_f.read().decode(errors="replace"), "stderr": err_f.read().decode(errors="replace"),
            "maxrss_kb": rusage.ru_maxrss if rusage else None, "tree_peak_kb": tree_peak,
            "hwm": {str(p): v for p, v in hwm.items()}, "cpu": {str(p): v for p, v in cpu.items()}}


# ------------------------------------------------------------------------------------------ children
def child_generate(data_dir: str, cfg_json: str) -> dict:
    from tenure.tools.synth import SynthConfig, generate, summary_line
    cfg = SynthConfig(**json.loads(cfg_json))
    result = generate(data_dir, cfg, lambda s, e: print(f"  ... {s['records']:,} records written in {e:.0f} s",
                                                        file=sys.stderr, flush=True))
    print(summary_line(data_dir, result), file=sys.stderr)
    return {"params": result["params"], "stats": result["stats"]}


def child_replay(data_dir: str, mode: str) -> dict:
    """In a fresh interpreter: open the data dir as the server does, then `load` (the runtime's load) or
    `full` (every record decoded and replayed in offset order)."""
    from kafka.record.default_records import DefaultRecordBatch

    from tenure.broker.topics import TopicRegistry
    from tenure.coordinator import GroupShard
    from tenure.coordinator.loader import iter_batches
    from tenure.coordinator.runtime import CoordinatorRuntime
    from tenure.protocol import records as rec
    from tenure.storage.datadir import DataDir

    out = {"mode": mode, "rss_start_kb": proc_status(os.getpid()).get("VmRSS")}
    t0 = time.perf_counter()
    data = DataDir.open(data_dir)
    registry = TopicRegistry(1, data.open_log, data.catalog)
    registry.load()
    topic = registry.get(OFFSETS_TOPIC)
    out["open_s"] = time.perf_counter() - t0
    coord = GroupShard()
    t1 = time.perf_counter()
    if mode == "load":
        report = CoordinatorRuntime(lambda _partition: coord, topic).load()   # one state: what the scan builds
        out.update(records=report.records, batches=report.batches, replayed=report.replayed,
                   unknown=sum(report.unknown.values()), undecodable=len(report.undecodable))
    else:
        records = batches = replayed = unknown = undecodable = 0
        for plog in topic.partitions:
            for h, raw in iter_batches(plog):
                batches += 1
                if h.is_control:
                    continue
                for r in DefaultRecordBatch(raw):
                    records += 1
                    if r.key is None:
                        undecodable += 1
                        continue
                    try:
                        record = rec.decode(r.key, r.value)
                    except rec.UnknownRecordType:
                        unknown += 1
                        continue
                    coord.replay(record)
                    replayed += 1
        out.update(records=records, batches=batches, replayed=replayed, unknown=unknown, undecodable=undecodable)
    out["replay_s"] = time.perf_counter() - t1
    out["groups"] = len(coord.groups)
    out["members"] = sum(len(g.members) for g in coord.groups.values())
    out["offsets"] = sum(len(o) for o in coord.offsets.values())
    st = proc_status(os.getpid())
    out["rss_end_kb"], out["hwm_kb"] = st.get("VmRSS"), st.get("VmHWM")
    for plog in topic.partitions:
        plog.close()
    data.close()
    return out


# ------------------------------------------------------------------------------------------ steps
def synth_params(args, records: int) -> dict:
    return {"records": records, "groups": args.groups, "members": args.members, "partitions": args.partitions,
            "topics": args.topics, "segment_bytes": args.segment_bytes,
            "offsets_partitions": args.offsets_partitions, "seed": args.seed}


def prepare(args, records: int, base: Path, deadline: Deadline) -> tuple[Path, dict] | tuple[None, str]:
    data_dir = base / f"records-{records}"
    params = synth_params(args, records)
    mf = data_dir / MANIFEST
    if mf.exists():
        manifest = json.loads(mf.read_text())
        from tenure.tools.synth import SynthConfig
        if manifest["params"] != SynthConfig(**params).params():
            return None, f"{data_dir} holds a log generated with other parameters: {manifest['params']}"
        print(f"reusing the log in {data_dir}", flush=True)
        return data_dir, manifest
    if data_dir.exists() and any(data_dir.iterdir()):
        return None, f"{data_dir} is not empty and has no {MANIFEST}; choose another --keep dir"
    print(f"generating {records:,} records into {data_dir} ...", flush=True)
    r = run_child([args.python, str(Path(__file__).resolve()), "--child-generate", str(data_dir),
                   json.dumps(params)], deadline.left())
    sys.stderr.write("".join(f"  {ln}\n" for ln in r["stderr"].splitlines()[-3:]))
    if r["timed_out"]:
        shutil.rmtree(data_dir, ignore_errors=True)
        return None, f"generation not finished within --max-seconds ({r['wall_s']:.0f} s); removed"
    if r["returncode"] != 0:
        return None, f"generation failed (exit {r['returncode']}):\n{r['stderr'][-2000:]}"
    manifest = json.loads(r["stdout"].strip().splitlines()[-1])
    manifest["generate_wall_s"] = r["wall_s"]
    mf.write_text(json.dumps(manifest))
    return data_dir, manifest


def replay_step(args, data_dir: Path, mode: str, deadline: Deadline) -> dict:
    if args.cold:
        drop_cache(data_dir)
    r = run_child([args.python, str(Path(__file__).resolve()), "--child-replay", str(data_dir), mode],
                  deadline.left())
    if r["timed_out"]:
        return {"error": f"killed at --max-seconds after {r['wall_s']:.0f} s"}
    if r["returncode"] != 0:
        return {"error": f"exit {r['returncode']}: {r['stderr'][-2000:]}"}
    out = json.loads(r["stdout"].strip().splitlines()[-1])
    out["wall_s"] = r["wall_s"]
    out["maxrss_kb"] = r["maxrss_kb"]
    return out


def audit_available(python: str) -> tuple[bool, str]:
    p = subprocess.run([python, "-m", "tenure", "audit", "--help"], capture_output=True, text=True, cwd=REPO,
                       timeout=120)
    if p.returncode == 0 and "--master" in p.stdout:
        return True, ""
    lines = (p.stderr or p.stdout).strip().splitlines()
    return False, lines[-1] if lines else f"exit {p.returncode}"


def audit_step(args, data_dir: Path, out_dir: Path, deadline: Deadline) -> dict:
    if args.cold:
        drop_cache(data_dir)
    cmd = [args.python, "-m", "tenure", "audit", str(data_dir), "--out", str(out_dir), "--master", args.master]
    if args.no_report:
        cmd.append("--no-report")
    for kv in args.audit_conf:
        cmd += ["--conf", kv]
    r = run_child(cmd, deadline.left(), cwd=REPO)
    r["cmd"] = "python -m tenure audit " + " ".join(cmd[4:])
    m = re.search(r"done in ([0-9.]+) s", r["stderr"])
    r["own_s"] = float(m.group(1)) if m else None
    if r["timed_out"]:
        r["error"] = f"killed at --max-seconds after {r['wall_s']:.0f} s"
    elif r["returncode"] not in (0, 1) or r["own_s"] is None:
        # exit 1 with its `done in` line: finished, found damage; otherwise it did not finish
        tail = [ln for ln in r["stderr"].splitlines() if not re.match(r"\s+at |.* WARN ", ln)][-25:]
        r["error"] = f"exit {r['returncode']}, no `done in` line (no figure):\n" + "\n".join(
            "    " + ln for ln in tail)
    r["jvm_hwm_kb"] = max((kb for name, kb in r["hwm"].values() if name == "java"), default=None)
    # CPU seconds by kind of process (sampled every 0.2 s: the last 0.2 s of a process may be missed):
    # the driver (the child itself), the JVM, Spark's Python workers (every other python)
    by: dict[str, float] = {}
    for pid, (name, sec) in r["cpu"].items():
        kind = "JVM" if name == "java" else "driver" if int(pid) == r["pid"] else (
            "Python workers" if name.startswith("python") else "other")
        by[kind] = by.get(kind, 0.0) + sec
    r["cpu_by_kind"] = by
    return r


# ------------------------------------------------------------------------------------------ main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", default="1000000,10000000", help="comma-separated log sizes in records "
                    "(default 1000000,10000000)")
    ap.add_argument("--master", default="local[2]", help="Spark master for the audit (default local[2])")
    ap.add_argument("--keep", default=None, help="generate into (or reuse) DIR/records-N and keep it")
    ap.add_argument("--max-seconds", type=float, default=5400.0, help="bound for the whole run (default 5400)")
    ap.add_argument("--cold", action="store_true", help="drop the log's page cache before each measured step")
    ap.add_argument("--no-report", action="store_true", help="pass --no-report to tenure audit")
    ap.add_argument("--skip-full-replay", action="store_true", help="only time CoordinatorRuntime.load()")
    ap.add_argument("--audit-only", action="store_true", help="no replay: only the audit (to compare settings)")
    ap.add_argument("--audit-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="pass --conf KEY=VALUE to tenure audit (repeatable)")
    ap.add_argument("--groups", type=int, default=2000)
    ap.add_argument("--members", type=int, default=8)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--topics", type=int, default=50)
    ap.add_argument("--segment-bytes", type=int, default=100 * 1024 * 1024)
    ap.add_argument("--offsets-partitions", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--child-generate", nargs=2, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-replay", nargs=2, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child_generate:
        print(json.dumps(child_generate(*args.child_generate)))
        return 0
    if args.child_replay:
        print(json.dumps(child_replay(*args.child_replay)))
        return 0

    sizes = [int(x.replace("_", "")) for x in args.records.split(",") if x.strip()]
    deadline = Deadline(args.max_seconds)
    print(f"python {sys.version.split()[0]}, cpus {os.cpu_count()}; sizes {', '.join(f'{n:,}' for n in sizes)} "
          f"records; {args.groups:,} groups x {args.members} static members; audit master {args.master}; "
          f"{'cold' if args.cold else 'warm'} page cache; --max-seconds {args.max_seconds:.0f}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; tree {tree_version()}", flush=True)
    has_audit, why = audit_available(args.python)
    if not has_audit:
        print(f"`tenure audit` is not available in this tree ({why}): the audit step is skipped and no audit "
              f"figure is printed", flush=True)
    tmp = None
    if args.keep:
        base = Path(args.keep).resolve()
        base.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.mkdtemp(prefix="tenure-bench-audit-", dir=os.environ.get("TMPDIR", "/tmp"))
        base = Path(tmp)
    results = []
    try:
        for n in sizes:
            print(f"\n=== {n:,} records", flush=True)
            data_dir, manifest = prepare(args, n, base, deadline)
            if data_dir is None:
                print(f"  skipped: {manifest}", flush=True)
                results.append({"size": n, "skipped": manifest})
                continue
            s = manifest["stats"]
            print(f"log: {s['records']:,} records in {s['batches']:,} batches, {s['bytes']:,} B "
                  f"({s['bytes'] / 2**20:,.1f} MiB) in {s['segments']} segment file(s); {s['offset_records']:,} "
                  f"offset commits, {s['group_records']:,} group records, {s['event_records']:,} static-member "
                  f"events" + (f"; generated in {manifest['generate_wall_s']:.0f} s" if "generate_wall_s" in
                                manifest else ""), flush=True)
            res = {"size": n, "stats": s}
            modes = [] if args.audit_only else ["load"] + ([] if args.skip_full_replay else ["full"])
            for mode in modes:
                r = replay_step(args, data_dir, mode, deadline)
                res[mode] = r
                report_replay(mode, r)
            if has_audit:
                out_dir = base / f"audit-out-{n}"
                shutil.rmtree(out_dir, ignore_errors=True)
                r = audit_step(args, data_dir, out_dir, deadline)
                res["audit"] = r
                report_audit(r, s)
                if not args.keep:
                    shutil.rmtree(out_dir, ignore_errors=True)
            summarize(res)
            results.append(res)
            if deadline.left() <= 0:
                print("--max-seconds reached; stopping", flush=True)
                break
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nload average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())} (other processes on this "
          f"machine compete for its {os.cpu_count()} cores)")
    return 0


LABEL = {"load": "CoordinatorRuntime.load() (latest record per key; the server's start-up)",
         "full": "full replay (every record decoded + GroupShard.replay, offset order)"}


def report_replay(mode: str, r: dict) -> None:
    if "error" in r:
        print(f"[{mode}] FAILED: {r['error']}", flush=True)
        return
    print(f"[{mode}] {LABEL[mode]}: open {r['open_s']:.2f} s + replay {r['replay_s']:.2f} s = "
          f"{r['open_s'] + r['replay_s']:.2f} s ({r['records'] / max(r['replay_s'], 1e-9):,.0f} records/s); "
          f"process wall {r['wall_s']:.2f} s; {r['records']:,} records, {r['replayed']:,} replayed -> "
          f"{r['groups']:,} groups, {r['members']:,} members, {r['offsets']:,} offsets; peak RSS "
          f"{mib(r['maxrss_kb'])}", flush=True)


def report_audit(r: dict, s: dict) -> None:
    print(f"[audit] {r['cmd']}", flush=True)
    if "error" in r:
        print(f"[audit] FAILED: {r['error']}", flush=True)
        return
    own = f"; its own `done in` {r['own_s']:.1f} s" if r.get("own_s") is not None else ""
    print(f"[audit] exit {r['returncode']}; wall {r['wall_s']:.2f} s (spawn to exit, JVM start included){own}; "
          f"{s['records'] / max(r['wall_s'], 1e-9):,.0f} records/s", flush=True)
    print(f"[audit] memory: Python driver peak RSS {mib(r['maxrss_kb'])} (rusage), JVM VmHWM "
          f"{mib(r['jvm_hwm_kb'])} (sampled), whole process tree peak {mib(r['tree_peak_kb'])} (sampled sum of "
          f"RSS over {len(r['hwm'])} processes seen)", flush=True)
    cpu = r.get("cpu_by_kind") or {}
    if cpu:
        print("[audit] CPU seconds (user + system, sampled): " + ", ".join(
            f"{k} {v:.1f} s" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]))
            + f"; total {sum(cpu.values()):.1f} s", flush=True)
    stages = [ln for ln in r["stderr"].splitlines() if ln.startswith("audit: [")]
    if stages:
        print("[audit] its progress lines (elapsed seconds, stages):")
        print("\n".join("    " + ln for ln in stages))
    table = r["stdout"].strip()
    if table:
        print("[audit] summary printed by tenure audit:")
        print("\n".join("    " + ln for ln in table.splitlines()))


def summarize(res: dict) -> None:
    a = res.get("audit")
    if not a or "error" in a:
        if a is None:
            print("ratio: no audit figure (tenure audit missing or not run)", flush=True)
        return
    for mode in ("load", "full"):
        r = res.get(mode)
        if not r or "error" in r:
            continue
        base = r["open_s"] + r["replay_s"]
        print(f"ratio audit / {mode}: wall {a['wall_s']:.2f} s / process wall {r['wall_s']:.2f} s = "
              f"{a['wall_s'] / max(r['wall_s'], 1e-9):.2f}x; audit wall / ({mode} open + replay {base:.2f} s) = "
              f"{a['wall_s'] / max(base, 1e-9):.2f}x", flush=True)


if __name__ == "__main__":
    sys.exit(main())
