"""The driver's Spark side: the SparkSession of an audit (a local master, or a cluster's with the `tenure`
package and a packed Python environment shipped to its executors), and the audit's progress lines on stderr
(its own messages, and a running job's task counts)."""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

EXECUTOR_ENV_DIR = "environment"     # where spark.archives unpacks --python-env on each executor
_T0 = time.monotonic()

# Spark's own log (log4j 2) while an audit runs: its warnings and errors, one line each, no start-up banner
# ("Using Spark's default log4j profile", "Setting default log level") - those come only with Spark's default
# profile, which this file replaces
LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
"""
JVM_LOG: Path | None = None          # where the JVM's stderr went (session(); None: the terminal)
JVM_LOG_DIR: Path | None = None      # ... in this directory, with the log4j 2 settings (None: no JVM started)


def progress(msg: str) -> None:
    print(f"audit: [{time.monotonic() - _T0:6.1f} s] {msg}", file=sys.stderr, flush=True)


class StageProgress:
    """While a Spark job runs: a thread polling the status tracker, printing its stages' task counts
    (one task = one segment file in the read stage) when they change, every `interval` seconds."""

    def __init__(self, sc, label: str, interval: float) -> None:
        self.sc, self.label, self.interval = sc, label, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="audit-progress", daemon=True)

    def _run(self) -> None:
        tracker, last = self.sc.statusTracker(), None
        while not self._stop.wait(self.interval):
            try:
                infos = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            except Exception:             # the context is stopping
                return
            done = sum(i.numCompletedTasks for i in infos if i is not None)
            total = sum(i.numTasks for i in infos if i is not None)
            running = sum(i.numActiveTasks for i in infos if i is not None)
            if total and (done, total, running) != last:
                last = (done, total, running)
                progress(f"{self.label}: {done}/{total} done, {running} running")

    def __enter__(self) -> StageProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


def package_zip(dest_dir: str) -> str:
    """The installed `tenure` package (every subpackage, wherever package-dir maps it) as one zip, for
    executors of a remote master (spark.submit.pyFiles / SparkContext.addPyFile)."""
    import importlib
    names = ["tenure", "tenure.protocol", "tenure.protocol.schemas", "tenure.broker", "tenure.storage",
             "tenure.coordinator", "tenure.audit", "tenure.catchup"]
    path = os.path.join(dest_dir, "tenure.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name in names:
            pkg = importlib.import_module(name)
            src = Path(list(pkg.__path__)[0])
            for f in sorted(src.iterdir()):
                if f.is_file() and f.suffix in (".py", ".json"):
                    z.write(f, "/".join(name.split(".")) + "/" + f.name)
    return path


@contextlib.contextmanager
def _stderr_to(path: Path | None):
    """While a JVM is started: this process's stderr (the descriptor it inherits) is `path`, so whatever the
    JVM and the Python workers it starts write there - log4j's lines, the launcher's `WARNING: Using incubator
    modules`, a worker's traceback - lands in that file, not between the audit's progress lines."""
    if path is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def session(master: str = "local[*]", app: str = "tenure-audit", python_env: str | None = None,
            conf: dict[str, str] | None = None, spark_log: bool = False) -> SparkSession:
    """A SparkSession for the audit. A local master runs the workers on this interpreter. Any other
    master gets the `tenure` package as a zip (`addPyFile`) and, with `python_env`, a packed Python
    environment holding the executors' third-party dependencies (`tenure.audit.pack`): shipped with
    `spark.archives` and unpacked as `./environment` in each executor's working directory, whose
    `bin/python` runs the Python workers. `conf`: further Spark settings (`--conf K=V`). Spark's and the
    JVM's own lines (warnings and errors) go to a file (JVM_LOG, named by the caller's progress line) unless
    `spark_log`, when they go to stderr as they come."""
    global JVM_LOG, JVM_LOG_DIR
    JVM_LOG = JVM_LOG_DIR = None
    log4j = ""
    if SparkContext._gateway is None:                 # a JVM is launched now (not one already running)
        JVM_LOG_DIR = Path(tempfile.mkdtemp(prefix="tenure-audit-spark-"))
        (JVM_LOG_DIR / "log4j2.properties").write_text(LOG4J2)
        log4j = f"-Dlog4j2.configurationFile=file:{JVM_LOG_DIR / 'log4j2.properties'}"
        JVM_LOG = None if spark_log else JVM_LOG_DIR / "spark.log"
    b = (SparkSession.builder.master(master).appName(app)
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "4")
         .config("spark.default.parallelism", "4")
         .config("spark.sql.session.timeZone", "UTC")
         # the cached DataFrames hold a few percent of the log: building the compressed in-memory columns
         # (dictionary statistics of every string column) cost more CPU than anything they saved
         .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
         .config("spark.ui.showConsoleProgress", "false")    # progress: our own lines on stderr
         .config("spark.driver.extraJavaOptions", log4j)                  # for a master other than local
         # offsets_history's part files (one or more per piece: 85 at 10M records) are given by path: Spark
         # would list more than 32 with a job of its own; the driver stats them itself
         .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "4096"))
    if master.startswith("local"):
        # loopback only; the workers run this interpreter, where tenure and its dependencies are installed
        b = (b.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.pyspark.python", sys.executable))
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # the JVM's optimizing JIT compiler (C2) cost more CPU than it saved in a job of seconds to minutes
        # on two cores (a third of the JVM's CPU at 1M records, docs/benchmarks.md); --conf overrides it
        # without C2 the JVM's code cache defaults to 48 MiB, which a long-lived session running many audits
        # (the tests' one session) filled: "Out of space in CodeCache for adapters" killed the JVM
        b = b.config("spark.driver.extraJavaOptions",
                     f"-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m {log4j}")
        # the one JVM is driver and executor: Spark's default 1g heap ran out at 10M records (Java heap
        # space, while the persisted read spilled to disk); --conf spark.driver.memory=... overrides it
        b = b.config("spark.driver.memory", "2g")
        # the JVM reads it at start: without it Spark warns that the host name resolves to a loopback
        # address and picks another interface, which a local run never uses
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    elif python_env is not None:
        where = python_env if "://" in python_env else os.path.abspath(python_env)   # hdfs://, s3a://, ...
        b = b.config("spark.archives", f"{where}#{EXECUTOR_ENV_DIR}")
        # read by SparkContext when it starts: the executors' Python workers run the packed interpreter
        os.environ["PYSPARK_PYTHON"] = f"./{EXECUTOR_ENV_DIR}/bin/python"
    for k, v in (conf or {}).items():
        b = b.config(k, v)
    # py4j logs each gateway connection it closes at INFO; the audit's own progress lines are enough
    logging.getLogger("py4j").setLevel(logging.WARNING)
    with _stderr_to(JVM_LOG):
        spark = b.getOrCreate()
    if not master.startswith("local"):
        spark.sparkContext.addPyFile(package_zip(tempfile.mkdtemp(prefix="tenure-audit-")))
    return spark
