"""``--warehouse`` with each engine (pipeline/location.py): the contract's folder or URL of the
Spark tables, the DuckDB file unchanged, and every command resolving it the same way.
No Spark session: resolving is path arithmetic, and the end-to-end run loads the inventory only."""

from pathlib import Path

import duckdb
import pytest

from pipeline.cli import main
from pipeline.config import config_from_dict, load_config, with_engine
from pipeline.errors import ConfigError, UsageError
from pipeline.location import CATALOG_NAME, resolve_warehouse

DUCKDB = config_from_dict({})
SPARK = config_from_dict({"engine": {"name": "spark"}})


@pytest.mark.parametrize("value", ["wh.duckdb", "some/folder", "s3://bucket/wh", "x.db"])
def test_duckdb_engine_takes_the_value_as_the_file(value):
    loc = resolve_warehouse(DUCKDB, value)
    assert (loc.catalog, loc.tables, loc.local_tables) == (Path(value), None, None)


def test_default_is_paths_warehouse():
    assert resolve_warehouse(DUCKDB, None).catalog == Path("fleetfault.duckdb")
    assert resolve_warehouse(SPARK, None).tables == "fleetfault.tables"


def test_spark_duckdb_file_keeps_its_tables_beside_it(tmp_path):
    loc = resolve_warehouse(SPARK, tmp_path / "wh.duckdb")
    assert (loc.catalog, loc.tables) == (tmp_path / "wh.duckdb", str(tmp_path / "wh.tables"))
    moved = config_from_dict({"engine": {"name": "spark", "spark": {"tables": "hdfs://nn/ff"}}})
    assert resolve_warehouse(moved, tmp_path / "wh.duckdb").tables == "hdfs://nn/ff"
    other = tmp_path / "old.db"  # an existing DuckDB file by another name is still the file
    other.write_bytes(b"")
    assert resolve_warehouse(SPARK, other).catalog == other


def test_spark_folder_holds_tables_and_catalog(tmp_path):
    loc = resolve_warehouse(SPARK, tmp_path / "wh")
    assert (loc.catalog, loc.tables, loc.local_tables) == (tmp_path / "wh" / CATALOG_NAME, str(tmp_path / "wh"), tmp_path / "wh")
    url = resolve_warehouse(SPARK, f"file://{tmp_path}/wh")
    assert (url.catalog, url.tables, url.local_tables) == (tmp_path / "wh" / CATALOG_NAME, f"file://{tmp_path}/wh", tmp_path / "wh")


def test_spark_remote_url_needs_a_local_catalog():
    with pytest.raises(UsageError, match=r"\[engine.spark\] catalog"):
        resolve_warehouse(SPARK, "s3://bucket/wh")
    cfg = config_from_dict({"engine": {"name": "spark", "spark": {"catalog": "/var/ff/catalog.duckdb", "tables": "ignored"}}})
    loc = resolve_warehouse(cfg, "s3://bucket/wh")
    assert (loc.catalog, loc.tables, loc.local_tables) == (Path("/var/ff/catalog.duckdb"), "s3://bucket/wh", None)


def test_config_check_names_the_missing_catalog(tmp_path):
    toml = tmp_path / "f.toml"
    toml.write_text('[paths]\nwarehouse = "s3://bucket/wh"\n[engine]\nname = "spark"\n')
    with pytest.raises(ConfigError, match="engine.spark.catalog: required"):
        load_config(toml)
    # The same warehouse on DuckDB's config is not checked here (DuckDB names a file), until --engine spark.
    cfg = config_from_dict({"paths": {"warehouse": "s3://bucket/wh"}})
    with pytest.raises(ConfigError, match="engine.spark.catalog: required"):
        with_engine(cfg, "spark")
    with pytest.raises(ConfigError, match="engine.spark.catalog: must be a local"):
        config_from_dict({"engine": {"spark": {"catalog": "s3://bucket/c.duckdb"}}})


def test_cli_run_then_read_a_spark_folder_warehouse(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "inventory.csv").write_text("serial,model,vendor,host,slot,site,batch,installed_at,removed_at\n"
                                        "S1,H100 80GB HBM3,OEM-A,h1,0,sha,B1,2024-01-01,\n")
    folder = tmp_path / "wh"
    args = ["--engine", "spark", "--warehouse", str(folder)]
    assert main(["run", "--data", str(data), "--out", str(tmp_path / "out"), "--stage", "inventory", "-q", *args]) == 0
    assert (folder / CATALOG_NAME).is_file() and not (tmp_path / "wh.tables").exists()
    out = tmp_path / "inv.csv"
    assert main(["export", "inventory", "-o", str(out), *args]) == 0
    assert "S1" in out.read_text()
    # The catalog file is a DuckDB warehouse like any other: the DuckDB engine reads it by name.
    assert main(["export", "runs", "-o", str(tmp_path / "runs.csv"), "--warehouse", str(folder / CATALOG_NAME)]) == 0
    # Without --engine spark the folder is no warehouse file.
    assert main(["export", "inventory", "-o", str(out), "--warehouse", str(folder)]) == 2
    assert "is a folder; a Spark warehouse folder needs --engine spark" in capsys.readouterr().err
    con = duckdb.connect(str(folder / CATALOG_NAME), read_only=True)
    assert con.execute("select count(*) from inventory").fetchone()[0] == 1
