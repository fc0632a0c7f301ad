"""The docs stand on their own: no reference to files outside the repository, every relative link resolves,
and the behaviour reference (docs/behaviour.md) is what code, tests and the coverage table cite."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SOURCE_DIRS = ("tenure", "protocol", "broker", "storage", "coordinator", "audit", "security", "tests", "bench",
               "docker")
LABEL = re.compile(r"\*\*([GJSHTLOARK]\d+)\b")


def _docs():
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def _sources():
    for d in SOURCE_DIRS:
        yield from sorted((ROOT / d).rglob("*.py"))


def _behaviour_labels() -> set[str]:
    return set(LABEL.findall((DOCS / "behaviour.md").read_text()))


@pytest.mark.parametrize("path", _docs(), ids=lambda p: p.name)
def test_docs_cite_nothing_outside_the_repository(path):
    text = path.read_text()
    assert not re.search(r"(?<![\w.-])(\.\./)*shared/(spec|seeds|architecture|container|hooks)", text), \
        f"{path.name} cites a file outside the repository"
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        assert (path.parent / target).exists(), f"{path.name}: link to {target} does not resolve"


def test_code_comments_cite_nothing_outside_the_repository():
    offenders = [str(p.relative_to(ROOT)) for p in _sources() if p.name != Path(__file__).name
                 and re.search(r"shared/(spec|seeds|architecture)", p.read_text())]
    assert offenders == []


def test_the_behaviour_reference_is_complete_and_labels_are_unique():
    text = (DOCS / "behaviour.md").read_text()
    labels = LABEL.findall(text)
    assert len(labels) == len(set(labels)), "a label is used twice"
    for prefix in "GJSHTLOARK":
        nums = sorted(int(lab[1:]) for lab in labels if lab[0] == prefix)
        assert nums == list(range(1, len(nums) + 1)), f"{prefix} items are not numbered 1..n: {nums}"


def test_coverage_table_has_one_row_per_behaviour_item():
    rows = re.findall(r"^\| ([GJSHTLOARK]\d+) \|", (DOCS / "spec-coverage.md").read_text(), re.M)
    assert sorted(rows) == sorted(_behaviour_labels())


def test_test_section_markers_name_items_that_exist():
    known = _behaviour_labels()
    cited = set()
    for p in sorted((ROOT / "tests" / "coordinator").glob("test_*.py")):
        for line in p.read_text().splitlines():
            m = re.match(r"# -{20,} (.*)$", line)
            if m:
                cited.update(re.findall(r"\b[GJSHTLOARK]\d+\b", m.group(1)))
    assert cited, "no section marker cites an item"
    assert cited <= known, f"markers cite unknown items: {sorted(cited - known)}"
