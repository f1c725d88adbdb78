"""The report, its workbook, the predicted-failure exports and the Prometheus file.

``fill_warehouse`` builds a small realistic fleet directly in the warehouse's base tables
(inventory, telemetry days, Xid events, coded tickets with hostile text, failures,
predictions, registry and quarantine), so these tests do not wait for the other stages.
"""

from __future__ import annotations

import base64
import html as htmllib
import random
import re
from datetime import date, datetime, timedelta

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openpyxl import load_workbook

from pipeline.config import Config
from pipeline.report.build import SECTIONS, build_report
from pipeline.report.stage import PREDICT_COLUMNS, write_outputs
from pipeline.vocab.sql import literal
from pipeline.warehouse import Rejected

HOSTILE = [
    "<script>alert(1)</script>",
    '=HYPERLINK("http://evil.example/x","click")',
    '"><img src=x onerror=alert(document.cookie)>',
    "+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd",
]
MODELS = [("H100 80GB HBM3", "Supermicro"), ("A100-SXM4-80GB", "Dell"), ("H200", "Inspur")]
START = date(2025, 1, 1)
DAYS = 150


def fill_warehouse(wh, seed: int = 7, gpus_per_model: int = 24) -> dict:
    """A fleet of 3 models x ``gpus_per_model`` GPUs over 150 days, with failures concentrated
    in one bad batch. Returns facts the tests check against."""
    rng = random.Random(seed)
    inv, days, xids, tickets, fails, preds = [], [], [], [], [], []
    serial_n = 0
    for m, (model, vendor) in enumerate(MODELS):
        for g in range(gpus_per_model):
            serial = f"1650{m}{serial_n:08d}"
            serial_n += 1
            host = f"gpu-{'abc'[m]}{g // 8:02d}"
            batch = f"B-2024-0{m + 3}" if g < gpus_per_model // 2 else f"B-2024-1{m}"
            inv.append({"serial": serial, "model": model, "vendor": vendor, "host": host, "slot": g % 8,
                        "site": "sha" if m < 2 else "fra", "batch": batch,
                        "installed_at": datetime(2024, 3 + m, 1), "removed_at": None, "file_id": 1,
                        "line_no": len(inv) + 2})
    bad = [r for r in inv if r["batch"] == "B-2024-10"]  # the A100 second batch fails often
    failed = {r["serial"]: START + timedelta(days=rng.randrange(10, DAYS - 5)) for r in bad[:8]}
    for r in rng.sample([r for r in inv if r["batch"] != "B-2024-10"], 4):
        failed[r["serial"]] = START + timedelta(days=rng.randrange(10, DAYS - 5))
    for r in inv:
        end = failed.get(r["serial"], START + timedelta(days=DAYS))
        if r["serial"] in failed:
            r["removed_at"] = datetime.combine(end, datetime.min.time()) + timedelta(hours=14)
        d = START
        while d < end:
            hot = r["serial"] in failed and (end - d).days < 6
            days.append({"gpu_key": r["serial"], "serial": r["serial"], "host": r["host"],
                         "pci_bus_id": f"0000:{0x18 + r['slot'] * 0x10:02x}:00.0", "gpu_index": r["slot"],
                         "name": r["model"], "day": d, "samples": 1440, "coverage": 1.0,
                         "temp_max": 84.0 if hot else 62.0 + rng.random() * 8,
                         "ecc_corrected_delta": 350.0 if hot else 0.0})
            d += timedelta(days=1)
    n_t = 0
    for serial, day in failed.items():
        r = next(i for i in inv if i["serial"] == serial)
        for k in range(3):
            ts = datetime.combine(day, datetime.min.time()) - timedelta(days=k, hours=rng.randrange(1, 20))
            code = 79 if k == 0 else 48
            xids.append({"event_id": f"e{len(xids)}", "ts": ts, "host": r["host"],
                         "pci_bus_id": f"0000:{0x18 + r['slot'] * 0x10:02x}:00.0", "kind": "Xid", "xid": code,
                         "message": "GPU has fallen off the bus." if code == 79 else "An uncorrectable double bit error",
                         "source_file": f"kernel/{r['host']}/kern.log", "line_no": 100 + len(xids), "serial": serial,
                         "severity": "critical", "hardware": True})
        n_t += 1
        opened = datetime.combine(day, datetime.min.time()) + timedelta(hours=9)
        part_text = HOSTILE[n_t % len(HOSTILE)] if n_t <= len(HOSTILE) else "GPU module replaced"
        tickets.append({"ticket_id": f"T-{1000 + n_t}", "service_point": "shanghai", "opened_at": opened,
                        "closed_at": opened + timedelta(hours=rng.choice([4, 8, 20, 30, 52])), "host": r["host"],
                        "serial": serial, "serial_text": serial, "part_text": part_text,
                        "symptom_text": "GPU fell off the bus / 掉卡", "action_text": "replaced",
                        "part_code": "GPU", "part_score": 97.0, "symptom_code": "FELL_OFF_BUS" if n_t % 3 else "MEMORY_UNCORRECTABLE",
                        "symptom_score": 92.0, "action_code": "REPLACE", "action_score": 99.0, "review": False})
        fails.append({"serial": serial, "failed_at": opened, "ticket_id": f"T-{1000 + n_t}", "part_code": "GPU",
                      "symptom_code": tickets[-1]["symptom_code"]})
    for k in range(10):  # non-failure tickets: fans, reseats, one unlinked and one for review
        r = rng.choice(inv)
        opened = datetime.combine(START + timedelta(days=rng.randrange(DAYS)), datetime.min.time())
        tickets.append({"ticket_id": f"T-{2000 + k}", "service_point": "frankfurt", "opened_at": opened,
                        "closed_at": opened + timedelta(hours=3), "host": r["host"],
                        "serial": None if k == 0 else r["serial"], "serial_text": HOSTILE[0] if k == 0 else r["serial"],
                        "part_text": HOSTILE[2] if k == 0 else "fan tray", "symptom_text": "fan speed low",
                        "action_text": "swapped fan", "part_code": "FAN" if k % 3 else "GPU",
                        "part_score": 90.0, "symptom_code": "FAN_FAULT" if k % 3 else "HANG", "symptom_score": 88.0,
                        "action_code": "REPLACE" if k % 3 else "RESEAT", "action_score": 90.0, "review": k == 1})
    for k in range(40):  # application Xids spread over the fleet
        r = rng.choice(inv)
        xids.append({"event_id": f"a{k}", "ts": datetime.combine(START + timedelta(days=rng.randrange(DAYS)), datetime.min.time()),
                     "host": r["host"], "pci_bus_id": None, "kind": "Xid", "xid": rng.choice([13, 31, 43]),
                     "message": "Graphics SM Warp Exception", "source_file": f"kernel/{r['host']}/dmesg.log",
                     "line_no": k + 1, "serial": r["serial"] if k % 10 else None, "severity": "app", "hardware": False})
    alive = [r for r in inv if r["serial"] not in failed]
    for rank, r in enumerate(sorted(alive, key=lambda _: rng.random()), start=1):
        risk = round(0.9 / rank, 4)
        preds.append({"rank": rank, "serial": r["serial"], "host": r["host"],
                      "pci_bus_id": f"0000:{0x18 + r['slot'] * 0x10:02x}:00.0", "model": r["model"], "risk": risk,
                      "horizon_days": 7, "top_factors": HOSTILE[1] if rank == 1 else "Xid 79 ×1 in 7 days; 12 °C above its model's median",
                      "as_of": START + timedelta(days=DAYS - 1), "model_version": "hgb-2025-05-30"})
    wh.insert("inventory", pl.DataFrame(inv))
    wh.insert("gpu_days", pl.DataFrame(days))
    wh.insert("xid_events", pl.DataFrame(xids))
    wh.insert("tickets", pl.DataFrame(tickets))
    wh.insert("failures", pl.DataFrame(fails))
    wh.insert("predictions", pl.DataFrame(preds))
    wh.engine.execute("INSERT INTO files VALUES (1, 'inventory', 'inventory.csv', 4096, 'ab', 72, 72, 0, 1, now(), 1), "
                      f"(2, 'tickets', {literal(f'tickets/shanghai/{HOSTILE[2]}.csv')}, 2048, 'cd', 20, 19, 1, 1, now(), 1)",
                      step="test")
    wh.quarantine("tickets", f"tickets/shanghai/{HOSTILE[2]}.csv",
                  [Rejected(7, "bad_timestamp", HOSTILE[0], "opened_at '31/02/2025' is not a date")], file_id=2)
    return {"gpus": len(inv), "failures": len(failed), "predictions": len(preds)}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One filled warehouse and its report for the read-only tests of this module."""
    from pipeline.warehouse import Warehouse

    with Warehouse(tmp_path_factory.mktemp("report") / "wh.duckdb") as wh:
        facts = fill_warehouse(wh)
        yield wh, facts, build_report(wh, Config())


@pytest.fixture
def filled(wh):
    facts = fill_warehouse(wh)
    return wh, facts


def _images(doc: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', doc)]


def test_report_has_every_section_and_real_charts(built):
    wh, facts, rep = built
    for sid in SECTIONS:
        assert f'<section id="{sid}"' in rep.html
    assert "No data yet" not in rep.html
    pngs = _images(rep.html)
    assert len(pngs) >= 9  # afr x3, survival, pareto, xids, trend, repairs, risk
    assert all(p.startswith(b"\x89PNG\r\n\x1a\n") and len(p) > 5000 for p in pngs)
    assert f"{facts['gpus']:,}" in rep.html
    # the bad batch is named in a flag sentence
    assert re.search(r'class="flag">[^<]*B-2024-10', rep.html)


def test_report_is_self_contained(built):
    doc = built[2].html
    assert "<script" not in doc.replace("&lt;script", "")
    assert not re.search(r'(src|href)="(https?:)?//', doc)
    assert "@import" not in doc and "url(" not in doc
    assert "@media print" in doc


def test_hostile_text_is_escaped(built):
    doc = built[2].html
    for bad in ("<script>alert(1)</script>", '"><img src=x onerror'):
        assert bad not in doc
    assert htmllib.escape("<script>alert(1)</script>") in doc  # shown as text (unlinked ticket)
    assert htmllib.escape('tickets/shanghai/"><img src=x onerror=alert(document.cookie)>.csv') in doc
    assert len(re.findall(r"<img ", doc)) == len(_images(doc))  # every <img> is one of our charts


def test_empty_warehouse_says_no_data(wh):
    rep = build_report(wh, Config())
    for sid in SECTIONS:
        assert f'<section id="{sid}"' in rep.html
    assert rep.html.count("No data yet") >= 6
    assert "could not be drawn" not in rep.html


def test_outputs_written_and_neutralized(built, tmp_path):
    wh, facts, _ = built
    paths = write_outputs(wh, Config(), tmp_path / "out")
    assert {p.name for p in paths.values()} == {"report.html", "report.xlsx", "predictions.csv",
                                                 "predictions.xlsx", "fleetfault.prom"}
    csv = pl.read_csv(paths["predictions_csv"])
    assert csv.columns == PREDICT_COLUMNS and csv.height == facts["predictions"]
    assert csv["top_factors"][0].startswith("'=HYPERLINK")
    assert csv["rank"].to_list() == sorted(csv["rank"].to_list())
    book = load_workbook(paths["workbook"])
    assert {"afr_by_model", "survival_by_model", "failure_modes", "top_xids", "monthly_trend",
            "repair_times", "predictions", "quarantine"} <= set(book.sheetnames)
    for ws in book.worksheets:
        for row in ws.iter_rows(values_only=True):
            for v in row:
                assert not (isinstance(v, str) and v[:1] in "=+-@"), (ws.title, v)
    preds = load_workbook(paths["predictions_xlsx"]).active
    assert [c.value for c in preds[1]] == PREDICT_COLUMNS
    assert preds["H2"].data_type == "s" and preds["H2"].value.startswith("'=")


def test_afr_before_the_stats_stage_matches_pipeline_stats(built):
    import pipeline.stats as stats
    from pipeline.report.reliability import afr, fleet_afr

    wh, facts, _ = built
    fleet = fleet_afr(wh, Config())
    assert fleet["failures"] == facts["failures"]
    by_model = afr(wh, Config(), "model")
    assert by_model["failures"].sum() == facts["failures"]
    assert abs(by_model["gpu_days"].sum() - fleet["gpu_days"]) < 1e-6
    direct = stats.afr(wh, "model", Config()).sort("model")
    assert by_model.sort("model")["afr_pct"].to_list() == direct["afr_pct"].to_list()
    for r in by_model.iter_rows(named=True):
        assert r["afr_ci_low_pct"] <= r["afr_pct"] <= r["afr_ci_high_pct"]


def test_report_prefers_the_stats_tables(filled):
    """Once the statistics stage has written its tables, the report shows those numbers."""
    wh, _ = filled
    row = {"grouping": "model", "group_value": "H200", "group_key": '{"model": "H200"}', "gpus": 24,
           "gpu_days": 3459.0, "failures": 3, "afr_pct": 31.66, "afr_ci_low_pct": 6.53,
           "afr_ci_high_pct": 92.5, "low_exposure": True}
    wh.insert("stats_afr", pl.DataFrame([row]))
    doc = build_report(wh, Config()).html
    assert "31.66" in doc and "From the statistics stage." in doc


_TAG = re.compile(r"</?(table|thead|tbody|tr|th|td|p)( class=\"?[a-z ]*\"?)?>")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=60), min_size=1, max_size=5))
def test_any_text_in_a_table_stays_text(texts):
    from pipeline.report.html import table

    doc = table(pl.DataFrame({"part_text": texts, "file": list(reversed(texts))}))
    assert "<" not in _TAG.sub("", doc)
    assert all(htmllib.escape(t, quote=True) in doc for t in texts)


def test_report_command(cli, tmp_path):
    from pipeline.warehouse import Warehouse

    path = tmp_path / "fleet.duckdb"
    with Warehouse(path) as wh:
        fill_warehouse(wh, gpus_per_model=8)
    assert cli("report", "-o", tmp_path / "r.html", "--warehouse", path, "--prometheus", tmp_path / "m.prom") == 0
    assert (tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert (tmp_path / "r.xlsx").exists() and (tmp_path / "m.prom").exists()
    assert cli("report", "-o", tmp_path / "r.pdf", "--warehouse", path) == 2  # not HTML
    assert cli("report", "-o", tmp_path / "r.html", "--warehouse", tmp_path / "none.duckdb") == 2


def test_uncalibrated_rule_scores_are_not_called_probabilities(filled):
    wh, _ = filled
    wh.engine.rows("UPDATE predictions SET model_version = 'rules-uncalibrated'", step="test")
    doc = build_report(wh, Config()).html
    assert "are not probabilities" in doc and "replacements in the next" not in doc
