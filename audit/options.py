"""What `tenure audit` is asked to do (`Options`): the data dir, the output, the Spark master, the filters,
the anomaly thresholds and how the read is cut into pieces."""
from __future__ import annotations

from dataclasses import dataclass

from .fold import Checks

SPLIT_BYTES = 16 << 20               # pieces per segment file: both cores of a small machine read one big file


@dataclass
class Options:
    data_dir: str
    out: str
    master: str = "local[*]"
    group: str | None = None
    since: int | None = None          # ms since the epoch; keeps rows whose time is >= since
    until: int | None = None          # ms since the epoch; keeps rows whose time is < until
    storm_k: int = 5                  # more than K rebalances ...
    storm_window_ms: int = 60_000     # ... within this window is a storm
    expiry_n: int = 2                 # an instance expiring at least N times
    churn_n: int = 4                  # an instance with at least N distinct member ids
    report: bool = True
    read_attempts: int = 3            # reads of a partition whose files a compaction swap changed meanwhile
    split_bytes: int | None = SPLIT_BYTES   # a segment file is read as pieces of about this size (listing.split)
    progress_interval_s: float = 5.0  # progress of the read stage on stderr every so often
    python_env: str | None = None     # a packed environment (tenure.audit.pack) for a cluster's executors
    conf: dict | None = None          # further Spark settings
    spark_log: bool = False           # Spark's and the JVM's own lines on stderr (default: in a file)

    def checks(self) -> Checks:
        return Checks(self.since, self.until, self.storm_k, self.storm_window_ms, self.expiry_n, self.churn_n)
