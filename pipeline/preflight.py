"""Checks made before the night starts: is there input, and can the outputs be written?

Reads: the data folder's top level, the output folder and the warehouse's folder. Writes: a
probe file in each output folder, removed at once. A scheduler must tell a careless
invocation (a mistyped ``--data``, a read-only ``--out``) from a night that ran: these
checks turn it into one line and exit 2 before any stage has run, where it would otherwise
end as "nothing new to load" (exit 0) or a traceback halfway through the night.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pipeline.errors import UsageError

#: What ``run`` reads under DATA (the contract's input layout).
LAYOUT = ("inventory.csv", "telemetry/", "kernel/", "tickets/")


def check_inputs(data_dir: Path, *, files: bool = True) -> None:
    """Raise :class:`UsageError` unless ``data_dir`` is a folder and (``files``) holds an
    inventory or some file under ``telemetry/``, ``kernel/`` or ``tickets/``."""
    data_dir = Path(data_dir)
    expected = ", ".join(LAYOUT)
    if not data_dir.is_dir():
        raise UsageError(f"--data {data_dir}: no such folder (expected {expected})")
    if not files or (data_dir / "inventory.csv").is_file():
        return
    for sub in ("telemetry", "kernel", "tickets"):
        folder = data_dir / sub
        if folder.is_dir() and any(p.is_file() for p in folder.rglob("*")):
            return
    try:
        seen = sorted(p.name + ("/" if p.is_dir() else "") for p in data_dir.iterdir())
    except OSError as exc:
        raise UsageError(f"--data {data_dir}: cannot list the folder ({exc.strerror})") from None
    held = f"; it holds {', '.join(seen[:6])}{' ...' if len(seen) > 6 else ''}" if seen else "; it is empty"
    raise UsageError(f"no input files under {data_dir}: expected {expected}{held}")


def check_writable(folder: Path, what: str) -> None:
    """Raise :class:`UsageError` unless ``folder`` exists or can be made, and takes a new file.

    ``what`` names the option in the message (``--out``, ``--warehouse``).
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{what}: cannot create the folder {folder} ({exc.strerror or exc})") from None
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".fleetfault-probe-"):
            pass
    except OSError as exc:
        raise UsageError(f"{what}: the folder {folder} is not writable ({exc.strerror or exc})") from None


def check_warehouse(path: Path | str) -> None:
    """The warehouse's folder takes new files (DuckDB writes a WAL beside the file) and an
    existing warehouse file is writable."""
    if str(path) == ":memory:":
        return
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"--warehouse {path}: is a folder; give a file such as {path / 'fleetfault.duckdb'}")
    check_writable(path.parent, f"--warehouse {path}")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"--warehouse {path}: the file is read-only")
