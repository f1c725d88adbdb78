"""Failure events from coded, linked tickets, as one SQL step.

A failure is a ticket whose ``part_code`` is in ``stats.failure_parts`` and whose
``action_code`` is in ``stats.failure_actions`` (default: GPU x REPLACE), linked to an
inventory serial. The same replacement reported by two service points (same serial, same
time) counts once.

:func:`failures_sql` is that definition, the one definition of a failure, as one SQL step.
:func:`build_failures` writes it to the ``failures`` table (the statistics stage, and
:func:`pipeline.run.recode` after review answers); everyone else (the report, the predictor,
the statistics of the night) reads that table. :func:`derive_failures` applies it to an
engine's tables without writing anything, for :mod:`pipeline.stats`' analyst functions, which
take the definition from the config they are given.
"""

from __future__ import annotations

from pipeline.config import Stats
from pipeline.engine import Engine
from pipeline.vocab.sql import literals

FAILURES = "_ff_failures"


def _in_list(values: list[str]) -> str:
    return f"({literals(values)})"


def failures_sql(parts: list[str], actions: list[str]) -> str:
    """The SELECT giving the ``failures`` table's columns from ``tickets``."""
    return f"""
SELECT serial, failed_at, min(ticket_id) AS ticket_id, min(part_code) AS part_code,
       min(symptom_code) AS symptom_code
FROM (
    SELECT t.serial, t.opened_at AS failed_at, t.ticket_id, t.part_code, t.symptom_code
    FROM tickets AS t
    WHERE t.serial IS NOT NULL AND t.opened_at IS NOT NULL
      AND t.part_code IN {_in_list(parts)}
      AND t.action_code IN {_in_list(actions)}
) AS f
GROUP BY serial, failed_at
"""


def derive_failures(engine: Engine, cfg: Stats) -> str:
    """Create the temporary failures table from ``tickets``; return its name."""
    engine.create_table(FAILURES, failures_sql(cfg.failure_parts, cfg.failure_actions),
                        step="stats: failures from tickets")
    return FAILURES


#: The declared table :func:`build_failures` writes.
TABLE = "failures"


#: The table :func:`failures_sql` reads (what the Spark engine is handed).
INPUTS = ("tickets",)


def build_failures(wh, cfg: Stats, engine: Engine | None = None) -> int:
    """Rebuild the ``failures`` table from the warehouse's ``tickets``, the SQL run on
    ``engine`` (default: the warehouse's); returns its rows."""
    frame = (engine or wh.engine).arrow(failures_sql(cfg.failure_parts, cfg.failure_actions)
                                        + "ORDER BY failed_at, serial", step="failures from tickets")
    with wh.transaction():
        wh.replace(TABLE, frame)
    return frame.num_rows
