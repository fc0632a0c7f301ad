"""`tenure audit`: a PySpark job over the coordinator's __consumer_offsets segment files (docs/audit.md).

Optional: install with the `audit` extra (pyspark, matplotlib, pandas, pyarrow). Importing this package
does not import pyspark; `tenure.audit.job` does.
"""
import tenure.protocol  # noqa: F401 - first: it loads kafka-python without its import-time warning

# what to tell someone without the extra: an installed tenure or a clone of the repository
INSTALL_HINT = ("install the audit extra: pip install 'tenure[audit]' (in a clone of the repository: "
                "pip install -e '.[audit]', or scripts/setup.sh audit); Java 17+ must be on the PATH")
