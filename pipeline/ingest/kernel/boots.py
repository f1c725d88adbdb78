"""A host's boots, known from any of its kernel logs, to date uptime-only lines in all of them.

Reads: per file and boot within it (``kernel_segments``: the uptimes it spans, the boot
instant where the file itself tells it, the local day its name gives), the event rows of
``xid_raw``, and ``kernel.boot_times``. Writes nothing: :func:`date_events` returns the
events with ``ts``, ``ts_quality`` and ``ts_error_s`` filled in, for
:func:`pipeline.link.xid.derive_xid_events` and ``parse xid``.

Why: ``dmesg`` written once a day stamps lines with the uptime only, and the boot marker
(``rtc_cmos ... setting system clock to <UTC>``, a line with both a wall clock and an
uptime, or the kernel banner ``Linux version ...`` in a log with wall clocks) is in the
file of the boot day only, or in another log of the host altogether. The boot table puts each uptime-only span of a
file on a boot of its host:

- a span whose file tells its boot is dated from it (``exact``), as is a span whose
  journalctl boot id (``-- Boot <id> --``) a marked span in any file shares;
- else a marked boot of the host (a marker in any of its files, or ``kernel.boot_times``)
  under which the span's lines fall on the local day the file is named for (``exact``);
- else the span is on a boot no file marks (one before the data began, typically). Every
  file named for a day bounds that boot's instant: its lines ``boot + uptime`` lie within
  the day, so ``day_start - first_uptime <= boot <= day_end - last_uptime``. Spans whose
  bounds overlap, uptimes rising, are one boot; its lines are dated at the middle of the
  intersection (``estimated``, ``ts_error_s`` its half-width). A span with no date in its
  file name and no marked boot stays undated (``unknown``).

The table is rebuilt from every file on each run, so the arrival order of files does not
matter.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from pipeline.timeutil import local_to_utc_expr
from pipeline.vocab.hosts import host_key_pl

#: Slack for a line written just past midnight into the previous day's file, and for the
#: drift between the kernel's uptime and the wall clock.
SLACK_S = 120.0
#: Two markers this close are the same boot seen in two files.
SAME_BOOT_S = 5.0

SEGMENT_SCHEMA: dict[str, pl.DataType] = {
    "host": pl.Utf8, "boot_seg": pl.Int32, "up_first": pl.Float64, "up_last": pl.Float64,
    "boot_at": pl.Datetime("us"), "day_lo": pl.Datetime("us"), "day_hi": pl.Datetime("us"), "boot_id": pl.Utf8,
}

_DAY_ONLY = re.compile(r"(?<!\d)(20\d\d)-?(0[1-9]|1[0-2])-?([0-3]\d)(?![-_T]?[0-2]\d[0-5]\d)(?!\d)")


def _named_day(path: Path) -> datetime | None:
    m = _DAY_ONLY.search(path.name if isinstance(path, Path) else Path(path).name)
    if not m:
        return None
    try:
        return datetime(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return None


def day_windows(files: list[tuple[Path, str]]) -> list[tuple[datetime, datetime] | None]:
    """:func:`day_window` of many ``(path, tz)`` at once (one polars step per zone)."""
    days = [_named_day(p) for p, _ in files]
    out: list[tuple[datetime, datetime] | None] = [None] * len(files)
    for tz in sorted({tz for (_, tz), d in zip(files, days) if d is not None}):
        ks = [k for k, ((_, z), d) in enumerate(zip(files, days)) if d is not None and z == tz]
        lo = pl.Series([days[k] for k in ks], dtype=pl.Datetime("us"))
        edges = pl.select(lo=local_to_utc_expr(pl.lit(lo), tz),
                          hi=local_to_utc_expr(pl.lit(lo + timedelta(days=1)), tz))
        for k, a, b in zip(ks, edges["lo"].to_list(), edges["hi"].to_list()):
            out[k] = (a, b)
    return out


def day_window(path: Path, tz: str) -> tuple[datetime, datetime] | None:
    """The UTC interval of the local day a file is named for (``dmesg-20250305.log``), or
    None when its name holds no date, or a time of day too (a file named for an instant)."""
    return day_windows([(path, tz)])[0]


def segments(df: pl.DataFrame, seg_boot: dict[tuple[int, int], datetime], items) -> pl.DataFrame:
    """One row per file (``fi``, an index into ``items``) and boot within it (``seg``) whose
    lines carry an uptime: the uptimes it spans, its boot instant where the file tells it,
    the file name's day. The wall clock of each kernel banner in a log without uptimes is a
    row of its own, ``boot_seg`` -1, -2, ...: a marked boot with no lines of its own there.
    Rows are in file order, then as listed."""
    up = (df.filter(pl.col("uptime_s").is_not_null()).group_by("fi", "seg")
          .agg(up_first=pl.col("uptime_s").min(), up_last=pl.col("uptime_s").max()).sort("fi", "seg"))
    ids = {(fi, seg): i for fi, seg, i in df.filter(pl.col("boot_id").is_not_null()).group_by("fi", "seg")
           .agg(pl.col("boot_id").first()).iter_rows()}
    banners = df.filter(pl.col("banner") & pl.col("wall").is_not_null() & pl.col("uptime_s").is_null())
    rows: list[tuple] = []
    for fi, seg, first, last in up.iter_rows():
        lo, hi = items[fi].day_window or (None, None)
        rows.append((fi, items[fi].host, seg, first, last, seg_boot.get((fi, seg)), lo, hi, ids.get((fi, seg))))
    k_of: dict[int, int] = {}
    for fi, wall in banners.select("fi", "wall").iter_rows():
        k = k_of[fi] = k_of.get(fi, 0) + 1
        lo, hi = items[fi].day_window or (None, None)
        rows.append((fi, items[fi].host, -k, 0.0, 0.0, wall, lo, hi, None))
    rows.sort(key=lambda r: r[0])  # (stable: a file's boots, then its banners)
    return pl.DataFrame(rows, schema={"fi": pl.Int32, **SEGMENT_SCHEMA}, orient="row")


def _merge(marks: list[datetime]) -> list[datetime]:
    out: list[datetime] = []
    for b in sorted(marks):
        if not out or (b - out[-1]).total_seconds() > SAME_BOOT_S:
            out.append(b)
    return out


def boot_table(segs: pl.DataFrame, config_boots: dict[str, datetime] | None = None) -> pl.DataFrame:
    """Per (file_id, boot_seg): the boot instant, ``ts_quality`` and ``ts_error_s``.

    ``segs`` has ``file_id`` and the :data:`SEGMENT_SCHEMA` columns; ``config_boots`` maps
    a host key (:func:`pipeline.vocab.hosts.host_key`) to a configured boot (naive UTC).
    """
    config_boots = config_boots or {}
    rows: list[tuple] = []
    if "boot_id" not in segs.columns:
        segs = segs.with_columns(boot_id=pl.lit(None, pl.Utf8))
    segs = segs.with_columns(hk=host_key_pl(pl.col("host")))
    for (hk,), g in segs.group_by("hk", maintain_order=True):
        marks = _merge([b for b in g["boot_at"].to_list() if b is not None] +
                       ([config_boots[hk]] if hk in config_boots else []))
        # journalctl's boot id names one boot in every file: a marker in one dates them all
        by_id = {i: b for i, b in g.filter(pl.col("boot_id").is_not_null() & pl.col("boot_at").is_not_null())
                 .select("boot_id", "boot_at").iter_rows()}
        open_: list[dict] = []
        for r in g.sort("day_lo", "up_first", nulls_last=True).iter_rows(named=True):
            key = (r["file_id"], r["boot_seg"])
            if r["boot_at"] is not None or r["boot_id"] in by_id:
                rows.append((*key, r["boot_at"] or by_id[r["boot_id"]], "exact", 0.0))
                continue
            if r["day_lo"] is None:
                continue  # no day to place it by: only its own file could have dated it
            lo = r["day_lo"] - timedelta(seconds=r["up_first"] + SLACK_S)
            hi = r["day_hi"] - timedelta(seconds=r["up_last"] - SLACK_S)
            fit = [b for b in marks if lo <= b <= hi]
            if fit:
                rows.append((*key, fit[-1], "exact", 0.0))
            else:
                open_.append({**r, "lo": lo, "hi": hi})
        # The spans no marker explains: consecutive ones whose bounds overlap, uptimes
        # rising, are one unmarked boot.
        clusters: list[dict] = []
        for r in open_:
            c = clusters[-1] if clusters else None
            if (c is not None and max(c["lo"], r["lo"]) <= min(c["hi"], r["hi"])
                    and r["up_first"] >= c["up_last"] - SLACK_S
                    and not (c["boot_id"] and r["boot_id"] and c["boot_id"] != r["boot_id"])):
                c["lo"], c["hi"] = max(c["lo"], r["lo"]), min(c["hi"], r["hi"])
                c["up_last"] = max(c["up_last"], r["up_last"])
                c["keys"].append((r["file_id"], r["boot_seg"]))
                c["boot_id"] = c["boot_id"] or r["boot_id"]
            else:
                clusters.append({"lo": r["lo"], "hi": r["hi"], "up_last": r["up_last"], "boot_id": r["boot_id"],
                                 "keys": [(r["file_id"], r["boot_seg"])]})
        for c in clusters:
            half = (c["hi"] - c["lo"]).total_seconds() / 2
            mid = c["lo"] + timedelta(seconds=half)
            rows.extend((*k, mid, "estimated", half) for k in c["keys"])
    return pl.DataFrame(rows, schema={"file_id": pl.Int64, "boot_seg": pl.Int32, "boot": pl.Datetime("us"),
                                      "quality": pl.Utf8, "error_s": pl.Float64}, orient="row")


def date_events(raw: pl.DataFrame, segs: pl.DataFrame, config_boots: dict[str, datetime] | None = None) -> pl.DataFrame:
    """``raw`` (``xid_raw`` rows) with uptime-only lines dated from the host's boot table,
    and ``ts_quality`` / ``ts_error_s``: a line's own clock or its own file's boot is
    ``exact`` (error 0); a boot found in another file or the config is ``exact`` too; an
    unmarked boot's instant is ``estimated``; no time at all is ``unknown``."""
    table = boot_table(segs, config_boots)
    df = raw.join(table, on=["file_id", "boot_seg"], how="left")
    if "ts_source" not in df.columns:  # (gpu_map rows)
        df = df.with_columns(ts_source=pl.when(pl.col("ts").is_not_null()).then(pl.lit("wall")))
    later = pl.col("ts").is_null() & pl.col("uptime_s").is_not_null() & pl.col("boot").is_not_null()
    dated = pl.col("boot") + pl.duration(microseconds=(pl.col("uptime_s") * 1e6).round().cast(pl.Int64))
    return df.with_columns(
        ts=pl.when(later).then(dated).otherwise("ts"),
        ts_source=pl.when(later).then(pl.lit("boot")).otherwise("ts_source"),
        ts_quality=pl.when(pl.col("ts").is_null() & ~later).then(pl.lit("unknown"))
        .when(later).then("quality").otherwise(pl.lit("exact")),
        ts_error_s=pl.when(pl.col("ts").is_null() & ~later).then(None)
        .when(later).then("error_s").otherwise(pl.lit(0.0)),
    ).drop("boot", "quality", "error_s")
