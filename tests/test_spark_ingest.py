"""Ingest as Spark tasks into the Parquet table layer: the same rows as the single-machine
ingest, and the registry's promises (rerun adds nothing, a changed file replaces exactly its
rows, a run killed before its commit leaves the tables as they were and its rerun completes
them). Shares the one local[2] session of the ``spark`` fixture."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import polars as pl
import pytest

from pipeline.config import load_config
from tests.conftest import ROOT
from tests.test_spark import assert_same_table

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

SAMPLE = ROOT / "data" / "sample"
CFG = load_config(ROOT / "fleetfault.toml")
#: A journal and a gzipped kern.log host; a headerless (configured fields) and a headed telemetry host.
HOSTS = {"kernel": ["fra-gpu001", "fra-gpu002"], "telemetry": ["fra-gpu001", "sha-gpu001"]}
FILES_PER_HOST = 3
#: Columns that name a load (file ids, run ids, times), not what was read.
LOAD_COLUMNS = {"file_id", "run_id", "quarantined_at", "loaded_at"}


def _small_fleet(root: Path) -> Path:
    """A few hosts and files of the bundled sample, in the input layout."""
    root.mkdir()
    shutil.copy(SAMPLE / "inventory.csv", root / "inventory.csv")
    for source, hosts in HOSTS.items():
        for host in hosts:
            dest = root / source / host
            dest.mkdir(parents=True)
            for path in sorted((SAMPLE / source / host).iterdir())[:FILES_PER_HOST]:
                shutil.copy(path, dest / path.name)
    return root


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """The small fleet, and its tables from the single-machine ingest (DuckDB)."""
    from pipeline.run import run_pipeline
    from pipeline.warehouse import Warehouse

    tmp = tmp_path_factory.mktemp("spark_ingest")
    data = _small_fleet(tmp / "data")
    run_pipeline(CFG, data, tmp / "wh.duckdb", tmp / "out", stages=["inventory", "smi", "xid"])
    with Warehouse(tmp / "wh.duckdb", read_only=True) as wh:
        tables = {t: wh.engine.pl(f'SELECT * FROM "{t}"', step="read")
                  for t in ("xid_raw", "gpu_map", "kernel_segments", "smi_hourly", "smi_headers", "quarantine")}
        zones = {h: CFG.site_tz(s) for h, s in wh.engine.rows(
            "SELECT host, any_value(site) FROM inventory GROUP BY host", step="sites")}
    return data, tables, zones


def _ingest(spark, root: Path, data: Path, zones: dict, stages=("xid", "smi")):
    from pipeline.engine.parquet_tables import ParquetTableStore
    from pipeline.engine.spark_ingest import ingest

    store = ParquetTableStore(spark, str(root))
    return store, {stage: ingest(spark, store, stage, data, CFG, zones=zones) for stage in stages}


def _read(store, table: str) -> pl.DataFrame:
    from pipeline.engine.spark_engine import naive_utc

    return pl.from_arrow(naive_utc(store.read(table).toArrow()))


def _content(frame: pl.DataFrame, table: str) -> pl.DataFrame:
    keep = [c for c in frame.columns if c not in LOAD_COLUMNS]
    if table == "smi_headers":  # what the file was read with; the rest is the DuckDB header planner's
        keep = ["host", "last_fields", "start_fields"]
    return frame.select(keep)


@pytest.fixture(scope="module")
def loaded(spark, fleet, tmp_path_factory):
    """The small fleet ingested on Spark once, uninterrupted."""
    data, _, zones = fleet
    return _ingest(spark, tmp_path_factory.mktemp("store") / "tables", data, zones)


def test_spark_ingest_gives_the_single_machine_rows(spark, fleet, loaded):
    _, ours, _ = fleet
    store, results = loaded
    assert results["xid"].files == 2 * FILES_PER_HOST and results["xid"].unchanged == 0
    assert results["xid"].rows_loaded == ours["xid_raw"].height > 0
    assert ours["smi_hourly"].height > 0
    for table, frame in ours.items():
        assert_same_table(_content(frame, table).with_columns(pl.col(pl.Datetime).dt.cast_time_unit("us")),
                          _content(_read(store, table), table), table)


def _ids_on_disk(store, table: str) -> list[int]:
    """The file ids of every row in a table's Parquet files, committed or not (any reader)."""
    import duckdb

    folder = Path(store.table_path(table))
    if not list(folder.glob("**/*.parquet")):
        return []
    return [i for (i,) in duckdb.sql(f"SELECT file_id FROM read_parquet('{folder}/**/*.parquet')").fetchall()]


def test_tables_are_plain_parquet_partitioned_by_batch_and_day(loaded):
    import duckdb

    store, results = loaded
    folder = Path(store.table_path("xid_raw"))
    # One batch per ingest, not a folder per input file: the files written follow the tasks and days.
    batches = {p.name for p in folder.glob("batch=*")}
    assert batches == {f"batch={min(results['xid'].committed)}"}
    days = sorted({p.name for p in folder.glob("batch=*/day=*")})
    assert days and all(d.startswith("day=2025-03-") for d in days)
    # Any Parquet reader gets the rows (here DuckDB, with the partition columns from the paths).
    n = duckdb.sql(f"SELECT count(*) FROM read_parquet('{folder}/**/*.parquet', hive_partitioning = true)").fetchall()[0][0]
    assert n == _read(store, "xid_raw").height == len(_ids_on_disk(store, "xid_raw"))


def test_a_rerun_adds_nothing(spark, fleet, loaded):
    data, _, zones = fleet
    store, _ = loaded
    before = {t: _read(store, t) for t in ("xid_raw", "smi_hourly", "quarantine")}
    again = _ingest(spark, Path(store.root), data, zones)[1]
    assert again["xid"].unchanged == again["xid"].files and again["xid"].rows_read == 0
    assert again["smi"].unchanged == again["smi"].files and again["smi"].rows_read == 0
    for table, frame in before.items():
        assert_same_table(frame, _read(store, table), table)


def test_a_changed_file_replaces_exactly_its_rows(spark, fleet, tmp_path):
    data, _, zones = fleet
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    store, _ = _ingest(spark, tmp_path / "tables", copy, zones, stages=("xid",))
    before = _read(store, "xid_raw")
    target = sorted((copy / "kernel" / "fra-gpu002").iterdir())[0]  # a gzipped kern.log
    key = str(target.relative_to(copy))
    lines = gzip.decompress(target.read_bytes()).splitlines(keepends=True)
    xid_lines = [i for i, line in enumerate(lines) if b"Xid" in line]
    del lines[xid_lines[0]]  # one event fewer in this file
    target.write_bytes(gzip.compress(b"".join(lines)))

    result = _ingest(spark, Path(store.root), copy, zones, stages=("xid",))[1]["xid"]
    assert result.unchanged == result.files - 1
    after = _read(store, "xid_raw")
    others = pl.col("source_file") != key
    assert_same_table(before.filter(others), after.filter(others), "xid_raw (other files)")
    assert after.filter(~others).height == before.filter(~others).height - 1
    assert after.filter(~others)["file_id"].n_unique() == 1  # the new version only
    # The old version's rows are gone from disk, not just hidden.
    old_id = before.filter(~others)["file_id"][0]
    on_disk = _ids_on_disk(store, "xid_raw")
    assert old_id not in on_disk and len(on_disk) == after.height


def test_a_run_killed_before_its_commit_then_rerun_gives_the_same_tables(spark, fleet, loaded, tmp_path, monkeypatch):
    from pipeline.engine.parquet_tables import ParquetTableStore

    data, _, zones = fleet
    real_commit = ParquetTableStore.commit

    def killed(self, stage, files, forget=(), written=()):
        self._publish(written)  # the tasks' files under the names readers open
        raise KeyboardInterrupt("killed after the data, before the registry")

    monkeypatch.setattr(ParquetTableStore, "commit", killed)
    with pytest.raises(KeyboardInterrupt):
        _ingest(spark, tmp_path / "tables", data, zones, stages=("xid",))
    store = ParquetTableStore(spark, str(tmp_path / "tables"))
    assert _ids_on_disk(store, "xid_raw"), "the killed run wrote its data"
    assert _read(store, "xid_raw").height == 0  # but no reader sees it

    monkeypatch.setattr(ParquetTableStore, "commit", real_commit)
    store, results = _ingest(spark, tmp_path / "tables", data, zones)
    assert results["xid"].unchanged == 0
    uninterrupted, _ = loaded
    for table in ("xid_raw", "gpu_map", "kernel_segments", "smi_hourly", "quarantine"):
        assert_same_table(_content(_read(uninterrupted, table), table), _content(_read(store, table), table), table)
    committed = set(store.registry().column("file_id").to_pylist())
    assert set(_ids_on_disk(store, "xid_raw")) <= committed  # the killed run's batch is gone


def test_a_store_of_the_layout_before_batches_is_refused_in_one_line(tmp_path):
    import pyarrow.parquet as pq

    from pipeline.engine.parquet_tables import ParquetTableStore
    from pipeline.engine.tables import arrow_schema

    store = ParquetTableStore(None, str(tmp_path / "tables"))  # (no Spark: the registry is pyarrow's)
    assert store.registry().num_rows == 0
    pq.write_table(arrow_schema("files").empty_table(), tmp_path / "tables" / "_registry" / "v00000001.parquet")
    with pytest.raises(RuntimeError, match="layout before batches.*move it away"):
        store.registry()


def _store_with_two_tasks(tmp_path, table: str, rows: dict[int, dict]):
    """A store (no Spark: its writes are pyarrow's) with file ids 5 and 6 begun and each
    written by its own task's writer (shipped as a task's is, pickled)."""
    import pickle
    from datetime import datetime

    import pyarrow as pa

    from pipeline.engine.parquet_tables import ParquetTableStore
    from pipeline.engine.tables import conform

    store = ParquetTableStore(None, str(tmp_path / "tables"))
    store.begin("xid", [5, 6])
    written = {i: pickle.loads(pickle.dumps(store.writer()))(table, pa.table(r)) for i, r in rows.items()}
    files = conform("files", pa.table({
        "file_id": [5, 6], "stage": ["xid"] * 2, "path": ["a", "b"], "size": [1, 1], "sha256": ["x", "y"],
        **{c: [1, 1] for c in ("rows_read", "rows_loaded", "rows_quarantined")},
        "loaded_at": [datetime(2025, 3, 3)] * 2}))
    return store, files, written


def _on_disk(store, table: str) -> list[tuple]:
    import duckdb

    files = sorted(str(p) for p in Path(store.table_path(table)).glob("**/*.parquet"))
    if not files:
        return []
    return duckdb.sql(f"SELECT file_id, * EXCLUDE (file_id) FROM read_parquet({files}, hive_partitioning = true) "
                      "ORDER BY ALL").fetchall()


def test_task_files_are_read_only_once_committed_and_a_failed_attempts_never(tmp_path):
    from datetime import datetime

    import pyarrow as pa

    late, early = datetime(2025, 3, 1, 23, 59), datetime(2025, 3, 2, 0, 1)
    store, files, written = _store_with_two_tasks(tmp_path, "xid_raw", {
        5: {"file_id": [5, 5], "ts": [late, early], "host": ["h1", "h1"]},
        6: {"file_id": [6], "ts": [None], "host": ["h2"]},
    })
    # A failed attempt of the second task had written its rows too before it was run again.
    store.writer()("xid_raw", pa.table({"file_id": [6], "ts": [None], "host": ["h2"]}))
    assert len(written[5]) == 2 and len(written[6]) == 1  # a file per UTC day (and one for no day)
    assert _on_disk(store, "xid_raw") == []  # written, not yet readable
    store.commit("xid", files, written=[*written[5], *written[6]])
    # Each row once (the failed attempt's file deleted, not published), by batch and UTC day.
    assert [(r[0], r[-2], str(r[-1])) for r in _on_disk(store, "xid_raw")] == [
        (5, 5, "2025-03-01"), (5, 5, "2025-03-02"), (6, 5, "None")]
    folder = Path(store.table_path("xid_raw")) / "batch=5"
    assert sorted(p.name for p in folder.iterdir()) == ["day=2025-03-01", "day=2025-03-02",
                                                       "day=__HIVE_DEFAULT_PARTITION__"]
    assert not list(folder.glob("**/.*"))


def test_rewritten_rows_of_a_file_replace_its_rows_in_their_own_parquet_file(tmp_path):
    import pyarrow as pa

    from pipeline.engine.tables import conform

    store, files, written = _store_with_two_tasks(tmp_path, "smi_headers", {
        i: {"file_id": [i], "host": [f"h{i}"], "header_from": ["own"]} for i in (5, 6)})
    store.commit("xid", files, written=[*written[5], *written[6]])
    parts = sorted(Path(store.table_path("smi_headers")).glob("**/*.parquet"))
    assert len(parts) == 2  # one per task
    store.rewrite_files("smi_headers", conform("smi_headers", pa.table(
        {"file_id": [6, 5], "host": ["h6", "h5"], "header_from": ["planned", "planned"]})), [5, 6])
    import pyarrow.parquet as pq

    # Each Parquet file swapped its own file's row (one rename: the old row or the new, never both).
    assert {tuple(pq.read_table(p, columns=["file_id", "header_from"]).to_pylist()[0].values()) for p in parts} == {
        (5, "planned"), (6, "planned")}
    assert all(pq.read_table(p).num_rows == 1 for p in parts)
