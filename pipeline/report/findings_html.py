"""The Findings section in plain words: what to buy less of, what more of, what cannot be told
yet and how long until it can, the leading failure modes, and what changed.

Reads: a :class:`~pipeline.report.findings.Findings` and the change sentences of
:mod:`pipeline.report.changes`. Writes nothing; returns HTML (every value escaped through
:mod:`pipeline.report.html`).
"""

from __future__ import annotations

import math

import polars as pl

from pipeline.config import Config
from pipeline.report import html as h
from pipeline.report.findings import LESS, LIKE, MORE, NO_FAILURES, TEST_NAME, TOO_LITTLE, Findings

#: What procurement can do about a group that fails more, per dimension.
_ACT = {
    "batch": "raise it with the vendor (firmware, a known defect, RMA terms) and prefer other batches until answered",
    "vendor": "review this vendor's RMA history and terms before the next order",
    "model": "weigh its higher replacement rate (spares, downtime) against the alternatives in the next order",
}


def _who(r: dict) -> str:
    model = r.get("model")
    extra = f" ({model})" if model and r["dimension"] != "model" else ""
    return f"{r['dimension']} {r['group_value']}{extra}"


def _ratio(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "∞"
    return f"{x:.2f}" if x < 1 else f"{x:.1f}"


def _p(x: float | None) -> str:
    return "p unknown" if x is None else ("p < 0.001" if x < 0.001 else f"p = {x:.3f}")


def _difference(r: dict, conf: float) -> str:
    rr = r["rate_ratio"]
    if rr is None:
        head = "fails while the rest of the fleet had none"
    elif rr == 0:  # "0.00x" reads like a typo: say what was expected instead
        expected = r["rest_failures"] / r["rest_gpu_days"] * r["gpu_days"] if r["rest_gpu_days"] else 0.0
        head = f"had no failure where the rest of the fleet's rate predicts {expected:.1f}"
    else:
        head = f"fails {_ratio(rr)}× the rate of the rest of the fleet"
    return (f"{_who(r)} {head} ({conf:.0%} CI {_ratio(r['rr_ci_low'])}–{_ratio(r['rr_ci_high'])}; "
            f"{r['failures']:,} failures in {r['gpu_days']:,.0f} GPU-days; adjusted {_p(r['p_adjusted'])})")


def _duration(days: float | None) -> str:
    if days is None:
        return "—"
    if days < 60:
        return f"≈ {days:,.0f} days"
    if days < 730:
        return f"≈ {days / 30.4:,.0f} months"
    return f"≈ {days / 365:,.1f} years"


def _lead(f: Findings, cfg: Config) -> str:
    s = f.facts
    if s.get("afr_pct") is None:
        return h.no_data("no exposure yet", "Findings appear once the inventory and some records are loaded.")
    window = f" ({f.window_days:,.0f} days)" if f.window_days else ""
    return h.para(
        f"From {s['period_start']} to {s['period_end']}{window} the fleet of {s['gpus']:,} GPUs recorded "
        f"{s.get('failures', 0):,} GPU replacements in {s.get('gpu_days', 0):,.0f} GPU-days: an annualized "
        f"failure rate of {s['afr_pct']:.2f}% ({cfg.stats.confidence:.0%} interval {s['afr_ci_low_pct']:.2f}–"
        f"{s['afr_ci_high_pct']:.2f}%). Each model, vendor and batch below is compared with the rest of the "
        f"fleet by the {TEST_NAME}.")


def _differences(f: Findings, cfg: Config) -> str:
    conf, out = cfg.stats.confidence, []
    more, less = f.by_verdict(MORE), f.by_verdict(LESS)
    out.append("<h3>Fails significantly more than the rest of the fleet</h3>")
    if more.height:
        out += [f'<p class="flag">{h.esc(_difference(r, conf))}. Act: {h.esc(_ACT.get(r["dimension"], "investigate"))}.</p>'
                for r in more.sort("rate_ratio", descending=True, nulls_last=False).iter_rows(named=True)]
    else:
        judged = f.groups.height - f.by_verdict(TOO_LITTLE).height - f.by_verdict(NO_FAILURES).height
        out.append(h.para(f"None: no model, vendor or batch fails significantly more than the rest of the fleet "
                          f"({judged:,} of {f.groups.height:,} groups have the exposure to show a "
                          f"{cfg.report.detect_rate_ratio:g}× difference)."))
    out.append("<h3>Fails significantly less than the rest of the fleet</h3>")
    if less.height:
        out += [f'<p class="ok">{h.esc(_difference(r, conf))}. A candidate to prefer in the next order.</p>'
                for r in less.sort("rate_ratio").iter_rows(named=True)]
    else:
        out.append(h.para("None."))
    like = f.by_verdict(LIKE)
    if like.height:
        names = ", ".join(_who(r) for r in like.iter_rows(named=True))
        out.append(h.para(f"Like the fleet (enough exposure to show a {cfg.report.detect_rate_ratio:g}× difference, "
                          f"none found): {names}."))
    return "".join(out)


def _too_little(f: Findings, cfg: Config, rate_multiplier: float = 1.0) -> str:
    rep = cfg.report
    rows = f.by_verdict(TOO_LITTLE)
    none = f.by_verdict(NO_FAILURES)
    out = ["<h3>Too little exposure to judge</h3>"]
    if none.height:
        out.append(h.para("No GPU failure is recorded yet, so no group can be judged: the rates are all zero "
                          "with intervals as wide as their exposure allows."))
        return "".join(out)
    if not rows.height:
        out.append(h.para("Every group has enough exposure to be judged."))
        return "".join(out)
    out.append(h.para(
        f"{rows.height:,} of {f.groups.height:,} groups could not show even a {rep.detect_rate_ratio:g}× difference "
        f"from the rest of the fleet: with the {f.facts.get('failures', 0):,} failures the fleet has recorded, a "
        f"difference that large would be detected less than {rep.power:.0%} of the time. \"Detectable now\" is the "
        f"smallest difference today's exposure would find {rep.power:.0%} of the time; \"GPU-days needed\" is the "
        f"group's exposure at which a {rep.detect_rate_ratio:g}× difference would be (the rest of the fleet growing "
        f"with it), and the time is at the group's current size. \"× rest\" is the group's rate against the "
        f"rest of the fleet: an interval that excludes 1 here did not survive the adjustment for comparing "
        f"{f.groups.height:,} groups at once, so it is a lead to watch, not a finding."
        + (f" These records' failure rates are multiplied by {rate_multiplier:g} (see the banner): a real fleet "
           f"would need about {rate_multiplier:g} times these GPU-days and times." if rate_multiplier > 1 else "")))
    table = rows.sort(["more_days", "more_gpu_days", "dimension", "group_value"], nulls_last=True).select(
        "dimension", pl.col("group_value").alias("group"), "gpu_days", "failures",
        pl.struct("rate_ratio", "rr_ci_low", "rr_ci_high").map_elements(
            lambda r: f"{_ratio(r['rate_ratio'])} ({_ratio(r['rr_ci_low'])}–{_ratio(r['rr_ci_high'])})",
            return_dtype=pl.Utf8).alias("× rest (95% CI)"),
        pl.col("detectable_ratio").map_elements(lambda x: "none" if not math.isfinite(x) else f"≥ {x:.1f}×",
                                                return_dtype=pl.Utf8).alias("detectable now"),
        pl.col("needed_gpu_days").alias("GPU-days needed"), pl.col("more_gpu_days").alias("more GPU-days"),
        pl.col("more_days").map_elements(_duration, return_dtype=pl.Utf8).alias("time at current size"))
    out.append(h.table(table, formats={"gpu_days": ",.0f", "GPU-days needed": ",.0f", "more GPU-days": ",.0f"},
                       labels={"gpu_days": "GPU-days", "GPU-days needed": "GPU-days needed",
                               "more GPU-days": "more GPU-days"}, limit=30))
    return "".join(out)


def _modes(f: Findings) -> str:
    out = ["<h3>Top failure modes</h3>"]
    fm, tm = f.failure_modes, f.ticket_modes
    items = []
    if fm.height:
        total = f.facts.get("failures") or int(fm["failures"].sum())
        lead = "; ".join(f"{r['symptom_code']} ({r['failures']:,} of {total:,})" for r in fm.iter_rows(named=True))
        rest = total - int(fm["failures"].sum())
        tail = f"; {rest:,} more in other modes" if rest > 0 else ""
        items.append(f"GPU replacements, by the symptom first reported: {lead}{tail}.")
    if tm.height:
        lead = "; ".join(f"{r['part_code']} · {r['symptom_code']} ({r['tickets']:,} tickets)" for r in tm.iter_rows(named=True))
        items.append(f"All coded tickets, by part and symptom: {lead} — {tm['cumulative_pct'][-1]:.0f}% of the "
                     f"tickets (see Failure modes).")
    out.append(h.bullets(items) if items else h.no_data("no coded tickets"))
    return "".join(out)


def _changes(lines: list[str], base: dict | None, same: dict | None, problem: str | None) -> str:
    out = ["<h3>What changed since the last report</h3>"]
    if problem:
        out.append(f'<p class="note">{h.esc(problem)}; nothing to compare with.</p>')
    if base is None and same is None:
        out.append(h.para("This is the first report in this folder; the next one will list what changed "
                          "(the findings are kept in the .findings.json file beside the report)."))
    elif base is None:
        out.append(h.para(f"No new records since the report of {same.get('generated_at')}: the findings are unchanged."))
    elif not lines:
        out.append(h.para(f"Compared with the report of {base.get('generated_at')}: no change in the findings."))
    else:
        out.append(h.para(f"Compared with the report of {base.get('generated_at')}:") + h.bullets(lines))
    return "".join(out)


def render(f: Findings, cfg: Config, *, change_lines: list[str], base: dict | None, same: dict | None,
           problem: str | None, rate_multiplier: float = 1.0) -> tuple[str, dict[str, pl.DataFrame]]:
    """The section's HTML and its workbook sheets (``rate_multiplier``: the records' failure
    rates against a real fleet's, see :mod:`pipeline.report.origin`)."""
    sheets: dict[str, pl.DataFrame] = {}
    if f.groups.height:
        sheets["findings"] = f.groups
    body = [_lead(f, cfg)]
    if f.groups.height:
        body.append(_differences(f, cfg))
        body.append(_too_little(f, cfg, rate_multiplier))
    elif f.facts.get("afr_pct") is not None:
        body.append(h.no_data("no group could be compared", "The comparison needs models, vendors or batches in the inventory."))
    body.append(_modes(f))
    body.append(_changes(change_lines, base, same, problem))
    return "".join(body), sheets
