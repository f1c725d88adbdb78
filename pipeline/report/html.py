"""HTML building blocks for the report: escaped tables, figures, sections and the page.

Every value that reaches the page goes through :func:`esc` (``html.escape`` with quotes), so
ticket text and file names such as ``<script>...`` or ``"><img onerror=...>`` are shown as
text, never run. The page is one file: inline CSS (with print rules), PNG charts as data URIs,
no script, no web font, nothing fetched when it is opened.
"""

from __future__ import annotations

import html
import logging
import math
import re
from collections.abc import Callable, Iterable
from datetime import date, datetime
from pathlib import Path

import polars as pl

log = logging.getLogger(__name__)

_TEMPLATE = Path(__file__).with_name("templates") / "report.html"


def esc(value) -> str:
    """Text for HTML: escaped, quotes included; None becomes an empty string."""
    return "" if value is None else html.escape(str(value), quote=True)


def fmt_value(value, spec: str | None = None) -> str:
    """A cell as text: numbers with thousands separators, dates ISO, NaN as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if math.isinf(value):
            return "∞"
        return format(value, spec or ",.2f")
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return format(value, spec or ",d")
    if isinstance(value, datetime):
        return value.strftime(spec or "%Y-%m-%d %H:%M")
    if isinstance(value, date):
        return value.strftime(spec) if spec else value.isoformat()
    return str(value)


def table(df: pl.DataFrame, columns: Iterable[str] | None = None, *, formats: dict[str, str] | None = None,
          labels: dict[str, str] | None = None, limit: int = 50, css: str = "") -> str:
    """An escaped HTML table of (the first ``limit`` rows of) a polars frame."""
    cols = [c for c in (columns or df.columns) if c in df.columns]
    formats, labels = formats or {}, labels or {}
    head = "".join(f"<th>{esc(labels.get(c, c.replace('_', ' ')))}</th>" for c in cols)
    numeric = [df.schema[c].is_numeric() for c in cols]
    body = []
    for row in df.head(limit).select(cols).iter_rows():
        cells = []
        for c, v, num in zip(cols, row, numeric):
            cells.append(f'<td{" class=num" if num else ""}>{esc(fmt_value(v, formats.get(c)))}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = (f'<p class="note">Showing {limit} of {df.height:,} rows; the workbook has them all.</p>'
            if df.height > limit else "")
    return f'<table class="{esc(css)}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>{more}'


def figure(uri: str, alt: str, caption: str = "") -> str:
    """An embedded chart (a ``data:image/png`` URI made by :mod:`pipeline.report.charts`)."""
    if not uri.startswith("data:image/png;base64,"):
        raise ValueError("figure() takes a data:image/png;base64 URI from pipeline.report.charts")
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f'<figure><img class="chart" src="{uri}" alt="{esc(alt)}">{cap}</figure>'


def no_data(what: str, hint: str = "") -> str:
    """The plain statement a section shows when its table has no rows yet."""
    extra = f" {esc(hint)}" if hint else ""
    return f'<p class="nodata">No data yet: {esc(what)}.{extra}</p>'


def para(text: str) -> str:
    return f"<p>{esc(text)}</p>"


def bullets(items: Iterable[str]) -> str:
    return "<ul>" + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>"


def kpis(items: list[tuple[str, str]]) -> str:
    """Headline figures as tiles: (label, value)."""
    tiles = "".join(f'<div class="kpi"><div class="v">{esc(v)}</div><div class="l">{esc(k)}</div></div>'
                    for k, v in items)
    return f'<div class="kpis">{tiles}</div>'


def section(sid: str, title: str, body: str) -> str:
    return f'<section id="{esc(sid)}" data-section="{esc(sid)}"><h2>{esc(title)}</h2>{body}</section>'


def safe(render: Callable[[], str], what: str) -> str:
    """Render a section body; a failure in one section becomes a visible note, not a crash."""
    try:
        return render()
    except Exception as exc:  # one broken table must not cost the whole report
        log.warning("report section %s failed: %s", what, exc, exc_info=True)
        return f'<p class="nodata">This section could not be drawn: {esc(type(exc).__name__)}: {esc(exc)}</p>'


def page(title: str, subtitle: str, sections: list[tuple[str, str, str]], banner: str = "") -> str:
    """The whole document: ``sections`` are (id, title, body HTML) in order; ``banner`` (HTML,
    already escaped) is shown above them all."""
    nav = "".join(f'<a href="#{esc(sid)}">{esc(t)}</a>' for sid, t, _ in sections)
    body = "\n".join(section(sid, t, b) for sid, t, b in sections)
    shell = _TEMPLATE.read_text(encoding="utf-8")
    values = {"title": esc(title), "subtitle": esc(subtitle), "nav": nav, "banner": banner, "body": body}
    # one pass, so text that happens to contain "{{body}}" is never expanded
    return re.sub(r"\{\{(\w+)\}\}", lambda m: values.get(m.group(1), m.group(0)), shell)
