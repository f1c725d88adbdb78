"""The DuckDB warehouse: declared tables, the file registry, the quarantine and the runs log.

Reads ``pipeline/declared/tables/*.yaml``; writes one DuckDB file. Every file a stage ingests goes
through :meth:`Warehouse.ingest_file`, which makes the nightly run incremental and
idempotent: a file already loaded with the same sha256 is skipped, a changed file has its
old rows deleted and is loaded again, and each file's load is one transaction, so a run
killed halfway leaves no half-loaded file behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb

from pipeline.engine import DuckDBEngine, Engine
from pipeline.errors import EngineError, FleetfaultError, SchemaError
from pipeline.schemas import TableSchema, all_schemas
from pipeline.vocab.sql import ident, literal, literals

log = logging.getLogger(__name__)

#: Bump when a change to the tables needs more than "create missing tables, add missing
#: columns" (which every open does); add the step to ``_MIGRATIONS``.
SCHEMA_VERSION = 2

# version -> SQL run to go from version-1 to version. Version 1 is the first layout. The
# steps run before missing tables are created, so each names its table with IF EXISTS.
_MIGRATIONS: dict[int, list[str]] = {
    # features.days_since_ticket counted from a ticket's close, which is known only after
    # the outcome; it left the declared table (the open-ticket counts replaced it). The
    # table is rebuilt every night, so nothing is lost with the column.
    2: ["ALTER TABLE IF EXISTS features DROP COLUMN IF EXISTS days_since_ticket"],
}


@dataclass
class Rejected:
    """A row a stage could not load: it goes to the quarantine, never silently dropped."""

    line_no: int | None
    reason: str  # a short code such as 'bad_timestamp', 'truncated_line'
    raw: str
    detail: str = ""


@dataclass
class Loaded:
    """What a stage's loader made of one file.

    ``rows_read`` counts the data rows the file held (headers, blank lines and, for kernel
    logs, unrelated lines are ``rows_skipped``, not read); it must equal ``rows_loaded``
    plus the number of ``rejects``.
    """

    tables: dict[str, Any] = field(default_factory=dict)  # table -> Arrow / polars / pandas
    rows_read: int = 0
    rows_loaded: int = 0
    rows_skipped: int = 0
    rejects: list[Rejected] = field(default_factory=list)


@dataclass(frozen=True)
class FileResult:
    path: str
    status: str  # 'loaded', 'reloaded', 'unchanged'
    rows_read: int = 0
    rows_loaded: int = 0
    rows_quarantined: int = 0


def sha256_file(path: Path, chunk: int = 1 << 20, limit: int | None = None) -> str:
    """The sha256 of the file, or of its first ``limit`` bytes."""
    h = hashlib.sha256()
    left = math.inf if limit is None else limit
    with open(path, "rb") as f:
        while left > 0 and (block := f.read(int(min(chunk, left)))):
            h.update(block)
            left -= len(block)
    return h.hexdigest()


def sha256_later(paths: Sequence[Path]) -> Future:
    """The files' sha256 digests (a list), computed in a thread meanwhile.

    A new file's digest is only needed for its registry row: hashing it while the loader
    reads the file (hashlib and file reads release the GIL; DuckDB's reader runs in its own
    threads) takes the ~1 s/GB hash off the critical path. Only the bytes there before the
    loader starts are hashed: a log still being written while it loads then differs from
    its digest on the next run and is reloaded whole, never skipped with rows missing.
    """
    sizes = [p.stat().st_size for p in paths]
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sha256")
    try:
        return pool.submit(lambda: [sha256_file(p, limit=n) for p, n in zip(paths, sizes)])
    finally:
        pool.shutdown(wait=False)


def _reconciled(stage: str, key: str, result: Loaded) -> int:
    """The number of rejects, once ``rows_read == rows_loaded + rejects`` is checked."""
    n_rej = len(result.rejects)
    if result.rows_read != result.rows_loaded + n_rej:
        raise FleetfaultError(
            f"{stage}: {key}: counts do not reconcile: read {result.rows_read} != "
            f"loaded {result.rows_loaded} + quarantined {n_rej} (a bug in the {stage} loader)"
        )
    return n_rej


def _concat_frames(frames: list) -> list:
    """Polars frames as one (columns aligned by name); anything else as given, one by one."""
    import polars as pl

    if len(frames) > 1 and all(isinstance(f, pl.DataFrame) for f in frames):
        frames = [f for f in frames if f.height] or frames[:1]
        # rechunk: DuckDB appends a frame of thousands of small chunks (one per file) to a
        # table several times slower than the same rows in one
        return [pl.concat(frames, how="diagonal_relaxed", rechunk=True)]
    return frames


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _open_failure(path: str, exc: Exception) -> str:
    """One line for a warehouse DuckDB would not open; a second run on a busy warehouse
    (DuckDB's file lock) is told which process holds it."""
    text = " ".join(str(exc).split())
    if "lock" in text.lower():
        pid = re.search(r"PID (\d+)", text)
        holder = f"process {pid[1]}" if pid else "another process"
        return (f"warehouse {path} is in use by {holder} (another fleetfault run, or a notebook with it open); "
                f"wait for it to finish, or pass another --warehouse")
    return f"cannot open warehouse {path}: {text}"


class Warehouse:
    """One DuckDB file with every declared table. Use as a context manager.

    Examples
    --------
    >>> with Warehouse(":memory:") as wh:
    ...     wh.engine.scalar("select count(*) from files", step="files")
    0
    """

    def __init__(self, path: str | Path = "fleetfault.duckdb", *, read_only: bool = False):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self.con = duckdb.connect(self.path, read_only=read_only)
        except duckdb.Error as exc:
            raise FleetfaultError(_open_failure(self.path, exc)) from None
        self._limit_memory()
        self.schemas: dict[str, TableSchema] = all_schemas()
        self.run_id: int | None = None
        self._in_tx = False
        self._engine: Engine | None = None
        if not read_only:
            self.migrate()

    def _limit_memory(self) -> None:
        """Cap DuckDB's memory (it spills to disk beyond): by default 40% of this machine's
        RAM rather than DuckDB's 80%, so a big night leaves room for the Python stages;
        ``FLEETFAULT_DUCKDB_MEMORY`` (e.g. ``8GB``) overrides it."""
        limit = os.environ.get("FLEETFAULT_DUCKDB_MEMORY")
        if not limit:
            try:
                total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
                limit = f"{max(total * 0.4 / 2**30, 1.0):.1f}GB"
            except (ValueError, OSError, AttributeError):
                return
        try:
            self.con.execute(f"SET memory_limit = {literal(limit)}")
        except duckdb.Error as exc:
            raise FleetfaultError(f"FLEETFAULT_DUCKDB_MEMORY={limit!r} is not a DuckDB memory size (e.g. 8GB): {exc}") from None

    # -- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.con.close()

    def migrate(self) -> None:
        """Bring the file to :data:`SCHEMA_VERSION`: run pending migrations, create missing
        tables and add declared columns that an older file lacks."""
        con = self.con
        con.execute("CREATE TABLE IF NOT EXISTS schema_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        rows = con.execute("SELECT value FROM schema_meta WHERE key = 'version'").fetchall()
        row = rows[0] if rows else None
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise SchemaError(
                f"warehouse {self.path} has schema version {version}, newer than this fleetfault "
                f"({SCHEMA_VERSION}); upgrade fleetfault or use another --warehouse"
            )
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute("CREATE SEQUENCE IF NOT EXISTS file_ids START 1")
            con.execute("CREATE SEQUENCE IF NOT EXISTS run_ids START 1")
            existing = {r[0] for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
            ).fetchall()}
            for v in range(version + 1, SCHEMA_VERSION + 1):
                for stmt in _MIGRATIONS.get(v, []):
                    con.execute(stmt)
            for name, sch in self.schemas.items():
                if name not in existing:
                    con.execute(sch.ddl())
                    continue
                have = {r[0] for r in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [name]
                ).fetchall()}
                for col in sch.columns:
                    if col.name not in have:
                        log.info("migration: adding %s.%s", name, col.name)
                        con.execute(f'ALTER TABLE "{name}" ADD COLUMN "{col.name}" {col.type}')
            con.execute(
                "INSERT OR REPLACE INTO schema_meta VALUES ('version', ?)", [str(SCHEMA_VERSION)]
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    @property
    def schema_version(self) -> int:
        return int(self._scalar("SELECT value FROM schema_meta WHERE key='version'"))

    # -- the engine ------------------------------------------------------------------
    @property
    def engine(self) -> Engine:
        """The engine that runs every SQL step over this warehouse's tables: the one
        :func:`pipeline.run.open_warehouse` built from the config, else DuckDB over this file."""
        if self._engine is None:
            self._engine = DuckDBEngine(self.con)
        return self._engine

    @engine.setter
    def engine(self, engine: Engine) -> None:
        self._engine = engine

    def table_exists(self, name: str) -> bool:
        """Whether the file holds table ``name`` (a read-only open of an older warehouse may lack it)."""
        return bool(self._scalar("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]))

    # -- the registry's own SQL (DuckDB, bound parameters) -----------------------------
    def _sql(self, sql: str, params: list | dict | None = None, *, step: str) -> list[tuple]:
        """Execute one statement of the registry, quarantine, runs or migrations and return
        its rows; failures raise :class:`EngineError` naming the step. (DuckDB 2 wants
        every result consumed before the next statement.) Stage SQL goes through
        :attr:`engine`, never here."""
        try:
            cur = self.con.execute(sql, params) if params is not None else self.con.execute(sql)
            return cur.fetchall() if cur.description else []
        except duckdb.Error as exc:
            raise EngineError(step, sql, exc) from None

    def _scalar(self, sql: str, params=None, *, step: str = "registry") -> Any:
        rows = self._sql(sql, params, step=step)
        return rows[0][0] if rows else None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction; nested use joins the outer one."""
        if self._in_tx:
            yield
            return
        self.con.execute("BEGIN TRANSACTION")
        self._in_tx = True
        try:
            yield
        except BaseException:
            self._in_tx = False
            self.con.execute("ROLLBACK")
            raise
        self._in_tx = False
        self.con.execute("COMMIT")

    def insert(self, table: str, data: Any) -> int:
        """Append rows (Arrow, polars or pandas) to a declared table, matching columns by name."""
        sch = self.schemas.get(table)
        if sch is None:
            raise SchemaError(f"no table {table!r} declared in pipeline/declared/tables/")
        columns = list(data.columns) if not hasattr(data, "column_names") else list(data.column_names)
        sch.validate_columns(columns)
        n = len(data) if not hasattr(data, "num_rows") else data.num_rows
        if n == 0:
            return 0
        view = f"_insert_{table}"
        self.con.register(view, data)
        try:
            cols = ", ".join(ident(c) for c in columns)
            self._sql(f"INSERT INTO {ident(table)} ({cols}) SELECT {cols} FROM {ident(view)}", step=f"insert {table}")
        finally:
            self.con.unregister(view)
        return n

    def replace(self, table: str, data: Any) -> int:
        """Replace a derived table's whole content (inside the caller's transaction, if any)."""
        self.clear(table)
        return self.insert(table, data)

    def rebuild(self, table: str, select: str, *, engine: Engine | None = None, step: str) -> int:
        """Replace a derived table's whole content with the rows of ``select``, run on
        ``engine`` (default: the warehouse's own), in one transaction; returns the row count.

        On the warehouse's engine the rows never leave DuckDB (``INSERT ... SELECT``); on
        another engine (Spark, :meth:`pipeline.run.RunContext.engine_for`) they come back as
        Arrow and are inserted. Columns are taken by the declared names either way.
        """
        if table not in self.schemas:
            raise SchemaError(f"no table {table!r} declared in pipeline/declared/tables/")
        engine = engine or self.engine
        names = self.schemas[table].names
        if engine is self.engine:
            cols = ", ".join(ident(c) for c in names)
            with self.transaction():
                self.clear(table)
                engine.execute(f"INSERT INTO {ident(table)} ({cols}) SELECT {cols} FROM ({select}) AS rows_",
                               step=step)
        else:
            cols = ", ".join(engine.dialect.quote(c) for c in names)
            frame = engine.arrow(f"SELECT {cols} FROM ({select}) AS rows_", step=step)
            with self.transaction():
                self.replace(table, frame)
        return self.engine.scalar(f"SELECT count(*) FROM {ident(table)}", step=f"{table} rows")

    def clear(self, table: str) -> None:
        """Delete every row of a declared table (inside the caller's transaction, if any)."""
        if table not in self.schemas:
            raise SchemaError(f"no table {table!r} declared in pipeline/declared/tables/")
        self._sql(f"DELETE FROM {ident(table)}", step=f"clear {table}")

    # -- file registry ---------------------------------------------------------------
    def registered(self, stage: str, path: str) -> dict | None:
        rows = self._sql("SELECT file_id, sha256, size FROM files WHERE stage = ? AND path = ?", [stage, path], step="registered file")
        row = rows[0] if rows else None
        return None if row is None else {"file_id": row[0], "sha256": row[1], "size": row[2]}

    def registered_keys(self, stage: str) -> list[str]:
        """The keys of every file the registry holds for ``stage``."""
        return [r[0] for r in self._sql("SELECT path FROM files WHERE stage = ? ORDER BY path", [stage],
                                        step="registered files of a stage")]

    def forget(self, stage: str, key: str) -> None:
        """Unregister a file and delete every row it put anywhere, in one transaction."""
        with self.transaction():
            prev = self.registered(stage, key)
            if prev is not None:
                self._forget_file(prev["file_id"])

    def _forget_file(self, file_id: int) -> None:
        """Delete every row a file put anywhere (tables with a ``file_id`` column)."""
        for name, sch in self.schemas.items():
            if "file_id" in sch.names and name != "files":
                self._sql(f'DELETE FROM "{name}" WHERE file_id = ?', [file_id], step=f"forget file in {name}")
        self._sql("DELETE FROM files WHERE file_id = ?", [file_id], step="forget file")

    def ingest_file(
        self,
        stage: str,
        path: str | Path,
        loader: Callable[[Path, int], Loaded],
        *,
        key: str | None = None,
        reload: bool = False,
    ) -> FileResult:
        """Load one file through ``loader`` unless the registry holds it unchanged.

        ``loader(path, file_id)`` returns a :class:`Loaded`; its tables are inserted, its
        rejects quarantined and the file registered, all in one transaction.
        ``key`` is the name the registry knows the file by (default: the path as given).
        ``reload``: load it again even when unchanged (its old rows are replaced), as when
        what it is read with has changed.
        """
        path = Path(path)
        key = key or str(path)
        prev = self.registered(stage, key)
        pending = None
        if prev and not reload:  # a known file is skipped when unchanged: its digest decides first
            digest = sha256_file(path)
            if prev["sha256"] == digest:
                return FileResult(key, "unchanged")
        else:
            pending = sha256_later([path])
        with self.transaction():
            if prev:
                self._forget_file(prev["file_id"])
            file_id = self._scalar("SELECT nextval('file_ids')")
            result = loader(path, file_id)
            if pending is not None:
                digest = pending.result()[0]
            n_rej = _reconciled(stage, key, result)
            for table, data in result.tables.items():
                self.insert(table, data)
            self.quarantine(stage, key, result.rejects, file_id=file_id)
            self._sql(
                "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [file_id, stage, key, path.stat().st_size, digest, result.rows_read,
                 result.rows_loaded, n_rej, result.rows_skipped, _now(), self.run_id],
                step="register file",
            )
        return FileResult(key, "reloaded" if prev else "loaded", result.rows_read, result.rows_loaded, n_rej)

    def ingest_batch(
        self,
        stage: str,
        paths: Sequence[str | Path],
        loader: Callable[[list[tuple[Path, int]]], list[Loaded]],
        *,
        keys: Sequence[str] | None = None,
        reload: Collection[str] = (),
    ) -> list[FileResult]:
        """Load many files through one ``loader`` call and one transaction.

        The registry's per-file rules hold as in :meth:`ingest_file`: files whose sha256 is
        unchanged are skipped (the loader never sees them), changed files have their old rows
        deleted, each file gets its own ``files`` row, ``file_id``, counts (which must
        reconcile) and quarantine rows. ``loader(items)`` gets ``[(path, file_id), ...]`` in
        the order given and returns one :class:`Loaded` per item. Any failure rolls the whole
        batch back, so a crash leaves none of it loaded. Tables are inserted once per batch.

        ``reload``: keys to load again even when unchanged (see :meth:`ingest_file`).

        Returns one :class:`FileResult` per path, in order.
        """
        paths = [p if isinstance(p, Path) else Path(p) for p in paths]  # (Path(p) of a Path costs as much as a new one)
        keys = list(keys) if keys is not None else [str(p) for p in paths]
        prev = self._registered_many(stage, keys)
        reload = set(reload)
        # Known files are skipped when unchanged, so their digests decide first; new (and
        # reloaded) files are hashed while the loader reads them.
        known = [k in prev and k not in reload for k in keys]
        digests: list[str | None] = [sha256_file(p) if kn else None for p, kn in zip(paths, known)]
        new = [i for i, kn in enumerate(known) if not kn]
        pending = sha256_later([paths[i] for i in new]) if new else None
        todo = [i for i, (k, d) in enumerate(zip(keys, digests)) if not (known[i] and prev[k]["sha256"] == d)]
        skipped = set(range(len(paths))) - set(todo)
        results = {i: FileResult(keys[i], "unchanged") for i in skipped}
        if not todo:
            return [results[i] for i in range(len(paths))]
        with self.transaction():
            old = [prev[keys[i]]["file_id"] for i in todo if keys[i] in prev]
            if old:
                self._forget_files(old)
            ids = self.new_file_ids(len(todo))
            loaded = loader([(paths[i], fid) for i, fid in zip(todo, ids)])
            if len(loaded) != len(todo):
                raise FleetfaultError(f"{stage}: the batch loader returned {len(loaded)} results for {len(todo)} files")
            if pending is not None:
                for i, d in zip(new, pending.result()):
                    digests[i] = d
            tables: dict[str, list] = {}
            rejects: list[tuple] = []
            registry: list[list] = []
            now = _now()
            for i, fid, res in zip(todo, ids, loaded):
                n_rej = _reconciled(stage, keys[i], res)
                for table, data in res.tables.items():
                    tables.setdefault(table, []).append(data)
                rejects += [(self.run_id, fid, stage, keys[i], r.line_no, r.reason, r.raw[:4000], r.detail[:1000], now)
                            for r in res.rejects]
                registry.append([fid, stage, keys[i], paths[i].stat().st_size, digests[i], res.rows_read,
                                 res.rows_loaded, n_rej, res.rows_skipped, now, self.run_id])
                results[i] = FileResult(keys[i], "reloaded" if keys[i] in prev else "loaded",
                                        res.rows_read, res.rows_loaded, n_rej)
            for table, frames in tables.items():
                for data in _concat_frames(frames):
                    self.insert(table, data)
            self._insert_rows("quarantine", rejects)
            self._insert_rows("files", registry)
        return [results[i] for i in range(len(paths))]

    def _insert_rows(self, table: str, rows: Sequence[Sequence]) -> None:
        """Append rows (tuples in the declared column order) with one statement."""
        if not rows:
            return
        cols = self.schemas[table].columns
        sel = ", ".join(f'unnest(?::{c.type}[]) AS "{c.name}"' for c in cols)
        names = ", ".join(f'"{c.name}"' for c in cols)
        self._sql(f'INSERT INTO "{table}" ({names}) SELECT {sel}', [list(col) for col in zip(*rows)], step=f"insert {table}")

    def _registered_many(self, stage: str, keys: Sequence[str]) -> dict[str, dict]:
        rows = self._sql(
            "SELECT path, file_id, sha256 FROM files WHERE stage = ? AND path IN (SELECT unnest(?::VARCHAR[]))",
            [stage, list(keys)], step="registered files",
        )
        return {path: {"file_id": fid, "sha256": sha} for path, fid, sha in rows}

    def _forget_files(self, file_ids: list[int]) -> None:
        """:meth:`_forget_file` for many files at once."""
        for name, sch in self.schemas.items():
            if "file_id" in sch.names and name != "files":
                self._sql(f'DELETE FROM "{name}" WHERE file_id IN (SELECT unnest(?::BIGINT[]))', [file_ids],
                         step=f"forget files in {name}")
        self._sql("DELETE FROM files WHERE file_id IN (SELECT unnest(?::BIGINT[]))", [file_ids], step="forget files")

    def new_file_ids(self, n: int) -> list[int]:
        """``n`` file ids no file has had: every loader numbers files from this one sequence,
        the Spark ingest's included, so ids never clash whichever engine loaded a file."""
        return [r[0] for r in self._sql("SELECT nextval('file_ids') FROM range(?)", [n], step="file ids")]

    def registry(self, stage: str):
        """The registry rows of ``stage`` (the ``files`` table), as Arrow."""
        return self.engine.arrow(f"SELECT * FROM files WHERE stage = {literal(stage)} ORDER BY file_id", step="registry")

    def adopt(self, stage: str, files, sources: dict[str, list[str]], retired: Collection[int] = ()) -> None:
        """Register files another writer loaded, under its file ids, with their rows: the
        Spark ingest's committed files, whose rows DuckDB reads from the Parquet store.

        ``files``: their registry rows (Arrow, the ``files`` columns); ``sources``: table ->
        Parquet files holding those files' rows (among others, told apart by ``file_id``);
        ``retired``: file ids whose rows go (changed files' old versions). A file already
        registered under the same path is replaced. One transaction: all or nothing.
        """
        ids = [int(i) for i in files.column("file_id").to_pylist()]
        paths = files.column("path").to_pylist()
        with self.transaction():
            same = [r[0] for r in self._sql(
                "SELECT file_id FROM files WHERE stage = ? AND (path IN (SELECT unnest(?::VARCHAR[])) "
                "OR file_id IN (SELECT unnest(?::BIGINT[])))", [stage, paths, ids], step="adopt: files replaced")]
            old = sorted({*same, *(int(i) for i in retired)})
            if old:
                self._forget_files(old)
            for table, parts in sources.items():
                if not parts or not ids:
                    continue
                cols = ", ".join(ident(c) for c in self.schemas[table].names)
                self._sql(f"INSERT INTO {ident(table)} ({cols}) SELECT {cols} FROM read_parquet([{literals(parts)}], "
                          "hive_partitioning = false) WHERE file_id IN (SELECT unnest(?::BIGINT[]))", [ids], step=f"adopt {table} rows")
            self.insert("files", files)

    def quarantine(self, stage: str, source_file: str, rejects: Iterable[Rejected], *, file_id: int | None = None) -> int:
        rows = [
            (self.run_id, file_id, stage, source_file, r.line_no, r.reason, r.raw[:4000], r.detail[:1000], _now())
            for r in rejects
        ]
        if rows:
            self.con.executemany("INSERT INTO quarantine VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        return len(rows)

    # -- runs ------------------------------------------------------------------------
    def start_run(self, command: str) -> int:
        self.run_id = self._scalar("SELECT nextval('run_ids')")
        self._sql(
            "INSERT INTO runs (run_id, command, started_at, status) VALUES (?, ?, ?, 'running')",
            [self.run_id, command, _now()], step="start run",
        )
        return self.run_id

    def end_run(self, status: str, stages: list[dict]) -> None:
        self._sql(
            "UPDATE runs SET ended_at = ?, status = ?, stages = ? WHERE run_id = ?",
            [_now(), status, json.dumps(stages, default=str), self.run_id], step="end run",
        )
