"""Assemble the procurement report: gather the tables, draw the charts, write HTML + XLSX.

Reads: the warehouse (through :mod:`pipeline.report.tables` and
:mod:`pipeline.report.reliability`). Writes: ``report.html`` (one self-contained file) and
``report.xlsx`` (the table behind every chart, one sheet each) beside it.

Each section renders from whatever tables have rows and says "No data yet" otherwise, so the
report works at every stage of a deployment: inventory only, telemetry without tickets, no
prediction model yet.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from pipeline.config import Config
from pipeline.link.observed import stale_inventory
from pipeline.output import write_xlsx
from pipeline.report import changes, charts, findings_html, origin, reliability, tables
from pipeline.report import html as h
from pipeline.report.findings import TOO_LITTLE, Findings, gather
from pipeline.warehouse import Warehouse

log = logging.getLogger(__name__)

#: Section ids in page order; the browser test checks each is present.
SECTIONS = ["findings", "summary", "afr", "survival", "flags", "pareto", "xids", "trend", "repairs",
            "predictions", "quality", "methodology"]

_PCT = {"afr_pct": ",.2f", "afr_ci_low_pct": ",.2f", "afr_ci_high_pct": ",.2f", "gpu_days": ",.0f"}
_AFR_LABELS = {"afr_pct": "AFR %", "afr_ci_low_pct": "95% low %", "afr_ci_high_pct": "95% high %",
               "gpu_days": "GPU-days", "low_exposure": "little exposure"}


@dataclass
class Report:
    """A rendered report: the HTML text and the tables behind it (sheet name -> frame)."""

    html: str
    sheets: dict[str, pl.DataFrame] = field(default_factory=dict)
    sections: list[str] = field(default_factory=list)
    #: What the findings said (kept beside the report for the next one to compare), and the
    #: snapshots before it.
    snapshot: dict | None = None
    history: list[dict] = field(default_factory=list)

    def write(self, path: str | Path) -> tuple[Path, Path]:
        """Write ``path`` (HTML), the workbook beside it (same name, ``.xlsx``) and the
        findings history (``.findings.json``)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.html, encoding="utf-8")
        if self.snapshot is not None:
            changes.save(changes.history_path(path), self.history, self.snapshot)
        book = path.with_suffix(".xlsx")
        sheets = {k: v for k, v in self.sheets.items() if v is not None and v.width}
        write_xlsx(sheets or {"summary": pl.DataFrame({"note": ["no data yet"]})}, book)
        return path, book


def build_report(wh: Warehouse, cfg: Config, *, at: str | Path | None = None,
                 data_dir: str | Path | None = None) -> Report:
    """Gather every section's tables from ``wh`` and render the report.

    ``at``: where the report will be written; the findings of the reports written there before
    (``.findings.json`` beside it) are what "what changed" compares with. ``data_dir``: the
    input folder, where the simulator's marker says whether the records are synthetic.
    """
    history, problem = changes.load(changes.history_path(at)) if at is not None else ([], None)
    b = _Builder(wh, cfg)
    b.origin = origin.resolve(cfg, data_dir, history)
    b.history, b.history_problem = history, problem
    parts = [
        ("findings", "Findings", b.findings),
        ("summary", "Fleet summary", b.summary),
        ("afr", "Annualized failure rates", b.afr),
        ("survival", "Survival and failure shape", b.survival),
        ("flags", "Flagged batches and vendors", b.flags),
        ("pareto", "Failure modes", b.pareto),
        ("xids", "Top Xid codes per model", b.xids),
        ("trend", "Monthly trend", b.trend),
        ("repairs", "Repair times", b.repairs),
        ("predictions", "Predicted failures", b.predictions),
        ("quality", "Data quality", b.quality),
        ("methodology", "Methodology", b.methodology),
    ]
    rendered = [(sid, title, h.safe(fn, sid)) for sid, title, fn in parts]
    s = b.facts
    period = (f"{s['period_start']} to {s['period_end']}" if s.get("period_start") else "no records yet")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    banner = origin.banner(b.origin, s.get("afr_pct"))
    doc = h.page(cfg.report.title, f"Records from {period} · generated {stamp}", rendered, banner=banner)
    return Report(doc, b.sheets, [sid for sid, _, _ in rendered], snapshot=b.snapshot, history=history)


def findings_section(found: Findings, cfg: Config, data_origin: origin.Origin, history: list[dict],
                     problem: str | None = None) -> tuple[str, dict[str, pl.DataFrame], dict]:
    """The Findings section on its own: (body HTML, workbook sheets, the snapshot to keep),
    compared with ``history`` (the snapshots of earlier reports, oldest first)."""
    snap = changes.snapshot(found, data_origin.as_dict())
    base, same = changes.baseline(history, snap)
    lines = changes.describe(snap, base) if base is not None else []
    body, sheets = findings_html.render(found, cfg, change_lines=lines, base=base, same=same, problem=problem,
                                        rate_multiplier=data_origin.rate_multiplier)
    return body, sheets, snap


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


class _Builder:
    """One method per section, each returning its body HTML and adding its sheets."""

    def __init__(self, wh: Warehouse, cfg: Config):
        self.wh, self.cfg = wh, cfg
        self.sheets: dict[str, pl.DataFrame] = {}
        self.facts: dict = {}
        self.origin = origin.Origin()
        self.history: list[dict] = []
        self.history_problem: str | None = None
        self.snapshot: dict | None = None
        self._findings: Findings | None = None
        try:
            self.facts = tables.summary(wh, cfg)
        except Exception as exc:
            log.warning("report: summary failed: %s", exc)

    @property
    def found(self) -> Findings:
        """The findings, gathered once for the Findings section and the AFR verdicts."""
        if self._findings is None:
            self._findings = gather(self.wh, self.cfg, self.facts)
        return self._findings

    def findings(self) -> str:
        body, sheets, self.snapshot = findings_section(self.found, self.cfg, self.origin, self.history,
                                                       self.history_problem)
        self.sheets.update(sheets)
        return body

    def _source(self, stats_name: str) -> str:
        used = reliability.has_rows(self.wh, stats_name)
        text = ("From the statistics stage." if used else
                "Computed on the spot by pipeline.stats from the inventory and the coded tickets "
                "(the statistics stage has not written its tables yet).")
        return f'<p class="source">{h.esc(text)}</p>'

    def summary(self) -> str:
        s = self.facts
        if not s.get("gpus"):
            return h.no_data("the inventory is empty", "Run `fleetfault run` on a data folder with inventory.csv.")
        self.sheets["summary"] = pl.DataFrame({"metric": list(s), "value": [h.fmt_value(v) for v in s.values()]})
        afr = s.get("afr_pct")
        tiles = [("GPUs in inventory", f"{s['gpus']:,}"), ("in service", f"{s['in_service']:,}"),
                 ("hosts", f"{s['hosts']:,}"), ("GPU models", f"{s['models']:,}"),
                 ("GPU-days observed", f"{s.get('gpu_days', 0):,.0f}"), ("GPU failures", f"{s.get('failures', 0):,}"),
                 ("fleet AFR", f"{afr:.2f}%" if afr is not None else "—"),
                 ("Xid events", f"{s['xid_events']:,}"), ("tickets", f"{s['tickets']:,}")]
        text = ""
        if afr is not None:
            text = h.para(
                f"Between {s['period_start']} and {s['period_end']} the fleet of {s['gpus']:,} GPUs accumulated "
                f"{s['gpu_days']:,.0f} GPU-days and {s['failures']:,} GPU replacements: an annualized failure "
                f"rate of {afr:.2f}% ({self.cfg.stats.confidence:.0%} interval {s['afr_ci_low_pct']:.2f}–"
                f"{s['afr_ci_high_pct']:.2f}%).")
        return h.kpis(tiles) + text

    def afr(self) -> str:
        fleet = self.facts.get("afr_pct")
        out = []
        for by in ("model", "vendor", "batch"):
            df = reliability.afr(self.wh, self.cfg, by)
            out.append(f"<h3>By {h.esc(by)}</h3>")
            if not df.height:
                out.append(h.no_data(f"no exposure per {by}"))
                continue
            df = self._with_verdicts(df, by)
            self.sheets[f"afr_by_{by}"] = df
            out.append(h.figure(charts.afr_bars(df, by, fleet), f"AFR by {by} with 95% intervals",
                                "Bars: annualized failure rate; whiskers: exact Poisson 95% interval; "
                                "dashed line: the whole fleet; grey bars: too little exposure to judge (see Findings)."))
            out.append(h.table(df, [by, "gpus", "gpu_days", "failures", "afr_pct", "afr_ci_low_pct", "afr_ci_high_pct",
                                    "verdict"], formats=_PCT, labels=_AFR_LABELS))
        return "".join(out) + self._source("stats_afr")

    def _with_verdicts(self, df: pl.DataFrame, by: str) -> pl.DataFrame:
        """``verdict`` from the findings (fails more / less, like the fleet, too little exposure);
        ``low_exposure`` (the grey bars) becomes "too little exposure to judge" where judged."""
        try:
            verdicts = self.found.verdict_of(by)
        except Exception as exc:  # the findings section shows the error; the AFR table still draws
            log.warning("report: verdicts by %s unavailable: %s", by, exc)
            verdicts = {}
        if not verdicts:
            return df
        df = df.with_columns(pl.col(by).replace_strict(verdicts, default=None, return_dtype=pl.Utf8).alias("verdict"))
        return df.with_columns((pl.col("verdict") == TOO_LITTLE).fill_null(pl.col("low_exposure")).alias("low_exposure"))

    def survival(self) -> str:
        km = reliability.survival(self.wh, self.cfg, "model")
        wb = reliability.weibull(self.wh, self.cfg, "model")
        out = []
        if km.height:
            self.sheets["survival_by_model"] = km
            band = ("shaded: 95% band." if km["ci_low"].drop_nulls().len() else
                    "no interval band: the survival stage gave none for these curves.")
            flat = km.group_by("model").agg(pl.col("events").fill_null(0).sum()).filter(pl.col("events") == 0).height
            note = (" Groups without a replacement stay at 100% and are named in the legend, not drawn."
                    if flat else "")
            out.append(h.figure(charts.survival_curves(km, "model"), "Kaplan-Meier survival by model",
                                f"Share of GPUs not yet replaced, by age; {band}{note}"))
        else:
            out.append(h.no_data("no lifetimes to draw survival curves from"))
        if wb.height:
            self.sheets["weibull_by_model"] = wb
            out.append("<h3>Weibull shape per model</h3>")
            items = [f"{r['model']}: {r['interpretation']}" for r in wb.iter_rows(named=True)]
            out.append(h.bullets(items))
            out.append(h.para("A Weibull shape below 1 means failures concentrate early in life (burn-in pays), "
                              "near 1 a constant rate, above 1 wear-out (plan replacements by age)."))
        return "".join(out) + self._source("stats_survival")

    def flags(self) -> str:
        df = reliability.flagged(self.wh, self.cfg)
        if not self.facts.get("failures") and not df.height:
            return h.no_data("no failures recorded, so no group can be compared")
        if not df.height:
            return ('<p class="ok">No batch, vendor or model fails significantly more often than the rest of the '
                    'fleet (exact test, Benjamini–Hochberg adjusted).</p>') + self._source("stats_compare")
        self.sheets["flagged"] = df
        items = "".join(f'<p class="flag">{h.esc(s)}.</p>' for s in df["sentence"])
        every = reliability.comparisons(self.wh, self.cfg)
        if every.height:
            self.sheets["comparisons"] = every
        return items + h.para("Each group is compared with the rest of the fleet by the exact conditional test "
                              "of two Poisson rates; p-values are Benjamini–Hochberg adjusted within each "
                              "dimension.") + self._source("stats_compare")

    def pareto(self) -> str:
        df = tables.pareto(self.wh)
        if not df.height:
            return h.no_data("no coded tickets", "Tickets appear once the tickets stage has run.")
        self.sheets["failure_modes"] = df
        top = df.head(1).row(0, named=True)
        lead = h.para(f"The most frequent failure mode is {top['part_code']} / {top['symptom_code']} "
                      f"({top['tickets']:,} tickets, {top['cumulative_pct']:.0f}% of all coded tickets).")
        return lead + h.figure(charts.pareto_chart(df), "Failure-mode Pareto") + h.table(
            df, formats={"cumulative_pct": ",.1f"}, labels={"cumulative_pct": "cumulative %"}, limit=25)

    def xids(self) -> str:
        df = tables.top_xids(self.wh)
        if not df.height:
            return h.no_data("no Xid events", "Kernel logs appear once the xid stage has run.")
        self.sheets["top_xids"] = df
        return h.figure(charts.xid_chart(df), "Top Xid codes per model") + h.table(
            df, formats={"per_1000_gpu_days": ",.2f"}, labels={"per_1000_gpu_days": "per 1,000 GPU-days"})

    def trend(self) -> str:
        df = tables.monthly_trend(self.wh, self.cfg)
        if not df.height:
            return h.no_data("no dated records")
        self.sheets["monthly_trend"] = df
        fmt = {"month": "%Y-%m", "gpu_days": ",.0f", **{c: ",.2f" for c in ("afr_pct", "afr_ci_low_pct", "afr_ci_high_pct")}}
        return h.figure(charts.trend_chart(df), "Monthly trend") + h.table(df, formats=fmt, labels=_AFR_LABELS, limit=36)

    def repairs(self) -> str:
        df = tables.repair_times(self.wh)
        if not df.height:
            return h.no_data("no ticket carries both an open and a close time")
        self.sheets["repair_times"] = df
        hours = tables.repair_hours(self.wh)
        fmt = {c: ",.1f" for c in ("median_hours", "p90_hours", "mean_hours")}
        return (h.figure(charts.repair_chart(hours), "Repair time histogram")
                + h.table(df, formats=fmt, labels={"p90_hours": "90th pct hours"}))

    def predictions(self) -> str:
        df = tables.predictions(self.wh)
        if not df.height:
            return h.no_data("no predicted-failure list", "The predict stage writes it once a model is trained.")
        self.sheets["predictions"] = df
        horizon = df["horizon_days"][0]
        expected = float(df["risk"].sum())
        high = int((df["risk"] >= 0.5).sum())
        version = df["model_version"][0] or "unknown"
        scored = f"As of {df['as_of'][0]}, {df.height:,} GPUs in service were scored by {version}. "
        if version.endswith("uncalibrated"):
            text = (scored + "No failure model is trained yet and too few failures are recorded to calibrate the "
                    "rule baseline (recent critical Xids and their like): its scores order the GPUs but are not "
                    "probabilities.")
        else:
            text = (scored + f"It expects about {expected:.1f} GPU replacements in the next {horizon} days "
                    f"(the sum of the calibrated probabilities); {_count(high, 'GPU')} "
                    f"{'has' if high == 1 else 'have'} a risk of 50% or more.")
        lead = h.para(text)
        from pipeline.report.predict_track import section as track_section

        return lead + h.figure(charts.risk_chart(df), "Highest predicted risk") + h.table(
            df, ["rank", "serial", "host", "pci_bus_id", "model", "risk", "top_factors"],
            formats={"risk": ".1%"}, limit=20) + track_section(self.wh)

    def quality(self) -> str:
        out = []
        files = tables.files_read(self.wh)
        out.append("<h3>Files read</h3>")
        if files.height:
            self.sheets["files_read"] = files
            out.append(h.table(files))
        else:
            out.append(h.no_data("no files registered"))
        empty = tables.empty_files(self.wh)
        if empty.height:  # a file the night read nothing from must not pass unnoticed
            self.sheets["files_without_rows"] = empty
            out.append("<h3>Files that gave no rows</h3>" + h.table(empty, limit=50))
        q = tables.quarantine_reasons(self.wh)
        out.append("<h3>Rows quarantined, by reason</h3>")
        if q.height:
            self.sheets["quarantine"] = q
            out.append(h.table(q))
        else:
            out.append('<p class="ok">No rows were quarantined.</p>')
        t = tables.ticket_quality(self.wh)
        out.append("<h3>Tickets</h3>")
        out.append(h.bullets([
            f"{_count(t['tickets'], 'ticket')}; {t['awaiting_review']:,} awaiting review (a code was not confident; "
            "`fleetfault review export` sends them to a person).",
            f"{_count(t['unlinked_tickets'], 'ticket')} could not be linked to an inventory GPU.",
            f"{t['unlinked_xid_events']:,} of {t['xid_events']:,} Xid events could not be linked to a GPU serial.",
        ]))
        self.sheets["ticket_quality"] = pl.DataFrame({"metric": list(t), "value": list(t.values())})
        un = tables.unlinked_tickets(self.wh)
        if un.height:
            self.sheets["unlinked_tickets"] = un
            out.append("<h3>Unlinked tickets (most recent)</h3>" + h.table(un, limit=20))
        stale = stale_inventory(self.wh) if self.wh.table_exists("inventory_stale") else None
        if stale is not None and stale.height:
            # The exposure already ends where the telemetry last saw these GPUs; the registry
            # itself is for the asset team to correct.
            self.sheets["inventory_stale"] = stale
            out.append(f"<h3>Inventory rows the telemetry contradicts</h3><p>{_count(stale.height, 'inventory row')} "
                       f"say installed for a serial the telemetry has not reported for more than "
                       f"{self.cfg.link.stale_after_days} days; exposure ends at its last report. "
                       "Correct them in the asset registry.</p>" + h.table(stale, limit=20))
        return "".join(out)

    def methodology(self) -> str:
        c = self.cfg.stats
        parts = " or ".join(c.failure_parts)
        acts = " or ".join(c.failure_actions)
        return "".join([
            "<h3>Definitions</h3>",
            h.bullets([
                f"A failure is a service ticket with part {parts} and action {acts}, linked to an inventory serial.",
                "Exposure is GPU-days inside the window the records cover (config stats.window_start/end, else the "
                "first to the last day of data); a GPU installed earlier enters the window late (delayed entry); a "
                "replacement ends its exposure even if the inventory still lists it; removal without a "
                "replacement ticket is censoring, not failure.",
                "AFR = failures / GPU-days × 365 × 100%.",
                f"Interval: exact Poisson (chi-square) {c.confidence:.0%}: lower = χ²(α/2; 2k)/2, "
                "upper = χ²(1−α/2; 2k+2)/2 failures, divided by GPU-years.",
                "Survival: Kaplan–Meier by age since installation with delayed entry; Weibull shape by maximum "
                "likelihood (lifelines).",
                "Flags: each group against the rest of the fleet; the rate ratio's interval and p-value come from "
                "the exact conditional binomial test; p-values are Benjamini–Hochberg adjusted within each "
                "dimension (batch, vendor, model).",
                "Predicted risk: the calibrated probability that a GPU is replaced within the horizon, from the "
                "predict stage's model; the expected number of replacements is the sum of the risks.",
            ]),
            "<h3>Caveats</h3>",
            h.bullets([
                f"A group is judged only when a {self.cfg.report.detect_rate_ratio:g}× difference from the rest of the "
                f"fleet would be detected {self.cfg.report.power:.0%} of the time by the same exact test (power "
                "computed exactly for the group's and the rest's GPU-days at the fleet's rate); below that it has "
                "too little exposure to judge, whatever its GPU-days, and the Findings give the exposure it needs. "
                "Read the interval, not the point estimate.",
                "Ticket coding is automatic; tickets below the confidence threshold await review and are not "
                "counted until a person codes them.",
                "Unlinked tickets and Xid events (see Data quality) are missing from the per-GPU numbers.",
                "Xid rates per 1,000 GPU-days use telemetry days as exposure; a model without telemetry shows counts only.",
            ]),
        ])
