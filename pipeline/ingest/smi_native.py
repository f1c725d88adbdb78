"""The native fast path: a clean nvidia-smi log read by a C reader, aggregated by DuckDB.

DuckDB's CSV reader reads cells such as ``45 %``, ``627.40 W`` or ``[N/A]`` as text, and
cleaning that text in SQL costs more than reading the file. Where the optional C extension
:mod:`pipeline.ingest._smiscan` is built (``pip install``), a file's blocks of whole lines
are parsed in C straight into typed Arrow columns (several blocks at a time, in threads: the
parse does not hold the GIL), and DuckDB aggregates that stream with the same SQL as the
other paths (:func:`pipeline.ingest.smi_facts.hourly_sql`, every value column already typed).

The reader accepts only what it reads exactly as the SQL cleaning would, and declines a
file at the first line it is not sure of (bad bytes, a wrong number of cells, a repeated
header, an unreadable value): the caller then takes DuckDB's reader and, failing that, the
line-by-line path, so results never depend on which path ran. The one line it quarantines
itself is a last line cut short (a log copied while nvidia-smi wrote it). Set
``FLEETFAULT_SMI_NATIVE=0`` to turn it off.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.ingest import smi_facts
from pipeline.ingest.smi_batch import judge_rejects
from pipeline.ingest.smi_fields import FAILING_MARKERS, Field
from pipeline.ingest.smi_read import first_line, open_binary
from pipeline.warehouse import Rejected

try:
    from pipeline.ingest import _smiscan
except ImportError:  # built without a C compiler: DuckDB's reader does it all
    _smiscan = None

log = logging.getLogger(__name__)

#: Bytes per parsed block: enough that per-block costs vanish, small enough that the few
#: blocks in flight keep memory well under the file's size.
BLOCK_BYTES = 8 << 20
#: Threads parsing blocks (DuckDB's aggregation takes the other cores' share).
WORKERS = max(2, min(8, (os.cpu_count() or 2) // 2))
#: Fields that tell GPUs apart: the reader numbers each line's GPU by them (``_gid``), DuckDB
#: groups by that number, and the texts are cleaned after aggregation.
IDENTITY_FIELDS = tuple(smi_facts.ID_RAW.values())


def available() -> bool:
    """True when the C reader is built and not turned off."""
    return _smiscan is not None and os.environ.get("FLEETFAULT_SMI_NATIVE", "1") != "0"


@dataclass(frozen=True)
class Plan:
    """How the C reader treats each field: its kind byte and the unit cut from numbers;
    the Arrow schema it hands DuckDB (``c0..`` and ``_gid``); the identity fields, in order."""

    kinds: bytes
    units: tuple[bytes, ...]
    schema: pa.Schema
    identity: tuple[str, ...]

    @property
    def typed(self) -> set[int]:
        """Columns that arrive as their clean value (see :func:`smi_facts.cleaned_sql`)."""
        return {i for i, k in enumerate(self.kinds) if k in b"nms"}


_TYPES = {ord("s"): pa.timestamp("us"), ord("n"): pa.float64(), ord("m"): pa.int64()}


def plan(fields: list[Field]) -> Plan | None:
    """The reader's plan for a field list, or None when it cannot take the file (no
    timestamp, GPUs numbered by line order, or a used field of a kind it does not read)."""
    if [f.name for f in fields].count("timestamp") != 1 or smi_facts.needs_round_index(fields):
        return None
    has_mask = any(f.kind == "mask" and f.column in smi_facts.METRICS["mask"] for f in fields)
    kinds, units = [], []
    for f, u in zip(fields, smi_facts.used_fields(fields)):
        if f.name in IDENTITY_FIELDS:
            kind = "t"
        elif u.ignored or (has_mask and smi_facts.is_reason_field(f)):
            kind = "i"  # (single throttle reasons stand in for the mask only where it is missing)
        else:
            kind = {"ts": "s", "num": "n", "mask": "m"}.get(u.kind)
            if kind is None:
                return None  # a throttle reason (Active / Not Active) in place of the mask: SQL reads it
        kinds.append(kind)
        units.append((" " + f.unit).encode() if kind == "n" and f.unit else b"")
    kb = "".join(kinds).encode()
    # identity cells travel as _gid; their c<i> and ignored fields' are all-null text
    schema = pa.schema([(f"c{i}", _TYPES.get(k, pa.string())) for i, k in enumerate(kb)] + [("_gid", pa.int32())])
    return Plan(kb, tuple(units), schema, tuple(f.name for f in fields if f.name in IDENTITY_FIELDS))


class Declined(Exception):
    """The C reader met a line it does not read exactly as the SQL would."""


@dataclass
class _Read:
    rows: int = 0
    why: list[str] = field(default_factory=list)
    ids: dict[tuple, int] = field(default_factory=dict)  # a GPU's identity texts -> its _gid
    tail: bytes | None = None  # a last line without its end that the reader declined

    # (no pa.array() here: it imports pandas, half a second a process)
    def global_ids(self, local: list[tuple], gid: bytes) -> pa.Array:
        """A block's GPU numbers (the block's own) as the file's."""
        to_file = np.array([self.ids.setdefault(t, len(self.ids)) for t in local], dtype=np.int32)
        ids = to_file[np.frombuffer(gid, dtype=np.int32)]
        return pa.Array.from_buffers(pa.int32(), len(ids), [None, pa.py_buffer(ids)])

    def table(self, p: Plan) -> pl.DataFrame:
        """``_gid`` and the raw identity columns (``r_gpu_index``, ...) of every GPU seen."""
        where = {name: j for j, name in enumerate(p.identity)}
        idents = list(self.ids)
        cols = {"_gid": pl.Series(range(len(idents)), dtype=pl.Int32)}
        for key, name in smi_facts.ID_RAW.items():
            j = where.get(name)
            cols[f"r_{key}"] = pl.Series([t[j] for t in idents] if j is not None else [None] * len(idents), dtype=pl.Utf8)
        return pl.DataFrame(cols)


def _pieces(path: Path, skip: int, block: int) -> Iterator[tuple[bytes | memoryview, bool]]:
    """The file's data lines as pieces of whole lines (no copy of the blocks' bodies; a line
    cut by a block's end becomes a small piece of its own), each with whether it is the
    file's last line left without its end (a log cut while being written, typically)."""
    with open_binary(path) as f:
        for _ in range(skip):
            f.readline()
        carry = b""
        while data := f.read(block):
            first, last = data.find(b"\n"), data.rfind(b"\n")
            if first < 0:
                carry += data
                continue
            if carry:
                yield carry + data[: first + 1], False
                body = memoryview(data)[first + 1: last + 1]
            else:
                body = memoryview(data)[: last + 1]
            if len(body):
                yield body, False
            carry = data[last + 1:]
        if carry:
            yield carry, True


def _batch(parsed: tuple, p: Plan, read: _Read) -> pa.RecordBatch:
    """One parsed block as Arrow columns."""
    rows, gid, idents, ts, values = parsed
    nums = iter(values)
    null = pa.nulls(rows, pa.string())  # identity and ignored fields: one all-null column for all
    cols = []
    for i, k in enumerate(p.kinds):
        if k == ord("s"):
            cols.append(pa.Array.from_buffers(pa.timestamp("us"), rows, [None, pa.py_buffer(ts)]))
        elif k in b"nm":
            data, valid, nulls = next(nums)
            cols.append(pa.Array.from_buffers(p.schema.field(i).type, rows,
                                              [pa.py_buffer(valid) if nulls else None, pa.py_buffer(data)], nulls))
        else:
            cols.append(null)
    cols.append(read.global_ids(idents, gid))
    return pa.RecordBatch.from_arrays(cols, schema=p.schema)


#: A failing GPU's markers: the reader nulls every bracketed marker alike, so a file that
#: holds one is left to the SQL paths, which count such samples (``gpu_error_n``).
_FAILING = re.compile(b"|".join(re.escape(m.encode()) for m in FAILING_MARKERS))


def _parse(piece: bytes | memoryview, p: Plan, local: threading.local) -> tuple:
    if _FAILING.search(piece):
        return None, None, "a failing GPU's marker (counted by the SQL paths)"
    # The parse's scratch (4 bytes per byte of the block, for the separators' offsets) is kept
    # per thread for the file: fresh memory for every block would cost more page faults.
    need = 4 * (len(piece) + 64)
    if len(getattr(local, "scratch", b"")) < need:
        local.scratch = bytearray(need)
    return _smiscan.parse(piece, p.kinds, p.units, local.scratch)


def _batches(path: Path, p: Plan, skip: int, read: _Read, block: int) -> Iterator[pa.RecordBatch]:
    local = threading.local()
    with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="smiscan") as pool:
        pending: deque = deque()
        pieces = _pieces(path, skip, block)
        while True:
            for piece, tail in pieces:
                pending.append((pool.submit(_parse, piece, p, local), piece if tail else None))
                if len(pending) > WORKERS:  # one block more than the threads: none waits
                    break
            if not pending:
                return
            fut, tail = pending.popleft()
            parsed = fut.result()
            if parsed[0] is None and tail is not None:
                read.tail = bytes(tail)  # judged once the lines before it are counted
                continue
            if parsed[0] is None:
                read.why.append(str(parsed[2]))
                for other, _ in pending:
                    other.cancel()
                raise Declined(parsed[2])
            read.rows += parsed[0]
            yield _batch(parsed, p, read)


def _with_identities(con: duckdb.DuckDBPyConnection, fields: list[Field], grouped: pa.Table, ids: pl.DataFrame
                     ) -> pl.DataFrame:
    con.register("smi_native_grouped", grouped)
    con.register("smi_native_ids", ids)
    try:
        return con.sql(smi_facts.with_identities_sql(fields, "smi_native_grouped", "smi_native_ids")).pl()
    finally:
        con.unregister("smi_native_grouped")
        con.unregister("smi_native_ids")


def hourly(con: duckdb.DuckDBPyConnection, path: Path, fields: list[Field], skip: int, *,
           block: int = BLOCK_BYTES) -> tuple[pl.DataFrame, int, list[Rejected]] | None:
    """(partial hourly facts, rows loaded, quarantined lines) of a clean file, or None: the
    reader is not built, cannot take these fields, or declined the file (see the module's
    notes). The one line it quarantines itself is a last line cut short (no line end, too
    few or too many cells), judged as DuckDB's reader path judges it."""
    p = plan(fields) if available() else None
    if p is None or ", " not in first_line(path, skip=skip):
        return None
    read = _Read()
    reader = pa.RecordBatchReader.from_batches(p.schema, _batches(path, p, skip, read, block))
    con.register("smi_native", reader)
    try:
        # two statements: the GPUs' identities are known once the whole file is read
        grouped = con.sql(smi_facts.hourly_sql(fields, "smi_native", typed=p.typed, gid=True)).to_arrow_table()
    except (duckdb.Error, pa.ArrowException, Declined, OSError, EOFError) as exc:
        log.debug("%s: native reader declined (%s)", path, read.why[0] if read.why else exc)
        return None
    finally:
        con.unregister("smi_native")
    rejects: list[Rejected] | None = []
    if read.tail is not None:
        raw = read.tail.decode("utf-8", errors="replace").rstrip("\r")
        cells = len(raw.split(","))
        kind = "MISSING COLUMNS" if cells < len(fields) else "TOO MANY COLUMNS" if cells > len(fields) else None
        rejects = judge_rejects([(skip + read.rows + 1, kind, raw)], len(fields)) if kind else None
    if rejects is None:
        return None
    rows = _with_identities(con, fields, grouped, read.table(p))
    # (SQL checks what the reader does not: an index that is not a number, say)
    return (rows, read.rows, rejects) if smi_facts.hourly_ok(rows) else None
