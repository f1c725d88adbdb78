"""The Prometheus textfile: it parses with the official parser, label values survive hostile
text, and the numbers match the warehouse."""

from __future__ import annotations

from datetime import date, datetime, timezone

import polars as pl
import pytest
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
    assert top.value == wh.engine.scalar("SELECT max(risk) FROM predictions", step="test")
    assert top.labels["serial"] == wh.engine.scalar("SELECT serial FROM predictions WHERE rank = 1", step="test")
    xids = fams["fleetfault_gpu_xid_events"]
    total = sum(s.value for s in xids.samples if s.labels["window"] == "all")
    assert total == wh.engine.scalar("SELECT count(*) FROM xid_events WHERE serial IS NOT NULL", step="test")
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
    assert ranker[0].labels["ranker"] == wh.engine.scalar("SELECT any_value(model_version) FROM predictions", step="test")


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


# -- how the night ended: fleetfault_run.prom ----------------------------------------------------

def _run_status(out) -> dict:
    text = (out / "fleetfault_run.prom").read_text(encoding="utf-8")
    return {f.name: f.samples[0].value for f in text_string_to_metric_families(text) if f.samples}


def test_failed_run_is_recorded_and_keeps_the_last_success(tmp_path):
    from pipeline.config import Config
    from pipeline.errors import UsageError
    from pipeline.report.run_status import RunRecord, write_status
    from pipeline.run import run_pipeline

    out = tmp_path / "out"
    assert write_status(out, RunRecord(1.0, 2.0, 2)) is None and not out.exists()  # never creates the folder
    out.mkdir()
    write_status(out, RunRecord(1_700_000_000.0, 1_700_000_600.0, 0))
    assert _run_status(out)["fleetfault_run_last_success_timestamp_seconds"] == 1_700_000_600.0
    with pytest.raises(UsageError):
        run_pipeline(Config(), tmp_path / "no-such-folder", tmp_path / "wh.duckdb", out)
    status = _run_status(out)
    assert status["fleetfault_run_last_exit_code"] == 2
    assert status["fleetfault_run_last_end_timestamp_seconds"] > 1_700_000_600.0
    assert status["fleetfault_run_last_success_timestamp_seconds"] == 1_700_000_600.0  # kept
    assert not list(out.glob(".fleetfault-*"))


def test_unwritable_status_file_is_a_warning_not_a_crash(tmp_path):
    from pipeline.report.run_status import FILE_NAME, RunRecord, write_status

    (tmp_path / FILE_NAME).mkdir()  # something that cannot be replaced by a file
    assert write_status(tmp_path, RunRecord(0.0, 1.0, 3)) is None


@pytest.mark.xdist_group("sample")
def test_sample_run_records_its_exit_code(sample_warehouse):
    _, out = sample_warehouse
    status = _run_status(out)
    assert status["fleetfault_run_last_exit_code"] == 1  # the sample's 4 truncated lines are quarantined
    assert status["fleetfault_run_rows_quarantined"] == 4
    assert status["fleetfault_run_last_success_timestamp_seconds"] == status["fleetfault_run_last_end_timestamp_seconds"]
