"""The few SQL differences between engines, in one place.

Steps are written in the SQL both DuckDB and Spark understand; where they differ, the step
asks its engine's dialect for the expression. Only what the steps need is here.
"""

from __future__ import annotations

from datetime import datetime

from pipeline.vocab.sql import literal


class Dialect:
    """SQL that differs between engines. The defaults are DuckDB's."""

    name = "duckdb"
    string_type = "VARCHAR"
    #: Whether exposure may read the inventory reconciled with telemetry
    #: (:func:`pipeline.link.observed.reconciled_inventory_sql`, written in DuckDB's SQL);
    #: where not, the registry is taken as it is.
    reconciles_inventory = True

    def quote(self, name: str) -> str:
        """A quoted identifier."""
        return '"' + name.replace('"', '""') + '"'

    def timestamp(self, value: datetime) -> str:
        """A timestamp literal."""
        return literal(value)

    def epoch_seconds(self, expr: str) -> str:
        """Seconds since 1970 of a TIMESTAMP expression, as a double."""
        return f"epoch({expr})"

    def explode_periods(self, start: str, end: str, unit: str) -> str:
        """A FROM-clause fragment that repeats each row once per calendar ``unit`` ('month'
        or 'quarter') from the one holding ``start`` through the one holding ``end``, with
        the period's first instant in column ``period_start``."""
        return (f"CROSS JOIN LATERAL (SELECT unnest(generate_series(date_trunc({literal(unit)}, {start}), "
                f"{end}, INTERVAL {_step(unit)})) AS period_start) AS periods")

    def add_months(self, expr: str, months: int) -> str:
        return f"({expr} + INTERVAL {months} MONTH)"

    def quantile(self, expr: str, q: float) -> str:
        """The interpolated ``q`` quantile of a numeric aggregate (0.5: the median)."""
        return f"quantile_cont({expr}, {float(q)!r})"

    def create_temp(self, name: str, select: str) -> str:
        return f"CREATE OR REPLACE TEMP TABLE {name} AS\n{select}"


class DuckDBDialect(Dialect):
    pass


class SparkDialect(Dialect):
    name = "spark"
    string_type = "STRING"
    reconciles_inventory = False

    def quote(self, name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    def epoch_seconds(self, expr: str) -> str:
        return f"(unix_micros({expr}) / 1e6)"

    def explode_periods(self, start: str, end: str, unit: str) -> str:
        return (f"LATERAL VIEW explode(sequence(date_trunc({literal(unit.upper())}, {start}), {end}, "
                f"INTERVAL {_step(unit)})) periods AS period_start")

    def add_months(self, expr: str, months: int) -> str:
        return f"({expr} + make_interval(0, {months}))"

    def quantile(self, expr: str, q: float) -> str:
        return f"percentile({expr}, {float(q)!r})"

    def create_temp(self, name: str, select: str) -> str:
        return f"CREATE OR REPLACE TEMP VIEW {name} AS\n{select}"


def _step(unit: str) -> str:
    return "3 MONTH" if unit == "quarter" else "1 MONTH"
