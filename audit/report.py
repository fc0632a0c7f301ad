"""report.html with PNG plots, from small aggregates (only aggregates are brought to the driver)."""
from __future__ import annotations

import html
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from pyspark.sql import Window  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402


def _plot_rebalances(gens, path: Path) -> None:
    pdf = (gens.filter(F.col("generation").isNotNull())
           .groupBy("group", (F.col("time") / 1000).cast("long").alias("second")).count()
           .orderBy("group", "second").toPandas())
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for g, part in pdf.groupby("group"):
        ax.step(part["second"] - pdf["second"].min(), part["count"].cumsum(), where="post", label=str(g))
    ax.set_xlabel("seconds since the first rebalance")
    ax.set_ylabel("rebalances (cumulative)")
    ax.set_title("Rebalances over time per group")
    if len(pdf):
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _bar(pdf, value: str, title: str, ylabel: str, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(8, 3.5))
    labels = [f"{g}/{i}" for g, i in zip(pdf["group"], pdf["instance_id"])]
    ax.bar(range(len(labels)), pdf[value])
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize="small")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_report(tables, summary: dict, out: Path) -> None:
    h = tables["member_map_history"]
    _plot_rebalances(tables["generations"], out / "rebalances.png")
    changes = (h.groupBy("group", "instance_id").agg(F.count("*").alias("member_ids"))
               .orderBy("group", "instance_id").limit(60).toPandas())
    _bar(changes, "member_ids", "Member ids per instance", "member ids", out / "member_id_changes.png")
    w = Window.partitionBy("group", "instance_id").orderBy("valid_from_offset")
    offline = (h.withColumn("prev_to", F.lag("valid_to_time").over(w))
               .withColumn("gap", F.greatest(F.col("valid_from_time") - F.col("prev_to"), F.lit(0)))
               .groupBy("group", "instance_id").agg(F.coalesce(F.sum("gap"), F.lit(0)).alias("offline_ms"))
               .orderBy("group", "instance_id").limit(60).toPandas())
    offline["offline_s"] = offline["offline_ms"] / 1000.0
    _bar(offline, "offline_s", "Time offline per instance (between member ids)", "seconds",
         out / "time_offline.png")
    anomalies = tables["anomalies"].orderBy("kind", "group", "instance_id").limit(200).toPandas()
    rows = "".join(f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(str(v))}</td></tr>"
                   for k, v in summary.items())
    doc = f"""<!doctype html><html><head><meta charset="utf-8"><title>tenure audit</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 6px;font-size:90%}}</style></head><body>
<h1>tenure audit of the member-map history</h1>
<h2>Summary</h2><table>{rows}</table>
<h2>Rebalances over time</h2><img src="rebalances.png" alt="rebalances over time per group">
<h2>Member-id changes per instance</h2><img src="member_id_changes.png" alt="member ids per instance">
<h2>Time offline per instance</h2><img src="time_offline.png" alt="time offline per instance">
<h2>Anomalies</h2>{anomalies.to_html(index=False, escape=True) if len(anomalies) else "<p>none</p>"}
<p>Tables (Parquet): {", ".join(html.escape(t) for t in tables)}; see docs/audit.md.</p>
</body></html>
"""
    (out / "report.html").write_text(doc, encoding="utf-8")
