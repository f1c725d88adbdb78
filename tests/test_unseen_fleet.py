"""The nightly job on a fleet our simulator did not make (``tests/unseen_fleet.py``): another
organisation's inventory, minimal nvidia-smi queries, quiet kernel logs, a four-column ticket
export, a config naming only some sites, and no config at all. It must run to the end (exit
0 or 1, never a traceback), explain every rejected row, say "no failures" sensibly, fall back
to the rule baseline with a note, render the report, and load nothing on a second run."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import polars as pl
import pytest

from pipeline.cli import main
from pipeline.warehouse import Warehouse
from tests import unseen_fleet as fleet

pytestmark = pytest.mark.xdist_group("unseen_fleet")


def _run(tmp: Path, data: Path, config: Path | None) -> int:
    args = ["run", "--data", str(data), "--warehouse", str(tmp / "wh.duckdb"), "--out", str(tmp / "out"), "-q"]
    return main(args + (["--config", str(config)] if config else []))


def _nightly(tmp: Path, *, replacements: bool, config: bool, minimal_query: bool = False) -> tuple[int, int]:
    data = fleet.build(tmp, replacements=replacements, minimal_query=minimal_query)
    cfg = None
    if config:
        cfg = tmp / "fleetfault.toml"
        cfg.write_text(fleet.CONFIG)
    first = _run(tmp, data, cfg)
    second = _run(tmp, data, cfg)
    return first, second


@pytest.fixture(scope="module")
def quiet_fleet(tmp_path_factory):
    """No replacement tickets, a config naming only site lab1 (dc-east is not in it)."""
    tmp = tmp_path_factory.mktemp("quiet")
    return tmp, *_nightly(tmp, replacements=False, config=True)


@pytest.fixture(scope="module")
def failing_fleet(tmp_path_factory):
    """Two replacement tickets, and no config file at all (built-in defaults)."""
    tmp = tmp_path_factory.mktemp("failing")
    cwd = Path.cwd()
    os.chdir(tmp)  # no ./fleetfault.toml: load_config falls back to the defaults
    try:
        return tmp, *_nightly(tmp, replacements=True, config=False)
    finally:
        os.chdir(cwd)


def _con(tmp: Path) -> Warehouse:
    return Warehouse(tmp / "wh.duckdb", read_only=True)


def _runs(tmp: Path) -> list[dict]:
    with _con(tmp) as con:
        return [json.loads(r[0]) for r in con.con.execute("SELECT stages FROM runs ORDER BY run_id").fetchall()]


def _notes(tmp: Path, stage: str) -> list[str]:
    return [n for s in _runs(tmp)[0] if s["stage"] == stage for n in s["notes"]]


@pytest.mark.parametrize("which", ["quiet_fleet", "failing_fleet"])
def test_runs_to_the_end_and_a_second_run_loads_nothing(which, request):
    tmp, first, second = request.getfixturevalue(which)
    assert first == 1, "the inventory row dated 'last tuesday' and a repeated row are rejected: exit 1"
    assert second == 0
    runs = _runs(tmp)
    assert len(runs) == 2
    assert [s["stage"] for s in runs[0]] == ["inventory", "smi", "xid", "tickets", "normalize", "link",
                                             "stats", "predict", "report"]
    assert sum(s["rows_loaded"] for s in runs[1]) == 0
    assert sum(s["rows_quarantined"] for s in runs[1]) == 0
    for s in runs[1]:
        assert s["unchanged"] == s["files"], s


@pytest.mark.parametrize("which", ["quiet_fleet", "failing_fleet"])
def test_outputs_and_exports_are_written(which, request, tmp_path):
    tmp, _, _ = request.getfixturevalue(which)
    out = tmp / "out"
    for name in ("report.html", "report.xlsx", "predictions.csv", "predictions.xlsx", "fleetfault.prom"):
        assert (out / name).stat().st_size > 0, name
    html = (out / "report.html").read_text()
    assert "Traceback" not in html and "nan%" not in html.lower()
    for table in ("xid", "tickets", "gpu_days", "failures", "quarantine", "inventory"):
        dest = tmp_path / f"{table}.csv"
        assert main(["export", table, "-o", str(dest), "--warehouse", str(tmp / "wh.duckdb")]) == 0
        assert dest.exists()


@pytest.mark.parametrize("which", ["quiet_fleet", "failing_fleet"])
def test_the_foreign_inventory_is_read(which, request):
    tmp, _, _ = request.getfixturevalue(which)
    with _con(tmp) as con:
        inv = con.engine.pl("SELECT serial, host, slot, site, batch, vendor, installed_at, removed_at "
                            "FROM inventory ORDER BY host, slot, installed_at", step="test")
    assert inv.height == 17  # 19 rows, one with an unreadable date, one repeated
    assert sorted(inv["host"].unique()) == sorted([fleet.FQDN, fleet.DGX, fleet.KLOGS_ONLY])
    dgx = inv.filter(pl.col("host") == fleet.DGX)
    assert dgx["slot"].to_list() == [0, 1, 2, 3] and set(dgx["batch"]) == {"H100-Q1"}
    assert str(dgx["installed_at"][0]) == "2024-03-05 00:00:00"  # 05.03.2024, day first
    fqdn = inv.filter(pl.col("host") == fleet.FQDN)
    assert fqdn["batch"].null_count() == fqdn.height and fqdn["vendor"].null_count() == fqdn.height
    moved = inv.filter(pl.col("serial") == fleet.MOVED)  # listed twice: pulled, then re-installed
    assert moved["host"].to_list() == [fleet.FQDN, fleet.KLOGS_ONLY]
    assert str(moved["removed_at"][0]) == "2025-05-07 09:30:00" and moved["removed_at"][1] is None  # closed by the move
    assert str(moved["installed_at"][1]) == "2025-05-07 09:30:00"  # ...T09:30:00Z
    missing = " ".join(_notes(tmp, "inventory"))
    assert ("dc-east" in missing) and (("lab1" in missing) == (which == "failing_fleet"))  # no config: no sites


@pytest.mark.parametrize("which", ["quiet_fleet", "failing_fleet"])
def test_quarantine_explains_every_rejected_row(which, request):
    tmp, _, _ = request.getfixturevalue(which)
    with _con(tmp) as con:
        rows = con.con.execute("SELECT stage, source_file, line_no, reason, raw, detail FROM quarantine").fetchall()
    assert len(rows) == sum(s["rows_quarantined"] for s in _runs(tmp)[0])
    for stage, path, line_no, reason, raw, detail in rows:
        if line_no is None:  # a file quarantined whole (smi-empty.csv: empty_file) says why in its detail
            assert stage and path and reason and detail, (stage, path, reason)
            continue
        assert stage and path and line_no and reason and raw, (stage, path, line_no, reason)
    assert [(r[1], r[3]) for r in rows if r[2] is None] == [("telemetry/DGX-A-12/smi-empty.csv", "empty_file")]
    inv = [r for r in rows if r[0] == "inventory"]
    assert sorted((r[2], r[3]) for r in inv) == [(15, "duplicate_row"), (20, "bad_timestamp")]
    assert "line 11" in min(inv)[5] and "last tuesday" in max(inv)[5]


@pytest.mark.parametrize("which", ["quiet_fleet", "failing_fleet"])
def test_kernel_logs_without_telemetry_or_xids(which, request):
    tmp, _, _ = request.getfixturevalue(which)
    with _con(tmp) as con:
        ev = con.con.execute("SELECT host, xid, ts FROM xid_events ORDER BY host, ts").fetchall()
        days = con.con.execute("SELECT min(day), max(day), count(DISTINCT host) FROM gpu_days").fetchall()[0]
    assert sorted((h, x) for h, x, _ in ev) == [(fleet.DGX, 48), (fleet.DGX, 79),
                                                (fleet.KLOGS_ONLY, 31), (fleet.KLOGS_ONLY, 63)]
    assert all(ts is not None and ts.year == 2025 and ts.month == 5 for _, _, ts in ev)
    assert str(days[0]) == "2025-05-01" and str(days[1]) == "2025-05-12"
    assert days[2] == 2  # DGX-A-12 and the host folder no inventory names


def test_zero_failures_are_reported_as_such(quiet_fleet):
    tmp, _, _ = quiet_fleet
    with _con(tmp) as con:
        assert con.con.execute("SELECT count(*) FROM failures").fetchall()[0][0] == 0
        afr = con.con.execute("SELECT grouping || ':' || group_value, gpus, gpu_days, failures, afr_pct, afr_ci_low_pct, afr_ci_high_pct "
                          "FROM stats_afr WHERE gpu_days > 0").fetchall()
    assert afr, "AFR rows with zero failures: the rate is 0 with an upper bound, not missing"
    for dim, gpus, gpu_days, failures, pct, lo, hi in afr:
        assert failures == 0 and pct == 0 and lo == 0, dim
        assert hi is not None and math.isfinite(hi) and hi > 0, dim
    window = [n for n in _notes(tmp, "stats") if "window" in n]
    assert window and "2025-05-01..2025-05-12" in window[0] and "no failures" in window[0]


@pytest.mark.parametrize("which", ["quiet_fleet", "failing_fleet"])
def test_predict_falls_back_to_the_evidence_score_with_a_note(which, request):
    tmp, _, _ = request.getfixturevalue(which)
    notes = " ".join(_notes(tmp, "predict"))
    assert "the evidence score ranks" in notes and "2025-05-12" in notes
    preds = pl.read_csv(tmp / "out" / "predictions.csv", schema_overrides={"serial": pl.Utf8})
    assert preds.columns[:8] == ["rank", "serial", "host", "pci_bus_id", "model", "risk", "horizon_days",
                                 "top_factors"]
    ranks = preds["rank"].to_list()
    assert preds.height >= 10 and ranks[0] == 1 and ranks == sorted(ranks)  # equal evidence, equal rank
    assert preds["risk"].is_between(0, 1).all() and preds["risk"].is_not_nan().all()
    assert set(preds["host"]) <= {fleet.FQDN, fleet.DGX, fleet.KLOGS_ONLY}
    assert fleet.SPARE in set(preds["serial"])  # installed mid-data, in service on the last day


def test_replacements_from_a_four_column_export_are_failures(failing_fleet):
    tmp, _, _ = failing_fleet
    with _con(tmp) as con:
        fails = con.con.execute("SELECT serial, ticket_id, symptom_code FROM failures ORDER BY failed_at").fetchall()
        fleet_afr = con.con.execute("SELECT failures, gpu_days FROM stats_afr WHERE grouping = ''").fetchall()[0]
    assert fails == [(fleet.MOVED, "INC0004", "FELL_OFF_BUS"), (fleet.DGX_SERIALS[1], "INC0005", "MEMORY_UNCORRECTABLE")]
    assert fleet_afr[0] == 2 and 150 < fleet_afr[1] < 210  # 17 GPUs x 12 days, less removals


def test_minimal_nvidia_smi_query(tmp_path):
    first, second = _nightly(tmp_path, replacements=False, config=True, minimal_query=True)
    assert (first, second) == (1, 0)
    with _con(tmp_path) as con:
        hosts = {r[0] for r in con.con.execute("SELECT DISTINCT host FROM gpu_days").fetchall()}
    assert fleet.FQDN in hosts


def test_year_less_syslog_copied_months_later(tmp_path):
    from pipeline.ingest.kernel.stage import parse_file

    log = tmp_path / fleet.DGX / "syslog.log"
    log.parent.mkdir()
    log.write_text(fleet.syslog_xids())
    later = fleet.LOGS_WRITTEN + 200 * 86400  # copied in late November, without -p
    os.utime(log, (later, later))
    ev = parse_file(log).events
    # (the one-line fallen-off message is a raw event of its own, one event with its Xid 79 in xid_events)
    assert ev.height == 3 and (ev["ts"].dt.year() == 2025).all()


SPREADSHEET_REGISTRY = (
    "sep=;\r\n"
    "Hostname;GPU Index;Serial Number;GPU Model;Location;Lot;Install Date;Decommissioned At;Comment\r\n"
    "DGX-B-01;GPU0;1.65052E+12;H100;fra;L7;5-Mar-2024;;serial rounded by Excel\r\n"
    "DGX-B-01;GPU1;1650523300350.0;H100;fra;L7;25/03/2024;;number cell\r\n"
    "DGX-B-01;gpu 2;'0325000000007;H100;fra;L7;45356;;Excel day number, leading zero kept by a quote\r\n"
    "DGX-B-01;#3;PH9;H100;fra;L7;05.03.2024 08:00:00;;\r\n"
    "DGX-B-01;#3;PH9;H100;fra;L7;05.03.2024 08:00:00;;exported twice\r\n"
    "DGX-B-01;slot four;PH10;H100;fra;L7;2024-03-05;;\r\n"
    ";;;;;;;;\r\n"
    "DGX-B-01;4;;H100;fra;L7;2024-03-05;;no serial\r\n"
)


def test_a_registry_exported_from_a_spreadsheet(tmp_path):
    from pipeline.ingest.inventory import read_inventory

    path = tmp_path / "inventory.csv"
    path.write_text(SPREADSHEET_REGISTRY, encoding="utf-8-sig")
    got = read_inventory(path, file_id=1, default_tz="Europe/Berlin")
    assert got.rows_read == 7 and got.rows_loaded + len(got.rejects) == got.rows_read
    assert {(r.line_no, r.reason) for r in got.rejects} == {
        (3, "mangled_serial"), (7, "duplicate_row"), (8, "bad_slot"), (10, "missing_serial")}
    assert all(r.detail for r in got.rejects)
    inv = got.tables["inventory"]
    assert inv["serial"].to_list() == ["1650523300350", "0325000000007", "PH9"]
    assert inv["slot"].to_list() == [1, 2, 3]
    assert inv["host"].unique().to_list() == ["DGX-B-01"] and inv["site"].unique().to_list() == ["fra"]
    assert inv["batch"].unique().to_list() == ["L7"] and inv["model"].unique().to_list() == ["H100"]
    # Day first (25/03 shows it); Berlin midnight is 23:00 UTC; Excel day 45356 is 2024-03-05.
    assert [str(t) for t in inv["installed_at"]] == ["2024-03-24 23:00:00", "2024-03-04 23:00:00",
                                                     "2024-03-05 07:00:00"]


def test_a_registry_without_host_is_a_usage_error(tmp_path):
    path = tmp_path / "data" / "inventory.csv"
    path.parent.mkdir()
    path.write_text("serial,model\nS1,H100\n")
    assert main(["run", "--data", str(path.parent), "--warehouse", str(tmp_path / "w.duckdb"),
                 "--out", str(tmp_path / "out"), "-q", "--stage", "inventory"]) == 2


# (A layout with no part at all is no night: exit 2, "no input files under DATA", see test_exit_codes.)
@pytest.mark.parametrize(("keep", "stats_says", "predict_says"), [
    (["kernel"], "no inventory GPU in service", "no inventory GPU matches"),
])
def test_a_layout_with_parts_missing(tmp_path, keep, stats_says, predict_says):
    import shutil

    data = fleet.build(tmp_path, minimal_query=False)
    for part in ("inventory.csv", "telemetry", "kernel", "tickets"):
        if part not in keep:
            shutil.rmtree(data / part) if (data / part).is_dir() else (data / part).unlink()
    assert _run(tmp_path, data, None) == 0
    assert (tmp_path / "out" / "report.html").stat().st_size > 0
    assert (tmp_path / "out" / "metrics" / "predict.json").exists()
    assert stats_says in " ".join(_notes(tmp_path, "stats"))
    assert predict_says in " ".join(_notes(tmp_path, "predict"))


def _broken_stage(ctx) -> None:
    raise TypeError("csv_source() got an unexpected keyword argument 'crlf'")


def test_a_broken_stage_stops_the_run_with_one_line(tmp_path, monkeypatch, capsys):
    import pipeline.run

    monkeypatch.setattr(pipeline.run, "STAGES", [("inventory", "pipeline.ingest.inventory:run"),
                                                  ("smi", "tests.test_unseen_fleet:_broken_stage"),
                                                  ("report", "pipeline.report.stage:run")])
    data = fleet.build(tmp_path, minimal_query=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # where the crash log goes
    assert _run(tmp_path, data, None) == 3  # a bug, not the user's doing: "internal error"
    err = capsys.readouterr().err.strip()
    assert "internal error: stage smi failed (TypeError: csv_source()" in err and "Traceback" not in err
    assert len(err.splitlines()) <= 3  # one line, wrapped by the console at most
    assert "Traceback" in Path(err.split("details in ")[1].split()[0]).read_text()
    with _con(tmp_path) as con:
        assert con.con.execute("SELECT status FROM runs").fetchall()[0][0] == "failed"
        assert con.con.execute("SELECT count(*) FROM inventory").fetchall()[0][0] == 17  # the stage before it was kept
    assert not (tmp_path / "out" / "report.html").exists()
    assert "failed: TypeError" in " ".join(_notes(tmp_path, "smi"))


def test_a_syslog_naming_the_short_host(tmp_path):
    data = fleet.build(tmp_path, minimal_query=False)
    log = data / "kernel" / fleet.KLOGS_ONLY / "syslog.log"
    log.write_text("May  3 04:05:06 node-018 kernel: [123456.789012] NVRM: Xid (PCI:0000:86:00): 79, pid=123, "
                   "name=python, GPU has fallen off the bus.\n")
    os.utime(log, (fleet.LOGS_WRITTEN, fleet.LOGS_WRITTEN))
    args = ["run", "--data", str(data), "--warehouse", str(tmp_path / "wh.duckdb"), "--out", str(tmp_path / "out"),
            "-q", "--stage", "inventory", "--stage", "xid"]
    assert main(args) == 1
    with _con(tmp_path) as con:
        hosts = {r[0] for r in con.con.execute("SELECT host FROM xid_events WHERE xid = 79").fetchall()}
    assert hosts == {fleet.DGX, fleet.KLOGS_ONLY}


def test_a_corrected_registry_replaces_its_rejects(tmp_path):
    data = fleet.build(tmp_path, minimal_query=False)
    args = ["run", "--data", str(data), "--warehouse", str(tmp_path / "wh.duckdb"), "--out", str(tmp_path / "out"),
            "-q", "--stage", "inventory"]
    assert main(args) == 1
    lines = (data / "inventory.csv").read_text().splitlines()
    fixed = [ln for n, ln in enumerate(lines, start=1) if n != 15]  # the repeated row goes
    fixed[-1] = fixed[-1].replace("last tuesday", "2025-05-06")
    (data / "inventory.csv").write_text("\n".join(fixed) + "\n")
    assert main(args) == 0
    with _con(tmp_path) as con:
        assert con.con.execute("SELECT count(*) FROM quarantine").fetchall()[0][0] == 0
        assert con.con.execute("SELECT count(*) FROM inventory").fetchall()[0][0] == 18


def test_a_telemetry_folder_in_lower_case(tmp_path):
    import shutil

    data = fleet.build(tmp_path, minimal_query=False)
    shutil.rmtree(data / "telemetry" / fleet.DGX)
    folder = data / "telemetry" / fleet.DGX.lower()
    folder.mkdir()
    rows = [f"{t:%Y/%m/%d %H:%M:%S}.000, {i}, {50 + i}" for t in fleet._times() for i in range(4)]
    (folder / "smi.csv").write_text("timestamp, index, temperature.gpu\n" + "\n".join(rows) + "\n")
    args = ["run", "--data", str(data), "--warehouse", str(tmp_path / "wh.duckdb"), "--out", str(tmp_path / "out"),
            "-q", "--stage", "inventory", "--stage", "smi"]
    assert main(args) == 1
    with _con(tmp_path) as con:
        serials = {r[0] for r in con.con.execute("SELECT serial FROM gpu_days WHERE lower(host) = 'dgx-a-12'").fetchall()}
    assert serials == set(fleet.DGX_SERIALS)
