"""Recovery: start-up time and memory of `tenure serve --data-dir` on a large __consumer_offsets log.

1. generate   A realistic __consumer_offsets log of --records records is written by tenure/tools/synth.py (also
              `tenure log synth`) with the project's own code: the data dir and topic catalog as the
              server opens them (storage DataDir + broker TopicRegistry), records encoded by
              tenure.protocol.records, and batches built and appended by the coordinator runtime's own
              write path (coordinator/writer.py CoordinatorWriter: one batch per state change, partitions chosen by
              Kafka's group hash), segments rolled at --segment-bytes (default Kafka's
              offsets.topic.segment.bytes, 100 MiB).
              The simulated workload: --groups consumer groups of --members static members each
              (group.instance.id set) on a --partitions-partition topic: mostly offset commits (one
              member commits its partitions: one batch of partitions/members records), rolling restarts
              of whole groups (each restarted member rejoins under a new member id with the same
              generation and assignment: a `replaced` static-member event and the group's GroupMetadata
              record per member, as KIP-345 has it; now and then the old pod is `fenced`), occasional
              rebalances (generation + 1, assignment rotated), expirations, leaves, admin removals and
              forced rebalances (with their static-member events; the member comes back), and a few
              group deletions (tombstones for the group, its offsets and its event keys, then the group
              forms again). The other rates keep tenure.tools.synth.SynthConfig's defaults.
2. server     The page cache is dropped for the segment files (posix_fadvise DONTNEED after an fsync; no
              root needed), then `python -m tenure serve --port 0 --data-dir DIR` is spawned and timed
              from just before the spawn to its `tenure listening on` line. Its stderr line `loaded
              __consumer_offsets: N record(s) ... in Xs` is the replay part (CoordinatorRuntime.load());
              the rest is interpreter + imports + opening the logs (the scan) + bind. Memory after load:
              the server's VmRSS and VmHWM (/proc/PID/status). 50 sampled groups' committed offsets
              (OffsetFetch v7) and members (DescribeGroups v5) are then read over the wire and compared
              with what the generator wrote last. The same on an empty data dir gives the baseline.
              --warm adds a second start on the now warm cache.
3. in-process The same data dir loaded in a fresh interpreter without a server: opening the logs (the
              segment scan: every batch's length, magic and CRC-32C, the sparse index) and
              CoordinatorRuntime.load() once per record reader the tree has (storage/reader.py: aiokafka's C
              reader where installed, kafka-python's), each in wall and CPU seconds and per record, with the
              decode of the survivors (records.decode) and GroupShard.replay timed inside it; the batch reads
              alone give the rest's split. --what-if adds an experiment: decode and replay only the last
              record per key, and compare the state.
4. move       A 2-broker ServerThread on the same data dir; the offsets partition's coordinator moved to the
              other broker and back (move_coordinator returns once the new broker has loaded it: groups are
              answered COORDINATOR_LOAD_IN_PROGRESS meanwhile); each move timed (--no-move skips it). The moves
              append their CoordinatorLoadRecords to the kept log.

After this tree's cold start (every batch verified: the clean-shutdown marker and the recovery-point checkpoint
are removed first, as after a kill before anything was checkpointed) it starts once more on the marker its
SIGTERM stop just left (storage/cleanshut.py: segments trusted up to their index files), timed the same way;
that server commits one offset (confluent-kafka), waits for its periodic recovery-point checkpoint
(--log-flush-offset-checkpoint-interval-ms 500) to name it and is SIGKILLed; a third cold start then recovers
from that kill (storage/datadir.py: the segments below the checkpointed recovery point trusted up to their index
files, the rest verified batch by batch). Each start prints the server's `opened N log(s) after a ... stop`
line. Every other start and in-process run removes the marker and the checkpoint first; the in-process run also
times an open after a simulated kill that leaves the checkpoint of its clean stop.

--background adds a start of this tree's server with --load-in-background: timed to its ready line (it
listens at once) and to its `loaded __consumer_offsets` line (every partition loaded). --baseline-python PY
runs a peer tree's interpreter (e.g. a worktree of main with its own venv) through the same starts, loads and
moves, interleaved with this tree's, and prints the ratios; each runs its own tree's code (a neutral cwd).

    .venv/bin/python bench/recovery.py [--records 1000000] [--groups 2000] [--members 8]
                                       [--segment-bytes 104857600] [--keep DIR] [--warm] [--background]
                                       [--baseline-python PY] [--no-move] [--what-if] [--profile] [--roll-flush]

--keep DIR generates into DIR (or reuses it when a previous run with the same parameters left it
there) and keeps it. --profile also runs the in-process load and the log open under cProfile and
prints the top functions (adds ~3x the load time). Prints figures only; it never asserts timings.
Each server start is bounded by --ready-timeout. The default run takes about 4 minutes (1M records:
~1.5 min to generate, ~1 min per load).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchcommon import drop_cache, mib, proc_status, tree_version, wait_ready_line

REPO = Path(__file__).resolve().parents[1]
# the tree's own modules come from the interpreter's install (its editable tree): a baseline interpreter given by
# --baseline-python runs its own tree's code, never this one's; only the driver adds this tree (tests.support)
NEUTRAL_CWD = tempfile.gettempdir()          # `python -m tenure` must not pick up a tree from the cwd
if not {"--in-process", "--move-in-process"} & set(sys.argv):
    sys.path.insert(0, str(REPO))
from tenure.protocol.internal_topics import OFFSETS_TOPIC  # noqa: E402

OPENED = re.compile(r"opened \d+ log\(s\) after an? (?:unclean|clean) stop: .*")
LOADED = re.compile(r"loaded __consumer_offsets: (\d+) record\(s\) in (\d+) batch\(es\), (\d+) group\(s\), "
                    r"in ([0-9.]+)s")
MANIFEST = "bench-recovery.json"


# ------------------------------------------------------------------------------------------ generate
def synth_config(args):
    from tenure.tools.synth import SynthConfig
    return SynthConfig(records=args.records, groups=args.groups, members=args.members, partitions=args.partitions,
                       topics=args.topics, segment_bytes=args.segment_bytes,
                       offsets_partitions=args.offsets_partitions, restart_rate=args.restart_rate,
                       rebalance_rate=args.rebalance_rate, delete_rate=args.delete_rate, seed=args.seed)


def _params(args) -> dict:
    return synth_config(args).params()


def generate(data_dir: Path, args) -> dict:
    """The generator lives in tenure/tools/synth.py (also `tenure log synth`)."""
    from tenure.tools.synth import generate as synth_generate

    def progress(stats: dict, elapsed: float) -> None:
        print(f"  ... {stats['records']:,} records written in {elapsed:.0f} s", flush=True)

    return synth_generate(data_dir, synth_config(args), progress)


# ------------------------------------------------------------------------------------------ server
def server_start(python: str, data_dir: Path, args, label: str, manifest: dict | None,
                 background: bool = False, kill: bool = False) -> dict:
    """`background`: with --load-in-background, timed to its ready line (listening) and to its `loaded
    __consumer_offsets` line (every partition loaded; groups answered 14 until then). `kill`: once ready,
    commit an offset, wait for the server's periodic recovery-point checkpoint to name it, then SIGKILL."""
    cmd = [python, "-m", "tenure", "serve", "--port", "0", "--data-dir", str(data_dir),
           "--offsets-partitions", str(args.offsets_partitions), "--log-level", "INFO"]
    if background:
        cmd.append("--load-in-background")
    if kill:
        cmd += ["--log-flush-offset-checkpoint-interval-ms", "500"]
    err = tempfile.TemporaryFile()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, bufsize=0, cwd=NEUTRAL_CWD)
    out = {"label": label, "cmd": " ".join(cmd[1:]), "load_avg": os.getloadavg()[0]}
    try:
        bootstrap, _ = wait_ready_line(proc, args.ready_timeout, poll_s=0.05)
        out["ready_s"] = time.perf_counter() - t0 if bootstrap else None
        if bootstrap is not None and background:
            deadline = time.monotonic() + args.ready_timeout
            while time.monotonic() < deadline and proc.poll() is None:
                err.seek(0)
                if LOADED.search(err.read().decode(errors="replace")):
                    out["all_loaded_s"] = time.perf_counter() - t0
                    break
                time.sleep(0.02)
        out["cpu_s"] = cpu_seconds(proc.pid)         # the server's CPU to ready (figures apart from the load)
        out.update(proc_status(proc.pid))
        if bootstrap is None:
            out["error"] = f"no ready line within {args.ready_timeout:.0f} s (exit code {proc.poll()})"
        elif manifest is not None:
            out["check"] = check_offsets(bootstrap, manifest, args.check_groups)
        if bootstrap is not None and kill:
            out["killed"] = commit_and_wait_checkpoint(bootstrap, data_dir, args.ready_timeout)
            proc.kill()
            proc.wait()
    finally:
        if proc.poll() is None:
            t1 = time.perf_counter()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            out["exit_s"] = time.perf_counter() - t1
        out["exit_code"] = proc.returncode
        err.seek(0)
        log = err.read().decode(errors="replace")
        m = OPENED.search(log)
        if m:
            out["opened"] = m.group(0)
        m = LOADED.search(log)
        if m:
            out["loaded"] = {"records": int(m.group(1)), "batches": int(m.group(2)), "groups": int(m.group(3)),
                             "seconds": float(m.group(4))}
        out["warnings"] = [ln for ln in log.splitlines() if re.search(r"WARNING|ERROR|CRITICAL|Traceback", ln)]
    return out


def cpu_seconds(pid: int) -> float | None:
    """user + system CPU seconds of a process so far (Linux /proc/PID/stat); None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def forget_clean_stop(data_dir: Path) -> None:
    """Remove the clean-shutdown marker (storage/cleanshut.py) and the recovery-point checkpoint
    (storage/datadir.py): the next start verifies every batch, as after a kill before anything was checkpointed
    (a peer tree's server neither writes nor removes them, so they must not outlive a peer's run)."""
    (data_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)
    (data_dir / "recovery-point-offset-checkpoint").unlink(missing_ok=True)


def _checkpointed(data_dir: Path) -> dict[str, int]:
    try:
        lines = (data_dir / "recovery-point-offset-checkpoint").read_text().splitlines()[2:]
    except FileNotFoundError:
        return {}
    return {f"{t}-{p}": int(o) for t, p, o in (ln.split(" ") for ln in lines)}


def commit_and_wait_checkpoint(bootstrap: str, data_dir: Path, timeout: float) -> dict:
    """Commit one offset (confluent-kafka; --fsync batch fsyncs it, raising the recovery point) and wait until
    the running server's periodic checkpoint names the new recovery point of __consumer_offsets."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    from tests.support.clients import create_topic
    try:
        create_topic(bootstrap, "bench-recovery-kill")
    except KafkaException as exc:            # a kept log from an earlier run has it
        if "already exists" not in str(exc).lower() and "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise
    before = _checkpointed(data_dir)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-recovery-kill", "enable.auto.commit": False,
                  "log_level": 0})
    try:
        c.commit(offsets=[TopicPartition("bench-recovery-kill", 0, 1)], asynchronous=False)
    finally:
        c.close()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        now = _checkpointed(data_dir)
        if any(now.get(k, -1) > before.get(k, -1) for k in now if k.startswith(OFFSETS_TOPIC)):
            return {"checkpoint": now, "waited_s": time.perf_counter() - t0}
        time.sleep(0.05)
    return {"checkpoint": _checkpointed(data_dir), "waited_s": None}


def check_offsets(bootstrap: str, manifest: dict, n: int) -> dict:
    """OffsetFetch + DescribeGroups for n sampled groups: do they hold what the generator wrote last?"""
    from kafka.protocol.admin.groups import DescribeGroupsRequest
    from kafka.protocol.consumer.group import OffsetFetchRequest

    from tests.support.wire import WireClient

    committed, expected = manifest["committed"], manifest["expected"]
    rng = random.Random(7)
    sample = rng.sample(sorted(expected), min(n, len(expected)))
    partitions = manifest["params"]["partitions"]
    bad, offsets_checked, members_checked = [], 0, 0
    with WireClient.to(bootstrap, timeout=30) as c:
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        for gid in sample:
            topic = expected[gid]["topic"]
            r = c.call(OffsetFetchRequest(group_id=gid, topics=[T(name=topic, partition_indexes=list(
                range(partitions)))], require_stable=False), 7)
            got = {p.partition_index: p.committed_offset for t in r.topics for p in t.partitions}
            want = {int(p): o for p, o in committed.get(gid, {}).items()}
            for p in range(partitions):
                offsets_checked += 1
                if got.get(p, -1) != want.get(p, -1):
                    bad.append(f"{gid} p{p}: fetched {got.get(p)} expected {want.get(p, -1)}")
        for i in range(0, len(sample), 20):
            r = c.call(DescribeGroupsRequest(groups=sample[i:i + 20], include_authorized_operations=False), 5)
            for g in r.groups:
                members_checked += 1
                mids = sorted(m.member_id for m in g.members)
                if mids != expected[g.group_id]["members"]:
                    bad.append(f"{g.group_id}: members {mids} differ from those written last "
                               f"{expected[g.group_id]['members']}")
    return {"groups": len(sample), "offsets": offsets_checked, "mismatches": bad}


# ------------------------------------------------------------------------------------------ in-process
def in_process(data_dir: str, segment_bytes: int, profile: bool, what_if: bool) -> dict:
    """Runs in a fresh interpreter (see main): open the logs, then the runtime's own load(), once per record
    reader this tree has (storage/reader.py: aiokafka's C reader where installed, kafka-python's), each
    timed in wall and CPU seconds, with the decode of the survivors and the one mutator timed inside it."""
    import gc

    from tenure.broker.topics import TopicRegistry
    from tenure.coordinator import GroupShard
    from tenure.coordinator.loader import iter_batches
    from tenure.coordinator.runtime import CoordinatorRuntime
    from tenure.protocol import records as rec
    from tenure.storage import reader
    from tenure.storage.datadir import DataDir
    from tenure.storage.segments import LogConfig, SegmentLog, partition_dir_name

    me = os.getpid()
    out = {"rss_start_kb": proc_status(me).get("VmRSS")}
    t0, c0 = time.perf_counter(), time.process_time()
    data = DataDir.open(data_dir, LogConfig(segment_bytes=segment_bytes))
    registry = TopicRegistry(1, data.open_log, data.catalog)
    registry.load()
    topic = registry.get(OFFSETS_TOPIC)
    out["open_s"], out["open_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    out["batches_indexed"] = sum(s.batches for plog in topic.partitions for s in plog.segments)
    out["rss_after_open_kb"] = proc_status(me).get("VmRSS")
    out["hwm_after_open_kb"] = proc_status(me).get("VmHWM")

    # the real load, with thin timing wrappers around the decode (records.decode) and the one mutator
    clock = time.perf_counter
    real_decode = rec.decode
    readers = getattr(reader, "RECORD_READERS", None) or ("kafka-python",)     # a tree without the seam
    out["loads"] = []
    for name in readers:
        used = reader.set_record_reader(name) if hasattr(reader, "set_record_reader") else name
        if used != name:
            continue                                       # "c" without aiokafka installed
        coord = GroupShard()               # every partition's groups in one shard: one state to measure
        runtime = CoordinatorRuntime(lambda _partition, coord=coord: coord, topic)
        spent = {"replay": 0.0, "decode": 0.0}
        real_replay = coord.replay

        def decode(key, value, spent=spent):
            t = clock()
            try:
                return real_decode(key, value)
            finally:
                spent["decode"] += clock() - t

        def replay(event, *offset, spent=spent, real_replay=real_replay):
            t = clock()
            real_replay(event, *offset)
            spent["replay"] += clock() - t

        rec.decode = decode
        coord.replay = replay
        gc.collect()
        try:
            t1, c1 = time.perf_counter(), time.process_time()
            report = runtime.load()
            load = {"reader": name, "load_s": time.perf_counter() - t1, "load_cpu_s": time.process_time() - c1,
                    "load_avg": os.getloadavg()[0]}
        finally:
            rec.decode = real_decode
            del coord.replay
        load.update(decode_s=spent["decode"], replay_s=spent["replay"], records=report.records,
                    batches=report.batches, groups=report.groups, replayed=report.replayed,
                    members=sum(len(g.members) for g in coord.groups.values()),
                    offsets=sum(len(o) for o in coord.offsets.values()))
        out["loads"].append(load)
        loaded_state = coord                       # the what-if compares its state with a real load's
        del runtime
    gc.collect()
    out["rss_after_load_kb"] = proc_status(me).get("VmRSS")     # (the last load's state still held)
    out["hwm_kb"] = proc_status(me).get("VmHWM")

    # batch reads alone (the runtime's iter_batches over every partition), to split the remainder
    t3, c3 = time.perf_counter(), time.process_time()
    for plog in topic.partitions:
        for _h, _raw in iter_batches(plog):
            pass
    out["read_only_s"], out["read_only_cpu_s"] = time.perf_counter() - t3, time.process_time() - c3

    if what_if:
        out["what_if"] = last_per_key(topic, loaded_state)
    if profile:
        import cProfile
        import io
        import pstats
        prof = cProfile.Profile()
        prof.enable()
        CoordinatorRuntime(lambda _partition: GroupShard(), topic).load()
        prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(18)
        out["profile_load"] = s.getvalue()
        prof = cProfile.Profile()
        prof.enable()
        again = [SegmentLog(Path(data_dir) / partition_dir_name(OFFSETS_TOPIC, i), LogConfig(segment_bytes))
                 for i in range(len(topic.partitions))]
        prof.disable()
        for plog in again:
            plog.close()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(10)
        out["profile_open"] = s.getvalue()
    logs = list(topic.partitions)
    for plog in logs:
        plog.close()
    if hasattr(data, "mark_clean_shutdown"):        # a tree with the clean-shutdown marker: stop cleanly, reopen
        t0, c0 = time.perf_counter(), time.process_time()
        for plog in logs:
            plog.flush()
        marked = data.mark_clean_shutdown(logs)
        out["clean_stop_s"], out["clean_stop_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
        data.close()
        if marked:
            t0, c0 = time.perf_counter(), time.process_time()
            data = DataDir.open(data_dir, LogConfig(segment_bytes=segment_bytes))
            registry = TopicRegistry(1, data.open_log, data.catalog)
            registry.load()
            data.finish_recovery()
            out["clean_open_s"], out["clean_open_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
            out["clean_open_segments"] = data.recovery_report()
            for plog in registry.get(OFFSETS_TOPIC).partitions:
                plog.close()
            if hasattr(data, "checkpoint_recovery_points"):   # a tree that trusts the checkpoint after a kill
                data.close()                   # a kill: no marker, the clean stop's recovery points still there
                t0, c0 = time.perf_counter(), time.process_time()
                data = DataDir.open(data_dir, LogConfig(segment_bytes=segment_bytes))
                registry = TopicRegistry(1, data.open_log, data.catalog)
                registry.load()
                data.finish_recovery()
                out["kill_open_s"], out["kill_open_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
                out["kill_open_segments"] = data.recovery_report()
                for plog in registry.get(OFFSETS_TOPIC).partitions:
                    plog.close()
    data.close()
    return out


def move_in_process(data_dir: str, segment_bytes: int) -> dict:
    """Runs in a fresh interpreter: a 2-broker server (ServerThread) on a copy-free open of the data dir,
    then the coordinator of the offsets partition moved to the other broker: timed from the control call
    to its return (the new broker has loaded the partition - COORDINATOR_LOAD_IN_PROGRESS meanwhile - and
    written its CoordinatorLoadRecord)."""
    from tenure.server.thread import ServerThread

    t0 = time.perf_counter()
    server = ServerThread(port=0, data_dir=data_dir, brokers=2, offsets_partitions=1,
                          segment_bytes=segment_bytes).start()
    out = {"start_s": time.perf_counter() - t0}
    try:
        group = "bench-move"
        moves = []
        for _ in range(2):
            to = 1 - server.live.coordinator_of(group)
            t1, c1 = time.perf_counter(), time.process_time()
            server.move_coordinator(group, to)
            moves.append({"to": to, "s": time.perf_counter() - t1, "cpu_s": time.process_time() - c1,
                          "load_avg": os.getloadavg()[0]})
        out["moves"] = moves
        out["records"] = server.live.load_report.records
    finally:
        server.stop()
    return out


def roll_flush_cost(segment_bytes: int) -> list[dict]:
    """A roll's own flush (storage/segments.py take_roll_flush: fsync, index files, directory) of one segment of
    `segment_bytes`, timed twice: its pages dirty (--fsync never) and already fsynced (--fsync batch)."""
    from tenure.storage.segments import LogConfig, SegmentLog
    from tests.support.wire import build_batch

    out = []
    with tempfile.TemporaryDirectory(prefix="tenure-roll-") as d:
        lg = SegmentLog(Path(d) / "t-0", LogConfig(segment_bytes=segment_bytes))
        jobs: list = []
        lg.on_roll = jobs.append
        raw = build_batch([(f"k{i}".encode(), b"v" * 180) for i in range(20)])
        while not jobs:
            lg.append(raw)
        seg = lg.segments[0]
        for pages in ("dirty (--fsync never)", "already fsynced (--fsync batch)"):
            t0, c0 = time.perf_counter(), time.process_time()
            jobs[-1]()
            out.append({"pages": pages, "mib": seg.size / 2**20, "batches": seg.batches,
                        "s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                        "load_avg": os.getloadavg()[0]})
            seg.sealed = seg.claimed = False
            jobs.append(lg.take_roll_flush())
        lg.close()
    return out


def last_per_key(topic, full) -> dict:
    """What-if (NOT what tenure does): read every record but decode and replay only the last one per
    key, in offset order (a compaction on read that keeps tombstones). Timed, and its state compared
    with the full replay's `full`. It can differ where a commit created an offsets-only group whose
    offsets were all deleted later: the full replay keeps that empty group, this does not."""
    from kafka.record.default_records import DefaultRecordBatch

    from tenure.coordinator import GroupShard
    from tenure.coordinator.loader import iter_batches
    from tenure.protocol import records as rec

    t0 = time.perf_counter()
    last: dict = {}
    for plog in topic.partitions:
        for h, raw in iter_batches(plog):
            if h.is_control:
                continue
            for r in DefaultRecordBatch(raw):
                k = r.key
                last.pop(k, None)                         # re-insert: dict order = order of last occurrence
                last[k] = r.value
    t1 = time.perf_counter()
    coord = GroupShard()
    for k, v in last.items():
        coord.replay(rec.decode(k, v))
    t2 = time.perf_counter()

    def state(c):
        return ({g: (x.generation, sorted(x.members)) for g, x in c.groups.items()},
                {g: {tp: r.offset for tp, r in o.items()} for g, o in c.offsets.items()})
    a, b = state(full), state(coord)
    return {"survivors": len(last), "scan_s": t1 - t0, "decode_replay_s": t2 - t1,
            "same_state": a == b, "groups_only_in_full": len(set(a[0]) - set(b[0])),
            "groups_only_here": len(set(b[0]) - set(a[0]))}


def run_in_process(python: str, data_dir: Path, args, cold: bool, mode: str = "--in-process") -> dict:
    if cold:
        drop_cache(data_dir)
    cmd = [python, str(Path(__file__).resolve()), mode, str(data_dir), "--segment-bytes", str(args.segment_bytes)]
    if args.profile and mode == "--in-process":
        cmd.append("--profile")
    if args.what_if and mode == "--in-process":
        cmd.append("--what-if")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.ready_timeout * 4, cwd=NEUTRAL_CWD)
    if p.returncode != 0:
        return {"error": p.stderr[-2000:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------ main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="records to write (default 1000000)")
    ap.add_argument("--groups", type=int, default=2000, help="consumer groups (default 2000)")
    ap.add_argument("--members", type=int, default=8, help="static members per group (default 8)")
    ap.add_argument("--partitions", type=int, default=16, help="partitions of each group's topic (default 16)")
    ap.add_argument("--topics", type=int, default=50, help="distinct topics the groups consume (default 50)")
    ap.add_argument("--segment-bytes", type=int, default=100 * 1024 * 1024,
                    help="roll segments at this size (default 100 MiB, Kafka's offsets.topic.segment.bytes)")
    ap.add_argument("--offsets-partitions", type=int, default=1, help="__consumer_offsets partitions (default 1)")
    ap.add_argument("--restart-rate", type=float, default=0.002,
                    help="per event: chance of a rolling restart of a whole group (default 0.002)")
    ap.add_argument("--rebalance-rate", type=float, default=0.0005,
                    help="per event: chance of a rebalance (generation + 1) (default 0.0005)")
    ap.add_argument("--delete-rate", type=float, default=0.00005,
                    help="per event: chance of a group deletion (tombstones) (default 0.00005)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", default=None, help="generate into (or reuse) this dir and keep it")
    ap.add_argument("--ready-timeout", type=float, default=120.0, help="give up on a server start after this")
    ap.add_argument("--check-groups", type=int, default=50, help="groups whose offsets are checked (default 50)")
    ap.add_argument("--warm", action="store_true", help="also start the server once more on a warm page cache")
    ap.add_argument("--profile", action="store_true", help="cProfile the in-process load and log open "
                    "(adds ~3x the load time)")
    ap.add_argument("--what-if", action="store_true", help="also time decoding and replaying only the last "
                    "record per key (an experiment, not what tenure does)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--baseline-python", default=None, help="the interpreter of a peer tree (e.g. a worktree of "
                    "main with its own venv): its server start and in-process load run beside this tree's, "
                    "interleaved, and the ratios are printed")
    ap.add_argument("--background", action="store_true", help="also start this tree's server with "
                    "--load-in-background: ready (listening) and all loaded timed apart")
    ap.add_argument("--no-move", action="store_true", help="skip the coordinator move in a 2-broker server")
    ap.add_argument("--roll-flush", action="store_true", help="also time this tree's roll flush of one segment "
                    "of --segment-bytes (written into a temporary dir)")
    ap.add_argument("--in-process", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--move-in-process", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.in_process:
        print(json.dumps(in_process(args.in_process, args.segment_bytes, args.profile, args.what_if)))
        return 0
    if args.move_in_process:
        print(json.dumps(move_in_process(args.move_in_process, args.segment_bytes)))
        return 0

    print(f"python {sys.version.split()[0]}, cpus {os.cpu_count()}; {args.records:,} records, {args.groups:,} "
          f"groups x {args.members} static members, {args.partitions} partitions per group topic, segments of "
          f"{args.segment_bytes:,} B, {args.offsets_partitions} __consumer_offsets partition(s); load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; tree {tree_version()}", flush=True)
    tmp = None
    if args.keep:
        data_dir = Path(args.keep).resolve()
    else:
        tmp = tempfile.mkdtemp(prefix="tenure-recovery-", dir=os.environ.get("TMPDIR", "/tmp"))
        data_dir = Path(tmp) / "data"
    try:
        manifest = None
        mf = data_dir / MANIFEST
        if mf.exists():
            manifest = json.loads(mf.read_text())
            if manifest["params"] != _params(args):
                raise SystemExit(f"{data_dir} holds a log generated with other parameters: {manifest['params']}")
            print(f"reusing the log in {data_dir}")
        else:
            if data_dir.exists() and any(data_dir.iterdir()):
                raise SystemExit(f"{data_dir} is not empty and has no {MANIFEST}; choose another --keep dir")
            print(f"generating into {data_dir} ...", flush=True)
            manifest = generate(data_dir, args)
            mf.write_text(json.dumps(manifest))
        s = manifest["stats"]
        print(f"log: {s['records']:,} records in {s['batches']:,} batches, {s['bytes'] / 2**20:,.1f} MiB in "
              f"{s['segments']} segment file(s); {s['offset_records']:,} offset commits + {s['group_records']:,} "
              f"group records + {s.get('event_records', 0):,} static-member events ({s['tombstones']:,} "
              f"tombstones); events: {s['commits']:,} commits, "
              f"{s['restarts']:,} rolling restarts, {s['rebalances']:,} rebalances, {s['deletions']:,} deletions"
              + (f"; written in {s['write_s']:.1f} s + flush {s['flush_s']:.1f} s" if "write_s" in s else ""),
              flush=True)

        trees = [("this tree", args.python)] + ([("baseline", args.baseline_python)] if args.baseline_python else [])
        runs, ips, moves = {}, {}, {}
        for label, python in trees:
            with tempfile.TemporaryDirectory(prefix="tenure-empty-") as empty:
                runs[label] = [server_start(python, Path(empty), args, f"{label}: empty data dir (baseline)", None)]
            report_run(runs[label][-1])
        for label, python in trees:                  # interleaved: each tree's cold start, then the next's
            drop_cache(data_dir)
            forget_clean_stop(data_dir)              # as after a kill: every batch verified
            runs[label].append(server_start(python, data_dir, args, f"{label}: server, cold page cache", manifest))
            report_run(runs[label][-1])
            if label == "this tree":                 # its SIGTERM stop just left the clean-shutdown marker
                drop_cache(data_dir)
                runs[label].append(server_start(python, data_dir, args, f"{label}: after a clean stop, cold "
                                                "page cache", manifest, kill=True))
                report_run(runs[label][-1])
                drop_cache(data_dir)                 # ... and that server was SIGKILLed after its checkpoint
                runs[label].append(server_start(python, data_dir, args, f"{label}: after a SIGKILL, checkpoint "
                                                "kept, cold page cache", manifest))
                report_run(runs[label][-1])
        if args.background:                          # this tree only (a flag the baseline may not have)
            drop_cache(data_dir)
            forget_clean_stop(data_dir)
            runs["this tree"].append(server_start(args.python, data_dir, args, "this tree: --load-in-background, "
                                                  "cold page cache", manifest, background=True))
            report_run(runs["this tree"][-1])
        if args.warm:
            for label, python in trees:
                forget_clean_stop(data_dir)
                runs[label].append(server_start(python, data_dir, args, f"{label}: server, warm page cache", manifest))
                report_run(runs[label][-1])
        for label, python in trees:
            forget_clean_stop(data_dir)
            ips[label] = run_in_process(python, data_dir, args, cold=False)
            print()
            if "error" in ips[label]:
                print(f"[{label}] in-process load failed:\n{ips[label]['error']}")
            else:
                report_in_process(label, ips[label], s)
        if not args.no_move:
            print()
            for label, python in trees:
                forget_clean_stop(data_dir)
                moves[label] = run_in_process(python, data_dir, args, cold=False, mode="--move-in-process")
                report_move(label, moves[label], s)
        if args.roll_flush:
            print()
            for r in roll_flush_cost(args.segment_bytes):
                print(f"[this tree] a roll's flush of a {r['mib']:.0f} MiB segment ({r['batches']:,} batches), pages "
                      f"{r['pages']}: {r['s']:.3f} s wall, {r['cpu_s']:.3f} s CPU, on the data dir's flusher "
                      f"thread; load average {r['load_avg']:.1f}")
        for label, _ in trees:
            if "error" not in ips[label]:
                summarize(label, runs[label], ips[label], s)
        if args.baseline_python:
            compare(runs, ips, moves, s)
        print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())} (other processes on "
              f"this machine compete for its {os.cpu_count()} cores)")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def report_run(r: dict) -> None:
    line = f"[{r['label']}] "
    if r.get("ready_s") is None:
        line += f"FAILED: {r.get('error')}"
    else:
        line += f"ready in {r['ready_s']:.2f} s"
        if "all_loaded_s" in r:
            line += f", every partition loaded at {r['all_loaded_s']:.2f} s (14 for their groups until then)"
        line += f" (load average {r['load_avg']:.1f})"
        if r.get("cpu_s") is not None:
            line += f", CPU to ready {r['cpu_s']:.2f} s"
        if "loaded" in r:
            ld = r["loaded"]
            line += (f"; server log: loaded {ld['records']:,} records in {ld['batches']:,} batches, "
                     f"{ld['groups']:,} groups, replay {ld['seconds']:.2f} s")
        line += f"; VmRSS {mib(r.get('VmRSS'))}, VmHWM {mib(r.get('VmHWM'))}"
        if "exit_s" in r:
            line += f"; SIGTERM to exit {r['exit_s']:.2f} s (code {r['exit_code']})"
        if "killed" in r:
            k = r["killed"]
            line += (f"; committed one offset, SIGKILLed {k['waited_s']:.2f} s later once the periodic checkpoint "
                     f"named it ({k['checkpoint']})" if k["waited_s"] is not None else
                     f"; SIGKILLed without a checkpoint naming the commit ({k['checkpoint']})")
    print(line, flush=True)
    if "opened" in r:
        print("    server: " + r["opened"], flush=True)
    c = r.get("check")
    if c:
        print(f"    checked {c['groups']} sampled groups over the wire: {c['offsets']} committed offsets "
              f"(OffsetFetch v7) and their members (DescribeGroups v5): "
              + ("all as written" if not c["mismatches"] else f"{len(c['mismatches'])} MISMATCHES e.g. "
                 f"{c['mismatches'][:3]}"), flush=True)
    for w in r.get("warnings", [])[:5]:
        print("    server: " + w)


def report_in_process(label: str, ip: dict, s: dict) -> None:
    print(f"[{label}] in-process (fresh interpreter, warm cache, no server): {s['records']:,} records in "
          f"{ip['batches_indexed']:,} batches")
    print(f"  open the logs (scan: length, magic, CRC-32C of every batch; index)  {ip['open_s']:7.2f} s  "
          f"(CPU {ip['open_cpu_s']:.2f} s; {s['bytes'] / 2**20 / max(ip['open_s'], 1e-9):,.0f} MiB/s)")
    for ld in ip["loads"]:
        n = max(ld["records"], 1)
        rest = ld["load_s"] - ld["decode_s"] - ld["replay_s"]
        print(f"  CoordinatorRuntime.load(), record reader {ld['reader']:<13} {ld['load_s']:7.2f} s  "
              f"(CPU {ld['load_cpu_s']:.2f} s): {1e6 * ld['load_s'] / n:.2f} us/record wall, "
              f"{1e6 * ld['load_cpu_s'] / n:.2f} us/record CPU; load average {ld['load_avg']:.1f}")
        print(f"    {ld['records']:,} records -> {ld['replayed']:,} replayed (the latest per key) -> "
              f"{ld['groups']:,} groups, {ld['members']:,} members, {ld['offsets']:,} committed offsets; decode "
              f"{ld['decode_s']:.2f} s, replay {ld['replay_s']:.2f} s, reading the batches and their records "
              f"and keeping the latest per key {rest:.2f} s")
    if "clean_open_s" in ip:
        print(f"  a clean stop (flush, index files, recovery points, marker)          {ip['clean_stop_s']:7.2f} s  "
              f"(CPU {ip['clean_stop_cpu_s']:.2f} s)")
        scanned, trusted = ip["clean_open_segments"]
        print(f"  open the logs after it ({scanned} segment(s) verified, {trusted} trusted)             "
              f"{ip['clean_open_s']:7.2f} s  (CPU {ip['clean_open_cpu_s']:.2f} s; against {ip['open_cpu_s']:.2f} s "
              f"after a kill: {ip['open_cpu_s'] / max(ip['clean_open_cpu_s'], 1e-9):.0f}x less CPU)")
    if "kill_open_s" in ip:
        scanned, trusted = ip["kill_open_segments"]
        print(f"  open after a kill that kept that checkpoint ({scanned} verified, {trusted} trusted)       "
              f"{ip['kill_open_s']:7.2f} s  (CPU {ip['kill_open_cpu_s']:.2f} s; against {ip['open_cpu_s']:.2f} s "
              f"with no checkpoint)")
    print(f"  batch reads alone (the segment reader, every batch checked again)   {ip['read_only_s']:7.2f} s  "
          f"(CPU {ip['read_only_cpu_s']:.2f} s)")
    print(f"  memory: VmRSS {mib(ip['rss_start_kb'])} after imports, {mib(ip['rss_after_open_kb'])} after "
          f"open (VmHWM {mib(ip['hwm_after_open_kb'])} by then), {mib(ip['rss_after_load_kb'])} after the loads; "
          f"VmHWM {mib(ip['hwm_kb'])}")
    w = ip.get("what_if")
    if w:
        print(f"  what-if, decode + replay only the last record per key (NOT what tenure does): "
              f"{w['survivors']:,} survivors; reading every record {w['scan_s']:.2f} s + decode/replay "
              f"{w['decode_replay_s']:.2f} s = {w['scan_s'] + w['decode_replay_s']:.2f} s; same state as the "
              f"full replay: {w['same_state']} (groups only in the full replay: {w['groups_only_in_full']}, "
              f"only here: {w['groups_only_here']})")
    for key in ("profile_load", "profile_open"):
        if key in ip:
            print(f"\ncProfile, {key.split('_')[1]} (sorted by own time):")
            print("\n".join(ln for ln in ip[key].splitlines() if ln.strip()))


def report_move(label: str, mv: dict, s: dict) -> None:
    if "error" in mv:
        print(f"[{label}] coordinator move failed:\n{mv['error']}")
        return
    n = max(s["records"], 1)
    for m in mv["moves"]:
        print(f"[{label}] coordinator move of the offsets partition to broker {m['to']} (2 brokers, in-process): "
              f"{m['s']:.2f} s (CPU {m['cpu_s']:.2f} s) = {1e6 * m['s'] / n:.2f} us/record; load average "
              f"{m['load_avg']:.1f}")


def summarize(label: str, runs: list[dict], ip: dict, s: dict) -> None:
    base = runs[0]
    print()
    print(f"[{label}] {'start-up to ready':<34}{'ready':>9}{'replay':>9}{'rest':>9}{'VmRSS':>11}{'VmHWM':>11}")
    for r in runs:
        if r.get("ready_s") is None:
            print(f"{r['label']:<45}{'failed':>9}")
            continue
        rep = r.get("loaded", {}).get("seconds")
        rest = r["ready_s"] - rep if rep is not None and "all_loaded_s" not in r else None   # background: apart
        print(f"{r['label']:<45}{r['ready_s']:>8.2f}s{(f'{rep:.2f}s' if rep is not None else '-'):>9}"
              f"{(f'{rest:.2f}s' if rest is not None else '-'):>9}{mib(r.get('VmRSS')):>11}{mib(r.get('VmHWM')):>11}")
    loaded = [r for r in runs[1:] if r.get("ready_s")]
    if loaded and base.get("ready_s") and ip.get("loads"):
        r, ld = loaded[0], ip["loads"][0]
        rep = r.get("loaded", {}).get("seconds")
        extra_kb = (r.get("VmRSS") or 0) - (base.get("VmRSS") or 0)
        print(f"{s['records']:,} records: start-up {r['ready_s'] - base['ready_s']:.1f} s over the empty-dir "
              f"baseline; the server's load {1e6 * rep / s['records'] if rep else float('nan'):.2f} us/record; "
              f"memory after load {extra_kb / 1024:,.0f} MiB over the baseline = "
              f"{1024 * extra_kb / max(ld['members'] + ld['offsets'], 1):,.0f} B per live member or committed "
              f"offset; peak (VmHWM) {mib(r.get('VmHWM'))}")


def compare(runs: dict, ips: dict, moves: dict, s: dict) -> None:
    """This tree against the baseline tree, measured in the same run."""
    print()

    def cold(label):
        got = [r for r in runs[label][1:] if "cold" in r["label"] and r.get("ready_s")]
        return got[0] if got else None
    a, b = cold("this tree"), cold("baseline")
    clean = [r for r in runs["this tree"] if "clean stop" in r["label"] and r.get("ready_s")]
    killed = [r for r in runs["this tree"] if "SIGKILL" in r["label"] and r.get("ready_s")]
    if a and b and killed:
        k = killed[0]
        print(f"ready after a SIGKILL with a recovery-point checkpoint (cold cache): this tree {k['ready_s']:.2f} s "
              f"(load average {k['load_avg']:.1f}, CPU to ready {k.get('cpu_s') or 0:.2f} s); with no checkpoint "
              f"{a['ready_s']:.2f} s (CPU {a.get('cpu_s') or 0:.2f} s): {a['ready_s'] / k['ready_s']:.2f}x; the "
              f"baseline after a kill {b['ready_s']:.2f} s (load average {b['load_avg']:.1f}, CPU "
              f"{b.get('cpu_s') or 0:.2f} s): {b['ready_s'] / k['ready_s']:.2f}x")
    if a and b and clean:
        c = clean[0]
        print(f"ready after a clean stop (cold cache): this tree {c['ready_s']:.2f} s (load average "
              f"{c['load_avg']:.1f}); after a kill {a['ready_s']:.2f} s (load average {a['load_avg']:.1f}): "
              f"{a['ready_s'] / c['ready_s']:.2f}x; the baseline {b['ready_s']:.2f} s (load average "
              f"{b['load_avg']:.1f}): {b['ready_s'] / c['ready_s']:.2f}x")
        if c.get("cpu_s") and a.get("cpu_s") and b.get("cpu_s"):
            print(f"the server's CPU to ready: after a clean stop {c['cpu_s']:.2f} s, after a kill {a['cpu_s']:.2f} s "
                  f"({a['cpu_s'] / c['cpu_s']:.2f}x), the baseline {b['cpu_s']:.2f} s ({b['cpu_s'] / c['cpu_s']:.2f}x)")
    if a and b:
        ra, rb = a.get("loaded", {}).get("seconds"), b.get("loaded", {}).get("seconds")
        print(f"ready (cold cache): this tree {a['ready_s']:.2f} s, baseline {b['ready_s']:.2f} s: "
              f"{b['ready_s'] / a['ready_s']:.2f}x faster")
        if ra and rb:
            print(f"the server's load per record: this tree {1e6 * ra / s['records']:.2f} us, baseline "
                  f"{1e6 * rb / s['records']:.2f} us: {rb / ra:.2f}x faster")
    la, lb = ips["this tree"].get("loads"), ips["baseline"].get("loads")
    if la and lb:
        base = {y["reader"]: y for y in lb}
        for x in la:          # each reader against the baseline's same reader (a baseline without it: its first one)
            y = base.get(x["reader"], lb[0])
            print(f"in-process load CPU per record, reader {x['reader']}: {1e6 * x['load_cpu_s'] / x['records']:.2f} us "
                  f"against the baseline's (reader {y['reader']}) {1e6 * y['load_cpu_s'] / y['records']:.2f} us: "
                  f"{(y['load_cpu_s'] / y['records']) / (x['load_cpu_s'] / x['records']):.2f}x")
        oa, ob = ips["this tree"]["open_cpu_s"], ips["baseline"]["open_cpu_s"]
        print(f"open (scan) CPU: this tree {oa:.2f} s, baseline {ob:.2f} s: {ob / oa:.2f}x")
    ma, mb = moves.get("this tree", {}).get("moves"), moves.get("baseline", {}).get("moves")
    if ma and mb:
        print(f"coordinator move: this tree {min(m['s'] for m in ma):.2f} s, baseline {min(m['s'] for m in mb):.2f} s "
              f"(best of {len(ma)}): {min(m['s'] for m in mb) / min(m['s'] for m in ma):.2f}x")


if __name__ == "__main__":
    sys.exit(main())
