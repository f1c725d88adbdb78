"""``fleetfault run --engine spark`` ingests telemetry and kernel logs with the Spark ingest:
the warehouse gets the same rows as from the DuckDB stages, through one file registry.

- the bundled sample's night (up to ``link``) on Spark gives DuckDB's ingested tables (and
  the derived ``gpu_days``, ``xid_events``), the same stage counts and exit code; a second
  night on Spark adds nothing (tickets included), and a DuckDB night after it on the same
  warehouse loads nothing twice;
- a changed file replaces exactly its rows; a run killed mid-ingest (after some of the
  store's tables were written, or after the store's commit and before the warehouse took
  the rows) then rerun gives the uninterrupted run's tables;
- nvidia-smi headers that arrive in a later night settle (``header_from``,
  ``reloaded_because``) as on DuckDB, with the nights alternating between the engines.

Shares the one local[2] session of the ``spark`` fixture, on the ``spark`` xdist worker. The
small fleets' tests skip the derived steps (their parity is tests/test_spark_derive.py's).
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import polars as pl
import pytest

from pipeline.config import load_config, with_engine
from tests.conftest import ROOT
from tests.spark_nights import sample_night
from tests.test_spark import assert_same_table

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

SAMPLE = ROOT / "data" / "sample"
CFG = load_config(ROOT / "fleetfault.toml")
SPARK = with_engine(CFG, "spark")
INGEST = ["inventory", "smi", "xid"]
#: The nights run again on the sample (the ticket stage's rerun too).
AGAIN = [*INGEST, "tickets"]
#: The ingested tables, and the registry.
TABLES = ("xid_raw", "gpu_map", "kernel_segments", "smi_hourly", "smi_headers", "quarantine", "files")
#: What the nights run again must leave as it is.
LOADED = (*TABLES, "tickets_raw")
#: Columns that name a load (ids, times), not what was read.
LOAD_COLUMNS = {"file_id", "run_id", "quarantined_at", "loaded_at"}
COUNTS = ("stage", "files", "unchanged", "rows_read", "rows_loaded", "rows_quarantined", "rows_out")


def _read(wh_path: Path, names=TABLES, *, ids: bool = False) -> dict[str, pl.DataFrame]:
    """The tables' rows in a stable order; without the load columns unless ``ids``."""
    from pipeline.warehouse import Warehouse

    out = {}
    with Warehouse(wh_path, read_only=True) as wh:
        for name in names:
            frame = wh.engine.pl(f'SELECT * FROM "{name}"', step="read")
            keep = [c for c in frame.columns if ids and c in ("file_id", "run_id") or c not in LOAD_COLUMNS]
            frame = frame.select(keep)
            out[name] = frame.sort(frame.columns, nulls_last=True)
    return out


def _assert_same(a: dict, b: dict, label: str) -> None:
    for name in a:
        assert_same_table(a[name], b[name], f"{label}: {name}")


def _ids_on_disk(store: Path, table: str) -> list[int]:
    """The file id of every row in the store's Parquet files of a table, committed or not."""
    import duckdb

    files = list((store / "tables" / table).glob("**/*.parquet"))
    return [i for (i,) in duckdb.sql(f"SELECT file_id FROM read_parquet({[str(f) for f in files]})").fetchall()]


def _counts(reports) -> list[tuple]:
    return [tuple(getattr(r, c) for c in COUNTS) for r in reports]


def _night(cfg, data: Path, wh: Path, stages=INGEST):
    from pipeline.run import run_pipeline

    return run_pipeline(cfg, data, wh, wh.parent / "out", stages=stages)


@pytest.fixture(scope="module")
def sample_nights(spark, tmp_path_factory):
    """The sample's night up to ``link`` on DuckDB and on Spark (shared with the other parity
    tests: tests/spark_nights.py); then, on a copy of the Spark warehouse and its store, a
    second night on Spark (tickets included; derived steps skipped: they are rebuilt, not
    loaded) and a night on DuckDB."""
    from pipeline import run

    derived = ("gpu_days", "xid_events")
    duck, ours = sample_night("duckdb", tmp_path_factory), sample_night("spark", tmp_path_factory)
    wh = ours.copy_to(tmp_path_factory.mktemp("spark_run") / "spark")
    nights = {"duck": (duck.reports, duck.code, _read(duck.wh, TABLES + derived)),
              "spark": (ours.reports, ours.code, _read(ours.wh, TABLES + derived)),
              "spark ids": _read(wh, LOADED, ids=True)}
    with pytest.MonkeyPatch.context() as m:
        m.setattr(run, "DERIVE_AFTER", {})
        again = _night(SPARK, SAMPLE, wh, stages=AGAIN)
    nights["spark again"] = (*again, _read(wh, LOADED, ids=True))
    then = _night(CFG, SAMPLE, wh, stages=AGAIN)
    nights["duck after"] = (*then, _read(wh, LOADED, ids=True))
    nights["store"] = wh.parent / "wh.tables"
    return nights


def test_the_sample_on_spark_gives_duckdbs_tables_counts_and_exit_code(sample_nights):
    duck_reports, duck_code, duck = sample_nights["duck"]
    spark_reports, spark_code, ours = sample_nights["spark"]
    assert duck["smi_hourly"].height > 0 and duck["xid_raw"].height > 0 and duck["gpu_days"].height > 0
    _assert_same(duck, ours, "sample")
    # The summary `fleetfault run` prints is made of these counts.
    assert _counts(spark_reports) == _counts(duck_reports)
    assert spark_code == duck_code
    if duck["quarantine"].height:  # the Spark ingest's rejected lines: file, line and reason
        assert ours["quarantine"].select("source_file", "line_no", "reason").null_count().row(0)[0] == 0


def test_the_store_and_the_warehouse_share_one_registry(sample_nights):
    import duckdb

    store = sample_nights["store"]
    ours = sample_nights["spark ids"]
    versions = sorted((store / "_registry").glob("v*.parquet"))
    registry = pl.from_arrow(duckdb.sql(f"SELECT file_id, stage, path, sha256 FROM '{versions[-1]}'").arrow())
    in_wh = ours["files"].filter(pl.col("stage").is_in(["smi", "xid"])).select(registry.columns)
    assert_same_table(registry.sort(registry.columns), in_wh.sort(in_wh.columns), "registry")
    # The warehouse holds exactly the store's committed rows, under the same file ids.
    folder = store / "tables" / "xid_raw"
    n = duckdb.sql(f"SELECT count(*) FROM read_parquet('{folder}/**/*.parquet', hive_partitioning = true)").fetchall()
    assert n[0][0] == ours["xid_raw"].height


def test_a_second_night_on_spark_adds_nothing(sample_nights):
    reports, code, after = sample_nights["spark again"]
    for r in reports:
        assert r.unchanged == r.files and r.rows_loaded == 0, r
    _assert_same(sample_nights["spark ids"], after, "second night")


def test_a_duckdb_night_after_spark_loads_nothing_twice(sample_nights):
    reports, code, after = sample_nights["duck after"]
    for r in reports:
        assert r.unchanged == r.files and r.rows_loaded == 0, r
    _assert_same(sample_nights["spark ids"], after, "DuckDB after Spark")


# -- small fleets: the registry's promises -------------------------------------------------
#: A journal and a gzipped kern.log host; a headerless (configured fields) and a headed telemetry host.
HOSTS = {"kernel": ["fra-gpu001", "fra-gpu002"], "telemetry": ["fra-gpu001", "sha-gpu001"]}


def _small_fleet(root: Path) -> Path:
    root.mkdir(parents=True)
    shutil.copy(SAMPLE / "inventory.csv", root / "inventory.csv")
    for source, hosts in HOSTS.items():
        for host in hosts:
            (root / source / host).mkdir(parents=True)
            for path in sorted((SAMPLE / source / host).iterdir())[:3]:
                shutil.copy(path, root / source / host / path.name)
    return root


@pytest.fixture
def no_derive(monkeypatch):
    from pipeline import run

    monkeypatch.setattr(run, "DERIVE_AFTER", {})


@pytest.fixture(scope="module")
def small(spark, tmp_path_factory):
    """The small fleet through one uninterrupted Spark night (derived steps skipped)."""
    from pipeline import run

    tmp = tmp_path_factory.mktemp("spark_small")
    data = _small_fleet(tmp / "data")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(run, "DERIVE_AFTER", {})
        _night(SPARK, data, tmp / "wh" / "wh.duckdb")
    return data, _read(tmp / "wh" / "wh.duckdb")


def test_a_changed_file_replaces_exactly_its_rows(small, no_derive, tmp_path):
    data, before = small
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    wh = tmp_path / "wh" / "wh.duckdb"
    _night(SPARK, copy, wh)
    target = sorted((copy / "kernel" / "fra-gpu002").iterdir())[0]  # a gzipped kern.log
    key = str(target.relative_to(copy))
    lines = gzip.decompress(target.read_bytes()).splitlines(keepends=True)
    del lines[next(i for i, line in enumerate(lines) if b"Xid" in line)]  # one event fewer
    target.write_bytes(gzip.compress(b"".join(lines)))

    reports, _ = _night(SPARK, copy, wh)
    xid = next(r for r in reports if r.stage == "xid")
    assert xid.files - xid.unchanged == 1
    after = _read(wh, ids=True)
    others = pl.col("source_file") != key
    old = before
    assert_same_table(old["xid_raw"].filter(others), after["xid_raw"].drop("file_id").filter(others), "other files")
    assert after["xid_raw"].filter(~others).height == old["xid_raw"].filter(~others).height - 1
    assert after["xid_raw"].filter(~others)["file_id"].n_unique() == 1
    # The store holds the new version only, under the warehouse's file id.
    new_id = after["files"].filter(pl.col("path") == key)["file_id"][0]
    on_disk = _ids_on_disk(wh.parent / "wh.tables", "xid_raw")
    assert new_id in on_disk and set(on_disk) == set(after["xid_raw"]["file_id"])
    assert len(on_disk) == after["xid_raw"].height


@pytest.mark.parametrize("where", ["after a table was written", "after the store's commit"])
def test_a_run_killed_mid_ingest_then_rerun_gives_the_same_tables(small, no_derive, tmp_path, monkeypatch, where):
    from pipeline.engine.parquet_tables import ParquetTableStore
    from pipeline.run import StageFailed
    from pipeline.warehouse import Warehouse

    data, uninterrupted = small
    wh = tmp_path / "wh" / "wh.duckdb"
    if where == "after a table was written":
        real = ParquetTableStore._publish

        def dies(self, written):  # one table's files published under their readable names, then killed
            real(self, [p for p in written if "/smi_hourly/" in p])
            raise RuntimeError("killed mid-ingest")

        monkeypatch.setattr(ParquetTableStore, "_publish", dies)
    else:
        def dies(self, *args, **kwargs):
            raise RuntimeError("killed between the store's commit and the warehouse's")

        monkeypatch.setattr(Warehouse, "adopt", dies)
    with pytest.raises(StageFailed):
        _night(SPARK, data, wh)
    assert _read(wh)["smi_hourly"].height == 0  # nothing of the killed stage is seen
    monkeypatch.undo()
    from pipeline import run

    monkeypatch.setattr(run, "DERIVE_AFTER", {})
    _night(SPARK, data, wh)
    _assert_same(uninterrupted, _read(wh), f"killed {where}, then rerun")
    # The store keeps only committed rows, each file's once.
    after = _read(wh, ids=True)
    on_disk = _ids_on_disk(wh.parent / "wh.tables", "smi_hourly")
    assert set(on_disk) == set(after["files"].filter(pl.col("stage") == "smi")["file_id"])
    assert len(on_disk) == after["smi_hourly"].height


def test_headers_arriving_in_later_nights_settle_as_on_duckdb_whichever_engine_runs(spark, no_derive, tmp_path):
    from tests.test_smi_headers import _fleet

    every = {}
    for label in ("duckdb", "mixed"):
        data = tmp_path / label / "data"
        data.mkdir(parents=True)
        shutil.copy(SAMPLE / "inventory.csv", data / "inventory.csv")
        every[label] = [p.name for p in _fleet(data)]
    nights = [every["duckdb"][:2], every["duckdb"][:4], every["duckdb"]]  # the header of day 3 comes in night 2
    got = {}
    for label, engines in (("duckdb", [CFG, CFG, CFG]), ("mixed", [SPARK, CFG, SPARK])):
        folder = tmp_path / label / "data" / "telemetry" / "h1"
        files = {p.name: p.read_bytes() for p in folder.iterdir()}
        for p in folder.iterdir():
            p.unlink()
        for cfg, names in zip(engines, nights):
            for name in names:
                (folder / name).write_bytes(files[name])
            _night(cfg, tmp_path / label / "data", tmp_path / label / "wh.duckdb", stages=["inventory", "smi"])
        got[label] = _read(tmp_path / label / "wh.duckdb", ("smi_hourly", "smi_headers", "quarantine", "files"))
    heads = got["duckdb"]["smi_headers"]
    assert heads["reloaded_because"].drop_nulls().len() > 0 and heads["header_from"].drop_nulls().len() > 0
    _assert_same(got["duckdb"], got["mixed"], "nights on DuckDB vs Spark, DuckDB, Spark")
    # The store's smi_headers rows of the files it holds are the warehouse's, settled plan included.
    import duckdb

    store = tmp_path / "mixed" / "wh.tables"
    ids = duckdb.sql(f"SELECT file_id FROM '{sorted((store / '_registry').glob('v*.parquet'))[-1]}'").fetchall()
    assert ids
    in_store = pl.from_arrow(duckdb.sql(
        f"SELECT * FROM read_parquet('{store}/tables/smi_headers/**/*.parquet') "
        f"WHERE file_id IN (SELECT unnest({[i for (i,) in ids]}))").arrow())
    in_wh = _read(tmp_path / "mixed" / "wh.duckdb", ("smi_headers",), ids=True)["smi_headers"]
    in_wh = in_wh.filter(pl.col("file_id").is_in([i for (i,) in ids]))
    assert_same_table(in_wh.sort("file_id"), in_store.select(in_wh.columns).sort("file_id"), "store's smi_headers")


def test_the_command_line_prints_the_same_summary_and_exit_code(small, no_derive, cli, capsys, tmp_path):
    data, _ = small
    said = {}
    for engine in ("duckdb", "spark"):
        # On Spark, --warehouse is the contract's folder of the tables (pipeline/location.py).
        wh = tmp_path / engine / ("wh.duckdb" if engine == "duckdb" else "wh")
        code = cli("run", "--engine", engine, "--data", data, "--warehouse", wh, "--out", tmp_path / engine / "out",
                   "--stage", "inventory", "--stage", "smi", "--stage", "xid", "-q")
        out = capsys.readouterr().out  # (the summary's first sentence: the paths differ, and may wrap)
        said[engine] = (code, [line.split(". ")[0] for line in out.splitlines()
                               if line.startswith(("Loaded", "No new rows"))])
    assert said["spark"] == said["duckdb"] and said["duckdb"][1], said
    folder = tmp_path / "spark" / "wh"
    assert (folder / "catalog.duckdb").is_file() and _ids_on_disk(folder, "xid_raw")
    _assert_same(_read(tmp_path / "duckdb" / "wh.duckdb"), _read(folder / "catalog.duckdb"), "folder warehouse")
