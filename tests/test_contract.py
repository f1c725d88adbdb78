"""Contract tests: every stage of the nightly job on the bundled sample produces its declared
tables, valid; the CLI's exports carry the contract's columns; a second run loads nothing."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.cli import EXPORTS, main
from pipeline.schemas import all_schemas
from pipeline.warehouse import Warehouse
from tests.conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sample")]

CONTRACT_COLUMNS = {
    "xid": ["ts", "uptime_s", "host", "pci_bus_id", "kind", "xid", "pid", "process", "message",
            "source_file", "line_no", "ts_quality", "ts_error_s", "serial"],
    "tickets": ["ticket_id", "service_point", "opened_at", "host", "serial", "part_text", "symptom_text",
                "action_text", "part_code", "part_score", "symptom_code", "symptom_score", "action_code",
                "action_score", "review"],
    "failures": ["serial", "failed_at", "ticket_id", "part_code", "symptom_code"],
}


# The code taxonomy fixed by the contract (../shared/CONTRACT.md).
CONTRACT_CODES = {
    "part": {"GPU", "GPU_BASEBOARD", "NVSWITCH", "NVLINK_BRIDGE", "PCIE_RISER", "FAN", "PSU", "COOLING",
             "MOTHERBOARD", "CPU", "DIMM", "STORAGE", "NIC", "CABLE", "BMC", "SOFTWARE", "NONE"},
    "symptom": {"FELL_OFF_BUS", "MEMORY_UNCORRECTABLE", "MEMORY_CORRECTABLE", "ROW_REMAP", "OVERHEAT",
                "FAN_FAULT", "POWER_FAULT", "NVLINK_ERROR", "PCIE_ERROR", "GSP_ERROR", "HANG", "PERFORMANCE",
                "APP_FAULT", "DRIVER_ISSUE", "PHYSICAL_DAMAGE", "BOOT_FAILURE", "OTHER"},
    "action": {"REPLACE", "RESEAT", "REBOOT", "REFLASH", "CLEAN", "MONITOR", "NONE"},
}


def test_bundled_taxonomy_has_exactly_the_contract_codes():
    from pipeline.normalize.taxonomy import load_taxonomy

    tax = load_taxonomy()
    for dim, codes in CONTRACT_CODES.items():
        assert set(tax.allowed(dim)) == codes, dim


def test_every_declared_table_is_present_with_its_columns(sample_warehouse):
    wh_path, _ = sample_warehouse
    with Warehouse(wh_path, read_only=True) as wh:
        for name, sch in all_schemas().items():
            cols = wh.engine.pl(f'SELECT * FROM "{name}" LIMIT 0', step="test").columns
            assert cols[: len(sch.names)] == sch.names or set(sch.names) <= set(cols), name
            for pk in [sch.primary_key] if sch.primary_key else []:
                keys = ", ".join(f'"{k}"' for k in pk)
                dupes = wh.engine.scalar(f'SELECT count(*) FROM (SELECT {keys} FROM "{name}" GROUP BY ALL HAVING count(*) > 1)', step="test")
                assert dupes == 0, f"{name}: duplicate primary keys"


def test_core_tables_are_filled(sample_warehouse):
    wh_path, out = sample_warehouse
    with Warehouse(wh_path, read_only=True) as wh:
        for table in ("inventory", "gpu_days", "xid_events", "tickets", "failures", "predictions", "stats_afr"):
            assert wh.engine.scalar(f'SELECT count(*) FROM "{table}"', step="test") > 0, f"{table} is empty after the sample run"
        # Every GPU-day belongs to a known host; Xid codes are integers with canonical bus ids.
        assert wh.engine.scalar("SELECT count(*) FROM xid_events WHERE pci_bus_id IS NOT NULL AND NOT regexp_matches(pci_bus_id, '^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]$')", step="test") == 0
        assert wh.engine.scalar("SELECT count(*) FROM predictions WHERE risk < 0 OR risk > 1", step="test") == 0
    for name in ("report.html", "predictions.csv"):
        assert (out / name).exists(), name


def test_counts_reconcile_per_file(sample_warehouse):
    wh_path, _ = sample_warehouse
    with Warehouse(wh_path, read_only=True) as wh:
        bad = wh.engine.rows("""
            SELECT f.path, f.rows_read, f.rows_loaded, f.rows_quarantined, count(q.file_id)
            FROM files f LEFT JOIN quarantine q USING (file_id)
            GROUP BY ALL
            HAVING f.rows_read <> f.rows_loaded + f.rows_quarantined OR f.rows_quarantined <> count(q.file_id)
        """, step="test")
        assert not bad, bad


def test_codes_are_in_the_taxonomy(sample_warehouse):
    wh_path, _ = sample_warehouse
    codes = CONTRACT_CODES
    with Warehouse(wh_path, read_only=True) as wh:
        for dim in ("part", "symptom", "action"):
            used = {r[0] for r in wh.engine.rows(f"SELECT DISTINCT {dim}_code FROM tickets WHERE {dim}_code IS NOT NULL", step="test")}
            assert used <= codes[dim], (dim, used - codes[dim])
            # A code is null exactly when the ticket needs review for it.
            assert wh.engine.scalar(f"SELECT count(*) FROM tickets WHERE {dim}_code IS NULL AND NOT review", step="test") == 0


@pytest.mark.parametrize("table", ["xid", "tickets", "gpu_days", "failures"])
def test_exports_have_contract_columns(sample_warehouse, tmp_path, table):
    wh_path, _ = sample_warehouse
    out = tmp_path / f"{table}.parquet"
    assert main(["export", table, "-o", str(out), "--warehouse", str(wh_path)]) == 0
    df = pl.read_parquet(out)
    if table in CONTRACT_COLUMNS:
        assert df.columns == CONTRACT_COLUMNS[table]
    else:
        assert df.columns[:2] == ["gpu_key", "serial"] and "day" in df.columns
    assert df.height > 0
    assert EXPORTS[table][0] in all_schemas()


def test_second_run_loads_nothing(sample_warehouse, tmp_path, capsys):
    wh_path, _ = sample_warehouse
    code = main(["run", "--data", str(ROOT / "data" / "sample"), "--warehouse", str(wh_path),
                 "--out", str(tmp_path / "out2"), "--config", str(ROOT / "fleetfault.toml"), "-q"])
    assert code == 0
    assert "No new rows" in capsys.readouterr().out
    with Warehouse(wh_path, read_only=True) as wh:
        last = wh.engine.rows("SELECT status FROM runs ORDER BY run_id DESC LIMIT 1", step="test")[0][0]
        assert last == "ok"
