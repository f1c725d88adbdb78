"""Kernel logs (dmesg, syslog, journald, kern.log): every Xid/SXid event, with its time, GPU
and process; the ``xid`` stage (:mod:`.stage`).

Modules, in the order a line meets them: :mod:`.stage` (files in, tables out),
:mod:`.scan` (the few lines that matter), :mod:`.journal` (journald entries back to plain
lines), :mod:`.formats` (the patterns), :mod:`.parse` (lines to events), :mod:`.boots` (a
host's boots across files), :mod:`.catalog` (what each code means), :mod:`.commands`
(``fleetfault parse xid``).
"""

from pipeline.ingest.kernel.stage import (
    CONTRACT_COLUMNS,
    parse_file,
    parse_xid_files,
    run,
)

__all__ = ["CONTRACT_COLUMNS", "parse_file", "parse_xid_files", "run"]
