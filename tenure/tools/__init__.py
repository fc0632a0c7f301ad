"""The command line and the offline tools: `tenure` (cli), the log tools (`tenure log ...`), the synthetic log
generator, and the demo."""
import tenure.protocol  # noqa: F401 - first: it loads kafka-python without its import-time warning
