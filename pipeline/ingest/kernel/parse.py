"""Parse kernel logs' candidate lines into events and GPU-map rows, many files at once.

:mod:`pipeline.ingest.kernel.scan` finds the few lines of each file that matter; here the
candidate lines of every file of a batch are one frame (a column ``fi`` names the file), every
regular expression runs once over all of them in polars (Rust), and what depends on the order
of lines within a file (boots, years, an SXid's companion lines, the multi-line "fallen off
the bus" message, a serial following its "GPU at" line) is a window over ``fi`` or a loop over
a handful of rows. A fleet writing one small file per host and day pays the parse once per
batch, not once per file. One file is a batch of one: the same code, the same rows (a
hypothesis property checks it). Nothing here raises on any text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import polars as pl

from pipeline.ingest.kernel import boots, journal, scan
from pipeline.ingest.kernel import formats as fmt
from pipeline.timeutil import local_to_utc_expr
from pipeline.vocab.hosts import host_key
from pipeline.vocab.pci import pci_id, pci_id_parts, pci_id_pl
from pipeline.warehouse import Rejected

RAW_SCHEMA: dict[str, pl.DataType] = {
    "source_file": pl.Utf8, "line_no": pl.Int64, "host": pl.Utf8, "ts": pl.Datetime("us"),
    "ts_source": pl.Utf8, "uptime_s": pl.Float64, "boot_seg": pl.Int32, "pci_bus_id": pl.Utf8,
    "kind": pl.Utf8, "xid": pl.Int32, "pid": pl.Int64, "process": pl.Utf8, "message": pl.Utf8,
    "gpu_instance": pl.Utf8, "fatal": pl.Boolean, "subcode": pl.Utf8, "recovery_action": pl.Utf8,
    "shape": pl.Utf8,
}
MAP_SCHEMA: dict[str, pl.DataType] = {
    "source_file": pl.Utf8, "line_no": pl.Int64, "host": pl.Utf8, "ts": pl.Datetime("us"),
    "uptime_s": pl.Float64, "boot_seg": pl.Int32, "pci_bus_id": pl.Utf8, "uuid": pl.Utf8, "serial": pl.Utf8,
}
_MONTHS = {m: i for m, i in fmt.MONTHS.items()}


@dataclass
class LogText:
    """One kernel log, decompressed, with what its rows record and how its times are read
    (the parameters of :func:`parse_bytes`)."""

    data: bytes
    source_file: str
    host: str
    tz: str = "UTC"
    boot_time: datetime | None = None
    ref_time: datetime | None = None
    boot_check: bool = False
    ref_is_latest: bool = True
    day_window: tuple[datetime, datetime] | None = None


@dataclass
class FileParse:
    """One file's events, GPU map rows and rejects."""

    events: pl.DataFrame
    gpu_map: pl.DataFrame
    rejects: list[Rejected]
    rows_skipped: int
    #: per boot within the file, what dates its uptime-only lines from other files
    #: (:func:`pipeline.ingest.kernel.boots.segments`)
    segments: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=boots.SEGMENT_SCHEMA))

    @property
    def rows_read(self) -> int:
        return self.events.height + len(self.rejects)



def _extract(lines: list[str]) -> pl.DataFrame:
    """Every regular expression over all candidate lines at once."""
    df = pl.DataFrame({"line": lines})
    # (on every line: a line's parse must not depend on the other lines of its batch)
    clean = pl.col("line").str.strip_chars_end("\r\n").str.replace_all(fmt.ANSI_RS, "").str.replace(fmt.JUNK_RS, "")
    df = df.with_columns(line=clean).with_columns(
        p=pl.col("line").str.extract_groups(fmt.PREFIX_RS),
        text=pl.col("line").str.replace(fmt.PREFIX_RS, ""),
    )
    # A program's syslog line ("gpud[12]: saw NVRM: Xid ...") quotes the kernel; it is no event.
    df = df.with_columns(text=pl.when(pl.col("p").struct.field("tag").is_null()).then("text").otherwise(pl.lit("")))
    df = df.with_columns(
        e=pl.col("text").str.extract_groups(fmt.EVENT_RS),
        like=pl.col("text").str.contains(fmt.EVENT_LIKE_RS),
        gpu_at=pl.col("text").str.extract_groups(fmt.GPU_AT_RS),
        serial=pl.col("text").str.extract(fmt.SERIAL_RS, 1),
        fell=pl.col("text").str.extract_groups(fmt.FELL_START_RS),
        fell_end=pl.col("text").str.contains("fallen off the bus", literal=True),
        fell1=pl.col("text").str.extract_groups(fmt.FELL_ONE_RS),
        rm_init=pl.col("text").str.extract_groups(fmt.RM_INIT_RS),
        is_rm_init=pl.col("text").str.contains(fmt.RM_INIT_RS),
        banner=pl.col("text").str.starts_with("Linux version "),
        boot_id=pl.col("line").str.extract(fmt.JOURNAL_BOOT_RS, 1),
        rtc=pl.col("text").str.extract_groups(fmt.RTC_RS),
    )
    rest = pl.col("text").str.replace(fmt.EVENT_HEAD_RS, "").str.strip_chars()
    df = df.with_columns(rest=rest, pn=rest.str.extract_groups(fmt.PID_RS))
    pn = pl.col("pn").struct
    pid_txt = pn.field("pid")
    name = pn.field("name").str.strip_chars()
    msg = pl.when(pid_txt.is_not_null()).then(pn.field("msg").fill_null("")).otherwise(
        pl.col("rest").str.replace(r"^,\s*", "")).str.strip_chars()
    pid = pid_txt.cast(pl.Int64, strict=False)
    return df.select(
        "line", "text", "like", "gpu_at", "serial", "fell", "fell_end", "fell1", "rm_init", "is_rm_init", "banner",
        "boot_id", "rtc", "p",
        kind=pl.col("e").struct.field("kind"),
        xid=pl.col("e").struct.field("code").cast(pl.Int32, strict=False),
        pci_bus_id=pci_id_pl(pl.col("e").struct.field("pci")),
        gpu_instance=pl.col("e").struct.field("inst").str.strip_chars().replace("", None),
        pid=pl.when(pid > 0).then(pid),  # old drivers print pid=0 when no process is known
        process=pl.when(name.is_not_null() & (name != "") & (name.str.strip_chars("'") != "<unknown>")).then(name),
        message=msg,
    ).with_columns(
        fatal=pl.col("message").str.slice(0, 120).str.extract(fmt.FATAL_RS, 1).str.to_lowercase() == "fatal",
        subcode=pl.col("message").str.extract(fmt.SUBCODE_RS, 1),
        recovery_action=pl.col("message").str.extract(fmt.RECOVERY_RS, 1).str.strip_chars(),
    )


#: Clock skew (and a local clock ahead of the UTC mtime) allowed past the file's last write.
_SKEW = timedelta(days=1)


def _last_year(md: tuple, ref: datetime, latest: bool) -> int | None:
    """Year of a file's last year-less line: with ``latest`` the latest year that puts it at
    or before ``ref`` (the file's mtime, plus :data:`_SKEW`); else the year nearest ``ref``."""
    years = [y for y in range(ref.year + 1, ref.year - 8, -1) if fmt.with_year(md, y) is not None]
    if latest:
        return next((y for y in years if fmt.with_year(md, y) <= ref + _SKEW), None)
    return min(years, key=lambda y: abs((fmt.with_year(md, y) - ref).total_seconds())) if years else None


def _by_zone(expr: pl.Expr, zones: list[str]) -> pl.Expr:
    """Naive local datetimes to naive UTC, each row in its file's zone (column ``tz``)."""
    if len(zones) == 1:
        return local_to_utc_expr(expr, zones[0])
    return pl.coalesce([pl.when(pl.col("tz") == z).then(local_to_utc_expr(expr, z)) for z in zones])


def _times(df: pl.DataFrame, items: list[LogText], human: dict[int, dict]) -> pl.DataFrame:
    """Add ``uptime_s``, ``seg`` (boot within the file) and ``wall`` (naive UTC from the line's clock)."""
    p = pl.col("p").struct
    up = pl.coalesce(p.field("up"), p.field("up2")).cast(pl.Float64, strict=False)
    df = df.with_columns(uptime_s=up)
    # A new boot where the uptime goes back, or where journalctl says so (-- Boot <id> --).
    back = (pl.col("uptime_s") + 1e-6 < pl.col("uptime_s").forward_fill().shift(1)).fill_null(False)
    df = df.with_columns(seg=(back | pl.col("boot_id").is_not_null()).cum_sum().cast(pl.Int32).over("fi"))
    mon = pl.coalesce(p.field("bsd_mon"), p.field("hm_mon")).replace_strict(_MONTHS, default=None, return_dtype=pl.Int32)
    day = pl.coalesce(p.field("bsd_day"), p.field("hm_day")).cast(pl.Int32, strict=False)
    hms = pl.coalesce(p.field("bsd_time"), p.field("hm_time") + ":00")
    since = pl.lit(0.0)
    if human:  # dmesg -H: every line's minute anchor and seconds since it, from its whole file
        anchors = [human[fi].get(no, (None, 0.0)) if fi in human else (None, 0.0)
                   for fi, no in df.select("fi", "line_no").iter_rows()]
        is_h = pl.col("fi").is_in(list(human))
        mon = pl.when(is_h).then(pl.Series([a[0][0] if a[0] else None for a in anchors], dtype=pl.Int32)).otherwise(mon)
        day = pl.when(is_h).then(pl.Series([a[0][1] if a[0] else None for a in anchors], dtype=pl.Int32)).otherwise(day)
        hms = pl.when(is_h).then(pl.Series([a[0][2] if a[0] else None for a in anchors], dtype=pl.Utf8)).otherwise(hms)
        since = pl.Series([a[1] for a in anchors], dtype=pl.Float64)
    df = df.with_columns(mon=mon, day=day, hms=hms, since=since)
    # Years: the last dated line takes its year from the reference; a month going back is a new year
    # (lines are in order, so the lines before a January belong to the year before).
    roll = (pl.col("mon") < pl.col("mon").forward_fill().shift(1)).fill_null(False).cum_sum().over("fi")
    dated = df.filter(pl.col("mon").is_not_null() & pl.col("day").is_not_null()).with_columns(roll=roll)
    bases: dict[int, int] = {}
    for fi, mon_, day_, hms_, roll_ in dated.select("fi", "mon", "day", "hms", "roll").group_by("fi").last().iter_rows():
        it = items[fi]
        year = _last_year((mon_, day_, hms_), it.ref_time or datetime.now(), it.ref_is_latest)
        if year is not None:
            bases[fi] = year - roll_
    base = (pl.col("fi").replace_strict(bases, default=None, return_dtype=pl.Int64) if bases
            else pl.lit(None, pl.Int64))
    df = df.with_columns(roll=pl.when(pl.col("mon").is_not_null()).then(roll))
    year_less = pl.concat_str(base + pl.col("roll"), pl.lit("-"), pl.col("mon"),
                              pl.lit("-"), pl.col("day"), pl.lit(" "), pl.col("hms"))
    ctime = pl.concat_str(p.field("ct_year"), pl.lit("-"),
                          p.field("ct_mon").replace_strict(_MONTHS, default=None, return_dtype=pl.Utf8),
                          pl.lit("-"), p.field("ct_day"), pl.lit(" "), p.field("ct_time"))
    iso = (p.field("iso").str.replace(",", ".", literal=True).str.replace(" ", "T", literal=True)
           .str.replace(r"Z$", "+00:00").str.replace(r"([+-][0-9]{2})([0-9]{2})$", "$1:$2"))
    iso = pl.when(p.field("zname").is_in(["UTC", "GMT"]) & ~iso.str.contains(r"[+-][0-9]{2}:[0-9]{2}$")).then(
        iso + "+00:00").otherwise(iso)
    has_zone = iso.str.contains(r"[+-][0-9]{2}:[0-9]{2}$")
    local_txt = pl.coalesce(ctime, pl.when(~has_zone).then(iso.str.replace("T", " ", literal=True)), year_less)
    local = local_txt.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False) + pl.duration(microseconds=(pl.col("since") * 1e6).round().cast(pl.Int64))
    aware = (pl.when(has_zone).then(iso).str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_zone="UTC")
             .dt.replace_time_zone(None))
    unix = (p.field("unix").cast(pl.Float64, strict=False) * 1e6).round().cast(pl.Int64, strict=False)
    aware = pl.coalesce(aware, pl.from_epoch(unix, time_unit="us"))
    df = df.with_columns(local=local, aware=aware)
    zones = sorted(set(df["tz"].to_list()))
    return df.with_columns(wall=pl.coalesce("aware", _by_zone(pl.col("local"), zones))).drop("local", "aware")


def _empty(n_lines: int) -> FileParse:
    return FileParse(pl.DataFrame(schema=RAW_SCHEMA), pl.DataFrame(schema=MAP_SCHEMA), [], n_lines)


def parse_bytes(buf: bytes, *, source_file: str, host: str, tz: str = "UTC", boot_time: datetime | None = None,
                ref_time: datetime | None = None, boot_check: bool = False, ref_is_latest: bool = True,
                day_window: tuple[datetime, datetime] | None = None) -> FileParse:
    """Parse one kernel log held in memory: :func:`parse_texts` of one file.

    Parameters
    ----------
    buf : bytes
        The whole (decompressed) file.
    source_file, host : str
        Recorded on every row; a syslog line naming another host overrides ``host`` (one
        naming the same host in other case or with/without its domain keeps ``host``).
    tz : str
        Zone of local wall-clock stamps (``dmesg -T``, syslog, journalctl short).
    boot_time : datetime, optional
        Naive UTC boot time for uptime-only lines of the last boot in the file when the
        log itself has no boot marker.
    boot_check : bool
        Use ``boot_time`` only for a boot whose last line, so dated, falls within two days
        of ``ref_time``: a host's one configured boot time must not date the other boots'
        dmesg dumps (each saved when the next boot came).
    ref_time : datetime, optional
        When the file was last written (default: now): no line of a log is later, so the
        last year-less line takes the latest year that puts it at or before ``ref_time``
        (one day's tolerance for clock skew); earlier lines count back across each
        December to January.
    ref_is_latest : bool
        False when ``ref_time`` is a date near the lines rather than a bound (a date in the
        file name, which may be its first or its last day): the last line takes the year
        that puts it nearest.
    day_window : (datetime, datetime), optional
        The UTC interval of the local day the file is named for, recorded with its boots
        (:func:`pipeline.ingest.kernel.boots.day_window`) to date them from other files.
    """
    return parse_texts([LogText(buf, source_file, host, tz, boot_time, ref_time, boot_check, ref_is_latest,
                                day_window)])[0]


def parse_texts(items: list[LogText]) -> list[FileParse]:
    """Parse many kernel logs held in memory in one pass: one :class:`FileParse` per item,
    in order, each as :func:`parse_bytes` gives it for that file alone."""
    lines_b: list[bytes] = []
    fis: list[int] = []
    nos: list[int] = []
    n_lines: list[int] = []
    human: dict[int, dict] = {}
    for fi, it in enumerate(items):
        buf = scan.lf_lines(it.data)  # (CR-only and mixed line ends split where an editor splits them)
        buf = journal.decode_array_messages(buf)  # a byte-array MESSAGE holds no literal Xid for the search
        cands, n = scan.candidate_lines(buf)
        n_lines.append(n)
        if cands:
            fis.extend([fi] * len(cands))
            nos.extend(c[0] for c in cands)
            lines_b.extend(c[1] for c in cands)
            if scan.is_human(buf):
                human[fi] = scan.human_times(buf)
    if not lines_b:
        return [_empty(n) for n in n_lines]
    lines = b"\n".join(lines_b).decode("utf-8", errors="replace").split("\n")
    files = pl.DataFrame({"fi": range(len(items)), "host": [it.host for it in items], "tz": [it.tz for it in items],
                          "source_file": [it.source_file for it in items]},
                         schema={"fi": pl.Int32, "host": pl.Utf8, "tz": pl.Utf8, "source_file": pl.Utf8})
    df = _extract(lines).with_columns(fi=pl.Series(fis, dtype=pl.Int32), line_no=pl.Series(nos, dtype=pl.Int64))
    df = df.join(files.select("fi", file_host="host", tz="tz"), on="fi", how="left", maintain_order="left")
    df = _times(df, items, human)
    # The folder names the host unless the line names another machine (the same one written
    # differently, "node-018" in "node-018.cluster.local/", keeps the folder's name).
    named = pl.col("p").struct.field("host")
    names = set(df.select(named.unique().drop_nulls()).to_series().to_list()) | {it.host for it in items}
    keys = {h: host_key(h) for h in names}
    same = named.replace_strict(keys, default=None) == pl.col("file_host").replace_strict(keys, default=None)
    df = df.with_columns(host=pl.when(named.is_null() | same).then(pl.col("file_host")).otherwise(named))
    rejects: dict[int, list[Rejected]] = {}
    for fi, no, line in df.filter(pl.col("xid").is_null() & pl.col("like")).select("fi", "line_no", "line").iter_rows():
        rejects.setdefault(fi, []).append(Rejected(
            no, "bad_xid_line", line[:4000],
            f"{items[fi].source_file}: looks like an Xid/SXid event but its PCI id or code cannot be read"))
    seg_boot = _boots(df, items)
    events = _finish(_events(df), seg_boot, files).select("fi", *RAW_SCHEMA)
    maps = _finish(_maps(df), seg_boot, files).select("fi", *MAP_SCHEMA)
    segs = boots.segments(df, seg_boot, items)
    by_file = [{k: v for (k,), v in t.partition_by("fi", as_dict=True, include_key=False).items()}
               for t in (events, maps, segs)]
    # (most files of a day's rotation have no event: they share one empty frame per table)
    empty = [pl.DataFrame(schema=s) for s in (RAW_SCHEMA, MAP_SCHEMA, boots.SEGMENT_SCHEMA)]
    out = []
    for fi, n in enumerate(n_lines):
        ev, gm, sg = (t.get(fi, e) for t, e in zip(by_file, empty))
        rej = rejects.get(fi, [])
        out.append(FileParse(ev, gm, rej, max(n - ev.height - len(rej), 0), sg))
    return out


def _boots(df: pl.DataFrame, items: list[LogText]) -> dict[tuple[int, int], datetime]:
    """Boot time (naive UTC) per (file, boot within it): from a line with both a clock and an
    uptime, else the RTC line, else (last boot of the file only) the configured one."""
    seg_boot: dict[tuple[int, int], datetime] = {}
    both = (df.filter(pl.col("wall").is_not_null() & pl.col("uptime_s").is_not_null())
            .unique(subset=["fi", "seg"], keep="first", maintain_order=True))
    for fi, seg, wall, up in both.select("fi", "seg", "wall", "uptime_s").iter_rows():
        seg_boot.setdefault((fi, seg), wall - timedelta(seconds=up))
    rtc = df.filter(pl.col("rtc").struct.field("iso").is_not_null() & pl.col("uptime_s").is_not_null())
    for fi, seg, r, up in rtc.select("fi", "seg", "rtc", "uptime_s").iter_rows():
        try:
            at = (datetime.fromtimestamp(int(r["epoch"]), timezone.utc).replace(tzinfo=None) if r["epoch"]
                  else datetime.fromisoformat(r["iso"].replace(" ", "T")))
        except (ValueError, OverflowError, OSError):
            continue
        seg_boot.setdefault((fi, seg), at - timedelta(seconds=up))
    configured = [fi for fi, it in enumerate(items) if it.boot_time is not None]
    if configured:
        last = (df.filter(pl.col("fi").is_in(configured)).group_by("fi")
                .agg(seg=pl.col("seg").max(), top=pl.col("uptime_s").filter(pl.col("seg") == pl.col("seg").max()).max()))
        for fi, seg, top in last.iter_rows():
            it = items[fi]
            if (fi, seg) in seg_boot:
                continue
            end = it.boot_time + timedelta(seconds=float(top or 0.0))
            ref = it.ref_time if it.boot_check else None
            if ref is None or ref - timedelta(days=2) <= end <= ref + timedelta(days=2):
                seg_boot[(fi, seg)] = it.boot_time
    return seg_boot


def _events(df: pl.DataFrame) -> pl.DataFrame:
    """Event rows: Xid/SXid lines (an SXid's Severity/Data lines folded into the first) and
    the codeless fallen-off-the-bus message as an Xid 79."""
    ev = df.filter(pl.col("xid").is_not_null())
    same_as_prev = ((pl.col("kind") == "SXid") & pl.col("message").str.contains(r"^(Severity|Data)\b")
                    & (pl.col("fi").shift(1) == pl.col("fi"))
                    & (pl.col("kind").shift(1) == "SXid") & (pl.col("xid").shift(1) == pl.col("xid"))
                    & (pl.col("pci_bus_id").shift(1) == pl.col("pci_bus_id"))
                    & (pl.col("line_no") - pl.col("line_no").shift(1) <= 4)).fill_null(False)
    ev = ev.filter(~same_as_prev).with_columns(shape=pl.lit("line"))
    fell_rows = []
    is_start = pl.col("fell").struct.field("dom").is_not_null()
    # an Xid 79 line says "fallen off the bus" too: look at those only when a message starts somewhere
    starts = df.filter(is_start | pl.col("fell_end")) if df.select(is_start.any()).item() else df.clear()
    pending = None
    for r in starts.iter_rows(named=True):
        if pending is not None and pending["fi"] != r["fi"]:
            pending = None  # a message never spans two files
        if r["fell"]["dom"] is not None:
            pending = r
        if r["fell_end"] and pending is not None and r["line_no"] - pending["line_no"] <= 4:
            f = pending["fell"]
            fell_rows.append({**pending, "kind": "Xid", "xid": 79,
                              "pci_bus_id": pci_id_parts(f["dom"], f["bus"], f["dev"], f["fn"]),
                              "pid": None, "process": None, "message": fmt.FELL_TEXT, "gpu_instance": None,
                              "fatal": None, "subcode": None, "recovery_action": None, "shape": "fallen_off_bus"})
            pending = None
    none = {"pid": None, "process": None, "gpu_instance": None, "fatal": None, "subcode": None, "recovery_action": None}
    one = df.filter(pl.col("fell1").struct.field("dom").is_not_null() & pl.col("xid").is_null())
    for r in one.iter_rows(named=True):
        f = r["fell1"]
        fell_rows.append({**r, **none, "kind": "Xid", "xid": 79, "message": fmt.FELL_TEXT, "shape": "fallen_off_bus",
                          "pci_bus_id": pci_id_parts(f["dom"], f["bus"], f["dev"], f["fn"])})
    fell_rows += _rm_init_rows(df.filter(pl.col("is_rm_init") & pl.col("xid").is_null()), none)
    if fell_rows:
        extra = pl.DataFrame(fell_rows, schema=ev.schema)
        ev = pl.concat([ev, extra]).sort("fi", "line_no", maintain_order=True)
    return ev


#: RmInitAdapter retries of one GPU within this many seconds are one failure to come up.
RM_INIT_BURST_S = 60.0


def _rm_init_rows(rows: pl.DataFrame, none: dict) -> list[dict]:
    """The driver failing to initialize a GPU, as events of kind ``RmInitAdapter`` (code 0):
    the driver retries several times a second at boot; a GPU's retries within
    :data:`RM_INIT_BURST_S` are one event. A line naming no GPU keeps a null PCI id."""
    out: list[dict] = []
    last: dict[tuple[int, str | None], tuple] = {}
    for r in rows.iter_rows(named=True):
        g = r["rm_init"]
        pci = pci_id_parts(g["dom"], g["bus"], g["dev"], g["fn"]) if g["dom"] else None
        at = (r["seg"], r["uptime_s"]) if r["uptime_s"] is not None else (None, r["wall"])
        prev = last.get((r["fi"], pci))
        if prev is not None and prev[0] == at[0] and at[1] is not None and prev[1] is not None:
            gap = at[1] - prev[1]
            gap = gap.total_seconds() if hasattr(gap, "total_seconds") else gap
            if 0 <= gap <= RM_INIT_BURST_S:
                continue  # a retry of the same failure (the burst is timed from its first line)
        last[(r["fi"], pci)] = at
        msg = f"{fmt.RM_INIT_TEXT}! {g['code']}" if g["code"] else f"{fmt.RM_INIT_TEXT}!"
        out.append({**r, **none, "kind": "RmInitAdapter", "xid": 0, "message": msg, "shape": "rm_init",
                    "pci_bus_id": pci})
    return out


def _maps(df: pl.DataFrame) -> pl.DataFrame:
    """GPU-map rows: each ``GPU at`` line with the serial printed within 4 lines after it."""
    rows = df.filter(pl.col("gpu_at").struct.field("uuid").is_not_null() | pl.col("serial").is_not_null())
    out, last = [], None
    for r in rows.iter_rows(named=True):
        g = r["gpu_at"]
        if g["uuid"] is not None:
            last = {**r, "pci_bus_id": pci_id(g["pci"]), "uuid": g["uuid"], "serial": None}
            out.append(last)
        elif (last is not None and last["fi"] == r["fi"] and r["line_no"] - last["line_no"] <= 4
              and last["serial"] is None):
            last["serial"] = r["serial"].strip() or None
    schema = {**{k: v for k, v in df.schema.items() if k not in ("serial",)}, "pci_bus_id": pl.Utf8, "uuid": pl.Utf8, "serial": pl.Utf8}
    return pl.DataFrame(out, schema=schema) if out else pl.DataFrame(schema=schema)


def _finish(df: pl.DataFrame, seg_boot: dict[tuple[int, int], datetime], files: pl.DataFrame) -> pl.DataFrame:
    """Settle ``ts`` (the line's clock, else boot time + uptime) and the bookkeeping columns."""
    boots_ = pl.DataFrame({"fi": [k[0] for k in seg_boot], "seg": [k[1] for k in seg_boot],
                           "boot": list(seg_boot.values())},
                          schema={"fi": pl.Int32, "seg": pl.Int32, "boot": pl.Datetime("us")})
    df = (df.join(boots_, on=["fi", "seg"], how="left", maintain_order="left")
          .join(files.select("fi", "source_file"), on="fi", how="left", maintain_order="left"))
    from_boot = pl.col("boot") + pl.duration(microseconds=(pl.col("uptime_s") * 1e6).round().cast(pl.Int64))
    return df.with_columns(
        ts=pl.coalesce("wall", from_boot),
        ts_source=pl.when(pl.col("wall").is_not_null()).then(pl.lit("wall"))
        .when(from_boot.is_not_null()).then(pl.lit("boot")),
        boot_seg=pl.col("seg"),
    )
