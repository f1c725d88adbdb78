"""End-to-end through the CLI: the nightly job on a tiny layout, exit codes 0/1/2."""

from pathlib import Path

import duckdb

from pipeline.cli import main

INVENTORY = """serial,model,vendor,host,slot,site,batch,installed_at,removed_at
S1,H100 80GB HBM3,OEM-A,h1,0,sha,B1,2024-01-01,
S2,H100 80GB HBM3,OEM-A,h1,1,sha,B1,2024-01-01 08:00:00,2024-06-01
"""


def _layout(root: Path, inventory: str = INVENTORY) -> Path:
    data = root / "data"
    data.mkdir()
    (data / "inventory.csv").write_text(inventory)
    return data


def test_run_twice_loads_nothing_twice(tmp_path, capsys):
    data = _layout(tmp_path)
    wh = tmp_path / "w.duckdb"
    assert main(["run", "--data", str(data), "--warehouse", str(wh), "--out", str(tmp_path / "out"), "-q"]) == 0
    assert main(["run", "--data", str(data), "--warehouse", str(wh), "--out", str(tmp_path / "out"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "No new rows" in out
    con = duckdb.connect(str(wh), read_only=True)
    assert con.execute("select count(*) from inventory").fetchone()[0] == 2
    assert con.execute("select count(*), min(status) from runs").fetchone() == (2, "ok")


def test_rejected_rows_exit_1_and_are_quarantined(tmp_path, capsys):
    data = _layout(tmp_path, INVENTORY + ",X,OEM,h1,2,sha,B1,2024-01-01,\nS4,X,OEM,h1,3,sha,B1,not-a-date,\n")
    wh = tmp_path / "w.duckdb"
    assert main(["run", "--data", str(data), "--warehouse", str(wh), "--out", str(tmp_path / "out"), "-q"]) == 1
    assert "quarantined" in capsys.readouterr().err
    con = duckdb.connect(str(wh), read_only=True)
    assert sorted(con.execute("select line_no, reason from quarantine").fetchall()) == [(4, "missing_serial"), (5, "bad_timestamp")]
    assert con.execute("select count(*) from inventory").fetchone()[0] == 2


def test_usage_and_config_errors_exit_2(tmp_path, capsys, monkeypatch):
    # In a folder of its own: a failed run still records its status in ./out/ where that exists.
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--data", str(tmp_path / "missing")]) == 2
    assert "no such folder" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("[paths]\nwarehouse = 5\n[predict]\nhorizon_days = 'x'\n")
    assert main(["run", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "paths.warehouse" in err and "predict.horizon_days" in err
    assert main(["no-such-command"]) == 2
    assert main(["export", "nonsense", "-o", str(tmp_path / "x.csv"), "--warehouse", str(tmp_path / "none.duckdb")]) == 2


def test_export_writes_csv_and_parquet(tmp_path):
    data = _layout(tmp_path)
    wh = tmp_path / "w.duckdb"
    main(["run", "--data", str(data), "--warehouse", str(wh), "--out", str(tmp_path / "out"), "-q"])
    assert main(["export", "inventory", "-o", str(tmp_path / "inv.parquet"), "--warehouse", str(wh)]) == 0
    import polars as pl

    df = pl.read_parquet(tmp_path / "inv.parquet")
    assert df["serial"].to_list() == ["S1", "S2"]
    assert str(df["removed_at"][1]) == "2024-06-01 00:00:00"


def test_import_with_core_dependencies_only():
    import subprocess
    import sys

    code = "import pipeline, pipeline.cli, pipeline.warehouse, sys; bad=[m for m in ('pyspark','pynvml') if m in sys.modules]; assert not bad, bad"
    subprocess.run([sys.executable, "-c", code], check=True)
