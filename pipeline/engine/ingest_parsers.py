"""The one place the Spark ingest calls the single-machine parsers.

A Spark task parses a host's files with exactly the code ``fleetfault run`` uses on one
machine: the per-file loaders the warehouse's registry calls (each returns a
:class:`~pipeline.warehouse.Loaded`: its tables' rows and its rejects). Only this module
names them, so when the parsers move the Spark side follows by editing it alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipeline.warehouse import Loaded

#: stage -> the tables its loader fills (besides the quarantine and the registry).
TABLES: dict[str, tuple[str, ...]] = {
    "xid": ("xid_raw", "gpu_map", "kernel_segments"),
    "smi": ("smi_hourly", "smi_headers"),
}


@dataclass(frozen=True)
class HostFile:
    """One file a task parses: where it is, its registry key, and the id its rows get."""

    path: str
    key: str
    file_id: int


@dataclass(frozen=True)
class HostSettings:
    """What the parsers need to know about a host, resolved on the driver from the config."""

    tz: str = "UTC"
    boot_time: str | None = None  # kernel: ISO boot time from kernel.boot_times
    fields: str | None = None  # telemetry: the header cells in force before the first file
    configured: str | None = None  # telemetry: the configured cells for the host's headerless files
    starts: dict[str, str | None] | None = None  # telemetry: registry key -> the cells a file starts with


def input_files(stage: str, data_dir: Path) -> dict[str, list[Path]]:
    """host -> its input files for ``stage``, in the order the parser reads them."""
    if stage == "xid":
        from pipeline.ingest.kernel.stage import kernel_files

        return kernel_files(data_dir)
    from pipeline.ingest.telemetry.stage import telemetry_files

    root = Path(data_dir) / "telemetry"
    hosts = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    return {d.name: files for d in hosts if (files := telemetry_files(d))}


def configured_fields(cfg, host: str) -> str | None:
    """The configured field list of a host's headerless telemetry, as header cells."""
    from pipeline.ingest.telemetry.header_plan import cells_text
    from pipeline.ingest.telemetry.stage import configured_fields as fields_of

    return cells_text(fields_of(cfg, host))


def parse_host(stage: str, host: str, files: list[HostFile], settings: HostSettings) -> Iterator[tuple[HostFile, Loaded]]:
    """Each file of one host, in order, through the stage's single-machine loader."""
    if stage == "xid":
        from pipeline.ingest.kernel.stage import KernelFile, loader
        from pipeline.timeutil import parse_datetime

        boot = parse_datetime(settings.boot_time, settings.tz) if settings.boot_time else None
        kfiles = {Path(f.path): KernelFile(Path(f.path), host, settings.tz, boot, f.key, boot_check=True) for f in files}
        # the host's files parsed together, as one batch of the nightly job
        loaded = loader(kfiles)([(Path(f.path), f.file_id) for f in files])
        yield from zip(files, loaded)
        return
    from pipeline.ingest.telemetry.batch import BATCH_FILES, load_files
    from pipeline.ingest.telemetry.header_plan import from_cells
    from pipeline.ingest.telemetry.stage import load_file

    configured = from_cells(settings.configured)
    starts = settings.starts or {}
    key_of = {Path(f.path): f.key for f in files}

    def start_of(path: Path, fields):
        # the header plan's pick for a headerless file, else the predecessor's field list
        key = key_of[Path(path)]
        return from_cells(starts[key]) if key in starts else fields

    def single(path: Path, file_id: int, fields):
        loaded, last = load_file(path, file_id, host=host, tz=settings.tz, fields=fields)
        return loaded, last or configured

    # As the single-machine stage: a host's files BATCH_FILES at a time, each batch starting
    # from the field list the one before ended with (a headerless file continues it).
    fields = from_cells(settings.fields)
    for at in range(0, len(files), BATCH_FILES):
        chunk = files[at:at + BATCH_FILES]
        items = [(Path(f.path), f.file_id) for f in chunk]
        for f, (loaded, last) in zip(chunk, load_files(items, host=host, tz=settings.tz, fields=fields, single=single,
                                                  start_of=start_of)):
            fields = last
            yield f, loaded
