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

    def seconds_between(self, start: str, end: str) -> str:
        """Seconds from TIMESTAMP ``start`` to TIMESTAMP ``end``, as a double (exact to the
        microsecond: the difference is taken before it becomes a double)."""
        return f"epoch({end} - {start})"

    def arg_min(self, arg: str, key: str) -> str:
        """``arg`` of the row with the least ``key``, among the rows whose ``arg`` is not NULL
        (DuckDB's ``arg_min``: a NULL ``arg`` does not win; rows whose key is NULL are skipped)."""
        return f"arg_min({arg}, {key})"

    def arg_max(self, arg: str, key: str) -> str:
        """``arg`` of the row with the greatest ``key``, skipping NULL ``arg`` as :meth:`arg_min`."""
        return f"arg_max({arg}, {key})"

    def array(self, *items: str) -> str:
        """An array (list) value of the items, ordered element by element (a sort key)."""
        return "[" + ", ".join(items) + "]"

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

    def drop_temp(self, name: str) -> str:
        """Drop what :meth:`create_temp` made."""
        return f"DROP TABLE IF EXISTS {name}"

    def day_diff(self, start: str, end: str) -> str:
        """Whole days from the DATE ``start`` to the DATE ``end`` (negative when ``end`` is earlier)."""
        return f"datediff('day', {start}, {end})"

    def explode_days(self, start: str, end: str, column: str) -> str:
        """A FROM-clause fragment (after a relation) that repeats each row once per day from
        the DATE ``start`` through the DATE ``end``, the day in column ``column`` (a DATE);
        no row when ``end`` is before ``start``."""
        return (f"CROSS JOIN LATERAL (SELECT CAST(g.d AS DATE) AS {column} FROM generate_series("
                f"CAST({start} AS TIMESTAMP), CAST({end} AS TIMESTAMP), INTERVAL 1 DAY) AS g(d)) AS days_{column}")

    def last_non_null(self, expr: str) -> str:
        """``last_value`` skipping nulls, for a window (``OVER`` follows)."""
        return f"last_value({expr} IGNORE NULLS)"

    def regr_slope(self, y: str, x: str, window: str) -> str:
        """``regr_slope(y, x) OVER window``: NULL without a non-null pair, NaN when every
        ``x`` is the same (DuckDB's answers, which the models were trained on)."""
        return f"regr_slope({y}, {x}) OVER {window}"


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

    def seconds_between(self, start: str, end: str) -> str:
        return f"((unix_micros({end}) - unix_micros({start})) / 1e6)"

    # Spark's min_by/max_by return a NULL arg when its row wins and skip rows whose key is
    # NULL: a NULL key for NULL args gives DuckDB's arg_min/arg_max.
    def arg_min(self, arg: str, key: str) -> str:
        return f"min_by({arg}, CASE WHEN {arg} IS NOT NULL THEN {key} END)"

    def arg_max(self, arg: str, key: str) -> str:
        return f"max_by({arg}, CASE WHEN {arg} IS NOT NULL THEN {key} END)"

    def array(self, *items: str) -> str:
        return "array(" + ", ".join(items) + ")"

    def explode_periods(self, start: str, end: str, unit: str) -> str:
        return (f"LATERAL VIEW explode(sequence(date_trunc({literal(unit.upper())}, {start}), {end}, "
                f"INTERVAL {_step(unit)})) periods AS period_start")

    def add_months(self, expr: str, months: int) -> str:
        return f"({expr} + make_interval(0, {months}))"

    def quantile(self, expr: str, q: float) -> str:
        return f"percentile({expr}, {float(q)!r})"

    def create_temp(self, name: str, select: str) -> str:
        return f"CREATE OR REPLACE TEMP VIEW {name} AS\n{select}"

    def drop_temp(self, name: str) -> str:
        return f"DROP VIEW IF EXISTS {name}"
    def day_diff(self, start: str, end: str) -> str:
        return f"datediff({end}, {start})"

    def explode_days(self, start: str, end: str, column: str) -> str:
        # sequence() counts down when end < start (and fails with a step): no days instead.
        return (f"LATERAL VIEW explode(IF({end} >= {start}, sequence(CAST({start} AS DATE), CAST({end} AS DATE)), "
                f"NULL)) days_{column} AS {column}")


    def last_non_null(self, expr: str) -> str:
        return f"last_value({expr}, true)"

    def regr_slope(self, y: str, x: str, window: str) -> str:
        # Spark answers NULL where every x is the same; DuckDB NaN.
        return (f"CASE WHEN regr_count({y}, {x}) OVER {window} > 0 THEN "
                f"coalesce(regr_slope({y}, {x}) OVER {window}, CAST('NaN' AS DOUBLE)) END")


def _step(unit: str) -> str:
    return "3 MONTH" if unit == "quarter" else "1 MONTH"
