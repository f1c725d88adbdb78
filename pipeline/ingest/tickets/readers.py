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
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from pipeline.ingest import sniff
from pipeline.warehouse import Rejected

log = logging.getLogger(__name__)

#: Tried when no BOM says otherwise and no encoding is configured: UTF-8 when it decodes,
#: else the legacy encoding whose text looks most like text (:func:`_plausibility`).
ENCODINGS = ("utf-8", "gb18030", "cp1252", "big5")  # ties go to the earlier
SUFFIXES = (".csv", ".txt", ".tsv", ".xlsx", ".xlsm", ".xls", ".htm", ".html", ".json", ".jsonl", ".ndjson")


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
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as exc:
        first = exc
    # GBK, Big5 and Windows-1252 bytes often decode as each other: keep the most plausible text.
    best: tuple[float, str, str] | None = None
    for enc in ENCODINGS[1:]:
        try:
            text = data.decode(enc)
        except UnicodeDecodeError:
            continue
        score = _plausibility(text, enc)
        if best is None or score > best[0]:
            best = (score, text, enc)
    if best is None or best[0] < 0.5:
        raise first
    return best[1], best[2]


def _plausibility(text: str, enc: str = "gb18030") -> float:
    """Share of the non-ASCII characters that a ticket plausibly holds: CJK characters that
    are frequent in the script of ``enc`` (GB2312 for GBK text, Big5's common range for
    Big5), CJK punctuation, and accented Latin letters beside ASCII. Mojibake lands on rare
    characters, the other script and symbols."""
    head = text[:20000]
    odd = [i for i, c in enumerate(head) if ord(c) > 127]
    if not odd:
        return 1.0
    good = 0.0
    for i in odd:
        c = head[i]
        near = head[max(i - 1, 0):i] + head[i + 1:i + 2]
        if "\u4e00" <= c <= "\u9fff":
            # One character between ASCII letters (M黮ler) is what a Latin accent read as a
            # double-byte code looks like; Chinese words stand in runs or beside digits.
            sandwiched = len(near) == 2 and all(ch.isascii() and ch.isalpha() for ch in near)
            good += _common_cjk(c, enc) * (0.5 if sandwiched else 1.0)
        elif "\u3000" <= c <= "\u303f" or "\uff00" <= c <= "\uffef":
            good += 1
        elif c.isalpha() and "\u00c0" <= c <= "\u024f" or c in "°±²³µ·×÷€£§–—‘’“”…•":
            # Müller, arrêt, 85°C: an accent or a sign sits beside ASCII; CJK bytes read as
            # Windows-1252 give runs of accented letters and symbols instead.
            good += 1 if any(ch.isascii() for ch in near) else 0.3
    return good / len(odd)


#: Lead bytes of the frequent and the less frequent characters of each script:
#: GB2312 levels 1 and 2; Big5's common and less common characters.
_LEADS = {"gb18030": ("gb2312", (0xB0, 0xD7), (0xD8, 0xF7)), "big5": ("big5", (0xA4, 0xC6), (0xC9, 0xF9))}


def _common_cjk(c: str, enc: str) -> float:
    charset, (lo, hi), (lo2, hi2) = _LEADS.get(enc, _LEADS["gb18030"])
    try:
        lead = c.encode(charset)[0]
    except UnicodeEncodeError:
        return 0.0
    return 1.0 if lo <= lead <= hi else 0.5 if lo2 <= lead <= hi2 else 0.0


def read_csv(path: Path, encoding: str = "") -> FileRead:
    data = path.read_bytes()
    try:
        text, enc = decode(data, encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        tried = encoding or "BOM, utf-16, " + ", ".join(ENCODINGS)
        detail = f"not decodable as {tried}: {exc}; set tickets.points.<point>.encoding if you know it"
        raw = data[:400].decode("latin-1")
        return FileRead(rejects=[Rejected(None, "bad_encoding", raw, detail)])
    lines = text.splitlines()
    sheet = Sheet(path.name)
    start = 1
    # Excel's "sep=;" first line names the delimiter.
    sep = re.match(r"^\ufeff?sep=(.)\s*$", lines[0]) if lines else None
    if sep:
        delimiter, text, start = sep.group(1), text[text.index("\n") + 1:] if "\n" in text else "", 2
    else:
        delimiter = sniff_delimiter(text)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    offset = start - 1
    try:
        for cells in reader:
            end = reader.line_num + offset
            sheet.rows.append((start, cells))
            sheet.raw[start] = "\n".join(lines[start - 1:end])
            start = end + 1
    except csv.Error as exc:  # e.g. a NUL inside the text, or a field past the size limit
        return FileRead([sheet], [Rejected(start, "bad_csv", "\n".join(lines[start - 1:start + 2]), str(exc))], enc)
    return FileRead([sheet], [], enc)


def sniff_delimiter(text: str, candidates: str = ",;\t|") -> str:
    """The delimiter that splits the first lines into the most rows of one common width.

    Deterministic where ``csv.Sniffer`` guesses: a title row, a quoted newline or a comma
    inside a semicolon-separated description does not mislead it.
    """
    sample = text[:16384]
    cut = sample.rfind("\n")
    sample = sample[:cut] if cut > 0 else sample
    best, best_score = ",", (0, 0)
    for d in candidates:
        if d not in sample:
            continue
        try:
            widths = [len(r) for r in csv.reader(io.StringIO(sample, newline=""), delimiter=d)][:50]
        except csv.Error:
            continue
        widths = [w for w in widths if w > 1]
        if not widths:
            continue
        common = max(set(widths), key=lambda w: (widths.count(w), w))
        score = (widths.count(common), common)
        if score > best_score:
            best, best_score = d, score
    return best


def read_xlsx(path: Path) -> FileRead:
    import openpyxl

    try:
        # data_only=False: a formula cell (=cmd|...) is kept as its text, never evaluated.
        # From bytes, not the name: openpyxl refuses a workbook whose name ends in .csv.
        book = openpyxl.load_workbook(io.BytesIO(path.read_bytes()), read_only=True, data_only=False)
    except Exception as exc:  # openpyxl raises many kinds for a damaged file
        return FileRead(rejects=[Rejected(None, "bad_xlsx", str(path), f"not a readable workbook: {type(exc).__name__}: {exc}")])
    out = FileRead(encoding="xlsx")
    try:
        states = {s.title: getattr(s, "sheet_state", "visible") for s in book.worksheets}
        for ws in book.worksheets:
            if states.get(ws.title) != "visible":
                log.info("%s: hidden sheet %r skipped", path, ws.title)
                continue
            sheet = Sheet(ws.title)
            for i, row in enumerate(ws.iter_rows(values_only=True), start=1):
                sheet.rows.append((i, list(row)))
            out.sheets.append(sheet)
    finally:
        book.close()
    return out


def read_xls(path: Path) -> FileRead:
    """An Excel 97-2003 workbook (the OLE2 ``.xls`` older OEM portals still export), read with
    xlrd like :func:`read_xlsx`: hidden sheets skipped, date cells as datetimes, numbers kept as
    numbers (a serial typed as a number is cleaned later, as for XLSX)."""
    import xlrd

    try:
        # xlrd prints its warnings to stdout unless given a log: keep the run's output clean.
        book = xlrd.open_workbook(file_contents=path.read_bytes(), on_demand=True, logfile=_XlrdLog(path))
    except Exception as exc:  # xlrd raises XLRDError, CompDocError, struct.error ... for a damaged file
        return FileRead(rejects=[Rejected(None, "bad_xls", str(path), f"not a readable workbook: {type(exc).__name__}: {exc}")])
    out = FileRead(encoding="xls")
    try:
        for index in range(book.nsheets):
            ws = book.sheet_by_index(index)
            if ws.visibility != 0:
                log.info("%s: hidden sheet %r skipped", path, ws.name)
                continue
            sheet = Sheet(ws.name)
            for i in range(ws.nrows):
                sheet.rows.append((i + 1, [_xls_value(c, book.datemode) for c in ws.row(i)]))
            out.sheets.append(sheet)
            book.unload_sheet(index)
    finally:
        book.release_resources()
    return out


class _XlrdLog(io.StringIO):
    """xlrd's log (``WARNING *** file size ...``), sent to the logging module."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def write(self, text: str) -> int:
        if text.strip():
            log.info("%s: xlrd: %s", self.path, text.strip())
        return len(text)


def _xls_value(cell, datemode: int) -> object:
    import xlrd

    if cell.ctype in (xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK):
        return None
    if cell.ctype == xlrd.XL_CELL_DATE:
        try:
            return xlrd.xldate_as_datetime(cell.value, datemode)
        except (ValueError, OverflowError):
            return cell.value
    if cell.ctype == xlrd.XL_CELL_ERROR:
        return xlrd.error_text_from_code.get(cell.value, "#ERR")
    if cell.ctype == xlrd.XL_CELL_BOOLEAN:
        return bool(cell.value)
    return cell.value


_RECORD_KEYS = ("records", "tickets", "data", "items", "rows", "results", "result", "issues", "incidents", "cases",
                "list", "content", "entries", "hits", "value")


def read_json(path: Path, encoding: str = "") -> FileRead:
    """A JSON list of objects, ``{"records": [...]}`` (or tickets/data/items), or JSONL."""
    data = path.read_bytes()
    try:
        text, enc = decode(data, encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        return FileRead(rejects=[Rejected(None, "bad_encoding", data[:400].decode("latin-1"), str(exc))])
    records: list[tuple[int, object, str]] = []
    rejects: list[Rejected] = []
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        doc = None
        if _is_jsonl(text) or isinstance(exc, RecursionError):
            for n, line in enumerate(text.splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    records.append((n, json.loads(line), line))
                except (json.JSONDecodeError, RecursionError) as err:
                    rejects.append(Rejected(n, "bad_json", line, str(err)))
        else:  # one document, cut short or damaged: keep the records before the damage
            records, rejects = _salvage(text, exc)
    if doc is not None:
        doc = _record_list(doc)
        records = [(i, r, json.dumps(r, ensure_ascii=False)) for i, r in enumerate(doc, start=1)]
    records = [(n, flatten(r) if isinstance(r, dict) else r, raw) for n, r, raw in records]
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


def _is_jsonl(text: str) -> bool:
    """JSON Lines: the first non-blank line is a whole JSON value by itself."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        json.loads(first)
    except (json.JSONDecodeError, RecursionError):
        return False
    return True


def _salvage(text: str, exc: json.JSONDecodeError) -> tuple[list[tuple[int, object, str]], list[Rejected]]:
    """The whole records of a JSON document that is cut short (a dump killed mid-write) or
    damaged, and one ``bad_json`` reject for the rest: the records are read one by one from
    the first list that holds objects (``[{...}, {...``, ``{"data": {"list": [{...``)."""
    dec = json.JSONDecoder()
    m = re.search(r"\[\s*\{", text)
    records: list[tuple[int, object, str]] = []
    pos = m.start() + 1 if m else len(text)
    while m:
        pos = _skip(text, pos, " \t\r\n,")
        if pos >= len(text) or text[pos] != "{":
            break
        try:
            rec, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            break
        records.append((len(records) + 1, rec, text[pos:end]))
        pos = end
    what = "cut short" if exc.pos >= len(text.rstrip()) - 1 else "damaged"
    detail = (f"the JSON document is {what} ({exc.msg} at line {exc.lineno} column {exc.colno}); record "
              f"{len(records) + 1} on is lost, the {len(records)} whole records before it were read")
    return records, [Rejected(len(records) + 1, "bad_json", text[pos:pos + 400], detail)]


def _skip(text: str, pos: int, chars: str) -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def _record_list(doc: object, depth: int = 0) -> list:
    """The list of records in an API response: the document itself, or the list under
    ``records``/``data``/``items``..., however deep (``{"data": {"items": [...]}}``)."""
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict) and depth < 4:
        for k in _RECORD_KEYS:
            v = doc.get(k)
            if isinstance(v, list) or (isinstance(v, dict) and _record_list(v, depth + 1) is not None):
                return _record_list(v, depth + 1)
        # A portal's own name for the list (``rmaRequests``, ``workOrders``): its one list of objects.
        lists = [v for v in doc.values() if isinstance(v, list) and v and all(isinstance(i, dict) for i in v)]
        if len(lists) == 1 and depth == 0 and not any(isinstance(v, (str, int, float)) and k in _ID_KEYS
                                                      for k, v in doc.items()):
            return lists[0]
        return [doc] if depth == 0 else None
    return [doc] if depth == 0 else None


#: Keys that make an object one ticket, not an envelope around a list of them.
_ID_KEYS = ("id", "key", "number", "ticket_id", "ticketId", "ticket", "rmaNumber", "caseNumber", "工单号", "工单编号")


#: Keys whose text is the content of a comment object (``{"author": ..., "body": ...}``).
_COMMENT_KEYS = ("body", "text", "content", "comment", "message", "note", "value", "内容", "备注")


def flatten(rec: dict, prefix: str = "") -> dict:
    """Nested objects to dotted keys (``{"device": {"sn": 1}}`` -> ``device.sn``), lists of
    comments to their texts, one a line."""
    out: dict = {}
    for k, v in rec.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and "display_value" in v:  # a ServiceNow reference field
            out[key] = v["display_value"]
        elif isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif isinstance(v, list) and not v:
            continue  # an empty list says nothing (no parts swapped), and makes no column of its own
        elif isinstance(v, list) and _is_item_list(v):
            # A list of objects that are not comments (parts swapped, attachments): one
            # column per key, ``parts[].oldSn``, each cell a list with one value per item.
            items = [flatten(item) for item in v]
            for k in dict.fromkeys(k for item in items for k in item):
                out[f"{key}[].{k}"] = [item.get(k) for item in items]
        elif isinstance(v, list):
            out[key] = _list_text(v)
        else:
            out[key] = v
    return out


def _is_item_list(items: list) -> bool:
    """A list of objects none of which is a comment (``{"author": .., "body": ..}``)."""
    return bool(items) and all(isinstance(i, dict) for i in items) and not any(
        isinstance(i.get(k), str) for i in items for k in _COMMENT_KEYS)


def _list_text(items: list) -> str | None:
    parts = []
    for item in items:
        if isinstance(item, dict):
            text = next((item[k] for k in _COMMENT_KEYS if isinstance(item.get(k), str)), None)
            parts.append(text if text is not None else json.dumps(item, ensure_ascii=False))
        elif item is not None and str(item).strip():
            parts.append(item if isinstance(item, str) else json.dumps(item, ensure_ascii=False))
    return "\n".join(parts) or None


def _json_cell(v: object) -> object:
    if isinstance(v, list):  # a list-of-objects column (see flatten): its values, as they are
        return [_json_cell(x) for x in v]
    if isinstance(v, dict):
        return json.dumps(v, ensure_ascii=False)
    return v


class _TableParser(HTMLParser):
    """The cells of every ``<table>`` of an HTML page, ``<br>`` kept as a line break."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th") and self.tables and self.tables[-1]:
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            text = re.sub(r"[ \t\r\n]*\n[ \t\r\n]*", "\n", "".join(self._cell)).strip()
            self.tables[-1][-1].append(re.sub(r"[ \t]+", " ", text))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data.replace("\n", " "))


def read_html(path: Path, encoding: str = "") -> FileRead:
    """An HTML table, as many web portals export "Excel" files (``工单导出.xls``)."""
    data = path.read_bytes()
    meta = re.search(rb"charset=[\"']?([\w-]+)", data[:4096], re.I)
    try:
        text, enc = decode(data, encoding or (meta.group(1).decode("ascii") if meta else ""))
    except (UnicodeDecodeError, LookupError) as exc:
        return FileRead(rejects=[Rejected(None, "bad_encoding", data[:400].decode("latin-1"), str(exc))])
    parser = _TableParser()
    parser.feed(text)
    parser.close()
    if not parser.tables:
        return FileRead(rejects=[Rejected(None, "no_table", text[:400], "an HTML page without a table")], encoding=enc)
    sheets = []
    for n, table in enumerate(parser.tables, start=1):
        sheet = Sheet(path.name if len(parser.tables) == 1 else f"{path.name}#{n}")
        sheet.rows = [(i, row) for i, row in enumerate(table, start=1) if row]
        sheets.append(sheet)
    return FileRead(sheets, [], enc)


_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def read_export(path: Path, encoding: str = "") -> FileRead:
    """Read one export by what its first bytes say it is, else by its suffix: portals name
    HTML tables and tab-separated text ``.xls``, and a workbook may be called ``.csv``."""
    with open(path, "rb") as fh:
        head = fh.read(512)
    suffix = path.suffix.lower()
    if head.startswith(b"PK\x03\x04") and suffix not in (".json", ".jsonl", ".ndjson"):
        return read_xlsx(path)
    if head.startswith(_OLE2):
        return read_xls(path)
    if (problem := sniff.file_problem(path, utf16=True, legacy=True, gzip=False)) is not None:
        if problem.reason == "binary_file" and suffix in (".xlsx", ".xlsm", ".xls"):
            problem = sniff.Problem("bad_xlsx" if suffix != ".xls" else "bad_xls",
                                    f"not an Excel workbook (no workbook signature); {problem.detail}")
        return FileRead(rejects=[problem.rejected(head[:400].decode("latin-1"))])
    if re.match(rb"\s*(?:\xef\xbb\xbf)?\s*<(?:!doctype\s+html|html|table|meta|head)", head, re.I):
        if suffix in (".json", ".jsonl", ".ndjson"):  # an API's login or error page saved as the dump
            return FileRead(rejects=[Rejected(None, "bad_json", head[:400].decode("latin-1"),
                                              "an HTML page (a login or error page?), not JSON")])
        return read_html(path, encoding)
    if suffix in (".json", ".jsonl", ".ndjson"):
        return read_json(path, encoding)
    return read_csv(path, encoding)
