"""The command line and the offline tools: `tenure` (cli), the log tools (`tenure log ...`), the synthetic log
generator, and the demo."""
