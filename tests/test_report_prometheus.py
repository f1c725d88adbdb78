"""The Prometheus textfile: it parses with the official parser, label values survive hostile
text, and the numbers match the warehouse."""

from __future__ import annotations

from datetime import date, datetime, timezone

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from pipeline.report.prometheus import render, write_textfile
from test_report import fill_warehouse


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_prom_file_parses_and_matches(wh, tmp_path):
    facts = fill_warehouse(wh)
    path = write_textfile(wh, tmp_path / "fleetfault.prom")
    fams = _families(path.read_text(encoding="utf-8"))
    risk = fams["fleetfault_gpu_failure_risk"]
    assert risk.type == "gauge" and len(risk.samples) == facts["predictions"]
    top = max(risk.samples, key=lambda s: s.value)
    assert set(top.labels) == {"serial", "host", "model", "pci_bus_id", "horizon_days"}
    assert top.value == wh.scalar("SELECT max(risk) FROM predictions")
    assert top.labels["serial"] == wh.scalar("SELECT serial FROM predictions WHERE rank = 1")
    xids = fams["fleetfault_gpu_xid_events"]
    total = sum(s.value for s in xids.samples if s.labels["window"] == "all")
    assert total == wh.scalar("SELECT count(*) FROM xid_events WHERE serial IS NOT NULL")
    assert all(s.value >= 0 for s in xids.samples)
    recent = {(s.labels["serial"], s.labels["xid"]): s.value for s in xids.samples if s.labels["window"] == "7d"}
    assert all(recent[(s.labels["serial"], s.labels["xid"])] <= s.value
               for s in xids.samples if s.labels["window"] == "all")
    as_of = fams["fleetfault_predictions_as_of_timestamp_seconds"].samples[0].value
    assert as_of == datetime(2025, 5, 30, tzinfo=timezone.utc).timestamp()
    assert not list(tmp_path.glob(".fleetfault-*"))  # the temporary file was renamed, not left behind


def test_track_record_and_ranker_are_exported(wh):
    fill_warehouse(wh)
    wh.insert("predict_track", pl.DataFrame({
        "month": ["2025-04", "2025-05"], "source": ["replayed", "published"], "failures": [3, 2], "caught": [2, 2],
        "missed": [1, 0], "false_alarms": [7, 4], "median_lead_days": [3.5, None], "gpu_days": [900, 930]}))
    fams = _families(render(wh))
    caught = {s.labels["month"]: s.value for s in fams["fleetfault_predict_failures_caught"].samples}
    assert caught == {"2025-04": 2.0, "2025-05": 2.0}
    assert [s.value for s in fams["fleetfault_predict_failures_missed"].samples] == [1.0, 0.0]
    assert [s.value for s in fams["fleetfault_predict_false_alarms"].samples] == [7.0, 4.0]
    lead = fams["fleetfault_predict_median_lead_days"].samples
    assert [(s.labels["month"], s.value) for s in lead] == [("2025-04", 3.5)]  # no lead without a catch
    ranker = fams["fleetfault_predict_ranker_info"].samples
    assert len(ranker) == 1 and ranker[0].value == 1.0
    assert ranker[0].labels["ranker"] == wh.scalar("SELECT any_value(model_version) FROM predictions")


def test_empty_warehouse_still_parses(wh):
    fams = _families(render(wh))
    assert fams["fleetfault_gpu_failure_risk"].samples == []
    assert len(fams["fleetfault_export_timestamp_seconds"].samples) == 1


_label_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None)
@given(serial=_label_text, host=_label_text, model=_label_text)
def test_hostile_label_values_round_trip(tmp_path_factory, serial, host, model):
    from pipeline.warehouse import Warehouse

    with Warehouse(":memory:") as wh:
        wh.insert("predictions", pl.DataFrame({
            "rank": [1], "serial": [serial], "host": [host], "pci_bus_id": ["0000:3b:00.0"], "model": [model],
            "risk": [0.25], "horizon_days": [7], "top_factors": ['"><script>'], "as_of": [date(2025, 5, 30)],
            "model_version": ["rules"]}))
        fams = _families(render(wh))
    (sample,) = fams["fleetfault_gpu_failure_risk"].samples
    assert (sample.labels["serial"], sample.labels["host"], sample.labels["model"]) == (serial, host, model)
    assert sample.value == 0.25
