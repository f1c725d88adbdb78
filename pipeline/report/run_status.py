"""How the last nightly run ended, as a Prometheus textfile beside the risk metrics.

Writes ``fleetfault_run.prom`` in the run's output folder (the folder node_exporter's textfile
collector reads) when :func:`pipeline.run.run_pipeline` returns or raises: its exit code (0
all loaded, 1 input quarantined, 2 usage/config/environment, 3 internal error, 130
interrupted; before ``--accept-rejects`` turns 1 into 0), start and end times, rows
quarantined, and the end of the last run that produced its outputs (kept from the previous
file when this one failed).
Reads only that previous file.

Why a second file: ``fleetfault.prom`` is written by the report stage, which a failed night
never reaches, so by itself it would only ever say "stale". The alerting rules in
``deploy/prometheus/fleetfault-rules.yml`` read both.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from pipeline.errors import FleetfaultError
from pipeline.report.atomic import write_atomic
from pipeline.report.prometheus import exposition

log = logging.getLogger(__name__)

FILE_NAME = "fleetfault_run.prom"
#: Exit codes of a run that still wrote every output (1: some input was quarantined).
PRODUCED = (0, 1)


@dataclass
class RunRecord:
    """One run's outcome."""

    started: float
    ended: float
    exit_code: int
    rows_quarantined: int = 0
    last_success: float | None = None


def _gauge(name: str, doc: str, value: float | None) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, doc)
    if value is not None:
        g.add_metric([], float(value))
    return g


def render(rec: RunRecord) -> str:
    """The text exposition of one run record."""
    families = [
        _gauge("fleetfault_run_last_exit_code",
               "Exit code of the last fleetfault run: 0 ok, 1 input quarantined (outputs written), "
               "2 usage/config/environment error, 3 internal error", rec.exit_code),
        _gauge("fleetfault_run_last_start_timestamp_seconds", "Unix time the last run started", rec.started),
        _gauge("fleetfault_run_last_end_timestamp_seconds", "Unix time the last run ended", rec.ended),
        _gauge("fleetfault_run_last_duration_seconds", "Wall-clock seconds of the last run", rec.ended - rec.started),
        _gauge("fleetfault_run_rows_quarantined", "Rows the last run sent to the quarantine", rec.rows_quarantined),
        _gauge("fleetfault_run_last_success_timestamp_seconds",
               "Unix time the last run that wrote its outputs (exit 0 or 1) ended", rec.last_success),
    ]
    return exposition(families)


def previous_success(path: Path) -> float | None:
    """The last-success time recorded in an earlier status file (None when absent or unreadable)."""
    try:
        for fam in text_string_to_metric_families(path.read_text(encoding="utf-8")):
            if fam.name == "fleetfault_run_last_success_timestamp_seconds" and fam.samples:
                return fam.samples[0].value
    except (OSError, ValueError) as exc:  # absent or damaged: no earlier success to keep
        log.info("run status: ignoring %s: %s", path, exc)
    return None


def write_status(out_dir: str | Path, rec: RunRecord) -> Path | None:
    """Write ``fleetfault_run.prom`` in ``out_dir``; None (with a warning) when it cannot be
    written: the missing update is what the stale-textfile alert is for.

    Only into a folder that exists (the run creates it as soon as it writes anything): a
    mistyped ``--out`` or a usage error must not leave a folder behind, and node_exporter can
    only be reading a folder that exists.
    """
    path = Path(out_dir) / FILE_NAME
    if not Path(out_dir).is_dir():
        log.info("run status: %s does not exist; not recorded", out_dir)
        return None
    if rec.last_success is None:
        rec.last_success = rec.ended if rec.exit_code in PRODUCED else previous_success(path)
    try:
        return write_atomic(path, render(rec))
    except OSError as exc:
        log.warning("run status: could not write %s: %s", path, exc)
        return None


def recorded(run):
    """Decorate ``run_pipeline(cfg, data_dir, warehouse, out_dir, ...)`` so that every return or
    exception leaves its outcome in ``out_dir/fleetfault_run.prom``."""
    sig = inspect.signature(run)

    @functools.wraps(run)
    def wrapper(*args, **kwargs):
        out_dir = sig.bind(*args, **kwargs).arguments["out_dir"]
        started = time.time()
        code, quarantined = 3, 0
        try:
            reports, code = run(*args, **kwargs)
            quarantined = sum(r.rows_quarantined for r in reports)
            return reports, code
        except FleetfaultError as exc:
            code = exc.exit_code
            raise
        except KeyboardInterrupt:
            code = 130  # the shell's code for an interrupted command
            raise
        finally:
            write_status(out_dir, RunRecord(started, time.time(), code, quarantined))

    return wrapper
