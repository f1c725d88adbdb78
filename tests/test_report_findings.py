"""The report's Findings: verdicts per group, the exposure a group needs before it can be
judged, what changed since the last report, the simulated-data banner, and the chart fixes
(survival legend = drawn curves; tickets not on the Xid axis)."""

from __future__ import annotations

import json
import math
import re
from datetime import date, datetime

import numpy as np
import polars as pl
import pytest
from scipy.stats import binomtest

from pipeline.config import Config, config_from_dict
from pipeline.report import changes, charts, findings, origin
from pipeline.report import tables
from pipeline.report.build import build_report, findings_section
from pipeline.report.findings import LIKE, MORE, NO_FAILURES, TOO_LITTLE, gather
from pipeline.report.stage import write_outputs
from pipeline.vocab.sql import literal
from test_report import fill_warehouse


# -- the planning figures -------------------------------------------------------------------

@pytest.mark.parametrize("t1, t2, rate", [(500, 9000, 0.01), (1437, 2341, 6 / 3778), (100, 300, 0.05)])
def test_needed_exposure_gives_the_target_power(t1, t2, rate):
    f = findings.exposure_factor(t1, t2, rate, 2.0)
    assert f > 1
    assert findings.exact_power(t1 * f, t2 * f, rate, 2.0) >= 0.8 - 1e-6
    assert findings.exact_power(t1 * f * 0.85, t2 * f * 0.85, rate, 2.0) < 0.8
    r = findings.detectable_ratio(t1, t2, rate)
    assert 2.0 < r < math.inf
    assert findings.exact_power(t1, t2, rate, r) >= 0.8 - 1e-6
    assert findings.exact_power(t1, t2, rate, r * 0.9) < 0.8


def test_exact_power_matches_simulated_exact_tests():
    """The power sum is the rejection rate of scipy's own binomtest on simulated counts."""
    seed = 20
    rng = np.random.default_rng(seed)
    t1, t2, rate, ratio = 800.0, 4000.0, 0.004, 2.5
    n_sim = 1500
    hits = 0
    for _ in range(n_sim):
        k1, k2 = rng.poisson(ratio * rate * t1), rng.poisson(rate * t2)
        hits += (k1 + k2) > 0 and binomtest(int(k1), int(k1 + k2), t1 / (t1 + t2)).pvalue < 0.05
    expected = findings.exact_power(t1, t2, rate, ratio)
    assert abs(hits / n_sim - expected) < 4 * math.sqrt(expected * (1 - expected) / n_sim), (seed, hits / n_sim, expected)


def test_judgeable_depends_on_failures_not_on_a_fixed_exposure():
    """The old rule marked every group under 3,650 GPU-days; what matters is expected failures."""
    busy = findings.exposure_factor(1000, 3000, 0.05, 2.0)   # 1,000 GPU-days, ~50 expected failures
    quiet = findings.exposure_factor(50_000, 150_000, 0.00005, 2.0)  # 50,000 GPU-days at a real 1.8% AFR
    assert busy < 1 < quiet
    assert findings.exposure_factor(1000, 3000, 0.0, 2.0) == math.inf
    assert findings.detectable_ratio(1000, 3000, 0.0) == math.inf
    # more failures in the fleet: less exposure needed
    assert findings.exposure_factor(500, 5000, 0.004, 2.0) < findings.exposure_factor(500, 5000, 0.002, 2.0)


def _compare(rows):
    cols = ["dimension", "group_value", "model", "gpu_days", "failures", "rest_gpu_days", "rest_failures",
            "rate_ratio", "rr_ci_low", "rr_ci_high", "p_value", "p_adjusted", "flagged", "sentence"]
    return pl.DataFrame([dict(zip(cols, r)) for r in rows], schema={
        "dimension": pl.Utf8, "group_value": pl.Utf8, "model": pl.Utf8, "gpu_days": pl.Float64, "failures": pl.Int64,
        "rest_gpu_days": pl.Float64, "rest_failures": pl.Int64, "rate_ratio": pl.Float64, "rr_ci_low": pl.Float64,
        "rr_ci_high": pl.Float64, "p_value": pl.Float64, "p_adjusted": pl.Float64, "flagged": pl.Boolean,
        "sentence": pl.Utf8})


def test_a_group_without_failures_is_described_by_what_was_expected():
    from pipeline.report.findings_html import _difference

    row = {"dimension": "vendor", "group_value": "Inspur", "model": "A100", "rate_ratio": 0.0, "rr_ci_low": 0.0,
           "rr_ci_high": 0.72, "failures": 0, "gpu_days": 4800.0, "rest_failures": 37, "rest_gpu_days": 33179.0,
           "p_adjusted": 0.032}
    text = _difference(row, 0.95)
    assert text.startswith("vendor Inspur (A100) had no failure where the rest of the fleet's rate predicts 5.4")
    assert "95% CI 0.00–0.72" in text and "adjusted p = 0.032" in text


def test_judge_assigns_every_verdict():
    df = _compare([
        ("batch", "bad", "H100", 2000.0, 40, 8000.0, 40, 4.0, 2.5, 6.3, 1e-9, 1e-8, True, "x"),
        ("batch", "good", "H100", 4000.0, 4, 6000.0, 76, 0.08, 0.02, 0.2, 1e-12, 1e-11, False, "y"),
        ("batch", "steady", "A100", 3000.0, 24, 7000.0, 56, 1.0, 0.6, 1.6, 0.9, 0.9, False, None),
        ("batch", "tiny", "L40S", 30.0, 0, 9970.0, 80, 0.0, 0.0, 12.0, 1.0, 1.0, False, None),
    ])
    out = findings.judge(df, Config(), window_days=90)
    v = dict(zip(out["group_value"], out["verdict"]))
    assert v == {"bad": MORE, "good": findings.LESS, "steady": LIKE, "tiny": TOO_LITTLE}
    tiny = out.filter(pl.col("group_value") == "tiny").row(0, named=True)
    assert tiny["needed_gpu_days"] > 30 * 10 and tiny["more_gpu_days"] == pytest.approx(tiny["needed_gpu_days"] - 30)
    assert tiny["more_days"] == pytest.approx(tiny["more_gpu_days"] / 30 * 90)
    judged = out.filter(pl.col("verdict") != TOO_LITTLE)
    assert judged["needed_gpu_days"].null_count() == judged.height  # no planning figure where none is needed
    none = findings.judge(_compare([("model", "A", None, 100.0, 0, 100.0, 0, None, None, None, None, None, False, None)]),
                          Config(), 10)
    assert none["verdict"].to_list() == [NO_FAILURES]


# -- the section on a filled warehouse ------------------------------------------------------

@pytest.fixture(scope="module")
def filled_report(tmp_path_factory):
    from pipeline.warehouse import Warehouse

    tmp = tmp_path_factory.mktemp("findings")
    with Warehouse(tmp / "wh.duckdb") as wh:
        fill_warehouse(wh)
        rep = build_report(wh, Config(), at=tmp / "out" / "report.html")
        yield wh, rep, tmp


def _section(doc: str, sid: str) -> str:
    m = re.search(rf'<section id="{sid}".*?</section>', doc, re.S)
    assert m, sid
    return m.group(0)


def test_findings_come_first_and_name_the_bad_batch(filled_report):
    _, rep, _ = filled_report
    assert rep.sections[0] == "findings"
    sec = _section(rep.html, "findings")
    flag = re.search(r'class="flag">([^<]*B-2024-10[^<]*)<', sec)
    assert flag, sec[:2000]
    # ratio, its interval and the adjusted p-value in words, and what to do
    assert re.search(r"fails \d+(\.\d)?× the rate of the rest of the fleet \(95% CI [\d.]+–[\d.]+;", flag.group(1))
    assert re.search(r"adjusted p (&lt;|=) 0\.\d{3}\)", flag.group(1)) and "Act: " in flag.group(1)
    assert "exact conditional test of two Poisson rates" in sec
    assert "Top failure modes" in sec and "FELL_OFF_BUS (8 of 12)" in sec
    assert "first report in this folder" in sec
    assert rep.sheets["findings"].height == 12
    assert rep.snapshot["failures"] == 12 and any(g["verdict"] == MORE for g in rep.snapshot["groups"])


def test_afr_tables_carry_the_verdicts(filled_report):
    _, rep, _ = filled_report
    afr = rep.sheets["afr_by_batch"]
    row = afr.filter(pl.col("batch") == "B-2024-10").row(0, named=True)
    assert row["verdict"] == MORE and row["low_exposure"] is False
    assert set(afr.filter(pl.col("verdict") == TOO_LITTLE)["low_exposure"]) <= {True}
    assert "little exposure: read the interval" not in rep.html


def _findings_now(wh, history):
    """The Findings section for the warehouse as it is (without drawing the rest of the report)."""
    cfg = Config()
    found = gather(wh, cfg, tables.summary(wh, cfg))
    body, _, snap = findings_section(found, cfg, origin.Origin(), history)
    return body, snap


def test_what_changed_is_kept_and_compared(wh, tmp_path):
    fill_warehouse(wh)
    at = tmp_path / "out" / "report.html"
    build_report(wh, Config(), at=at).write(at)
    hist = changes.history_path(at)
    history = changes.load(hist)[0]
    assert [s["failures"] for s in history] == [12]
    again, snap = _findings_now(wh, history)
    assert "No new records since the report of" in again
    history.append(snap)
    # one more GPU replaced in another batch: a new night with different records
    serial = wh.engine.scalar("SELECT serial FROM inventory WHERE batch = 'B-2024-03' AND serial NOT IN "
                       "(SELECT serial FROM failures) ORDER BY serial LIMIT 1", step="test")
    when = datetime(2025, 5, 20, 9)
    wh.engine.execute(f"INSERT INTO tickets SELECT * REPLACE ('T-9999' AS ticket_id, {literal(serial)} AS serial, "
                      f"{literal(when)} AS opened_at, {literal(when)} AS closed_at) FROM tickets WHERE ticket_id = 'T-1001'",
                      step="test")
    wh.insert("failures", pl.DataFrame({"serial": [serial], "failed_at": [when], "ticket_id": ["T-9999"],
                                        "part_code": ["GPU"], "symptom_code": ["OVERHEAT"]}))
    third, _ = _findings_now(wh, history)
    assert "+1 GPU failures (12 → 13)" in third
    assert f"Compared with the report of {history[-1]['generated_at']}" in third  # the newest earlier one


def test_describe_names_verdict_changes():
    base = {"period_start": "2025-01-01", "period_end": "2025-03-31", "gpus": 10, "gpu_days": 900.0, "failures": 2,
            "afr_pct": 81.1, "groups": [{"dimension": "batch", "group": "B1", "verdict": TOO_LITTLE},
                                        {"dimension": "batch", "group": "B0", "verdict": LIKE}],
            "failure_modes": [{"symptom_code": "HANG", "failures": 2}]}
    now = {**base, "period_end": "2025-04-30", "gpu_days": 1200.0, "failures": 6, "afr_pct": 182.5, "gpus": 12,
           "groups": [{"dimension": "batch", "group": "B1", "verdict": MORE},
                      {"dimension": "batch", "group": "B2", "verdict": TOO_LITTLE}],
           "failure_modes": [{"symptom_code": "FELL_OFF_BUS", "failures": 4}]}
    text = "\n".join(changes.describe(now, base))
    assert "2025-01-01 to 2025-04-30" in text and "+4 GPU failures (2 → 6)" in text
    assert "Now flagged: batch B1 now fails significantly more" in text and "(last report: too little exposure)" in text
    assert "New: batch B2" in text and "Gone: batch B0" in text
    assert "+2 GPUs" in text and "leading failure mode is now FELL_OFF_BUS" in text
    assert changes.describe(base, base) == []


@pytest.mark.parametrize("content", ["{not json", '{"snapshots": 3}', '["a"]', "", '{"snapshots": [1]}'])
def test_damaged_history_is_a_reason_not_a_crash(tmp_path, content):
    path = tmp_path / "report.findings.json"
    path.write_text(content)
    snaps, problem = changes.load(path)
    assert snaps == [] and problem.startswith("report.findings.json could not be read (")


def test_damaged_history_is_reported_and_replaced(wh, tmp_path):
    fill_warehouse(wh)
    at = tmp_path / "report.html"
    changes.history_path(at).write_text("{not json")
    rep = build_report(wh, Config(), at=at)
    sec = _section(rep.html, "findings")
    assert "report.findings.json could not be read" in sec and "first report in this folder" in sec
    rep.write(at)
    assert len(changes.load(changes.history_path(at))[0]) == 1  # replaced by a good file


# -- simulated data banner ------------------------------------------------------------------

def _marker(tmp_path, accel=8.0, text=None):
    data = tmp_path / "data"
    (data / "truth").mkdir(parents=True)
    (data / "truth" / "params.json").write_text(text if text is not None else json.dumps({"accel": accel, "seed": 5}))
    return data


def test_banner_from_the_simulators_marker(wh, tmp_path):
    fill_warehouse(wh)
    data = _marker(tmp_path)
    out = tmp_path / "out"
    paths = write_outputs(wh, Config(), out, data)
    doc = paths["report"].read_text()
    banner = re.search(r'<div class="banner" id="data-origin".*?</div>', doc, re.S).group(0)
    assert "Simulated data: failure rates ×8" in banner and "Do not base purchases" in banner
    assert "at real rates" in banner
    assert doc.index('id="data-origin"') < doc.index('<section id="findings"')
    # `fleetfault report` into the same folder, without the data folder: the banner stays
    kept = origin.resolve(Config(), None, changes.load(changes.history_path(paths["report"]))[0])
    assert (kept.simulated, kept.rate_multiplier) == (True, 8.0)


def test_banner_rules(tmp_path):
    data = _marker(tmp_path, accel=8)
    assert origin.resolve(Config(), data).rate_multiplier == 8.0
    assert not origin.resolve(Config(), tmp_path).flagged  # a data folder without the marker
    real = config_from_dict({"report": {"data_origin": "real"}})
    assert not origin.resolve(real, data).flagged
    sim = config_from_dict({"report": {"data_origin": "simulated"}})
    assert origin.resolve(sim, tmp_path).simulated
    acc = config_from_dict({"report": {"rate_multiplier": 4}})
    o = origin.resolve(acc, tmp_path)
    assert (o.simulated, o.rate_multiplier) == (False, 4.0)
    assert "Accelerated data: failure rates ×4" in origin.banner(o, 20.0) and "about 5.00% at real rates" in origin.banner(o, 20.0)
    broken = _marker(tmp_path / "b", text="{oops")
    assert origin.resolve(Config(), broken).simulated
    assert origin.banner(origin.Origin()) == ""
    with pytest.raises(Exception, match="report.data_origin"):
        config_from_dict({"report": {"data_origin": "maybe"}})


# -- chart defects ----------------------------------------------------------------------------

def test_survival_legend_lists_only_drawn_curves():
    rows = []
    for g, events in [("A", [0, 1, 1]), ("B", [0, 0, 0]), ("C", [0, 1, 0]), ("D", [0, 0, 0])]:
        s = 1.0
        for i, e in enumerate(events):
            s *= 0.9 if e else 1.0
            rows.append({"model": g, "t_days": 100.0 * i, "at_risk": 10, "events": e, "survival": s,
                         "ci_low": None, "ci_high": None})
    fig = charts.survival_figure(pl.DataFrame(rows), "model")
    ax = fig.axes[0]
    curves = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert [ln.get_label() for ln in curves] == ["A", "C"]
    assert texts[:2] == ["A", "C"] and len(texts) == 3
    assert "B" in texts[2] and "D" in texts[2] and "not drawn" in texts[2]
    assert "95% band" not in ax.get_title()  # no interval, no promise of one


def test_trend_draws_tickets_apart_from_xid_events():
    df = pl.DataFrame({"month": [date(2025, 3, 1), date(2025, 4, 1)], "failures": [5, 1], "tickets": [18, 11],
                       "xid_events": [598, 575]})
    fig = charts.trend_figure(df)
    top, bottom = fig.axes[:2]
    assert [list(ln.get_ydata()) for ln in top.get_lines()] == [[18, 11]]
    assert [p.get_height() for p in top.patches] == [5, 1]
    assert [p.get_height() for p in bottom.patches] == [598, 575]
    assert top.get_ylim()[1] < 100  # the tickets' axis is scaled to tickets, not to Xid events


# -- the bundled sample -----------------------------------------------------------------------

@pytest.mark.xdist_group("sample")
def test_sample_report_says_simulated_and_what_it_cannot_judge(sample_warehouse):
    _, out = sample_warehouse
    doc = (out / "report.html").read_text(encoding="utf-8")
    assert "Simulated data: failure rates ×8" in doc
    sec = _section(doc, "findings")
    snap = changes.load(out / "report.findings.json")[0][-1]
    for g in snap["groups"]:
        assert g["verdict"] in {MORE, findings.LESS, LIKE, TOO_LITTLE, NO_FAILURES}
    # 6 failures in 3,778 GPU-days: no group can show a 2x difference, and the section says how
    # much exposure each would need instead of a bare "little exposure"
    assert "Too little exposure to judge" in sec and "GPU-days needed" in sec
    assert "a real fleet would need about 8 times these GPU-days" in sec
    rows = re.findall(r"<td class=num>([\d,]+)</td><td class=num>(\d+)</td><td>[\d.]+ \([\d.]+–[\d.∞]+\)</td>"
                      r"<td>≥ [\d.]+×</td><td class=num>([\d,]+)</td>", sec)
    assert len(rows) == sum(g["verdict"] == TOO_LITTLE for g in snap["groups"]) > 0
    assert all(float(need.replace(",", "")) > float(days.replace(",", "")) for days, _, need in rows)


def test_report_command_takes_the_data_folder_for_the_banner(tmp_path):
    from pipeline.cli import main
    from pipeline.warehouse import Warehouse

    with Warehouse(tmp_path / "wh.duckdb") as wh:
        fill_warehouse(wh)
    data = _marker(tmp_path, accel=5)
    out = tmp_path / "r" / "report.html"
    assert main(["report", "-o", str(out), "--warehouse", str(tmp_path / "wh.duckdb"), "--data", str(data)]) == 0
    assert "Simulated data: failure rates ×5" in out.read_text(encoding="utf-8")
    assert changes.history_path(out).exists()
