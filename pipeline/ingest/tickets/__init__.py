"""Ticket exports (CSV, Excel, JSON from every service point's own tool) into ``tickets_raw``.

- :mod:`.stage`: the stage (``run``): each point's files, sheet by sheet, into rows.
- :mod:`.readers`: opening an export (encodings, Excel, nested JSON) as sheets of cells.
- :mod:`.columns`: header names and cell values (serials, slots, times) one at a time.
- :mod:`.values`: what a column's values look like, for the layout recogniser.
- :mod:`.layout`: which column fills which field, from headers and values together.
- :mod:`.swaps`: the removed part in a nested part-swap list.
- :mod:`.commands`: ``fleetfault tickets inspect``, the layout fleetfault would read from an export.
"""

from pipeline.ingest.tickets.stage import RAW_SCHEMA, latest_sql, load_tickets, point_tz, run, ticket_files

__all__ = ["RAW_SCHEMA", "latest_sql", "load_tickets", "point_tz", "run", "ticket_files"]
