import duckdb
import polars as pl
import pytest

from pipeline.errors import EngineError, FleetfaultError, SchemaError
from pipeline.schemas import all_schemas
from pipeline.vocab.sql import literal
from pipeline.warehouse import SCHEMA_VERSION, Loaded, Rejected, Warehouse


def _inv_loader(rows, rejects=()):
    def load(path, file_id):
        df = pl.DataFrame(
            {"serial": [f"S{i}" for i in range(rows)], "host": ["h"] * rows, "file_id": [file_id] * rows},
            schema={"serial": pl.Utf8, "host": pl.Utf8, "file_id": pl.Int64},
        )
        return Loaded({"inventory": df}, rows_read=rows + len(rejects), rows_loaded=rows, rejects=list(rejects))
    return load


def test_every_declared_table_is_created(wh):
    names = {r[0] for r in wh.engine.rows("select table_name from information_schema.tables", step="test")}
    assert set(all_schemas()) <= names
    assert wh.schema_version == SCHEMA_VERSION


def test_migration_adds_missing_columns_and_sets_version(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("create table inventory (serial varchar not null, host varchar)")
    con.execute("insert into inventory values ('A', 'h1')")
    con.execute("create table schema_meta (key varchar primary key, value varchar)")
    con.execute("insert into schema_meta values ('version', '0')")
    con.close()
    with Warehouse(path) as wh:
        cols = {r[0] for r in wh.engine.rows("select column_name from information_schema.columns where table_name='inventory'", step="test")}
        assert {"model", "site", "removed_at", "file_id"} <= cols
        assert wh.engine.rows("select serial, host, model from inventory", step="test") == [("A", "h1", None)]
        assert wh.schema_version == SCHEMA_VERSION


def test_version_2_drops_the_features_column_that_left_the_declared_table(tmp_path):
    path = tmp_path / "v1.duckdb"
    Warehouse(path).close()
    con = duckdb.connect(str(path))
    con.execute("alter table features add column days_since_ticket double")
    con.execute("update schema_meta set value = '1' where key = 'version'")
    con.close()
    with Warehouse(path) as wh:
        cols = [r[0] for r in wh.engine.rows(
            "select column_name from information_schema.columns where table_name = 'features'", step="test")]
        assert "days_since_ticket" not in cols
        assert cols == wh.schemas["features"].names
        assert wh.schema_version == SCHEMA_VERSION == 2


def test_newer_warehouse_is_refused(tmp_path):
    path = tmp_path / "new.duckdb"
    Warehouse(path).close()
    con = duckdb.connect(str(path))
    con.execute("update schema_meta set value = '999' where key = 'version'")
    con.close()
    with pytest.raises(SchemaError, match="newer"):
        Warehouse(path)


def test_registry_skips_unchanged_and_reloads_changed(wh, tmp_path):
    f = tmp_path / "a.csv"
    f.write_text("one")
    r1 = wh.ingest_file("inventory", f, _inv_loader(3))
    r2 = wh.ingest_file("inventory", f, _inv_loader(3))
    assert (r1.status, r1.rows_loaded) == ("loaded", 3)
    assert (r2.status, r2.rows_loaded) == ("unchanged", 0)
    assert wh.engine.scalar("select count(*) from inventory", step="test") == 3
    f.write_text("two")
    r3 = wh.ingest_file("inventory", f, _inv_loader(5, [Rejected(7, "bad", "x")]))
    assert r3.status == "reloaded"
    assert wh.engine.scalar("select count(*) from inventory", step="test") == 5  # old rows replaced, not added
    assert wh.engine.scalar("select count(*) from files", step="test") == 1
    assert wh.engine.rows("select rows_read, rows_loaded, rows_quarantined from files", step="test") == [(6, 5, 1)]
    assert wh.engine.rows("select line_no, reason, source_file from quarantine", step="test") == [(7, "bad", str(f))]


def test_log_appended_while_it_loads_is_reloaded_next_run(wh, tmp_path, monkeypatch):
    # The day's nvidia-smi log is still being written when the nightly job reads it: what
    # was appended during the load must not be taken as already loaded, even when the
    # digest (computed in a thread) is read after the append.
    import threading

    from pipeline import warehouse

    appended, real = threading.Event(), warehouse.sha256_file

    def late(path, *args, **kw):
        if threading.current_thread() is not threading.main_thread():
            assert appended.wait(10)
        return real(path, *args, **kw)

    monkeypatch.setattr(warehouse, "sha256_file", late)

    def growing(loader, path):
        def load(*args):
            loaded = loader(*args)
            with open(path, "ab") as out:
                out.write(b"row\n" * 1000)
            appended.set()
            return loaded
        return load

    f = tmp_path / "today.csv"
    f.write_bytes(b"row\n" * 3)
    assert wh.ingest_file("inventory", f, growing(_inv_loader(3), f)).status == "loaded"
    r = wh.ingest_file("inventory", f, _inv_loader(1003))
    assert (r.status, r.rows_loaded) == ("reloaded", 1003)
    assert wh.ingest_file("inventory", f, _inv_loader(1003)).status == "unchanged"

    appended.clear()
    g = tmp_path / "batch.csv"
    g.write_bytes(b"row\n")
    assert [r.status for r in wh.ingest_batch("inventory", [g], growing(_batch_loader(1), g))] == ["loaded"]
    assert [r.status for r in wh.ingest_batch("inventory", [g], _batch_loader(1001))] == ["reloaded"]


def test_sha256_of_a_prefix(tmp_path):
    import hashlib

    from pipeline.warehouse import sha256_file

    f = tmp_path / "x"
    data = bytes(range(256)) * 9000
    f.write_bytes(data)
    for n in (0, 1, 255, 1 << 20, (1 << 20) + 3, len(data), len(data) + 10):
        assert sha256_file(f, chunk=1 << 20, limit=n) == hashlib.sha256(data[:n]).hexdigest()
    assert sha256_file(f) == hashlib.sha256(data).hexdigest()


def test_reload_loads_an_unchanged_file_again_replacing_its_rows(wh, tmp_path):
    f = tmp_path / "a.csv"
    f.write_text("one")
    wh.ingest_file("inventory", f, _inv_loader(3, [Rejected(2, "no_header", "x")]))
    r = wh.ingest_file("inventory", f, _inv_loader(4), reload=True)
    assert (r.status, r.rows_loaded) == ("reloaded", 4)
    assert wh.engine.scalar("select count(*) from inventory", step="test") == 4 and wh.engine.scalar("select count(*) from quarantine", step="test") == 0
    assert wh.ingest_file("inventory", f, _inv_loader(4)).status == "unchanged"
    files = [tmp_path / "b.csv", tmp_path / "c.csv"]
    for g in files:
        g.write_text(g.name)
    wh.ingest_batch("inventory", files, _batch_loader(1))
    res = wh.ingest_batch("inventory", files, _batch_loader(2), reload=[str(files[1])])
    assert [r.status for r in res] == ["unchanged", "reloaded"]
    assert wh.engine.rows(f"select path, rows_loaded from files where path <> {literal(str(f))} order by path", step="test") == [
        (str(files[0]), 1), (str(files[1]), 2)]
    assert [r.status for r in wh.ingest_batch("inventory", files, _batch_loader(2))] == ["unchanged"] * 2


def test_crash_mid_file_leaves_nothing_and_next_run_loads_fully(wh, tmp_path):
    f = tmp_path / "a.csv"
    f.write_text("data")

    def crashing(path, file_id):
        wh.insert("inventory", pl.DataFrame({"serial": ["X"], "host": ["h"], "file_id": [file_id]}))
        raise KeyboardInterrupt("killed halfway")

    with pytest.raises(KeyboardInterrupt):
        wh.ingest_file("inventory", f, crashing)
    assert wh.engine.scalar("select count(*) from inventory", step="test") == 0
    assert wh.engine.scalar("select count(*) from files", step="test") == 0
    res = wh.ingest_file("inventory", f, _inv_loader(4))
    assert res.status == "loaded" and wh.engine.scalar("select count(*) from inventory", step="test") == 4


def test_counts_must_reconcile(wh, tmp_path):
    f = tmp_path / "a.csv"
    f.write_text("x")

    def liar(path, file_id):
        return Loaded({}, rows_read=10, rows_loaded=3)

    with pytest.raises(FleetfaultError, match="reconcile"):
        wh.ingest_file("inventory", f, liar)
    assert wh.engine.scalar("select count(*) from files", step="test") == 0


def test_insert_validates_columns(wh):
    with pytest.raises(SchemaError, match="undeclared"):
        wh.insert("inventory", pl.DataFrame({"serial": ["a"], "file_id": [1], "colour": ["red"]}))
    with pytest.raises(SchemaError, match="no table"):
        wh.insert("nope", pl.DataFrame({"a": [1]}))


def test_sql_errors_name_the_step(wh):
    with pytest.raises(EngineError, match="my step") as exc:
        wh.engine.rows("select * from missing_table", step="my step")
    assert "missing_table" in str(exc.value)


def _batch_loader(rows, rejects_for=None):
    def load(items):
        return [_inv_loader(rows, (rejects_for or {}).get(path.name, ()))(path, fid) for path, fid in items]
    return load


def test_batch_registers_each_file_skips_unchanged_and_replaces_changed(wh, tmp_path):
    files = [tmp_path / f"f{i}.csv" for i in range(3)]
    for i, f in enumerate(files):
        f.write_text(f"v1 {i}")
    res = wh.ingest_batch("inventory", files, _batch_loader(2, {"f1.csv": [Rejected(4, "bad", "x, y")]}))
    assert [r.status for r in res] == ["loaded"] * 3
    assert wh.engine.rows("select path, rows_read, rows_loaded, rows_quarantined from files order by path", step="test") == [
        (str(files[0]), 2, 2, 0), (str(files[1]), 3, 2, 1), (str(files[2]), 2, 2, 0)]
    ids = dict(wh.engine.rows("select path, file_id from files", step="test"))
    assert len(set(ids.values())) == 3
    assert wh.engine.rows("select file_id, count(*) from inventory group by all order by 1", step="test") == [(i, 2) for i in sorted(ids.values())]
    assert wh.engine.rows("select file_id, line_no, source_file from quarantine", step="test") == [(ids[str(files[1])], 4, str(files[1]))]

    files[1].write_text("v2")
    seen = []

    def loader(items):
        seen.extend(p for p, _ in items)
        return _batch_loader(5)(items)

    res = wh.ingest_batch("inventory", files, loader)
    assert [r.status for r in res] == ["unchanged", "reloaded", "unchanged"] and seen == [files[1]]
    assert wh.engine.scalar("select count(*) from inventory", step="test") == 2 + 5 + 2  # old rows replaced, not added
    assert wh.engine.scalar("select count(*) from quarantine", step="test") == 0 and wh.engine.scalar("select count(*) from files", step="test") == 3


def test_crash_mid_batch_leaves_none_of_it_loaded(wh, tmp_path):
    files = [tmp_path / f"f{i}.csv" for i in range(3)]
    for f in files:
        f.write_text("v1")
    wh.ingest_batch("inventory", files[:1], _batch_loader(2))
    files[0].write_text("v2")  # a changed file whose old rows must survive the crash

    def crashing(items):
        out = []
        for k, (path, fid) in enumerate(items):
            if k == 2:
                raise KeyboardInterrupt("killed halfway through the batch")
            wh.insert("inventory", pl.DataFrame({"serial": ["X"], "host": ["h"], "file_id": [fid]}))
            out.append(Loaded({}, rows_read=1, rows_loaded=1))
        return out

    with pytest.raises(KeyboardInterrupt):
        wh.ingest_batch("inventory", files, crashing)
    assert wh.engine.rows("select path from files", step="test") == [(str(files[0]),)]
    assert wh.engine.scalar("select count(*) from inventory", step="test") == 2 and wh.engine.scalar("select count(*) from inventory where serial = 'X'", step="test") == 0
    res = wh.ingest_batch("inventory", files, _batch_loader(4))
    assert [r.status for r in res] == ["reloaded", "loaded", "loaded"]
    assert wh.engine.scalar("select count(*) from inventory", step="test") == 12


def test_batch_counts_must_reconcile_per_file(wh, tmp_path):
    files = [tmp_path / f"f{i}.csv" for i in range(2)]
    for f in files:
        f.write_text("x")

    def one_liar(items):
        return [Loaded({}, rows_read=1, rows_loaded=1), Loaded({}, rows_read=10, rows_loaded=3)]

    with pytest.raises(FleetfaultError, match="f1.csv: counts do not reconcile"):
        wh.ingest_batch("inventory", files, one_liar)
    assert wh.engine.scalar("select count(*) from files", step="test") == 0
