"""The Spark jobs the audit costs after the read: each job is fixed cost on a small machine."""
import pyarrow as pa
import pyarrow.parquet as pq


def test_many_part_files_are_listed_without_a_spark_job(spark, tmp_path):
    # offsets_history's part files come from the read tasks (one or more per piece: 85 at 10M records);
    # Spark lists more than 32 given paths with a job of its own unless the session raises that threshold
    files = []
    for i in range(40):
        f = tmp_path / f"part-{i:05d}.parquet"
        pq.write_table(pa.table({"x": pa.array([i], pa.int64())}), str(f))
        files.append(str(f))
    sc = spark.sparkContext
    sc.setJobGroup("tenure-listing-test", "listing the part files")
    try:
        df = spark.read.schema("x long").parquet(*files)
        listing_jobs = list(sc.statusTracker().getJobIdsForGroup("tenure-listing-test"))
        rows = sorted(r.x for r in df.collect())
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
    assert listing_jobs == []
    assert rows == list(range(40))
