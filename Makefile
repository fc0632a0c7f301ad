# Shortcuts; README.md has the two commands that matter (set up + serve, set up + test).
.PHONY: serve test demo apis

serve:
	scripts/setup.sh && .venv/bin/tenure serve

test:
	scripts/test.sh

# static membership in a minute: consumers restart with no rebalance, the server restarts with nothing
# lost, the Spark audit writes its report (needs Java 17 for the audit)
demo:
	scripts/setup.sh audit && .venv/bin/tenure demo

apis:
	.venv/bin/tenure apis --update docs/apis.md
