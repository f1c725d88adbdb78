"""Many small telemetry files read in batches give what reading them one by one gives."""

from __future__ import annotations

import polars as pl

from pipeline.ingest.telemetry import stage as smi
from pipeline.ingest.telemetry import load_file
from pipeline.ingest.telemetry.batch import load_files
from tests.test_smi import HEADER, _ctx, line, run_smi, write

SHORT = "timestamp, index, serial, temperature.gpu [C], ecc.errors.corrected.volatile.total"
SUMS = ["samples", "temp_n", "temp_sum", "temp_max", "power_sum", "throttle_power", "ecc_corrected_delta"]


def _day(d: int, hours=(22, 23), temp=45) -> list[str]:
    return [line(ts=f"2026/07/{d:02d} {h:02d}:{m:02d}:00.000", idx=i, temp=str(temp + m % 7), ecc=str(m // 20))
            for h in hours for m in range(0, 60, 20) for i in (0, 1)]


def _short(d: int) -> list[str]:
    return [f"2026/07/{d:02d} 10:{m:02d}:00.000, 0, SN0, {40 + m % 5}, {m // 10}" for m in range(0, 60, 15)]


def _damaged(path):
    path.write_bytes(path.read_bytes()[:-40])  # the copy to the archive was cut short
    return path


def _host_files(root):
    h = root / "h1"
    return [
        write(h / "a01.csv", HEADER, *_day(1)),
        write(h / "a02.csv", HEADER, *_day(2, (22,)), HEADER, *_day(2, (23,))),  # logger restarted
        write(h / "a03.csv", *_day(3)),  # copytruncate: continues the header
        write(h / "a04.csv", HEADER, *_day(4)[:3], line(ts="2026/07/04 23:59:00.000", temp="hot"), *_day(4)[3:]),
        write(h / "a05.csv", *_day(5)),
        write(h / "a06.csv.gz", HEADER, *_day(6), gz=True),
        _damaged(write(h / "a06b.csv.gz", HEADER, *_day(6), gz=True)),
        write(h / "a07.csv", SHORT, *_short(7)),  # the query changed
        write(h / "a08.csv", *_short(8)),
        write(h / "a09.csv", HEADER, *_day(9), end="\r\n"),
        write(h / "a10.csv", HEADER),  # header only
        write(h / "a11.csv", HEADER, *_day(11), line()[:40]),  # killed mid-line
        # headerless; the restarted logger spells a field by its other documented name
        write(h / "a11b.csv", *_day(10, (22,)), HEADER.replace("clocks.sm [MHz]", "clocks.current.sm [MHz]"),
              *_day(10, (23,))),
        write(h / "a12.csv", *_day(12), SHORT, *_short(12)),  # headerless, the query changed mid-file
        write(h / "a13.csv", *_short(13)),  # so this one continues the short header
    ]


def _facts(loaded) -> pl.DataFrame:
    df = loaded.tables["smi_hourly"]
    return df.group_by("file_id", "gpu_index", "hour").agg(pl.col(c).sum() for c in SUMS).sort(pl.all())


def test_batches_match_file_by_file(tmp_path):
    files = _host_files(tmp_path)
    items = [(p, k) for k, p in enumerate(files, 1)]
    one_by_one, fields = [], None
    for path, fid in items:
        loaded, fields = load_file(path, fid, host="h1", tz="Asia/Shanghai", fields=fields)
        one_by_one.append((loaded, fields))
    slow = []

    def single(path, file_id, flds):
        slow.append(path.name)
        return load_file(path, file_id, host="h1", tz="Asia/Shanghai", fields=flds)

    batched = load_files(items, host="h1", tz="Asia/Shanghai", fields=None, single=single)
    # line by line: an unreadable value, a damaged gzip, a header change and the file continuing it
    assert slow == ["a04.csv", "a06b.csv.gz", "a12.csv", "a13.csv"]
    for (path, _), (a, fa), (b, fb) in zip(items, one_by_one, batched):
        assert (b.rows_read, b.rows_loaded, b.rows_skipped) == (a.rows_read, a.rows_loaded, a.rows_skipped), path.name
        assert [(r.line_no, r.reason, r.raw) for r in b.rejects] == [(r.line_no, r.reason, r.raw) for r in a.rejects]
        assert b.rows_read == b.rows_loaded + len(b.rejects)
        assert fb == fa
        assert _facts(b).equals(_facts(a)), path.name
        assert b.tables["smi_headers"].rows() == a.tables["smi_headers"].rows()
    assert [b.rows_skipped for b, _ in batched][:3] == [1, 2, 0] and batched[11][0].rows_skipped == 1
    assert sum(b.rows_loaded for b, _ in batched) == 12 * 10 + 4 * 4
    assert [r.reason for b, _ in batched for r in b.rejects] == ["bad_value", "bad_gzip", "truncated_line"]


def test_stage_reloads_a_changed_headerless_file_between_unchanged_ones(tmp_path, wh):
    data = tmp_path / "data"
    files = _host_files(data / "telemetry")
    (data / "inventory.csv").write_text("serial,model,vendor,host,slot,site,batch,installed_at,removed_at\n")
    ctx = _ctx(tmp_path, wh, data)
    run_smi(ctx)
    first = wh.engine.pl("SELECT * EXCLUDE (file_id) FROM smi_hourly", step="test").sort(pl.all())
    rep = ctx.report("smi")
    assert rep.files == len(files) and rep.rows_quarantined == 3
    assert wh.con.execute("SELECT sum(rows_read) = sum(rows_loaded + rows_quarantined), count(*) FROM files").fetchall() == [(True, 15)]

    write(files[4], *_day(5)[:2])  # a05: headerless, its neighbours unchanged
    ctx2 = _ctx(tmp_path, wh, data)
    run_smi(ctx2)
    rep2 = ctx2.report("smi")
    assert (rep2.unchanged, rep2.rows_loaded) == (14, 2)
    reloaded = wh.con.execute("SELECT h.samples FROM smi_hourly h JOIN files f USING (file_id) WHERE f.path LIKE '%a05.csv'").fetchall()
    assert sum(r[0] for r in reloaded) == 2
    assert wh.con.execute("SELECT count(*) FROM files").fetchall()[0][0] == 15
    write(files[4], *_day(5))
    run_smi(_ctx(tmp_path, wh, data))
    assert wh.engine.pl("SELECT * EXCLUDE (file_id) FROM smi_hourly", step="test").sort(pl.all()).equals(first)


def test_new_files_are_hashed_while_loading_and_registered_with_their_digest(wh, tmp_path):
    from pipeline.warehouse import sha256_file

    files = _host_files(tmp_path / "telemetry")[:3]

    def one(path, fid):
        return load_file(path, fid, host="h1", tz="UTC", fields=smi.header_fields(HEADER))[0]

    assert wh.ingest_file("smi", files[0], one).status == "loaded"
    res = wh.ingest_batch("smi", files, lambda items: [one(p, fid) for p, fid in items])
    assert [r.status for r in res] == ["unchanged", "loaded", "loaded"]
    registered = dict(wh.con.execute("SELECT path, sha256 FROM files").fetchall())
    assert registered == {str(p): sha256_file(p) for p in files}
    assert [r.status for r in wh.ingest_batch("smi", files, lambda items: [])] == ["unchanged"] * 3
    assert wh.ingest_file("smi", files[1], one).status == "unchanged"


def test_a_large_file_is_read_in_its_batch_like_alone(tmp_path):
    h = tmp_path / "h1"
    files = [write(h / "b01.csv", HEADER, *_day(1)), write(h / "b02.csv", *(_day(2) * 30)),  # headerless, large
             write(h / "b03.csv", *_day(3)), write(h / "b04.csv", *_day(4))]
    items = [(p, k) for k, p in enumerate(files, 1)]
    one_by_one, fields = [], None
    for path, fid in items:
        loaded, fields = load_file(path, fid, host="h1", tz="UTC", fields=fields)
        one_by_one.append(loaded)
    alone = []

    def single(path, file_id, flds):
        alone.append(path.name)
        return load_file(path, file_id, host="h1", tz="UTC", fields=flds)

    batched = load_files(items, host="h1", tz="UTC", fields=None, single=single)
    assert alone == []  # one read_csv streams all four; b03 and b04 continue b02's field list
    for a, (b, fb) in zip(one_by_one, batched):
        assert (b.rows_read, b.rows_loaded, b.rejects) == (a.rows_read, a.rows_loaded, a.rejects)
        assert _facts(b).equals(_facts(a)) and fb is not None
    assert batched[1][0].rows_loaded == 12 * 30


def test_local_hours_to_utc_by_distinct_hour_match_row_by_row():
    # Each distinct local hour is converted once and looked up per row: the rows must be
    # those a conversion of every row gives, a skipped and a repeated DST hour included.
    from datetime import datetime

    from pipeline.ingest.telemetry.batch import _hourly_utc
    from pipeline.timeutil import local_to_utc_expr

    hours = [datetime(2026, 3, 8, 2), datetime(2026, 3, 8, 2), datetime(2026, 3, 8, 3), datetime(2026, 11, 1, 1),
             datetime(2026, 11, 1, 1), datetime(2026, 11, 1, 2), None, datetime(2026, 7, 1, 0)]
    df = pl.DataFrame({"hour_local": hours, "ts_first": [h and h.replace(minute=5) for h in hours],
                       "ts_last": [h and h.replace(minute=55) for h in hours], "file_id": list(range(len(hours)))},
                      schema={"hour_local": pl.Datetime("us"), "ts_first": pl.Datetime("us"),
                              "ts_last": pl.Datetime("us"), "file_id": pl.Int32})
    for tz in ("America/Los_Angeles", "Europe/Berlin", "UTC"):
        got = _hourly_utc(df, tz)
        local = pl.col("hour_local")
        want = df.with_columns(hour=local_to_utc_expr(local, tz)).with_columns(
            ts_first=pl.col("ts_first") + (pl.col("hour") - local), ts_last=pl.col("ts_last") + (pl.col("hour") - local),
            file_id=pl.col("file_id").cast(pl.Int64))
        assert got.select(want.columns).equals(want), tz
    assert _hourly_utc(df, "America/Los_Angeles")["hour"][0] == datetime(2026, 3, 8, 10)  # (clock-forward answer)
