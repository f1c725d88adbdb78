"""Writing tables for people and other programs: CSV, Parquet, XLSX.

Ticket text is untrusted: a cell that starts with ``=``, ``+``, ``-``, ``@`` (or a tab or
carriage return) would run as a formula when the CSV or XLSX is opened in a spreadsheet.
Such string cells are prefixed with ``'`` (OWASP's advice); numbers are left alone.
Parquet keeps the data exactly as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralize(value: Any) -> Any:
    """Prefix a string that a spreadsheet would read as a formula with ``'``.

    >>> neutralize("=HYPERLINK(\\"http://x\\")")
    '\\'=HYPERLINK("http://x")'
    >>> neutralize(-3)
    -3
    """
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def to_polars(data: Any) -> pl.DataFrame:
    if isinstance(data, pl.DataFrame):
        return data
    if hasattr(data, "num_rows"):  # Arrow
        return pl.from_arrow(data)
    return pl.from_pandas(data)


def neutralize_frame(df: pl.DataFrame) -> pl.DataFrame:
    """Neutralize every string column of a polars frame."""
    exprs = []
    for name, dtype in df.schema.items():
        if dtype == pl.Utf8:
            col = pl.col(name)
            exprs.append(
                pl.when(col.str.contains(r"^[=+\-@\t\r]")).then(pl.lit("'") + col).otherwise(col).alias(name)
            )
    return df.with_columns(exprs) if exprs else df


def write_table(data: Any, path: str | Path) -> Path:
    """Write a table as Parquet when ``path`` ends in ``.parquet``, XLSX for ``.xlsx``, else CSV."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    df = to_polars(data)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        df.write_parquet(path)
    elif suffix == ".xlsx":
        write_xlsx({"data": df}, path)
    else:
        df = neutralize_frame(df)
        # Nested columns (lists) do not fit CSV: write them as JSON-ish text.
        nested = [n for n, t in df.schema.items() if isinstance(t, (pl.List, pl.Struct, pl.Array))]
        if nested:
            df = df.with_columns([pl.col(n).map_elements(str, return_dtype=pl.Utf8) for n in nested])
        df.write_csv(path, datetime_format="%Y-%m-%dT%H:%M:%S%.f")
    return path


def write_xlsx(sheets: dict[str, Any], path: str | Path) -> Path:
    """One workbook, one sheet per table, cells neutralized, header frozen and filterable."""
    from openpyxl import Workbook
    from openpyxl.utils import get_column_letter

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    wb = Workbook()
    wb.remove(wb.active)
    for name, data in sheets.items():
        df = to_polars(data)
        ws = wb.create_sheet(title=str(name)[:31])
        ws.append(list(df.columns))
        for row in df.iter_rows():
            ws.append([_xlsx_cell(v) for v in row])
        ws.freeze_panes = "A2"
        if df.width:
            ws.auto_filter.ref = f"A1:{get_column_letter(df.width)}{max(df.height, 1) + 1}"
        for i, col in enumerate(df.columns, start=1):
            ws.column_dimensions[get_column_letter(i)].width = min(max(len(str(col)) + 2, 10), 60)
    wb.save(path)
    return path


def _xlsx_cell(v: Any) -> Any:
    if isinstance(v, (list, dict, tuple)):
        v = str(v)
    if hasattr(v, "tzinfo") and getattr(v, "tzinfo", None) is not None:
        v = v.replace(tzinfo=None)  # Excel has no zones; fleetfault times are UTC
    return neutralize(v)
