"""The nightly job: every stage in data-flow order, incremental and idempotent.

Wiring lives here and nowhere else. A stage is a function ``run(ctx)`` in its module; it
reads its declared input tables, writes its declared outputs and reports counts through
the :class:`RunContext`. ``dvc.yaml`` runs the same stages one by one with
``fleetfault run --stage NAME``.
"""

from __future__ import annotations

import importlib
import json
import logging
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipeline import preflight
from pipeline.config import Config
from pipeline.engine import Engine
from pipeline.errors import ConfigError, DependencyMissing, FleetfaultError, UsageError
from pipeline.location import WarehouseLocation, resolve_warehouse, tables_beside
from pipeline.report.run_status import recorded
from pipeline.vocab.sql import ident
from pipeline.warehouse import FileResult, Loaded, Warehouse

log = logging.getLogger(__name__)

#: (stage name, "module:function"), in the order they run.
STAGES: list[tuple[str, str]] = [
    ("inventory", "pipeline.ingest.inventory:run"),
    ("smi", "pipeline.ingest.telemetry:run"),
    ("xid", "pipeline.ingest.kernel:run"),
    ("tickets", "pipeline.ingest.tickets:run"),
    ("normalize", "pipeline.normalize.stage:run"),
    ("link", "pipeline.link.tickets:run"),
    ("stats", "pipeline.stats.stage:run"),
    ("predict", "pipeline.predict.stage:run"),
    ("report", "pipeline.report.stage:run"),
]
#: Tables derived right after a stage from all it has loaded (and the stages before it):
#: stage -> "module:function(ctx) -> rows written".
DERIVE_AFTER: dict[str, str] = {
    "smi": "pipeline.ingest.telemetry.gpu_days:derive",
    "xid": "pipeline.link.xid:derive",
}
#: Stages that run as another function with ``[engine] name = "spark"``: the ingest as Spark
#: tasks into the Parquet table store, its committed rows copied into the warehouse.
SPARK_STAGES: dict[str, str] = {
    "smi": "pipeline.engine.spark_stages:smi",
    "xid": "pipeline.engine.spark_stages:xid",
}


class StageFailed(FleetfaultError):
    """A stage stopped the run: one line naming the stage and the cause (details with ``-v``)."""

    def __init__(self, stage: str, cause: BaseException):
        self.stage, self.cause = stage, cause
        # A fleetfault error keeps its code; anything else is a bug: 3, "internal error".
        self.exit_code = cause.exit_code if isinstance(cause, FleetfaultError) else 3
        first = (str(cause).strip().splitlines() or [""])[0]
        super().__init__(f"stage {stage} failed ({type(cause).__name__}: {first}); the stages before it were "
                         f"saved, the later ones did not run")


#: Errors that already say in one line what the user must change: passed through as they are.
_USER_ERRORS = (UsageError, ConfigError, DependencyMissing)


@dataclass
class StageReport:
    stage: str
    files: int = 0
    unchanged: int = 0
    rows_read: int = 0
    rows_loaded: int = 0
    rows_quarantined: int = 0
    rows_out: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


class RunContext:
    """What a stage gets: config, warehouse, folders, progress and its report."""

    def __init__(self, cfg: Config, wh: Warehouse, data_dir: Path, out_dir: Path, progress=None, *,
                 tables: str | None = None):
        self.cfg, self.wh, self.data_dir, self.out_dir = cfg, wh, Path(data_dir), Path(out_dir)
        # The Spark ingest's tables (pipeline.location.resolve_warehouse); None: those of the
        # warehouse file, as resolved from its path.
        self.tables = tables
        self.progress = progress  # a rich.progress.Progress, or None when quiet
        self.reports: dict[str, StageReport] = {}
        self._spark = None  # the Spark engine, started by the first stage that asks for it
        self._store = None  # the Spark ingest's Parquet table store

    def engine_for(self, inputs: Sequence[str]) -> Engine:
        """The engine a stage's SQL steps run on (``[engine] name``), seeing ``inputs``.

        DuckDB reads the warehouse directly. Spark reads the ingested tables from the Spark
        ingest's Parquet store when it holds exactly the warehouse's files (:meth:`_stored`);
        every other input is handed over as Arrow from the warehouse.
        """
        if self.cfg.engine.name != "spark":
            return self.wh.engine
        spark = self._spark_engine()
        stored = self._stored(inputs)
        for table in inputs:
            if table in stored:  # read where the Spark ingest wrote it, not copied out of the warehouse
                stored[table].createOrReplaceTempView(table)
            else:
                spark.register(table, self.wh.engine.arrow(f"SELECT * FROM {ident(table)}",
                                                           step=f"hand {table} to spark"))
        return spark

    def _stored(self, inputs: Sequence[str]) -> dict:
        """table -> its committed rows in the Spark ingest's store (a Spark frame), for the
        ``inputs`` an ingest stage writes, when the store holds exactly the warehouse's files
        of that stage (it does not after a night on DuckDB, which loads into the warehouse only)."""
        from pipeline.engine.ingest_parsers import TABLES  # (no Spark module)
        stages = {stage for stage, tables in TABLES.items() if set(tables) & set(inputs)}
        if not stages or self.wh.path == ":memory:":
            return {}
        root = self.tables_root()
        if "://" not in root and not (Path(root) / "_registry").is_dir():
            return {}
        _, store = self.spark_store()
        registry = store.registry()
        out = {}
        for stage in stages:
            mine = sorted(i for i, st in zip(registry.column("file_id").to_pylist(), registry.column("stage").to_pylist())
                          if st == stage)
            theirs = sorted(self.wh.registry(stage).column("file_id").to_pylist())
            if mine == theirs:
                out.update({t: store.read(t) for t in TABLES[stage] if t in inputs})
        return out

    def _spark_engine(self):
        if self._spark is None:
            from pipeline.engine.spark_engine import SparkEngine  # imported only when asked for

            self._spark = SparkEngine(settings=self.cfg.engine.spark)
        return self._spark

    def tables_root(self) -> str:
        """The folder or URL of the Spark ingest's tables."""
        return self.tables or tables_beside(self.cfg, self.wh.path)

    def spark_store(self):
        """(SparkSession, the Parquet table store of the Spark ingest at :meth:`tables_root`)."""
        if self._store is None:
            from pipeline.engine.parquet_tables import ParquetTableStore

            self._store = ParquetTableStore(self._spark_engine().spark, self.tables_root())
        return self._spark_engine().spark, self._store

    def report(self, stage: str) -> StageReport:
        return self.reports.setdefault(stage, StageReport(stage))

    def note(self, stage: str, text: str) -> None:
        log.info("%s: %s", stage, text)
        self.report(stage).notes.append(text)

    def track(self, items: Sequence, description: str) -> Iterable:
        """Iterate with a progress bar when a display is attached."""
        if self.progress is None or not items:
            yield from items
            return
        task = self.progress.add_task(description, total=len(items))
        for item in items:
            yield item
            self.progress.advance(task)
        self.progress.update(task, visible=False)

    def ingest_files(self, stage: str, paths: Sequence[Path], loader: Callable[[Path, int], Loaded]) -> list[FileResult]:
        """Load each file through the registry, adding its counts to the stage's report."""
        results = self.load_files(stage, paths, loader)
        self.tally(stage, results)
        return results

    def load_files(self, stage: str, paths: Sequence[Path], loader: Callable[[Path, int], Loaded], *,
                   reload: Collection[Path] = ()) -> list[FileResult]:
        """:meth:`ingest_files` without the counting (``reload``: files to load again even
        when unchanged)."""
        return [self.wh.ingest_file(stage, path, loader, key=self.file_key(path), reload=path in reload)
                for path in self.track(list(paths), f"{stage}: files")]

    def tally(self, stage: str, results: Iterable[FileResult]) -> None:
        """Add the files' counts to the stage's report."""
        rep = self.report(stage)
        for res in results:
            rep.files += 1
            rep.unchanged += res.status == "unchanged"
            rep.rows_read += res.rows_read
            rep.rows_loaded += res.rows_loaded
            rep.rows_quarantined += res.rows_quarantined

    def file_key(self, path: Path) -> str:
        """Registry key: the path relative to the data folder, so a moved data folder still matches."""
        try:
            return str(Path(path).resolve().relative_to(self.data_dir.resolve()))
        except ValueError:
            return str(Path(path).resolve())


def _write_stage_report(out_dir: Path, report: StageReport) -> None:
    """``OUT/stages/<stage>.json``: the stage's counts, which dvc.yaml tracks as its output."""
    folder = out_dir / "stages"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{report.stage}.json").write_text(json.dumps(asdict(report), indent=2) + "\n")


def open_warehouse(cfg: Config, path: Path | str, *, read_only: bool = False) -> Warehouse:
    """The warehouse at ``path``: every command that reads or writes the warehouse opens it
    here. Its SQL runs on DuckDB over the file (``wh.engine``); with ``[engine] name =
    "spark"``, the stages whose steps run on Spark get that engine from
    :meth:`RunContext.engine_for`, their inputs handed over, until the Parquet table layer
    (:mod:`pipeline.engine.tables`) holds every table."""
    del cfg  # the engine a stage runs on is chosen per stage (RunContext.engine_for)
    return Warehouse(path, read_only=read_only)


def recode(wh: Warehouse, cfg: Config, notes: list[str] | None = None) -> tuple[int, int]:
    """Code the tickets again, link them and rebuild ``failures``: what follows new review
    answers (``fleetfault review import``) without a whole night. Returns (tickets, still
    awaiting review)."""
    from pipeline.link.tickets import relink
    from pipeline.normalize.stage import recode as code_tickets
    from pipeline.stats.failures import build_failures

    n, waiting = code_tickets(wh, cfg, notes)
    relink(wh, cfg)
    build_failures(wh, cfg.stats)
    return n, waiting


def resolve_stage(target: str) -> Callable[[RunContext], None]:
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


@recorded  # how the night ended, for Prometheus (out_dir/fleetfault_run.prom)
def run_pipeline(
    cfg: Config,
    data_dir: Path,
    warehouse: Path | str | WarehouseLocation,
    out_dir: Path,
    *,
    stages: Sequence[str] | None = None,
    progress=None,
) -> tuple[list[StageReport], int]:
    """Run the stages (all, or those named) and return their reports and the exit code.

    ``warehouse``: ``--warehouse`` as given (resolved by :func:`resolve_warehouse`), or resolved.

    Exit code 0: all loaded; 1: some rows were quarantined (the rest is loaded).
    """
    names = [n for n, _ in STAGES]
    for s in stages or []:
        if s not in names:
            raise UsageError(f"unknown stage {s!r}; stages are: {', '.join(names)}")
    # Input files are required by the night, or its first stage as dvc.yaml runs it.
    preflight.check_inputs(Path(data_dir), files=not stages or "inventory" in stages)
    loc = warehouse if isinstance(warehouse, WarehouseLocation) else resolve_warehouse(cfg, warehouse)
    preflight.check_warehouse(loc.catalog)
    if loc.local_tables is not None:
        preflight.check_writable(loc.local_tables, f"--warehouse {loc.tables}")
    preflight.check_writable(Path(out_dir), "--out")
    with open_warehouse(cfg, loc.catalog) as wh:
        wh.start_run("run" if not stages else "run --stage " + ",".join(stages))
        ctx = RunContext(cfg, wh, Path(data_dir), Path(out_dir), progress, tables=loc.tables)
        status = "failed"
        try:
            for name, target in STAGES:
                if stages and name not in stages:
                    continue
                if cfg.engine.name == "spark":
                    target = SPARK_STAGES.get(name, target)
                t0 = time.perf_counter()
                try:
                    resolve_stage(target)(ctx)
                    if name in DERIVE_AFTER:
                        ctx.report(name).rows_out = resolve_stage(DERIVE_AFTER[name])(ctx)
                except _USER_ERRORS:
                    raise
                except Exception as exc:  # a bug or a broken input: one line, the details in the log
                    log.info("stage %s failed", name, exc_info=exc)
                    ctx.note(name, f"failed: {type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}")
                    raise StageFailed(name, exc) from exc
                ctx.report(name).seconds = round(time.perf_counter() - t0, 3)
                _write_stage_report(Path(out_dir), ctx.report(name))
            reports = list(ctx.reports.values())
            rejected = sum(r.rows_quarantined for r in reports)
            status = "rejected_rows" if rejected else "ok"
        finally:
            wh.end_run(status, [asdict(r) for r in ctx.reports.values()])
    return reports, (1 if rejected else 0)
