"""nvidia-smi telemetry: ``--query-gpu ... --format=csv`` logs to hourly and daily GPU facts.

Modules, in data-flow order: :mod:`.fields` (the one table of what a cell means, and the
SQL generated from it), :mod:`.read` (reading files: many per DuckDB statement, or line by
line), :mod:`.header_plan` (the header a headerless file is read with), :mod:`.batch`
(the fast path and its reject judge), :mod:`.facts` (hourly facts SQL), :mod:`.stage`
(the smi stage and ``parse smi``), :mod:`.gpu_days` (the derived ``gpu_days``),
:mod:`.commands` (the ``parse smi`` command).
"""

from pipeline.ingest.telemetry.gpu_days import derive_gpu_days
from pipeline.ingest.telemetry.stage import load_file, parse_smi_files, run

__all__ = ["derive_gpu_days", "load_file", "parse_smi_files", "run"]
