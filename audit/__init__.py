"""`tenure audit`: a PySpark job over the coordinator's __consumer_offsets segment files (docs/audit.md).

Optional: install with the `audit` extra (pyspark, matplotlib, pandas, pyarrow). Importing this package
does not import pyspark; `tenure.audit.job` does.
"""
