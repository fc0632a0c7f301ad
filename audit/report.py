"""report.html: one self-contained page (inline CSS and SVG, no network) built around the questions people
audit a member map for - who held instance X, when, and why did that change; why did the group rebalance;
what looks wrong. Only bounded aggregates come to the driver: at most MAX_GROUPS groups, MAX_LANES instances
per group (those with the most churn, the rest summarised in a sentence), MAX_ROWS rows per table.

Times are UTC ISO 8601, durations in ms/s/min/h; the tables' raw epoch milliseconds never show.
"""
from __future__ import annotations

import html
import io
import json
import logging
import re
from datetime import UTC, datetime
from pathlib import Path

import matplotlib

# matplotlib's own notes ("building the font cache", "created a temporary cache directory" where HOME is not
# writable, as in the Docker image) are not the audit's progress
logging.getLogger("matplotlib").setLevel(logging.ERROR)
matplotlib.use("Agg")
matplotlib.rcParams["svg.fonttype"] = "none"       # text stays text in the page (searchable, small)
matplotlib.rcParams["svg.hashsalt"] = "tenure"      # stable element ids from run to run
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker as ticker  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from .fold import (  # noqa: E402,F401
    DRAWN_GENERATIONS,
    DRAWN_INTERVALS,
    DRAWN_MARKS,
    MARK_CAUSES,
    MAX_GROUPS,
    MAX_LANES,
    MAX_MARKS,
    MAX_ROWS,
)

LABEL_LINES = 40       # rebalance lines are labelled with their cause up to this many per plot

START_COLOURS = {"joined": "#2e7d32", "replaced": "#1565c0", "unknown": "#9e9e9e"}
START_LEGEND = {"joined": "member id that joined", "replaced": "member id that replaced the one before\n(a restart, "
                "or a second process)", "unknown": "member id, start unknown\n(its event was compacted away)"}
MARKS = {  # cause -> (marker, colour, legend label)
    "fenced": ("x", "#c62828", "fenced request"),
    "expired": ("v", "#ef6c00", "session expired"),
    "registration_expired": ("v", "#ef6c00", "session expired"),
    "sync_expired": ("v", "#ef6c00", "session expired"),
    "left": ("<", "#6a1b9a", "left"),
    "removed": ("D", "#212121", "removed by an admin"),
    "group_full": ("s", "#ad1457", "group full"),
}
assert set(MARKS) == MARK_CAUSES
CAUSE_WORDS = {
    # replaced: a new member id took the instance over - a restart, or a second process with the same
    # group.instance.id (the fenced_duplicate_instance anomaly tells them apart)
    "joined": "joined", "replaced": "replaced (a restart or a second process)",
    "unknown": "unknown (its event was compacted away)",
    "expired": "session expired", "registration_expired": "session expired (registration)",
    "sync_expired": "session expired (sync)", "left": "left", "removed": "removed by an admin",
    "group_full": "group full", "group_deleted": "group deleted", "forced_rebalance": "forced rebalance",
    "initial": "first generation", "dynamic_membership": "dynamic members changed",
}


# ---------------------------------------------------------------------------------------- formatting
def iso(ms) -> str:
    """UTC ISO 8601 with milliseconds, e.g. 2026-11-23T23:58:31.123Z; '-' for none."""
    if ms is None or ms != ms:                      # None or NaN (pandas)
        return "-"
    t = datetime.fromtimestamp(int(ms) / 1000, tz=UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def duration(ms) -> str:
    """A duration for people: 850 ms, 12.3 s, 4.5 min, 2.1 h, 3.0 days."""
    if ms is None or ms != ms:
        return "-"
    ms = int(ms)
    if abs(ms) < 1000:
        return f"{ms} ms"
    for unit, size in (("days", 86_400_000), ("h", 3_600_000), ("min", 60_000)):
        if abs(ms) >= size:
            return f"{ms / size:.1f} {unit}"
    return f"{ms / 1000:.1f} s"


# the summary's count of static-member events by cause: each event is one member's, so a count says members
# (one forced rebalance of three members is three events)
EVENT_COUNTS = {
    "joined": "{n} joined", "replaced": "{n} replaced (a restart or a second process)",
    "expired": "{n} session(s) expired", "registration_expired": "{n} session(s) expired (registration)",
    "sync_expired": "{n} session(s) expired (sync)", "fenced": "{n} fenced request(s)", "left": "{n} left",
    "removed": "{n} removed by an admin", "group_full": "{n} refused (group full)",
    "forced_rebalance": "{n} member(s) through forced rebalances",
}


def event_counts(by_cause: dict) -> str:
    """'25 joined, 3 replaced (...), 3 member(s) through forced rebalances', by count, largest first."""
    parts = sorted(by_cause.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(EVENT_COUNTS.get(c, "{n} " + cause_words(c)).format(n=n) for c, n in parts) or "none"


def when(first, last) -> str:
    """'at T' for one moment, else 'between T1 and T2'."""
    return f"at {iso(first)}" if first == last else f"between {iso(first)} and {iso(last)}"


def cause_words(c) -> str:
    if c is None or c != c:
        return "-"
    return "+".join(CAUSE_WORDS.get(x, x) for x in str(c).split("+"))


def slug(*parts) -> str:
    """An HTML id for a group or an instance lane."""
    return "-".join(re.sub(r"[^A-Za-z0-9_.-]", "_", str(p)) for p in parts)


def _e(x) -> str:
    return html.escape("-" if x is None or x != x else str(x))


def _table(headers: list[str], rows: list[list[str]], row_ids: list[str | None] | None = None) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for i, r in enumerate(rows):
        rid = row_ids[i] if row_ids else None
        attr = f' id="{rid}"' if rid else ""
        body.append(f"<tr{attr}>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


# ---------------------------------------------------------------------------------------- data
def collect(tables) -> dict[str, dict]:
    """Everything the page draws, for the MAX_GROUPS most active groups (generations + member ids): the
    per-group pass worked it out for each task's most active groups (`fold.group_drawing`); one small job
    brings those (at most MAX_GROUPS per task) to the driver, which keeps the MAX_GROUPS most active."""
    drawn = sorted((json.loads(r["s"]) for r in tables.drawings.collect()),
                   key=lambda d: (-d["activity"], d["group"]))[:MAX_GROUPS]
    return {d["group"]: dict(lanes=d["lanes"], instances=d["instances"], kinds=d.get("kinds", []),
                             intervals=pd.DataFrame(d["intervals"], columns=list(DRAWN_INTERVALS)),
                             marks=pd.DataFrame(d["marks"], columns=list(DRAWN_MARKS)),
                             gens=pd.DataFrame(d["gens"], columns=list(DRAWN_GENERATIONS)),
                             first=d["first"], last=d["last"])
            for d in drawn}


# ---------------------------------------------------------------------------------------- timeline
def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]                 # inline: no XML declaration or doctype


def timeline_svg(group: str, d: dict) -> str:
    """The timeline (timeline_figure) as inline SVG; "" when the group has no time span."""
    fig = timeline_figure(group, d)
    return "" if fig is None else _svg(fig)


def timeline_figure(group: str, d: dict):
    """One lane per instance id, one bar per member id (coloured by how it started), marks for fenced
    requests, expiries, leaves and removals, and a vertical line per rebalance, labelled above the plot with
    its generation and cause."""
    lanes = d["lanes"]
    first, last = d["first"], d["last"]
    if last is None or first is None:
        return None
    pad = max((last - first) * 0.02, 500)
    lo, hi = first - pad, last + pad
    to_num = lambda ms: mdates.date2num(datetime.fromtimestamp(ms / 1000, tz=UTC))  # noqa: E731
    fig, ax = plt.subplots(figsize=(11, 1.4 + 0.45 * len(lanes)))
    y = {iid: i for i, iid in enumerate(reversed(lanes))}
    for iid in lanes:
        part = d["intervals"][d["intervals"]["instance_id"] == iid]
        spans, colours = [], []
        for r in part.itertuples():
            start = r.valid_from_time
            end = r.valid_to_time if r.valid_to_time == r.valid_to_time and r.valid_to_time is not None else last
            spans.append((to_num(start), max(to_num(end) - to_num(start), to_num(lo + 50) - to_num(lo))))
            colours.append(START_COLOURS.get(r.start_cause, "#9e9e9e"))
        coll = ax.broken_barh(spans, (y[iid] - 0.35, 0.7), facecolors=colours, edgecolor="white", linewidth=0.8)
        coll.set_gid(f"lane-{slug(group, iid)}")
    seen = {}
    for r in d["marks"].itertuples():
        marker, colour, label = MARKS[r.cause]
        ax.plot([to_num(r.time)], [y[r.instance_id]], marker=marker, color=colour, markersize=8, linestyle="none",
                markeredgewidth=2)
        seen[label] = (marker, colour)
    gens = d["gens"][d["gens"]["generation"].notna()]
    for r in gens.itertuples():
        ax.axvline(to_num(r.time), color="#757575", linestyle="--", linewidth=0.8, zorder=0)
    ax.set_yticks(range(len(lanes)), list(reversed(lanes)))
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    ax.set_xlim(to_num(lo), to_num(hi))
    _time_axis(ax, lo, hi, to_num)
    title = f"group {group}: who held each instance id"
    ax.set_title(title)
    handles: list[Artist] = [Patch(color=c, label=START_LEGEND[k])
                             for k, c in START_COLOURS.items() if (d["intervals"]["start_cause"] == k).any()]
    handles += [Line2D([], [], marker=m, color=c, linestyle="none", label=lab) for lab, (m, c) in seen.items()]
    handles.append(Line2D([], [], color="#757575", linestyle="--", label="rebalance (new generation)"))
    ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    if len(gens) and len(gens) <= LABEL_LINES:      # placed on the plot's width as laid out, then room above it
        width_pt = ax.get_window_extent().width * 72 / fig.dpi
        rows = _label_generations(ax, [(to_num(r.time), int(r.generation), cause_words(r.trigger))
                                       for r in gens.itertuples()], to_num(lo), to_num(hi), width_pt)
        ax.set_title(title, pad=8 + LABEL_ROW_PT * rows)
        fig.tight_layout()
    return fig


LABEL_ROW_PT = 12      # the height of one row of generation labels above a timeline, in points
LABEL_ROWS = 4         # rows of labels at most; beyond, the labels say only "gen N" (the table says why)
CHAR_PT = 5.2          # a little more than one character of the 8 pt label font


def _label_generations(ax, gens: list[tuple[float, int, str]], lo: float, hi: float, width_pt: float) -> int:
    """Each rebalance line's label ("gen N: why") above the plot, level, in rows so that no two overlap (a label
    starts at its line, or ends at it in the right third). When "gen N: why" does not fit in LABEL_ROWS rows
    the labels say "gen N", and a line whose label still finds no room has none (the generations table below
    the plot lists them all). Returns the rows used."""
    per_pt = (hi - lo) / (width_pt * 0.95)

    def place(texts: list[str], skip: bool) -> list[int | None] | None:
        ends: list[float] = []                     # per row: the data x where its last label ends
        rows: list[int | None] = []
        for (x, _, _), text in zip(gens, texts, strict=True):
            width = (len(text) * CHAR_PT + 8) * per_pt
            left, right = (x, x + width) if x < lo + (hi - lo) * 2 / 3 else (x - width, x)
            row = next((i for i, end in enumerate(ends) if end <= left), None)
            if row is None and len(ends) < LABEL_ROWS:
                ends.append(right)
                row = len(ends) - 1
            elif row is not None:
                ends[row] = right
            elif not skip:
                return None
            rows.append(row)
        return rows

    texts = [f"gen {g}: {why}" for _, g, why in gens]
    rows = place(texts, skip=False)
    if rows is None:
        texts = [f"gen {g}" for _, g, _ in gens]
        rows = place(texts, skip=True)
    assert rows is not None
    for (x, _, _), text, row in zip(gens, texts, rows, strict=True):
        if row is None:
            continue
        right_third = x >= lo + (hi - lo) * 2 / 3
        ax.annotate(text, xy=(x, 1), xycoords=("data", "axes fraction"), xytext=(0, 3 + LABEL_ROW_PT * row),
                    textcoords="offset points", ha="right" if right_third else "left", va="bottom", fontsize=8,
                    color="#212121", annotation_clip=False,
                    arrowprops=dict(arrowstyle="-", color="#9e9e9e", linewidth=0.6, shrinkA=0, shrinkB=0,
                                    relpos=(1, 0) if right_third else (0, 0)))
    return max((r for r in rows if r is not None), default=-1) + 1


def _time_axis(ax, lo: int, hi: int, to_num) -> None:
    """Ticks at round times, every label in one format (HH:MM, or HH:MM:SS when a tick is not on a whole
    minute, with the month and day when the plot spans days); the date, when it is one day, in the axis label."""
    loc = mdates.AutoDateLocator(tz=UTC, minticks=4, maxticks=9)
    first, last = (datetime.fromtimestamp(ms / 1000, tz=UTC) for ms in (lo, hi))
    ticks = [t for t in loc.tick_values(first, last) if to_num(lo) <= t <= to_num(hi)]
    when_ = [mdates.num2date(t, tz=UTC) for t in ticks]
    one_day = first.date() == last.date()
    fmt = "%H:%M:%S" if any(t.second or t.microsecond for t in when_) else "%H:%M"
    if not one_day:
        fmt = "%b %d " + fmt
    ax.xaxis.set_major_locator(ticker.FixedLocator(ticks))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: mdates.num2date(x, tz=UTC).strftime(fmt)))
    ax.set_xlabel(f"time (UTC), {first:%Y-%m-%d}" if one_day else "time (UTC)")


# ---------------------------------------------------------------------------------------- sections
def _lanes_table(group: str, d: dict) -> str:
    rows, ids, first_row = [], [], set()
    iv = d["intervals"].sort_values(["instance_id", "valid_from_offset"])
    order = {iid: i for i, iid in enumerate(d["lanes"])}
    iv = iv.assign(_o=iv["instance_id"].map(order)).sort_values(["_o", "valid_from_offset"])
    for r in iv.itertuples():
        open_ = r.valid_to_time is None or r.valid_to_time != r.valid_to_time
        held = "held at the end of the log" if open_ else duration(r.valid_to_time - r.valid_from_time)
        gens = f"{int(r.from_generation)}" + ("" if open_ or r.to_generation != r.to_generation
                                              else f" to {int(r.to_generation)}")
        rows.append([_e(r.instance_id), f"<code>{_e(r.member_id)}</code>", _e(iso(r.valid_from_time)),
                     _e("-" if open_ else iso(r.valid_to_time)), _e(held), _e(cause_words(r.start_cause)),
                     _e("-" if open_ else cause_words(r.end_cause)), _e(gens)])
        rid = None
        if r.instance_id not in first_row:
            first_row.add(r.instance_id)
            rid = f"instance-{slug(group, r.instance_id)}"
        ids.append(rid)
    return _table(["instance id", "member id", "from", "to", "held for", "started by", "ended by", "generations"],
                  rows, ids)


def _generations_table(d: dict) -> str:
    rows = []
    for r in d["gens"].itertuples():
        took = (r.time - r.rebalance_start) if r.rebalance_start == r.rebalance_start and r.rebalance_start is not None \
            else None
        rows.append([_e("deleted" if r.generation != r.generation else int(r.generation)), _e(iso(r.time)),
                     _e(duration(took)), _e(cause_words(r.trigger)), _e(int(r.member_count)),
                     _e(", ".join(r.joined) if r.joined is not None and len(r.joined) else "-"),
                     _e(", ".join(r.left) if r.left is not None and len(r.left) else "-")])
    return _table(["generation", "at", "rebalance took", "cause", "members", "joined", "left"], rows)


SENTENCES = {   # anomaly kind -> what it says (fields: see anomaly_sentence)
    "fenced_duplicate_instance": "{n} request(s) for instance {i} of group {g} were fenced (FENCED_INSTANCE_ID) "
                                 "{when}: two processes use this group.instance.id, or a replaced member kept "
                                 "running. {detail}.",
    "concurrent_member_ids": "Instance {i} of group {g} was held by two member ids at once (first at {first}); "
                             "{detail}.",
    "rebalance_storm": "Group {g} rebalanced {n} times within {window} (more than {k}), {when}.",
    "repeated_expiry": "The session of instance {i} of group {g} expired {n} times {when}: the consumer stalls "
                       "or stops for longer than session.timeout.ms.",
    "instance_churn": "Instance {i} of group {g} had {n} member ids {when}: each restart or expiry gives it a "
                      "new one.",
    "log_damage": "The log is damaged: {detail}.",
    "log_gap": "Records are missing from the log: {detail}.",
    "share_redelivery": "In share group {g}, {n} record(s) were delivered more than once or archived, {when} - "
                        "{detail}: a record that keeps coming back is a poison message its consumers cannot handle.",
    "catchup_unfinished": "A catch-up range checkpointed in group {g} by instance {i} still owed {n} offset(s) "
                          "at the end of the log ({detail}); it opened at {first}, the last checkpoint is of "
                          "{last}: unless that consumer is still catching up, those records were never "
                          "processed.",
}


def anomaly_sentence(r: dict, opts) -> str:
    return SENTENCES.get(r["kind"], "{kind}: {detail}").format(
        kind=r["kind"], g=r["group"], i=r["instance_id"], n=r["count"], detail=r["detail"],
        first=iso(r["first_time"]), last=iso(r["last_time"]), when=when(r["first_time"], r["last_time"]),
        window=duration(opts.storm_window_ms), k=opts.storm_k)


def _anomalies(tables, opts, drawn: dict[str, list[str]], total: int) -> tuple[str, int]:
    df = tables["anomalies"]
    if not total:
        return "<p>Nothing looks wrong: no anomalies.</p>", 0
    rows = df.orderBy("kind", "group", "instance_id").limit(MAX_ROWS).collect()
    items = []
    for r in rows:
        r = r.asDict()
        link = ""
        if r["kind"] == "catchup_unfinished":
            link = ' <a href="#catchup-ranges">the catch-up ranges</a>'
        elif r["kind"] == "share_redelivery":
            link = ' <a href="#share-groups">the share groups\' records</a>'
        elif r["group"] is not None and r["instance_id"] is not None:
            if r["instance_id"] in drawn.get(r["group"], ()):
                link = f' <a href="#instance-{slug(r["group"], r["instance_id"])}">the lane of {_e(r["instance_id"])}</a>'
            else:
                link = " (this instance is not among those drawn: see member_map_history)"
        elif r["group"] is not None and r["group"] in drawn:
            link = f' <a href="#group-{slug(r["group"])}">the group\'s timeline</a>'
        items.append(f'<li class="anomaly {_e(r["kind"])}"><b>{_e(r["kind"])}</b>: {_e(anomaly_sentence(r, opts))}'
                     f"{link}</li>")
    more = f"<p>{total - len(rows)} more in the anomalies table.</p>" if total > len(rows) else ""
    return f"<ul>{''.join(items)}</ul>{more}", total


def _catchup_ranges(tables) -> str:
    """The catch-up consumer's ranges (the latest MAX_ROWS by opening time), or a sentence."""
    df = tables["catchup_ranges"]
    total = df.count()
    if not total:
        return ("<p>No catch-up ranges: no tenure.catchup consumer checkpointed a range token in this log "
                "(or in the --since/--until window).</p>")
    rows = []
    for r in sorted((r.asDict() for r in df.orderBy(F.desc("opened"), F.desc("lo")).limit(MAX_ROWS).collect()),
                    key=lambda r: (r["opened"], r["group"], r["topic"], r["partition"], r["lo"])):
        if r["processed"] is not None:
            end, took = iso(r["processed"]), duration(r["processed"] - r["opened"])
        elif r["merged_into"] is not None:
            end, took = f"merged into {r['merged_into']} at {iso(r['closed'])}", "-"
        else:
            end, took = "not by the end of the log", "-"
        owed = "-" if r["owed_from"] is None else f"{r['owed_from']}..{r['owed_to'] - 1} ({r['owed_to'] - r['owed_from']})"
        rows.append([_e(r["group"]), _e(r["instance_id"]), _e(f"{r['topic']}-{r['partition']}"),
                     _e(f"{r['lo']}-{r['hi']}"), _e(iso(r["opened"])), _e(end), _e(took), _e(owed)])
    more = f"<p>{total - len(rows)} older range(s) in the catchup_ranges table.</p>" if total > len(rows) else ""
    return _table(["group", "instance", "partition", "range", "opened", "processed", "took", "owed"], rows) + more


FINAL_WORDS = {"archived": "archived", "acknowledged": "acknowledged", "available": "still in flight (available)",
               "acquired": "still in flight (acquired)", "deleted": "state deleted with the share partition",
               "done": "done: acknowledged or archived (the state record that moved the start offset past it does not "
                       "say which)"}


def _share_deliveries(tables) -> str:
    """The share groups' records delivered more than once or archived (the MAX_ROWS most delivered), or a
    sentence."""
    df = tables["share_deliveries"]
    total = df.count() if getattr(tables, "shares", True) else 0
    if not total:
        return ("<p>No share group record was delivered more than once or archived (or none in the --since/--until "
                "window; a log without __share_group_state has none).</p>")
    rows = []
    got = df.orderBy(F.desc("delivery_count"), "group", "topic_id", "partition", "offset").limit(MAX_ROWS).collect()
    for r in got:
        name = r["topic"] if r["topic"] is not None else f"topic id {r['topic_id']}"
        rows.append([_e(r["group"]), _e(f"{name}-{r['partition']}"), _e(r["offset"]), _e(r["delivery_count"]),
                     _e(FINAL_WORDS.get(r["final_state"], r["final_state"])), _e(iso(r["first_time"])),
                     _e("-" if r["done_time"] is None else iso(r["done_time"]))])
    top = got[0]
    lead = (f"<p>{total} record(s) of share groups were delivered more than once or archived. The most delivered: "
            f"offset {top['offset']} of {_e(top['topic'] or top['topic_id'])}-{top['partition']} in share group "
            f"{_e(top['group'])}, delivered {top['delivery_count']} times, "
            f"{_e(FINAL_WORDS.get(top['final_state'], top['final_state']))}.</p>")
    more = f"<p>{total - len(rows)} more in the share_deliveries table.</p>" if total > len(rows) else ""
    return lead + _table(["share group", "partition", "offset", "deliveries", "final state", "first redelivered",
                          "done at"], rows) + more


def _summary(s: dict) -> str:
    evs = event_counts(s["events_by_cause"])
    an = ", ".join(f"{k} {n}" for k, n in sorted(s["anomalies"].items())) or "none"
    errs = ", ".join(f"{k} {n}" for k, n in sorted(s["errors_by_kind"].items()))
    span = (f"The log covers {iso(s['first_time'])} to {iso(s['last_time'])} "
            f"({duration(s['last_time'] - s['first_time'])})." if s["first_time"] is not None else
            "The log holds no group records.")
    rows = [["groups", s["groups"]], ["instance ids", s["instances"]], ["member ids held (intervals)", s["member_ids"]],
            *([["group conversions (classic <-> consumer)", s["conversions"]]] if s.get("conversions") else []),
            ["generations (rebalances completed)", s["generations"]],
            ["static-member events", f"{s['static_events']} ({evs})"], ["offset commits", s["offset_commits"]]]
    if s.get("share_deliveries"):
        rows.append(["share group records delivered more than once or archived", s["share_deliveries"]])
    txn = s.get("transactional_commits") or {}
    if txn:
        rows.append(["offset commits in transactions", ", ".join(f"{k} {n}" for k, n in txn.items())
                     + " (aborted and open ones are not the group's commits)"])
    rows += [["anomalies", f"{sum(s['anomalies'].values())} ({an})"],
             ["read errors", f"{s['errors']}" + (f" ({errs})" if errs else "")]]
    return f"<p>{_e(span)}</p>" + _table(["", "count"], [[_e(a), _e(b)] for a, b in rows])


CSS = """body{font-family:sans-serif;max-width:75em;margin:auto;padding:0 1em;color:#212121}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;font-size:90%;
text-align:left;vertical-align:top}th{background:#f5f5f5}code{font-size:85%}svg{max-width:100%;height:auto}
tr:target{background:#fff59d}li{margin:.3em 0}section{margin-bottom:2em}"""


def write_report(tables, summary: dict, out: Path, opts=None, data: dict | None = None) -> None:
    """report.html from the tables, their summary and what `collect(tables)` gives (collected here unless
    `data` is that already)."""
    data = collect(tables) if data is None else data
    n_groups = summary["groups"]      # the summary counted the groups already
    groups = list(data)
    sections, drawn = [], {}
    for g in groups:
        d = data[g]
        drawn[g] = d["lanes"]
        kinds = f" ({', '.join(d['kinds'])} group)" if d.get("kinds") else ""
        parts = [f'<section id="group-{slug(g)}"><h2>Group {_e(g)}{_e(kinds)}</h2>']
        parts.append("<h3>Who held each instance, when, and why it changed</h3>")
        if d["lanes"]:
            rest = d["instances"] - len(d["lanes"])
            if rest > 0:
                parts.append(f"<p>The {len(d['lanes'])} instances with the most churn are drawn; {rest} other "
                             f"instance(s) with fewer member ids are in the member_map_history table.</p>")
            parts.append(f'<div class="timeline">{timeline_svg(g, d)}</div>')
            parts.append(_lanes_table(g, d))
        else:
            parts.append("<p>A share group's members have no instance id: its membership is in the generations "
                         "below.</p>" if d.get("kinds") == ["share"] else
                         "<p>No static member (group.instance.id) ever held a place in this group: it has only "
                         "dynamic members, so there is no instance to draw.</p>")
        parts.append("<h3>Why the group rebalanced</h3>")
        if len(d["gens"]):
            parts.append(_generations_table(d))
        else:
            parts.append("<p>No generation of this group is in the log (its GroupMetadata records are gone or "
                         "outside --since/--until).</p>")
        parts.append("</section>")
        sections.append("".join(parts))
    if not groups:
        sections.append("<p>No group records in the log: nothing to draw.</p>")
    elif n_groups > len(groups):
        sections.append(f"<p>{n_groups - len(groups)} less active group(s) are not drawn; their rows are in the "
                        f"tables.</p>")

    class _Defaults:
        storm_k, storm_window_ms = 5, 60_000
    anomalies, _ = _anomalies(tables, opts or _Defaults, drawn, sum(summary["anomalies"].values()))
    doc = f"""<!doctype html><html><head><meta charset="utf-8"><title>tenure audit</title>
<style>{CSS}</style></head><body>
<h1>tenure audit: the static members' history</h1>
<h2>Summary</h2>{_summary(summary)}
<h2>What looks wrong</h2>{anomalies}
<h2 id="catchup-ranges">Catch-up ranges</h2>{_catchup_ranges(tables)}
<h2 id="share-groups">Share groups: records delivered more than once</h2>{_share_deliveries(tables)}
{''.join(sections)}
<p>All times UTC. The full tables (Parquet): {", ".join(html.escape(t) for t in tables)}.</p>
</body></html>
"""
    (out / "report.html").write_text(doc, encoding="utf-8")
