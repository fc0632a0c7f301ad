from pathlib import Path

from tenure.cli import api_table_markdown

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_api_table_in_docs_is_generated_from_the_code():
    text = (DOCS / "apis.md").read_text()
    assert api_table_markdown() in text, "docs/apis.md is stale: regenerate it with `tenure apis`"
