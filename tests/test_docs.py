import re
from pathlib import Path

from tenure.tools.cli import TABLE_BEGIN, TABLE_END, api_table_markdown, main

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def test_api_table_in_docs_is_generated_from_the_code():
    text = (DOCS / "apis.md").read_text()
    _, _, rest = text.partition(TABLE_BEGIN)
    table, end, _ = rest.partition(TABLE_END)
    assert end, "docs/apis.md has lost its generated-table markers"
    assert table == api_table_markdown(), "docs/apis.md is stale: regenerate it with `make apis`"


def test_make_apis_rewrites_only_the_table(tmp_path):
    """`make apis` runs `tenure apis --update docs/apis.md`: on a stale copy it puts the current table back
    between the markers and leaves the title, the intro and whatever follows the table as they were."""
    recipe = re.search(r"^apis:\n\t(.+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert recipe == ".venv/bin/tenure apis --update docs/apis.md"
    current = (DOCS / "apis.md").read_text()
    head, _, rest = current.partition(TABLE_BEGIN)
    _, _, tail = rest.partition(TABLE_END)
    assert head.startswith("# Served APIs and versions\n") and "make apis" in head
    stale = head + TABLE_BEGIN + "| 0 | Produce | 3-4 | - |\n" + TABLE_END + tail + "\nA note after the table.\n"
    copy = tmp_path / "apis.md"
    copy.write_text(stale)
    assert main(["apis", "--update", str(copy)]) == 0
    assert copy.read_text() == current + "\nA note after the table.\n"


def test_apis_update_refuses_a_file_without_markers(tmp_path, capsys):
    copy = tmp_path / "apis.md"
    copy.write_text("# My notes\n")
    assert main(["apis", "--update", str(copy)]) == 2
    assert copy.read_text() == "# My notes\n"
    assert "markers" in capsys.readouterr().err
