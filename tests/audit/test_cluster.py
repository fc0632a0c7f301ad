"""`tenure audit` on a real Spark standalone cluster: a master and two workers on loopback, started with the
scripts inside the pyspark package (`bin/spark-class ...deploy.master.Master` / `...deploy.worker.Worker`),
each worker with one core and 512 MiB. The executors run a Python with none of tenure's dependencies: the
job ships `tenure` as a zip and its third-party dependencies as a packed environment (`python -m
tenure.audit.pack`, sent with spark.archives; packed by the audit itself when it is given no --python-env).
The tables must equal those of the same audit on `local[2]`,
on a log made by the real scenario of test_scenario (confluent-kafka static consumers against the server).
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyspark
import pytest

from tenure.audit import job, pack, spark_session

from .test_scenario import scenario

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"


def _env() -> dict:
    """What the master, the workers and so the executors see: loopback, and no trace of this venv (no
    PYTHONPATH, VIRTUAL_ENV or its bin/ on the PATH), so an executor finds nothing installed by us."""
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
    return env


def _wait_log(path: Path, pattern: str, proc: subprocess.Popen, timeout: float = 120) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(pattern, path.read_text(errors="replace"))
        if m:
            return m
        assert proc.poll() is None, f"{path.name} exited {proc.returncode}:\n{path.read_text()[-3000:]}"
        time.sleep(0.5)
    raise AssertionError(f"no {pattern!r} in {path} after {timeout} s:\n{path.read_text()[-3000:]}")


class Standalone:
    """A standalone master and `workers` workers on 127.0.0.1 with free ports; stopped by process group."""

    def __init__(self, root: Path, workers: int = 2) -> None:
        self.root, self.procs, self.env = root, [], _env()
        root.mkdir(parents=True, exist_ok=True)
        self.work_dirs: list[Path] = []
        try:
            log = root / "master.log"
            master = self._start(log, "org.apache.spark.deploy.master.Master",
                                 "--host", "127.0.0.1", "--port", "0", "--webui-port", "0")
            self.url = _wait_log(log, r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", master).group(1)
            for i in range(workers):
                work = root / f"worker-{i}"
                work.mkdir()
                self.work_dirs.append(work)
                log = root / f"worker-{i}.log"
                w = self._start(log, "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                                "--port", "0", "--webui-port", "0", "--cores", "1", "--memory", "512m",
                                "--work-dir", str(work))
                _wait_log(log, r"Successfully registered with master", w)
        except BaseException:
            self.stop()
            raise

    def _start(self, log: Path, cls: str, *args: str) -> subprocess.Popen:
        p = subprocess.Popen([str(SPARK_CLASS), cls, *args], stdout=log.open("w"), stderr=subprocess.STDOUT,
                             env=self.env, cwd=self.root, start_new_session=True)
        self.procs.append(p)
        return p

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)


def _rows(spark, path: Path) -> list:
    return sorted((r.asDict(recursive=True) for r in spark.read.parquet(str(path)).collect()), key=repr)


@pytest.mark.timeout(900)
def test_the_audit_on_a_standalone_cluster_equals_local(spark, tmp_path):
    base = getattr(sys, "_base_executable", sys.executable)
    bare = subprocess.run([base, "-c", "import kafka"], capture_output=True, env=_env())
    assert bare.returncode != 0, f"{base} has kafka-python: this test needs a base Python without tenure's deps"
    pool = ThreadPoolExecutor(1)
    starting = pool.submit(Standalone, tmp_path / "spark")   # its JVMs start while the scenario's clients wait
    try:
        data = tmp_path / "data"
        scenario(data)
        local_out = tmp_path / "local"
        code, _ = job.run(job.Options(str(data), str(local_out), report=False), spark=spark)
        assert code == 0
        cluster = starting.result()
        cluster_out = tmp_path / "cluster"
        # no --python-env: the audit packs the executors' environment itself, once, into its cache dir
        cmd = [sys.executable, "-m", "tenure", "audit", str(data), "--out", str(cluster_out), "--master", cluster.url,
               "--no-report", "--conf", "spark.executor.memory=512m", "--conf", "spark.executor.cores=1",
               "--conf", "spark.cores.max=2"]
        cache = tmp_path / "cache"
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                           env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "XDG_CACHE_HOME": str(cache)})
        assert p.returncode == 0, p.stderr[-5000:]
        [env_archive] = (cache / "tenure").glob("audit-env-py*.tar.gz")
        assert f"packing the executors' Python environment ({', '.join(pack.requirements())}) once, into " \
               f"{env_archive}" in p.stderr, p.stderr[-3000:]
    finally:
        pool.shutdown()
        if starting.exception() is None:
            starting.result().stop()
    assert f"starting Spark ({cluster.url})" in p.stderr

    # tasks ran on both workers, each executor that ran one with the archive unpacked as ./environment in
    # its work dir (an executor the worker started late, e.g. to replace a lost one, may have run none)
    executors = {d: (d / "stderr").read_text(errors="replace")
                 for w in cluster.work_dirs for d in w.glob("app-*/*") if d.is_dir()}
    ran = [d for d, log in executors.items() if "Running task" in log]
    assert {d.parent.parent for d in ran} == set(cluster.work_dirs), list(executors)
    for d in ran:
        assert (d / spark_session.EXECUTOR_ENV_DIR / "bin" / "python").exists(), d
    assert not [d for d, log in executors.items() if "ModuleNotFoundError" in log]

    # the same tables, row for row, and not empty
    for name in job.TABLES:
        local_rows, cluster_rows = _rows(spark, local_out / name), _rows(spark, cluster_out / name)
        assert cluster_rows == local_rows, name
    assert len(_rows(spark, cluster_out / "member_map_history")) == 6
    assert len(_rows(spark, cluster_out / "static_events")) == 10
