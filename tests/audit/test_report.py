"""report.html answers its questions, checked by looking: the report of a crafted log is rendered in headless
Chromium (Debian's `chromium`), its screenshot kept as a test artifact (test-artifacts/audit-report.png,
named in the run's output), and its DOM asserted on: one lane per instance id (the MAX_LANES with the most
churn, the rest summarised), the generations with their causes, the anomalies with a sentence and a link to
their lane, human times only (no raw epoch milliseconds), nothing fetched from the network. And the query
mode: `tenure audit DIR --instance G/I --at TIME [--format json]`."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tenure.audit import job, query, report
from tenure.protocol import records as rec
from tenure.tools.cli import main

from .logs import T0, Writer, ev, gm

G, N_INSTANCES = "shop", 25
ARTIFACTS = Path(os.environ.get("TENURE_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts"))
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


def write_log(data: Path) -> dict:
    """Group `shop`: 25 static instances join (generation 1); inst-00 restarts three times (replaced, no
    rebalance) and its old process is fenced; inst-01's session expires (generation 2); inst-02 is removed
    by an admin (generation 3). Group `dyn`: dynamic members only. Returns the times the tests ask about."""
    w, t, gen, at = Writer(data), T0, 1, {}
    ids = {f"inst-{i:02d}": f"m-{i:02d}-1" for i in range(N_INSTANCES)}
    pairs = lambda: [(m, i) for i, m in ids.items()]  # noqa: E731
    for iid, mid in ids.items():
        w.add(ev(G, iid, rec.JOINED, None, mid, t, gen), t)
        t += 10
    w.add(gm(G, gen, pairs(), t), t)
    at["gen1"] = t
    for n in range(2, 5):
        t += 60_000
        old, ids["inst-00"] = ids["inst-00"], f"m-00-{n}"
        w.add(ev(G, "inst-00", rec.REPLACED, old, ids["inst-00"], t, gen), t)
        at[f"m-00-{n}"] = t
        t += 5
        w.add(gm(G, gen, pairs(), t), t)
    t += 1000
    w.add(ev(G, "inst-00", rec.FENCED, "m-00-3", "m-00-4", t, gen), t)
    t += 30_000
    w.add(ev(G, "inst-01", rec.EXPIRED, "m-01-1", None, t, gen), t)
    at["expired"] = t
    del ids["inst-01"]
    t += 3000
    gen += 1
    w.add(gm(G, gen, pairs(), t), t)
    t += 20_000
    w.add(ev(G, "inst-02", rec.REMOVED, "m-02-1", None, t, gen), t)
    del ids["inst-02"]
    t += 400
    gen += 1
    w.add(gm(G, gen, pairs(), t), t)
    w.add(gm("dyn", 1, [("dyn-1", None)], t + 1), t + 1)
    at["end"] = t + 1
    w.close()
    return at


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    at = write_log(root / "data")
    code, summary = job.run(job.Options(str(root / "data"), str(root / "out"), churn_n=4), spark=spark)
    assert code == 0
    return root, at, summary


class _Dom(HTMLParser):
    """Ids, links, text (outside <style>) and resource attributes of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids, self.hrefs, self.text, self.sources, self.tags = [], [], [], [], []
        self._style = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        self._style = tag == "style"
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        self.sources += [a[k] for k in ("src", "srcset", "data") if k in a]
        if tag == "link" and "href" in a:
            self.sources.append(a["href"])

    def handle_endtag(self, tag):
        if tag == "style":
            self._style = False

    def handle_data(self, data):
        if not self._style:
            self.text.append(data)


def chromium(*args: str, tmp: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium")
    assert exe, "Debian's chromium is needed (scripts/setup.sh test installs it)"
    return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'chromium-profile'}", *args],
                          capture_output=True, text=True, timeout=180)


def test_human_times_and_durations():
    assert report.iso(1_700_000_000_123) == "2023-11-14T22:13:20.123Z"
    assert report.iso(None) == "-"
    assert [report.duration(x) for x in (850, 12_345, 270_000, 7_560_000, 3 * 86_400_000)] == [
        "850 ms", "12.3 s", "4.5 min", "2.1 h", "3.0 days"]


def test_the_report_rendered_in_chromium(audited, tmp_path, record_property):
    root, at, summary = audited
    page = root / "out" / "report.html"
    raw = page.read_text(encoding="utf-8")
    # self-contained: no image, script, stylesheet or frame fetched from anywhere
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", raw)
    assert not re.search(r"<(img|script|link|iframe)\b", raw)

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = ARTIFACTS / "audit-report.png"
    png.unlink(missing_ok=True)
    shot = chromium("--window-size=1300,2600", f"--screenshot={png}", page.as_uri(), tmp=tmp_path)
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", shot.stderr[-2000:]
    record_property("report_png", str(png))
    import matplotlib.image as mpimg
    pixels = (mpimg.imread(str(png))[:, :, :3] * 255).round().astype(int)
    for colour in (report.START_COLOURS["joined"], report.START_COLOURS["replaced"]):   # bars were drawn
        rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
        assert ((abs(pixels - rgb).sum(axis=2)) <= 6).sum() > 200, colour

    dumped = chromium("--dump-dom", page.as_uri(), tmp=tmp_path)
    assert dumped.returncode == 0 and "<svg" in dumped.stdout, dumped.stderr[-2000:]
    dom = _Dom()
    dom.feed(dumped.stdout)
    text = " ".join(dom.text)

    # one lane per instance id: the MAX_LANES with the most churn (inst-00 first of them), the rest summarised
    lanes = [i for i in dom.ids if i.startswith(f"lane-{G}-")]
    assert len(lanes) == report.MAX_LANES and f"lane-{G}-inst-00" in lanes
    assert f"{N_INSTANCES - report.MAX_LANES} other instance(s)" in text
    assert "only dynamic members" in text                     # group dyn: a sentence, not an empty plot
    # who held inst-00: its four member ids, started by joined / a restart, in the lanes table
    assert f"instance-{G}-inst-00" in dom.ids
    for n in range(1, 5):
        assert f"m-00-{n}" in text
    # why the group rebalanced: generations with their causes, when, how long
    for words in ("first generation", "session expired", "removed by an admin", "3.0 s", "400 ms"):
        assert words in text, words
    # what looks wrong: a sentence per anomaly with a link to its lane, which exists
    assert "were fenced (FENCED_INSTANCE_ID)" in text and "had 4 member ids" in text
    links = [h for h in dom.hrefs if h.startswith("#instance-")]
    assert f"#instance-{G}-inst-00" in links and all(h[1:] in dom.ids for h in links)
    # human times only: ISO 8601 UTC, never a raw epoch millisecond number
    assert report.iso(at["expired"]) in text
    assert not re.search(r"\b1\d{12}\b", text), re.findall(r"\b1\d{12}\b", text)[:5]
    # counts that match the summary and the tables
    assert f"{summary['static_events']} (" in text and summary["events_by_cause"] == {
        "fenced": 1, "joined": N_INSTANCES, "removed": 1, "replaced": 3, "expired": 1}


def test_query_mode(audited, capsys):
    root, at, _ = audited
    out = str(root / "out")
    assert main(["audit", out, "--instance", f"{G}/inst-00", "--at", str(at["m-00-3"] + 1000)]) == 0
    text = capsys.readouterr().out
    assert f"{G}/inst-00 at {report.iso(at['m-00-3'] + 1000)}: held by member id m-00-3" in text
    assert f"since {report.iso(at['m-00-3'])} (replaced (a restart or a second process); generation 1), 1.0 s " \
           "before" in text
    assert f"until {report.iso(at['m-00-4'])} (replaced (a restart or a second process))" in text
    assert "before: member id m-00-2" in text
    # after inst-01 expired nothing holds it: exit 1, what held it before and why it ended
    iso_after = report.iso(at["expired"] + 10).replace("Z", "+00:00")
    assert main(["audit", out, "--instance", f"{G}/inst-01", "--at", iso_after, "--format", "json"]) == 1
    a = json.loads(capsys.readouterr().out)
    assert a["held_by"] == [] and a["next"] is None
    assert (a["previous"]["member_id"], a["previous"]["ended_by"], a["previous"]["until"]) == (
        "m-01-1", "expired", report.iso(at["expired"]))
    # still held at the end of the log
    assert main(["audit", out, "--instance", f"{G}/inst-05", "--at", str(at["end"])]) == 0
    assert "still held at the end of the log" in capsys.readouterr().out
    # an unknown instance, and a usage error
    assert main(["audit", out, "--instance", f"{G}/nobody", "--at", str(at["end"])]) == 1
    assert "never held a place" in capsys.readouterr().out
    assert main(["audit", out, "--instance", "no-slash", "--at", "0"]) == 2


def test_query_mode_on_a_data_dir_equals_the_tables(audited, spark):
    """On a data dir the query builds the group's member map with Spark (the running session) itself."""
    root, at, _ = audited
    t = at["m-00-2"] + 5
    from_tables = query.answer(query.intervals(str(root / "out"), G, "inst-00"), G, "inst-00", t)
    from_log = query.answer(query.intervals(str(root / "data"), G, "inst-00", spark=spark), G, "inst-00", t)
    assert from_log == from_tables and from_log["held_by"][0]["member_id"] == "m-00-2"


# ---------------------------------------------------------------------- readable without Spark: the pieces
def _drawing(gen_times: list[tuple[int, str]], span_ms: int = 240_000) -> dict:
    """A group's drawing as collect() gives it: six instances, inst-00 replaced once, inst-01 expired, and one
    generation per (ms after T0, trigger)."""
    import pandas as pd

    from tenure.audit.fold import DRAWN_GENERATIONS, DRAWN_INTERVALS, DRAWN_MARKS
    lanes = [f"inst-{i:02d}" for i in range(6)]
    iv = [(G, lane, f"m-{i}-1", T0 + i * 10, None if i else T0 + 60_000, "joined", None if i else "replaced", 1,
           None, i) for i, lane in enumerate(lanes)]
    iv.append((G, "inst-00", "m-0-2", T0 + 60_000, None, "replaced", None, 1, None, 10))
    marks = [(G, "inst-01", "expired", "m-1-1", T0 + span_ms - 26_000)]
    gens = [(G, g, T0 + t, T0 + t - 300, why, 5, [], [], g) for g, (t, why) in enumerate(gen_times, start=1)]
    return dict(lanes=lanes, instances=6, intervals=pd.DataFrame(iv, columns=list(DRAWN_INTERVALS)),
                marks=pd.DataFrame(marks, columns=list(DRAWN_MARKS)),
                gens=pd.DataFrame(gens, columns=list(DRAWN_GENERATIONS)), first=T0, last=T0 + span_ms)


@pytest.mark.parametrize("gen_times,span_ms", [
    ([(250, "initial"), (214_265, "expired"), (234_665, "removed"), (236_000, "forced_rebalance")], 240_000),
    ([(i * 1_000, "expired") for i in range(1, 30)], 40_000),                     # crowded: "gen N" only
    ([(0, "initial"), (2 * 86_400_000, "expired")], 3 * 86_400_000),              # days
], ids=["close-together", "crowded", "days"])
def test_generation_labels_are_level_above_the_bars_and_never_overlap(gen_times, span_ms):
    import matplotlib.pyplot as plt
    fig = report.timeline_figure(G, _drawing(gen_times, span_ms))
    try:
        fig.canvas.draw()
        ax = fig.axes[0]
        renderer = fig.canvas.get_renderer()
        top = ax.get_window_extent(renderer).y1
        labels = [t for t in ax.texts if t.get_text().startswith("gen ")]
        lines = [ln for ln in ax.lines if ln.get_linestyle() == "--"]
        assert len(lines) == len(gen_times)
        # every line labelled, but where 29 rebalances crowd 40 s: as many as fit (the table lists them all)
        assert len(labels) == len(gen_times) if len(gen_times) < 10 else 5 <= len(labels) < len(gen_times)
        from matplotlib.text import Text
        boxes = [Text.get_window_extent(t, renderer) for t in labels]        # the words, not their connector
        assert all(t.get_rotation() == 0 for t in labels)
        assert all(b.y0 >= top for b in boxes), "above the plot, not over the bars"
        assert all(t.get_fontsize() >= 8 and t.get_color() == "#212121" for t in labels)
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert not a.overlaps(b), (a, b)
        title = ax.title.get_window_extent(renderer)
        assert all(not title.overlaps(b) for b in boxes), "the title sits above the labels"
        if len(gen_times) < 10:
            assert labels[0].get_text() == f"gen 1: {report.cause_words(gen_times[0][1])}"
        else:
            assert labels[0].get_text() == "gen 1"                                # the table says why
        # every tick label in one format: HH:MM, HH:MM:SS, or with the day when the plot spans days
        ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert len(ticks) >= 3
        pattern = {240_000: r"\d\d:\d\d", 40_000: r"\d\d:\d\d:\d\d", 3 * 86_400_000: r"[A-Z][a-z]{2} \d\d \d\d:\d\d"}
        assert all(re.fullmatch(pattern[span_ms], t) for t in ticks), ticks
        label = ax.get_xlabel()
        assert label == ("time (UTC)" if span_ms > 86_400_000 else f"time (UTC), {report.iso(T0)[:10]}")
    finally:
        plt.close(fig)


def test_counts_of_static_member_events_say_members_and_one_moment_is_at_not_between():
    assert report.event_counts({"forced_rebalance": 3, "joined": 25, "replaced": 3}) == \
        "25 joined, 3 member(s) through forced rebalances, 3 replaced (a restart or a second process)"
    assert report.event_counts({}) == "none"
    row = dict(kind="fenced_duplicate_instance", group=G, instance_id="inst-00", count=1, detail="d",
               first_time=T0, last_time=T0)
    opts = job.Options("data", "out")
    sentence = report.anomaly_sentence(row, opts)
    assert f"fenced (FENCED_INSTANCE_ID) at {report.iso(T0)}:" in sentence and "between" not in sentence
    row["last_time"] = T0 + 5000
    assert f"between {report.iso(T0)} and {report.iso(T0 + 5000)}" in report.anomaly_sentence(row, opts)
    assert report.cause_words("replaced") == "replaced (a restart or a second process)"
    assert "restart (replaced)" not in report.CAUSE_WORDS.values()
