"""The review loop: texts the matcher was unsure of, out to a person and their codes back in.

``export_review`` reads ``tickets`` (rows with ``review`` true) and writes an XLSX with one
row per dimension and distinct text awaiting a code: how many tickets carry it, one
ticket's other fields for context, the matcher's top three suggestions, and an empty
``code`` column to fill in (a second sheet lists the allowed codes). ``import_review``
checks every filled-in code against the taxonomy and stores the answers in
``review_answers``; :func:`pipeline.run.recode` then codes and links the tickets again, so
those texts and their near variants are coded automatically from then on.
"""

from __future__ import annotations

import csv
import logging
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from pipeline.errors import UsageError
from pipeline.normalize import stage as _stage
from pipeline.normalize.stage import DIMENSIONS
from pipeline.output import neutralize
from pipeline.vocab.sql import literal

log = logging.getLogger(__name__)

SUGGESTIONS = 3
REVIEW_COLUMNS = (["dimension", "text", "tickets", "example_ticket", "context"]
                  + [c for i in range(1, SUGGESTIONS + 1) for c in (f"suggestion_{i}", f"score_{i}")]
                  + ["code"])

def allowed_codes(matcher) -> dict[str, dict[str, str]]:
    """dimension -> {code: description} of the taxonomy the matcher uses
    (``matcher.taxonomy.codes``, or ``matcher.codes(dimension)`` for a stand-in)."""
    tax = getattr(matcher, "taxonomy", None)
    out: dict[str, dict[str, str]] = {}
    for dim in DIMENSIONS:
        codes = tax.codes[dim] if tax is not None else {c: "" for c in matcher.codes(dim)}
        out[dim] = {str(k): str(getattr(v, "description", v) or "") for k, v in codes.items()}
    return out


def pending(wh) -> pl.DataFrame:
    """One row per (dimension, text) that some ticket needs a code for, most tickets first;
    then the texts the learned layer coded (``learned_code``, ``learned_score``), for a person
    to confirm or correct (their rows come after those without a code)."""
    parts = []
    for dim in DIMENSIONS:
        parts.append(f"""
            SELECT {literal(dim)} AS dimension, {dim}_text AS text, count(*) AS tickets,
                   min(t.service_point || ' ' || t.ticket_id) AS example_ticket,
                   min(concat_ws(' | ', part_text, symptom_text, action_text)) AS context,
                   max(l.code) AS learned_code, max(l.score) AS learned_score
            FROM tickets_coded t LEFT JOIN learned_codes l
              ON l.dimension = {literal(dim)} AND l.service_point = t.service_point AND l.ticket_id = t.ticket_id
            WHERE nullif(trim({dim}_text), '') IS NOT NULL
              AND ((review AND {dim}_code IS NULL) OR l.code IS NOT NULL)
            GROUP BY {dim}_text""")
    sql = (" UNION ALL ".join(parts)
           + " ORDER BY learned_code IS NOT NULL, dimension, tickets DESC, text")
    return wh.engine.pl(sql, step="texts awaiting review")


def export_review(wh, cfg, path: str | Path) -> int:
    """Write the texts awaiting review with suggestions to ``path`` (.xlsx or .csv); returns rows."""
    path = Path(path)
    todo = pending(wh)
    matcher = _stage.load_matcher(cfg, _stage.learned_answers(wh))
    rows = []
    for dim, text, n, example, context, learned_code, learned_score in todo.iter_rows():
        sugg = list(matcher.suggest(dim, text, k=SUGGESTIONS))
        if learned_code is not None:  # coded by the learned layer: its code first
            sugg = [(learned_code, learned_score)] + [s for s in sugg if s[0] != learned_code]
        sugg = sugg[:SUGGESTIONS]
        sugg += [(None, None)] * (SUGGESTIONS - len(sugg))
        flat = [v for code, score in sugg for v in (code, None if score is None else round(float(score), 1))]
        rows.append([dim, text, n, example, context, *flat, None])
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".xlsx":
        _write_xlsx(path, rows, allowed_codes(matcher))
    else:
        with open(path, "w", newline="", encoding="utf-8-sig") as f:
            w = csv.writer(f)
            w.writerow(REVIEW_COLUMNS)
            w.writerows([[neutralize(v) for v in r] for r in rows])
    return len(rows)


def _write_xlsx(path: Path, rows: list[list], codes: dict[str, dict[str, str]]) -> None:
    import openpyxl
    from openpyxl.worksheet.datavalidation import DataValidation

    book = openpyxl.Workbook()
    ws = book.active
    ws.title = "review"
    ws.append(REVIEW_COLUMNS)
    for r in rows:
        ws.append([neutralize(v) for v in r])
    code_col = openpyxl.utils.get_column_letter(len(REVIEW_COLUMNS))
    for dim in DIMENSIONS:
        lines = [i for i, r in enumerate(rows, start=2) if r[0] == dim]
        listing = ",".join(codes[dim])
        if lines and len(listing) <= 250:  # Excel's limit for an inline list
            dv = DataValidation(type="list", formula1=f'"{listing}"', allow_blank=True)
            dv.add(f"{code_col}{lines[0]}:{code_col}{lines[-1]}")
            ws.add_data_validation(dv)
    ref = book.create_sheet("codes")
    ref.append(["dimension", "code", "description"])
    for dim in DIMENSIONS:
        for code, desc in codes[dim].items():
            ref.append([dim, code, neutralize(desc)])
    book.save(path)


def read_answers(path: str | Path) -> list[tuple[int, dict[str, object]]]:
    """(row number, {column: value}) of a filled-in review file (.xlsx first sheet, or CSV)."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"review import: no such file {path}")
    if path.suffix.lower() in (".xlsx", ".xlsm"):
        import openpyxl

        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
        try:
            ws = book["review"] if "review" in book.sheetnames else book.worksheets[0]
            grid = [list(r) for r in ws.iter_rows(values_only=True)]
        finally:
            book.close()
    else:
        with open(path, newline="", encoding="utf-8-sig") as f:
            grid = list(csv.reader(f))
    if not grid:
        raise UsageError(f"review import: {path} is empty")
    header = [str(h or "").strip().lower() for h in grid[0]]
    missing = [c for c in ("dimension", "text", "code") if c not in header]
    if missing:
        raise UsageError(f"review import: {path} lacks the columns {missing}; it has {header}. "
                         "Use the file `fleetfault review export` wrote.")
    return [(i, dict(zip(header, r))) for i, r in enumerate(grid[1:], start=2)]


def _text(v: object) -> str:
    s = "" if v is None else str(v).strip()
    # export_review neutralized formula-like text with a leading ': take it off again.
    return s[1:] if s.startswith("'") and s[1:2] in ("=", "+", "-", "@") else s


def import_review(wh, cfg, path: str | Path) -> int:
    """Store the filled-in codes of a review file in ``review_answers``; nothing else
    (:func:`pipeline.run.recode` puts them to use).

    Every code is checked first; one bad code rejects the whole file (nothing stored)
    with a message listing each bad row and the allowed codes.

    Returns
    -------
    The number of answers stored.
    """
    canonical = _stage.canonical_key
    matcher = _stage.load_matcher(cfg, _stage.learned_answers(wh))
    codes = allowed_codes(matcher)
    answers, problems = {}, []
    for line, rec in read_answers(path):
        dim, text, code = _text(rec.get("dimension")).lower(), _text(rec.get("text")), _text(rec.get("code"))
        if not code:
            continue
        code = code.upper()
        if dim not in DIMENSIONS:
            problems.append(f"row {line}: dimension {dim!r} is not one of {', '.join(DIMENSIONS)}")
        elif code not in codes[dim]:
            problems.append(f"row {line}: {code!r} is not a {dim} code")
        elif not text:
            problems.append(f"row {line}: code {code} given for an empty text")
        else:
            answers[(dim, canonical(text))] = (dim, text, canonical(text), code)
    if problems:
        allowed = "; ".join(f"{d}: {', '.join(codes[d])}" for d in DIMENSIONS)
        shown = problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else [])
        raise UsageError(f"review import: {path}: nothing stored, {len(problems)} bad row(s): "
                         + "; ".join(shown) + f". Allowed codes: {allowed}")
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    frame = pl.DataFrame(
        [(d, t, c, code, str(path), now) for d, t, c, code in answers.values()],
        schema={"dimension": pl.Utf8, "text": pl.Utf8, "canonical": pl.Utf8, "code": pl.Utf8,
                "source_file": pl.Utf8, "imported_at": pl.Datetime("us")},
        orient="row",
    )
    replaced = " OR ".join(f"(dimension = {literal(d)} AND canonical = {literal(c)})" for d, _, c, _ in answers.values())
    with wh.transaction():
        if replaced:
            wh.engine.execute(f"DELETE FROM review_answers WHERE {replaced}", step="replace answers")
        wh.insert("review_answers", frame)
    return frame.height
