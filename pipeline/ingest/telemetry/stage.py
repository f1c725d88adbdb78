"""Ingest nvidia-smi ``--query-gpu ... --format=csv`` logs: clean samples and GPU facts.

Reads: ``DATA/telemetry/<host>/*.csv[.gz]`` and the ``inventory`` table (a host's site, so
its time zone; serials for GPUs whose telemetry lacks one). Writes: ``smi_hourly`` (per
file, GPU and UTC hour), ``smi_headers`` (the field list each file ends with), the
quarantine (every line that cannot be read, with file, line and reason), and
nothing else: ``gpu_days`` is derived from ``smi_hourly`` by :func:`derive_gpu_days`,
which the nightly job runs after this stage.

Telemetry is the bulk of the data. Fleets mostly write it as many small files (one per host
and day), whose cost is per statement and per file: :meth:`Warehouse.ingest_batch` takes
up to :data:`INGEST_FILES` files of any hosts (one transaction, registry look-up and insert
per table for the lot, a registry row per file), and within them ONE DuckDB ``read_csv``
reads all files that share a layout, whatever their hosts, the file name a column; each
file's host and time zone are columns joined from a small per-file table
(:mod:`pipeline.ingest.telemetry.batch`). One scratch engine serves the whole stage.
Only files the fast path gives back are read line by line
(:mod:`pipeline.ingest.telemetry.read`); both clean cells with the SQL generated from one
table of cell meanings (:mod:`pipeline.ingest.telemetry.fields`).
``parse_smi_files`` gives the contract's clean per-sample table for ``fleetfault parse smi``.
"""

from __future__ import annotations

import concurrent.futures
import fnmatch
import functools
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.engine.base import Engine
from pipeline.ingest.telemetry import batch, facts, header_plan
from pipeline.ingest.telemetry.batch import (
    cell,
    finish_hourly,
    headers_frame,
    probe,
)
from pipeline.ingest.telemetry.fields import (
    Field,
    clean_sql,
    fixed_dtype,
    header_fields,
    marker_sql,
    parse_fields,
)
from pipeline.ingest.telemetry.read import (
    ExactRead,
    Segment,
    first_line,
    read_exact,
    read_unheaded,
    scratch,
    stage_scratch,
)
from pipeline.timeutil import local_to_utc_expr
from pipeline.vocab.hosts import host_key, host_key_sql
from pipeline.vocab.sql import ident, literal, literals
from pipeline.warehouse import FileResult, Loaded, Rejected

log = logging.getLogger(__name__)

STAGE = "smi"
IDENTITY_COLUMNS = ["ts", "host", "gpu_index", "name", "serial", "uuid", "pci_bus_id"]
_ROTATED = re.compile(r"^(?P<base>.*?)(?:\.(?P<n>\d+))?(?:\.gz)?$")


# -- the clean per-sample table (fleetfault parse smi) ---------------------------------

def parse_smi_files(
    paths: Iterable[str | Path],
    *,
    host: str | None = None,
    tz: str = "UTC",
    fields: Sequence[str] | str | None = None,
) -> tuple[pl.DataFrame, list[Rejected]]:
    """nvidia-smi CSV logs to one clean table, and the lines that could not be read.

    Parameters
    ----------
    paths
        Log files (plain or gzip), in rotation order (oldest first); a file that starts
        without a header takes the same host's nearest header that fits its lines, before
        it, else after it (:mod:`pipeline.ingest.telemetry.header_plan`).
    host
        Host of every sample; default: each file's folder name. A ``hostname`` field in
        the line wins over both.
    tz
        Zone of the timestamps (IANA name); they are returned as naive UTC.
    fields
        Query field names for headerless (``noheader``) files, e.g.
        ``"timestamp,index,temperature.gpu"``.

    Returns
    -------
    (frame, rejects)
        ``frame`` has ``ts, host, gpu_index, name, serial, uuid, pci_bus_id`` and then one
        column per other field (``memory.used [MiB]`` -> ``memory_used``, numbers in
        nvidia-smi's default units, Yes/No/Enabled/Disabled/Active/Not Active as 1/0,
        markers as null). Each rejected line's ``detail`` starts with its file.
        Without a field that tells GPUs apart (the minimal query ``timestamp,name,...``),
        ``gpu_index`` is the line's place in its sampling round, as in the hourly facts
        (:func:`pipeline.ingest.telemetry.facts.round_index_sql`).

    Examples
    --------
    >>> df, bad = parse_smi_files(["gpu0.csv"], host="h1", tz="Asia/Shanghai")  # doctest: +SKIP
    """
    configured = parse_fields(fields) if fields else None
    paths = [Path(p) for p in paths]
    hosts = [host or p.resolve().parent.name for p in paths]
    groups, per_file, starts = _read_in_order(paths, hosts, configured, {})
    planned = _cli_plan(paths, hosts, per_file, configured)
    if any(planned[k] != starts[k] for k in planned):  # a header after a file, or a nearer fitting one
        groups, per_file, _ = _read_in_order(paths, hosts, configured, planned)
    frames: list[pl.DataFrame] = []
    bad_by_seq: dict[int, list[Rejected]] = {}
    with scratch() as con:
        for (flds, h), parts in groups.items():
            seg = Segment(list(flds), pl.concat(parts))
            df, bad = clean_segment(con, seg, h, tz)
            frames.append(df)
            for r in bad:
                bad_by_seq.setdefault(r.seq, []).append(r.rejected)
    rejects: list[Rejected] = []
    for seq, (p, out) in enumerate(per_file):
        mine = sorted(out.rejects + bad_by_seq.get(seq, []), key=lambda r: r.line_no or 0)
        rejects.extend(Rejected(r.line_no, r.reason, r.raw, f"{p}: {r.detail}") for r in mine)
    frames = [f for f in frames if f.width]
    if not frames:
        empty = {"ts": pl.Datetime("us"), "host": pl.Utf8, "gpu_index": pl.Int32, "name": pl.Utf8,
                 "serial": pl.Utf8, "uuid": pl.Utf8, "pci_bus_id": pl.Utf8}
        return pl.DataFrame(schema=empty), rejects
    df = pl.concat(frames, how="diagonal_relaxed").sort("_seq", "_line_no", maintain_order=True)
    return df.drop("_seq", "_line_no"), rejects


def _read_in_order(paths: list[Path], hosts: list[str], configured, planned: dict[int, list[Field] | None]):
    """Each file's segments read line by line, a file continuing its predecessor's field
    list unless ``planned`` names its start. Segments with the same fields (and host) are
    grouped, to be cleaned together: one SQL step each."""
    groups: dict[tuple, list[pl.DataFrame]] = {}
    per_file: list[tuple[Path, ExactRead]] = []
    starts: list[list[Field] | None] = []
    current = configured
    for seq, (p, h) in enumerate(zip(paths, hosts)):
        current = planned.get(seq, current)
        starts.append(current)
        out = ExactRead()
        for seg in read_exact(p, current, out):
            groups.setdefault((tuple(seg.fields), h), []).append(seg.frame.with_columns(_seq=pl.lit(seq)))
        current = out.last_fields
        per_file.append((p, out))
    return groups, per_file, starts


def _cli_plan(paths: list[Path], hosts: list[str], per_file, configured) -> dict[int, list[Field] | None]:
    """The header plan (:func:`header_plan.plan_starts`) of the files that start without a
    header, host by host in the order given; empty when every file starts with one."""
    firsts = [header_fields(first_line(p)) for p in paths]
    if all(firsts):
        return {}
    out: dict[int, list[Field] | None] = {}
    for h in dict.fromkeys(hosts):
        idx = [k for k, hh in enumerate(hosts) if hh == h]
        files = []
        for k in idx:
            own_first = firsts[k] or header_plan.scan(paths[k]).own_first
            files.append(header_plan.HostFile(str(paths[k]), firsts[k] is not None, own_first,
                                              per_file[k][1].last_fields if own_first else None,
                                              [] if firsts[k] else functools.partial(header_plan.head_sample, paths[k])))
        for k, st in zip(idx, header_plan.plan_starts(files, configured)):
            if firsts[k] is None:
                out[k] = st.fields
    return out


def _reject_reason(field_name: str) -> str:
    return {"timestamp": "bad_timestamp", "index": "bad_index"}.get(field_name, "bad_value")


def _bad_rows(con: Engine, seg_fields: list[Field]) -> list[Rejected]:
    rows = con.rows(facts.reject_rows_sql(seg_fields, "seg", facts_only=True), step="smi: unreadable values")
    return [Rejected(ln, _reject_reason(f), line, f"unreadable {f}") for ln, line, f in rows]


@dataclass
class _SeqRejected:
    seq: int
    rejected: Rejected


def clean_segment(con: Engine, seg, host: str, tz: str) -> tuple[pl.DataFrame, list[_SeqRejected]]:
    """Clean one segment's raw columns (DuckDB SQL); returns the frame and its bad rows.

    The segment's frame carries ``_seq`` (the file's position); so do the results.
    """
    fields = seg.fields
    con.register("seg", seg.frame)
    try:
        bad_rows = con.rows(
            f"SELECT _seq, line_no, line, bad_field FROM ({facts.reject_rows_sql(fields, 'seg', extra='_seq, ')})",
            step="smi: unreadable values")
        rejects = [_SeqRejected(q, Rejected(ln, _reject_reason(f), line, f"unreadable {f}")) for q, ln, line, f in bad_rows]
        auto = [i for i, f in enumerate(fields) if f.kind == "auto"]
        numeric: set[int] = set()
        if auto and seg.frame.height:
            checks = ", ".join(
                f"bool_and({marker_sql(f'c{i}')} OR {clean_sql(fields[i], f'c{i}', as_kind='num')} IS NOT NULL)"
                for i in auto
            )
            row = con.rows(f"SELECT {checks} FROM seg", step="smi: numeric columns")[0]
            numeric = {i for i, ok in zip(auto, row) if ok}
        by_name = {f.name: i for i, f in enumerate(fields)}
        # No field tells GPUs apart (the minimal query): each line's place in its sampling
        # round is its index, as in the hourly facts; numbered per file, before bad lines go.
        by_round = facts.needs_round_index(fields)
        sel = {}
        for col, src in (("ts", "timestamp"), ("gpu_index", "index"), ("name", "name"),
                         ("serial", "serial"), ("uuid", "uuid"), ("pci_bus_id", "pci.bus_id")):
            if src in by_name:
                i = by_name[src]
                sel[col] = clean_sql(fields[i], f"c{i}")
            elif col == "gpu_index" and by_round:
                sel[col] = "TRY_CAST(_round_idx AS INTEGER)"
            else:
                sel[col] = {"ts": "NULL::TIMESTAMP", "gpu_index": "NULL::INTEGER"}.get(col, "NULL::VARCHAR")
        host_sql = literal(host)
        if "hostname" in by_name:
            i = by_name["hostname"]
            host_sql = f"coalesce({clean_sql(fields[i], f'c{i}')}, {host_sql})"
        sel["host"] = host_sql
        taken = set(IDENTITY_COLUMNS)
        dtypes: dict[str, str | None] = {}
        for i, f in enumerate(fields):
            if f.column in IDENTITY_COLUMNS or f.name == "hostname":
                continue
            col = f.column
            k = 2
            while col in taken:
                col, k = f"{f.column}_{k}", k + 1
            taken.add(col)
            dtypes[col] = fixed_dtype(f.name) if f.kind in ("num", "mask") or i in numeric else None
            kind = ("num" if i in numeric else "text") if f.kind == "auto" else None
            sel[col] = clean_sql(f, f"c{i}", as_kind=kind)
        src = facts.round_index_sql(fields, "seg", by="_seq") if by_round else "seg"
        if rejects:
            con.register("bad_lines", pl.DataFrame({"_seq": [r.seq for r in rejects],
                                                    "line_no": [r.rejected.line_no for r in rejects]}))
            src = f"(SELECT * FROM {src} ANTI JOIN bad_lines USING (_seq, line_no))"
        cols = ", ".join(f"{e} AS {ident(c)}" for c, e in sel.items())
        df = con.pl(f"SELECT {cols}, _seq, line_no AS _line_no FROM {src}", step="smi: clean samples")
    finally:
        con.unregister("seg")
    order = IDENTITY_COLUMNS + [c for c in df.columns if c not in IDENTITY_COLUMNS and not c.startswith("_")] + ["_seq", "_line_no"]
    df = df.select(order).with_columns(
        local_to_utc_expr(pl.col("ts").cast(pl.Datetime("us")), tz).alias("ts"),
        pl.col("serial").str.to_uppercase(),
    )
    return _integral_to_int(df, dtypes), rejects


def _integral_to_int(df: pl.DataFrame, dtypes: dict[str, str | None] | None = None) -> pl.DataFrame:
    """Numeric columns take their field's fixed type (:func:`fixed_dtype`): Int64 or
    Float64 whatever the data, all-null included. Other float columns holding only whole
    numbers (counts, 1/0 flags) become integers. An ``int`` field with a fractional value
    (never seen from nvidia-smi) stays Float64 rather than lose it."""
    dtypes = dtypes or {}
    fixed_float = [c for c, t in dtypes.items() if t == "float" and c in df.columns]
    df = df.with_columns(pl.col(c).cast(pl.Float64) for c in fixed_float)
    floats = [c for c, t in df.schema.items() if t == pl.Float64 and dtypes.get(c) != "float"]
    if not floats:
        return df
    whole = df.select(
        (((pl.col(c) % 1) == 0) & (pl.col(c).abs() < 2**53)).all()
        .and_(pl.col(c).is_not_null().any() | pl.lit(dtypes.get(c) == "int")).alias(c)
        for c in floats
    ).row(0) if df.height else [dtypes.get(c) == "int" for c in floats]
    return df.with_columns(pl.col(c).cast(pl.Int64) for c, ok in zip(floats, whole) if ok)


# -- hourly facts of one file (the stage's loader) --------------------------------------

def load_file(path: Path, file_id: int, *, host: str, tz: str, fields: list[Field] | None,
              fast: bool = True) -> tuple[Loaded, list[Field] | None]:
    """Hourly facts of one telemetry file, for :meth:`Warehouse.ingest_file`.

    ``fields`` is the field list in force before the file's first line (the host's last
    header, or the configured list). Returns the :class:`Loaded` and the field list in
    force at the end of the file. ``fast=False``: straight to the line-by-line path (the
    fast path already gave the file back).
    """
    lay, hf = probe(path, fields)
    with scratch() as con:
        got = batch.fast_batch(con, [batch.Item(path, file_id, host, tz)], lay)[0] if fast and lay is not None else None
        if got is not None:
            (loaded, frame), last = got, list(lay.fields)
        else:
            loaded, frame, last = _line_by_line(con, path, file_id, host=host, tz=tz, fields=fields)
    loaded.tables = {"smi_hourly": frame, "smi_headers": headers_frame(file_id, host, last, hf or fields)}
    return loaded, last


def _line_by_line(con: Engine, path: Path, file_id: int, *, host: str, tz: str, fields: list[Field] | None):
    """The exact path, for a file the fast path gave back: every line numbered and judged
    (blank, header, wrong cell count, unreadable value: :func:`_bad_rows`), the rest
    aggregated by the same SQL as the fast path, one row per GPU and hour as there
    (:func:`~pipeline.ingest.telemetry.facts.combine_hourly_sql`). Returns (Loaded, smi_hourly rows, the
    field list in force at the end)."""
    quick = read_unheaded(path) if fields is None else None  # nothing to aggregate: no field list
    out = quick or ExactRead()
    parts = []
    for seg in [] if quick else read_exact(path, fields, out):
        if "timestamp" not in [f.name for f in seg.fields]:
            out.rejects.extend(
                Rejected(ln, "no_timestamp", line, "the field list has no timestamp")
                for ln, line in seg.frame.select("line_no", "line").iter_rows()
            )
            continue
        con.register("seg", seg.frame)
        bad = _bad_rows(con, seg.fields)
        out.rejects.extend(bad)
        seg_src = "seg"
        if facts.needs_round_index(seg.fields):  # numbered before bad lines go
            seg_src = facts.round_index_sql(seg.fields, "seg")
        good_rows = seg_src
        if bad:
            con.register("bad_lines", pl.DataFrame({"line_no": [r.line_no for r in bad]}))
            good_rows = f"(SELECT * FROM {seg_src} ANTI JOIN bad_lines USING (line_no))"
        parts.append(con.pl(facts.hourly_sql(seg.fields, good_rows, combinable=True),
                            step="smi: hourly facts, line by line"))
        con.unregister("seg")
    hourly = pl.concat(parts, how="diagonal_relaxed") if parts else None
    good = sum(int(p["samples"].sum()) for p in parts)
    loaded = Loaded(rows_read=out.rows_read, rows_loaded=good, rows_skipped=out.rows_skipped, rejects=out.rejects)
    if hourly is None or hourly.is_empty():
        frame = finish_hourly(con, None, host, tz)
    else:
        con.register("exact_agg", hourly)
        # Each stretch (between header lines, within a block) was aggregated on its own: an
        # hour split over two is one row again, the row the fast path gives.
        agg = facts.combine_hourly_sql("exact_agg") if len(parts) > 1 else "exact_agg"
        frame = finish_hourly(con, f"(SELECT *, {literal(int(file_id))}::BIGINT AS file_id FROM {agg})", host, tz)
    return loaded, frame, out.last_fields


# -- the stage ---------------------------------------------------------------------------

def rotation_order(paths: Iterable[Path]) -> list[Path]:
    """Oldest first: ``gpu.csv.2.gz, gpu.csv.1, gpu.csv`` (logrotate numbering), else by name."""
    def key(p: Path):
        m = _ROTATED.match(p.name)
        base, n = m.group("base"), m.group("n")
        return (base, 0 if n is not None else 1, -int(n) if n is not None else 0, p.name)
    return sorted(paths, key=key)


def telemetry_files(host_dir: Path) -> list[Path]:
    files = [p for p in host_dir.iterdir() if p.is_file() and re.search(r"\.csv(\.\d+)?(\.gz)?$", p.name)]
    return rotation_order(files)


def configured_fields(cfg, host: str) -> list[Field] | None:
    """The field list for a host's headerless files from the config, if any."""
    for pattern, names in cfg.telemetry.host_fields.items():
        if fnmatch.fnmatch(host, pattern):
            return parse_fields(names)
    return parse_fields(cfg.telemetry.fields) if cfg.telemetry.fields else None


def run(ctx) -> None:
    """Stage: load new or changed telemetry files (``gpu_days`` is derived afterwards, by
    :func:`~pipeline.ingest.telemetry.gpu_days.derive_gpu_days`)."""
    root = ctx.data_dir / "telemetry"
    if not root.is_dir():
        ctx.note(STAGE, f"no {root}: no telemetry")
        return
    wh = ctx.wh
    # A host's site (so its zone) by host_key: folder 'dgx-a-12' finds inventory 'DGX-A-12'.
    sites = dict(wh.engine.rows(f"SELECT {host_key_sql('host')}, any_value(site) FROM inventory "
                                "WHERE host IS NOT NULL GROUP BY 1", step="smi: sites of hosts"))
    plan: list[tuple[Path, str, Path | None]] = []  # (file, host, previous file of the host)
    keys: dict[Path, str] = {}
    for host_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        prev = None
        # A file's registry key resolves its path (a system call per part of it): the
        # host's folder is resolved once, a file only when it is itself a link.
        base = Path(ctx.file_key(host_dir))
        for path in telemetry_files(host_dir):
            plan.append((path, host_dir.name, prev))
            keys[path] = ctx.file_key(path) if path.is_symlink() else str(base / path.name)
            prev = path
    state: dict[Path, list[Field] | None] = {}
    key_of = keys.__getitem__
    configured = functools.cache(functools.partial(configured_fields, ctx.cfg))  # (once a host)

    def before(host: str, prev: Path | None) -> list[Field] | None:
        if prev is not None:
            if prev in state:
                return state[prev] or configured(host)
            reg = wh.registered(STAGE, key_of(prev))
            if reg:
                rows = wh.engine.rows(f"SELECT last_fields FROM smi_headers WHERE file_id = {literal(reg['file_id'])}",
                                      step="smi: a file's last header")
                if rows and rows[0][0]:
                    return header_fields(rows[0][0])
        return configured(host)

    info = {path: (host, prev) for path, host, prev in plan}
    # The header plan's choice for files that start without a header (filled by
    # _settle_headers; until then a file continues its predecessor's field list).
    planned: dict[Path, list[Field] | None] = {}

    def start_of(path: Path, fields: list[Field] | None) -> list[Field] | None:
        return planned[path] if path in planned else fields

    samples_root = None
    if ctx.cfg.telemetry.keep_samples:
        base = Path(wh.path).parent if wh.path != ":memory:" else ctx.out_dir
        samples_root = ctx.cfg.resolve(ctx.cfg.telemetry.samples_dir, base=base)

    def loader(path: Path, file_id: int) -> Loaded:
        host, prev = info[path]
        tz = ctx.cfg.site_tz(sites.get(host_key(host)))
        fields = start_of(path, before(host, prev))
        loaded, last = load_file(path, file_id, host=host, tz=tz, fields=fields)
        state[path] = last
        if samples_root is not None:
            keep_samples(path, samples_root, host=host, tz=tz, fields=fields)
        return loaded

    def ingest(entries, reload: bool = False) -> dict[Path, FileResult]:
        paths = [path for path, _, _ in entries]
        if samples_root is not None:  # clean samples are written file by file
            return dict(zip(paths, ctx.load_files(STAGE, paths, loader, reload=set(paths) if reload else ())))
        return _ingest_batched(ctx, entries, sites, before, state, reload=reload, start_of=start_of, key_of=key_of,
                               configured=configured, firsts=firsts, head_samples=head_samples)

    # The header of each file's first line, as the loader found it (None: data first), and
    # the first data lines of those that start with data, where the loader's peek read them.
    firsts: dict[Path, list[Field] | None] = {}
    head_samples: dict[Path, list[str]] = {}
    with stage_scratch():
        results = ingest(plan)
        results.update(_settle_headers(ctx, plan, planned, ingest, results, key_of, configured, firsts, head_samples))
    ctx.tally(STAGE, results.values())  # a reloaded file counts once, with its last result


def _settle_headers(ctx, plan, planned: dict, ingest, results: dict[Path, FileResult], key_of,
                    configured, firsts: dict | None = None, head_samples: dict | None = None) -> dict[Path, FileResult]:
    """Read every file that starts without a header with the header
    :func:`~pipeline.ingest.telemetry.header_plan.plan_starts` picks for it from all the host's files
    present now, and record the pick (``smi_headers.header_from``).

    A file loaded with another field list than the plan's (its header arrived in a later
    run, or nearer one did; it was read as ``no_header``) is loaded again although
    unchanged, replacing its old rows, and ``smi_headers.reloaded_because`` says why. The
    plan depends on the headers written in the files only, never on the start it replaces,
    so one round settles it: a host none of whose files changed, each read with a
    header, is not looked at again. Returns the reloaded files' results."""
    wh = ctx.wh
    reg = {path: row for path, *row in wh.engine.rows(
        "SELECT f.path, f.file_id, h.start_fields, h.last_fields, h.own_first, h.header_from, f.rows_skipped "
        f"FROM files f LEFT JOIN smi_headers h USING (file_id) WHERE f.stage = {literal(STAGE)}",
        step="smi: recorded headers")}
    by_host: dict[str, list[tuple[Path, Path | None]]] = {}
    for path, host, prev in plan:
        by_host.setdefault(host, []).append((path, prev))
    todo: list[tuple[Path, str, Path | None]] = []
    why: dict[int, str] = {}
    record: list[tuple[int, str | None, str]] = []  # (file_id, header_from, own_first)
    for host, entries in by_host.items():
        keys = [key_of(p) for p, _ in entries]
        if any(k not in reg for k in keys):
            continue  # a file the registry lacks was not loaded: nothing to settle against
        if all(results[p].status == "unchanged" and reg[k][4] is not None for (p, _), k in zip(entries, keys)):
            continue  # the plan is a function of the files' headers: unchanged files, unchanged plan
        files = []
        for (path, _), key in zip(entries, keys):
            file_id, start, last, own, src, skipped = reg[key]
            first = (header_plan.from_cells(own) if src == key and own
                     else firsts[path] if firsts and path in firsts else header_fields(first_line(path)))
            if first is not None:
                own_first = first
            elif own is not None:  # '' : looked for before, none
                own_first = header_plan.from_cells(own)
            elif skipped == 0:  # the loader skipped no line: no header line in it
                own_first = None
            else:
                own_first = header_plan.scan(path).own_first
            files.append(header_plan.HostFile(key, first is not None, own_first,
                                              header_plan.from_cells(last) if own_first else None,
                                              [] if first is not None else
                                              head_samples[path] if head_samples and path in head_samples else
                                              functools.partial(header_plan.head_sample, path)))
        starts = header_plan.plan_starts(files, configured(host))
        for (path, prev), key, f, st in zip(entries, keys, files, starts):
            file_id, start = reg[key][:2]
            record.append((file_id, st.source, header_plan.cells_text(f.own_first) or ""))
            if f.starts_with_header:
                continue
            planned[path] = st.fields
            if start != st.text:
                todo.append((path, host, prev))
                why[key] = (f"read with the header of {st.source}" if st.source not in (None, "config")
                            else "read with telemetry.fields" if st.source == "config" else "no header fits it") + \
                    (f" (was {'no header' if start is None else 'another field list'})")
    out = ingest(todo, reload=True) if todo else {}
    if todo:
        ctx.note(STAGE, f"{len(todo)} headerless files read again: the host's header they are read with changed")
    if record:
        ids = {k: reg[k][0] for k in reg}
        fresh = dict(wh.engine.rows(f"SELECT path, file_id FROM files WHERE stage = {literal(STAGE)} "
                                    f"AND path IN ({literals(why)})", step="smi: reloaded file ids")) if why else {}
        old_to_new = {ids[k]: fid for k, fid in fresh.items()}
        because = {old_to_new[ids[k]]: w for k, w in why.items() if ids[k] in old_to_new}
        frame = pl.DataFrame(
            {"file_id": [old_to_new.get(fid, fid) for fid, _, _ in record], "header_from": [s for _, s, _ in record],
             "own_first": [o for _, _, o in record],
             "reloaded_because": [because.get(old_to_new.get(fid, fid)) for fid, _, _ in record]},
            schema={"file_id": pl.Int64, "header_from": pl.Utf8, "own_first": pl.Utf8, "reloaded_because": pl.Utf8})
        wh.engine.register("_smi_header_plan", frame)
        try:
            wh.engine.execute("UPDATE smi_headers SET header_from = p.header_from, own_first = p.own_first, "
                   "reloaded_because = coalesce(p.reloaded_because, smi_headers.reloaded_because) "
                   "FROM _smi_header_plan p WHERE smi_headers.file_id = p.file_id", step="smi: record header plan")
        finally:
            wh.engine.unregister("_smi_header_plan")
    return out


#: Files per :meth:`Warehouse.ingest_batch` call (one transaction, one registry look-up,
#: one insert per table), across hosts: the per-call costs are paid per chunk, not per host.
INGEST_FILES = 2000


def _ingest_batched(ctx, plan, sites, before, state, *, reload: bool = False, start_of=None,
                    key_of=None, configured=None, firsts=None, head_samples=None) -> dict[Path, FileResult]:
    """Load the plan's files through :meth:`Warehouse.ingest_batch`, :data:`INGEST_FILES`
    at a time (one transaction each); within a chunk, the files of all hosts that share a
    layout are read by one DuckDB statement (:func:`~pipeline.ingest.telemetry.batch.load_runs`).
    Returns each file's result (``reload``: even the unchanged ones are loaded again)."""
    info = {path: (host, prev) for path, host, prev in plan}
    peeks: dict[Path, batch.Peek | None] = {}  # the chunk's files, peeked ahead

    def single(path: Path, file_id: int, fields, run: batch.Run):
        loaded, last = load_file(path, file_id, host=run.host, tz=run.tz, fields=fields, fast=False)
        return loaded, last or (configured or functools.partial(configured_fields, ctx.cfg))(run.host)

    def loader(items: list[tuple[Path, int]]) -> list[Loaded]:
        # Unchanged files are not handed over: a run of a host's consecutive files starts
        # from the field list its predecessor ended with (loaded now, or in the registry).
        runs: list[batch.Run] = []
        for path, fid in items:
            if runs and info[path][1] == runs[-1].items[-1][0]:
                runs[-1].items.append((path, fid))
                continue
            host, prev = info[path]
            runs.append(batch.Run(host, ctx.cfg.site_tz(sites.get(host_key(host))), before(host, prev), [(path, fid)]))
        out: list[Loaded] = []
        for run, results in zip(runs, batch.load_runs(runs, single=single, start_of=start_of, firsts=firsts,
                                                      peeks=peeks, head_samples=head_samples)):
            for (path, _), (loaded, last) in zip(run.items, results):
                state[path] = last
                out.append(loaded)
        return out

    chunks = [plan[i:i + INGEST_FILES] for i in range(0, len(plan), INGEST_FILES)]
    results: dict[Path, FileResult] = {}
    key_of = key_of or ctx.file_key
    # The next chunk's files are peeked (batch.peek: their heads read and judged, Python)
    # in a thread while DuckDB, which lets go of the GIL, reads this chunk's: on 2 cores
    # the Python no longer leaves one idle. Only files the registry lacks: they will be
    # loaded (a known file is loaded only when changed, which a rerun mostly finds not).
    known = {k for (k,) in ctx.wh.engine.rows(f"SELECT path FROM files WHERE stage = {literal(STAGE)}",
                                              step="smi: registered files")} if chunks and not reload else set()

    def unknown(chunk) -> list[Path]:
        return [path for path, _, _ in chunk if key_of(path) not in known]

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="smi-peek") as pool:
        ahead = pool.submit(batch.peek_many, unknown(chunks[0])) if chunks and not reload else None
        for i, chunk in enumerate(ctx.track(chunks, f"{STAGE}: file batches")):
            peeks.clear()
            peeks.update(ahead.result() if ahead is not None else {})
            ahead = pool.submit(batch.peek_many, unknown(chunks[i + 1])) if ahead is not None and i + 1 < len(chunks) else None
            paths = [path for path, _, _ in chunk]
            keys = [key_of(p) for p in paths]
            results.update(zip(paths, ctx.wh.ingest_batch(STAGE, paths, loader, keys=keys,
                                                          reload=keys if reload else ())))
    return results


def keep_samples(path: Path, root: Path, *, host: str, tz: str, fields: list[Field] | None) -> int:
    """Write a file's clean samples as Parquet by UTC day: ``root/day=YYYY-MM-DD/<host>__<file>.parquet``.

    A reloaded file's old samples are removed first, so each file appears once.
    """
    name = f"{host}__{path.name}.parquet"
    for old in root.glob(f"day=*/{name}"):
        old.unlink()
    df, _ = parse_smi_files([path], host=host, tz=tz, fields=[cell(f) for f in fields] if fields else None)
    df = df.filter(pl.col("ts").is_not_null())
    for (day,), part in df.group_by(pl.col("ts").dt.date().alias("day")):
        out = root / f"day={day.isoformat()}"
        out.mkdir(parents=True, exist_ok=True)
        part.write_parquet(out / name)
    return df.height
