"""Read a ticket export (CSV in any common encoding, XLSX, JSON, JSONL) into raw rows.

A reader returns :class:`Sheet` objects: rows of cells with their 1-based line (CSV,
JSONL), row (XLSX) or record (JSON) number. It knows nothing of the ticket schema; the
header is found later among the first rows (exports put a title row above it).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.warehouse import Rejected

log = logging.getLogger(__name__)

#: Tried in order when no BOM says otherwise and no encoding is configured.
ENCODINGS = ("utf-8", "gb18030")
SUFFIXES = (".csv", ".txt", ".tsv", ".xlsx", ".xlsm", ".json", ".jsonl", ".ndjson")


@dataclass
class Sheet:
    name: str
    rows: list[tuple[int, list]] = field(default_factory=list)  # (line number, cells)
    # CSV only: the raw text of each line number, for the quarantine.
    raw: dict[int, str] = field(default_factory=dict)
    # JSON: the header is given, not found among the rows.
    header: list[str] | None = None


@dataclass
class FileRead:
    sheets: list[Sheet] = field(default_factory=list)
    rejects: list[Rejected] = field(default_factory=list)
    encoding: str = ""


def decode(data: bytes, encoding: str = "") -> tuple[str, str]:
    """Bytes to text: the configured encoding, else the BOM's, else the first of
    :data:`ENCODINGS` that decodes the whole file. Raises UnicodeDecodeError when none does."""
    if encoding:
        return data.decode(encoding), encoding
    for bom, enc in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return data.decode(enc), enc
    # UTF-16 without a BOM: every other byte of ASCII text is zero.
    head = data[:4096]
    if len(head) >= 4 and head[1::2].count(0) > 0.4 * len(head[1::2]):
        return data.decode("utf-16-le"), "utf-16-le"
    if len(head) >= 4 and head[0::2].count(0) > 0.4 * len(head[0::2]):
        return data.decode("utf-16-be"), "utf-16-be"
    if b"\x00" in head:
        raise UnicodeDecodeError("binary", data, data.index(b"\x00"), data.index(b"\x00") + 1, "NUL byte: not a text file")
    last: UnicodeDecodeError | None = None
    for enc in ENCODINGS:
        try:
            return data.decode(enc), enc
        except UnicodeDecodeError as exc:
            last = exc
    assert last is not None
    raise last


def read_csv(path: Path, encoding: str = "") -> FileRead:
    data = path.read_bytes()
    try:
        text, enc = decode(data, encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        tried = encoding or "BOM, utf-16, " + ", ".join(ENCODINGS)
        detail = f"not decodable as {tried}: {exc}; set tickets.points.<point>.encoding if you know it"
        raw = data[:400].decode("latin-1")
        return FileRead(rejects=[Rejected(None, "undecodable", raw, detail)])
    sample = text[:8192]
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
        delimiter = dialect.delimiter
    except csv.Error:
        delimiter = ","
    lines = text.splitlines()
    sheet = Sheet(path.name)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    start = 1
    try:
        for cells in reader:
            end = reader.line_num
            sheet.rows.append((start, cells))
            sheet.raw[start] = "\n".join(lines[start - 1:end])
            start = end + 1
    except csv.Error as exc:  # e.g. a NUL inside the text, or a field past the size limit
        return FileRead([sheet], [Rejected(start, "bad_csv", "\n".join(lines[start - 1:start + 2]), str(exc))], enc)
    return FileRead([sheet], [], enc)


def read_xlsx(path: Path) -> FileRead:
    import openpyxl

    try:
        # data_only=False: a formula cell (=cmd|...) is kept as its text, never evaluated.
        book = openpyxl.load_workbook(path, read_only=True, data_only=False)
    except Exception as exc:  # openpyxl raises many kinds for a damaged file
        return FileRead(rejects=[Rejected(None, "unreadable_xlsx", str(path), f"{type(exc).__name__}: {exc}")])
    out = FileRead(encoding="xlsx")
    try:
        for ws in book.worksheets:
            sheet = Sheet(ws.title)
            for i, row in enumerate(ws.iter_rows(values_only=True), start=1):
                sheet.rows.append((i, list(row)))
            out.sheets.append(sheet)
    finally:
        book.close()
    return out


_RECORD_KEYS = ("records", "tickets", "data", "items", "rows", "results")


def read_json(path: Path, encoding: str = "") -> FileRead:
    """A JSON list of objects, ``{"records": [...]}`` (or tickets/data/items), or JSONL."""
    data = path.read_bytes()
    try:
        text, enc = decode(data, encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        return FileRead(rejects=[Rejected(None, "undecodable", data[:400].decode("latin-1"), str(exc))])
    records: list[tuple[int, object, str]] = []
    rejects: list[Rejected] = []
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        doc = None
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append((n, json.loads(line), line))
            except json.JSONDecodeError as exc:
                rejects.append(Rejected(n, "bad_json", line, str(exc)))
    if doc is not None:
        if isinstance(doc, dict):
            key = next((k for k in _RECORD_KEYS if isinstance(doc.get(k), list)), None)
            doc = doc[key] if key else [doc]
        if not isinstance(doc, list):
            doc = [doc]
        records = [(i, r, json.dumps(r, ensure_ascii=False)) for i, r in enumerate(doc, start=1)]
    header: list[str] = []
    for _, rec, _ in records:
        if isinstance(rec, dict):
            header.extend(k for k in rec if k not in header)
    sheet = Sheet(path.name, header=header)
    for n, rec, raw in records:
        if not isinstance(rec, dict):
            rejects.append(Rejected(n, "bad_json", raw, f"a record must be an object, got {type(rec).__name__}"))
            continue
        cells = [_json_cell(rec.get(k)) for k in header]
        sheet.rows.append((n, cells))
        sheet.raw[n] = raw
    return FileRead([sheet], rejects, enc)


def _json_cell(v: object) -> object:
    if isinstance(v, (dict, list)):
        return json.dumps(v, ensure_ascii=False)
    return v


def read_export(path: Path, encoding: str = "") -> FileRead:
    """Read one export by its suffix."""
    suffix = path.suffix.lower()
    if suffix in (".xlsx", ".xlsm"):
        return read_xlsx(path)
    if suffix in (".json", ".jsonl", ".ndjson"):
        return read_json(path, encoding)
    return read_csv(path, encoding)
