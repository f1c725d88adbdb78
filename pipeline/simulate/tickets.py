"""Service tickets as each service point exports them.

Reads the service rows of a :class:`~pipeline.simulate.process.FleetSim`; writes
``DATA/tickets/<point>/tickets-YYYY-MM.<ext>`` and returns the truth rows.

Every point has its own columns, language, date format and encoding:

==========  ===================  ====================================================
sha-sp1     CSV, GBK             Chinese headers, ``2025/3/5 10:11``, Chinese and mixed text
sha-sp2     XLSX                 English headers, Excel date cells, mixed text
sjc-depot   CSV, UTF-8 with BOM  ``03/05/2025 10:11 AM``, English
fra-rz1     JSON                 ``05.03.2025 10:11``, English
iad-noc     XLSX                 ``2025-03-05 10:11:12`` text, part/summary/resolution
iad-vendor  CSV, UTF-8           ISO 8601 UTC ``2025-03-05T15:11:12Z``, terse English
==========  ===================  ====================================================

The text is composed, not templated: a sentence frame, a phrase per code from a broad
vocabulary, a slot reference, sometimes the model or host, then abbreviations, typos, case
changes and full-width characters. Serials are sometimes mistyped or missing (then host and
slot identify the GPU).
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np

from pipeline.simulate import vocab
from pipeline.simulate.process import NAMED_PART

POINT_STYLE = {
    "sha-sp1": ("zh", "csv_gbk"), "sha-sp2": ("mixed", "xlsx"), "sjc-depot": ("en", "csv_bom"),
    "fra-rz1": ("en", "json"), "iad-noc": ("en", "xlsx_noc"), "iad-vendor": ("en", "csv_vendor"),
}
ID_PREFIX = {"sha-sp1": "SH", "sha-sp2": "SHA2-", "sjc-depot": "SJC", "fra-rz1": "RZ1-", "iad-noc": "NOC-",
             "iad-vendor": "CASE"}


def _pick(rng: np.random.Generator, seq):
    return seq[int(rng.integers(len(seq)))]


def _is_zh(s: str) -> bool:
    return any("\u4e00" <= c <= "\u9fff" for c in s)


_GPU_ONLY = ("HBM", "显存", "Xid", "xid", "GPU", "gpu", "DBE", "nvidia-smi", "card", "卡", "row", "page")


def _phrase(rng, table: dict, code: str, lang: str, gpu: bool = True) -> str:
    opts = table[code]
    if not gpu:
        opts = tuple(o for o in opts if not any(w in o for w in _GPU_ONLY)) or opts
    if lang == "en":
        en = [o for o in opts if not _is_zh(o)]
        opts = en or opts
    elif lang == "zh" and rng.random() < 0.75:
        zh = [o for o in opts if _is_zh(o)]
        opts = zh or opts
    return _pick(rng, opts)


def _fill(rng, template: str) -> str:
    """Numbers in a detail phrase: counts, temperatures, link widths, RPMs, driver versions."""
    return template.format(
        big=int(rng.choice([int(rng.integers(50, 999)), int(rng.integers(1000, 99999))])),
        small=int(rng.integers(1, 9)), temp=int(rng.integers(86, 104)), w=int(rng.choice([1, 2, 4, 8])),
        g=int(rng.integers(1, 4)), rpm=int(rng.choice([0, 0, int(rng.integers(300, 2000))])),
        sxid=int(rng.choice([12028, 19084, 20034, 11004, 22013])), pct=int(rng.integers(10, 70)),
        drv=str(rng.choice(["535.104.05", "550.54.15", "470.82.01"])), post=f"{int(rng.integers(0x10, 0xff)):02X}")


def _typo(rng, s: str) -> str:
    """One keyboard slip in a Latin word: swap, drop or double a letter."""
    idx = [i for i, c in enumerate(s) if c.isascii() and c.isalpha()]
    if len(idx) < 4:
        return s
    i = idx[int(rng.integers(1, len(idx) - 1))]
    k = int(rng.integers(3))
    if k == 0 and i + 1 < len(s):
        return s[:i] + s[i + 1] + s[i] + s[i + 2:]
    if k == 1:
        return s[:i] + s[i + 1:]
    return s[:i] + s[i] + s[i:]


def _fullwidth(s: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalnum() else c for c in s)


def _mangle(rng, s: str, lang: str) -> str:
    words = s.split(" ")
    for i, w in enumerate(words):
        low = w.lower().strip(",.")
        if low in vocab.ABBREV and rng.random() < 0.35:
            words[i] = _pick(rng, vocab.ABBREV[low])
    s = " ".join(words)
    r = rng.random()
    if r < 0.12:
        s = _typo(rng, s)
    elif r < 0.18:
        s = s.upper()
    elif r < 0.28:
        s = s.lower()
    if lang != "en" and rng.random() < 0.15:
        s = _fullwidth(s)
    return s


def _urgency(rng, s: str, lang: str) -> str:
    if rng.random() < 0.1:
        s = s + _pick(rng, (" !!", "?", " (urgent)", " pls check", " 紧急" if lang != "en" else " asap", "..."))
    return s


def vocabulary(seed: int, keep: float = 0.7) -> dict[str, dict[str, tuple[str, ...]]]:
    """The phrase tables a fleet's technicians use: a seed-dependent share of each code's
    phrases (at least one English and one Chinese where the code has them), so that a matcher
    tuned on one simulated fleet meets unseen wording in another."""
    rng = np.random.default_rng([int(seed), 0x70CA])
    out = {}
    for name, table in (("part", vocab.PART), ("symptom", vocab.SYMPTOM), ("action", vocab.ACTION),
                        ("detail", vocab.SYMPTOM_DETAIL)):
        out[name] = {}
        for code, phrases in table.items():
            kept = [p for p in phrases if rng.random() < keep]
            for zh in (False, True):
                if not any(_is_zh(p) == zh for p in kept):
                    pool = [p for p in phrases if _is_zh(p) == zh]
                    if pool:
                        kept.append(pool[int(rng.integers(len(pool)))])
            out[name][code] = tuple(p for p in phrases if p in kept)
    return out


def ticket_text(rng, row: dict, lang: str, new_serial: str | None,
                words: dict[str, dict[str, tuple[str, ...]]] | None = None) -> tuple[str, str, str]:
    """(part_text, symptom_text, action_text) for one service row, from ``words``
    (:func:`vocabulary`; default: the whole vocabulary)."""
    if words is None:
        words = {"part": vocab.PART, "symptom": vocab.SYMPTOM, "action": vocab.ACTION, "detail": vocab.SYMPTOM_DETAIL}
    if lang == "mixed":
        lang_now = _pick(rng, ("en", "zh", "mix"))
    else:
        lang_now = lang if rng.random() < 0.85 else ("mix" if lang == "zh" else "en")
    plang = "zh" if lang_now in ("zh", "mix") else "en"
    part = _phrase(rng, words["part"], NAMED_PART.get(row.get("kind"), row["part_code"]), plang)
    gpu = row["part_code"] in ("GPU", "NONE", "SOFTWARE") and row["slot"] is not None
    sym = _phrase(rng, words["symptom"], row["symptom_code"], plang if lang_now != "mix" else _pick(rng, ("en", "zh")), gpu)
    act = _phrase(rng, words["action"], row["action_code"], plang)
    n = row["slot"] if row["slot"] is not None else None
    slot = ""
    if n is not None:
        slot = _pick(rng, vocab.SLOT_ZH if plang == "zh" and rng.random() < 0.6 else vocab.SLOT_EN).format(n=n)
    frames = {"en": vocab.FRAMES_EN, "zh": vocab.FRAMES_ZH, "mix": vocab.FRAMES_MIXED}[lang_now]
    frame = _pick(rng, frames)
    if n is None:
        frames = tuple(f for f in frames if "{slot}" not in f and "{n}" not in f) or ("{sym}",)
        frame = _pick(rng, frames)
    if rng.random() < 0.35 and row["symptom_code"] in words["detail"]:
        detail = _fill(rng, _phrase(rng, words["detail"], row["symptom_code"], plang))
        sym = detail if rng.random() < 0.4 else f"{sym}, {detail}" if plang == "en" else f"{sym}，{detail}"
    if rng.random() < 0.2:
        ctx = _fill(rng, _pick(rng, vocab.CONTEXT_ZH if plang == "zh" else vocab.CONTEXT_EN))
        sym = f"{sym} ({ctx})" if plang == "en" else f"{sym}，{ctx}"
    if rng.random() < 0.25:
        mods = vocab.PART_MOD_ZH if _is_zh(part) else vocab.PART_MOD_EN
        part = _pick(rng, mods).format(p=part, k=int(rng.integers(0, 8)))
    model = row["model"] if rng.random() < 0.8 else row["model"].split(" ")[0]
    symptom_text = frame.format(sym=sym, slot=slot, host=row["host"], model=model, n=n).strip(" -:，")
    symptom_text = " ".join(symptom_text.split())
    if row["part_code"] == "GPU" and rng.random() < 0.3:
        part = f"{model} {part}" if rng.random() < 0.5 else f"{part} ({model})"
    if row["action_code"] == "REPLACE" and new_serial and rng.random() < 0.35:
        act = f"{act}, new SN {new_serial}" if plang == "en" else f"{act}，新SN {new_serial}"
    return (_mangle(rng, part, lang_now), _urgency(rng, _mangle(rng, symptom_text, lang_now), lang_now),
            _mangle(rng, act, lang_now))


def _serial_written(rng, serial: str | None) -> str:
    if not serial:
        return ""
    r = rng.random()
    if r < 0.18:
        return ""  # technician only wrote host and slot
    if r < 0.28:
        i = int(rng.integers(len(serial)))
        return serial[:i] + str((int(serial[i]) + int(rng.integers(1, 9))) % 10) + serial[i + 1:]
    if r < 0.33:
        i = int(rng.integers(len(serial) - 1))
        return serial[:i] + serial[i + 1] + serial[i] + serial[i + 2:]
    if r < 0.38:
        return "SN:" + serial
    return serial


def write_tickets(sim, out: Path, new_serials: dict[str, str], layouts: str = "default") -> list[dict]:
    """Write every point's exports; returns truth rows (one per ticket). ``layouts="field"``
    writes most points in layouts the default does not use
    (:mod:`pipeline.simulate.field_layouts`); the tickets and their truth are the same."""
    from pipeline.simulate import field_layouts

    rng = np.random.default_rng([sim.seed, 0x71C])
    words = vocabulary(sim.seed)
    by_point: dict[str, list[dict]] = {}
    truth: list[dict] = []
    counters: dict[str, int] = {}
    for row in sim.service_rows:
        p = row["service_point"]
        lang, _ = POINT_STYLE[p]
        counters[p] = counters.get(p, int(rng.integers(1000, 9000))) + int(rng.integers(1, 4))
        tid = f"{ID_PREFIX[p]}{counters[p]:06d}"
        new_sn = new_serials.get(row["serial"]) if row["is_replacement"] else None
        base = field_layouts.SLOT_BASE.get(p, 0) if layouts == "field" and row["slot"] is not None else 0
        part, sym, act = ticket_text(rng, {**row, "slot": row["slot"] + base} if base else row, lang, new_sn, words)
        sn = _serial_written(rng, row["serial"])
        rec = {**row, "ticket_id": tid, "part_text": part, "symptom_text": sym, "action_text": act,
               "serial_text": sn, "new_serial": new_sn}
        rec["host_text"] = row["host"].upper() if rng.random() < 0.06 else row["host"]
        by_point.setdefault(p, []).append(rec)
        truth.append({"service_point": p, "ticket_id": tid, "serial": row["serial"] or "", "host": row["host"],
                      "slot": row["slot"], "opened_at": row["opened_at"], "event_at": row["event_at"],
                      "part_code": row["part_code"], "symptom_code": row["symptom_code"],
                      "action_code": row["action_code"], "is_replacement": int(row["is_replacement"]),
                      "kind": row["kind"], "serial_written": sn})
    for p, recs in sorted(by_point.items()):
        folder = out / p
        folder.mkdir(parents=True, exist_ok=True)
        if layouts == "field" and field_layouts.write_point(p, folder, recs, sim):
            continue
        if p in SNAPSHOT_POINTS:
            _write_snapshots(folder, recs, sim)
            continue
        months: dict[str, list[dict]] = {}
        for r in recs:
            months.setdefault(r["opened_at"].strftime("%Y-%m"), []).append(r)
        for month, rs in sorted(months.items()):
            _WRITERS[POINT_STYLE[p][1]](folder / f"tickets-{month}", rs, sim)
    return truth


#: Points that export weekly snapshots of the last four weeks: a ticket appears in several
#: files, first open (no resolution yet), later closed. The latest version is the truth.
SNAPSHOT_POINTS = {"iad-noc"}
SNAPSHOT_EVERY_DAYS, SNAPSHOT_SPAN_DAYS = 7, 28


def _write_snapshots(folder: Path, recs: list[dict], sim) -> None:
    from datetime import timedelta

    t = sim.start + timedelta(days=SNAPSHOT_EVERY_DAYS)
    while True:
        last = t >= sim.end
        t = min(t, sim.end)
        rows = []
        for r in recs:
            if t - timedelta(days=SNAPSHOT_SPAN_DAYS) <= r["opened_at"] < t:
                rows.append({**r, "_open": r["closed_at"] > t})
        if rows:
            _w_xlsx_noc(folder / f"cases-{t:%Y-%m-%d}", rows, sim)
        if last:
            break
        t += timedelta(days=SNAPSHOT_EVERY_DAYS)


def _local(t: datetime, tz: str) -> datetime:
    return t.replace(tzinfo=timezone.utc).astimezone(ZoneInfo(tz)).replace(tzinfo=None)


def _tz(r: dict) -> str:
    from pipeline.simulate.fleet import SITE_BY_NAME

    return SITE_BY_NAME[r["site"]].tz


def _slot(r: dict) -> str:
    return "" if r["slot"] is None else str(r["slot"])


def _csv_bytes(header: list[str], rows: list[list], encoding: str) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue().encode(encoding)


def _w_csv_gbk(stem: Path, rs: list[dict], sim) -> None:
    header = ["工单编号", "报修时间", "机房", "主机名", "GPU槽位", "序列号", "故障部件", "故障现象", "处理方式", "状态", "完成时间"]
    rows = []
    for r in rs:
        o, c = _local(r["opened_at"], _tz(r)), _local(r["closed_at"], _tz(r))
        rows.append([r["ticket_id"], f"{o.year}/{o.month}/{o.day} {o:%H:%M}", "上海" if r["site"] == "sha" else r["site"],
                     r["host_text"], _slot(r), r["serial_text"], r["part_text"], r["symptom_text"], r["action_text"],
                     "已关闭", f"{c.year}/{c.month}/{c.day} {c:%H:%M}"])
    stem.with_suffix(".csv").write_bytes(_csv_bytes(header, rows, "gbk"))


def _w_csv_bom(stem: Path, rs: list[dict], sim) -> None:
    header = ["Ticket ID", "Opened", "Hostname", "GPU Slot", "Serial Number", "Part", "Problem Description",
              "Resolution", "Status", "Closed"]
    rows = []
    for r in rs:
        o, c = _local(r["opened_at"], _tz(r)), _local(r["closed_at"], _tz(r))
        rows.append([r["ticket_id"], o.strftime("%m/%d/%Y %I:%M %p"), r["host_text"], _slot(r), r["serial_text"],
                     r["part_text"], r["symptom_text"], r["action_text"], "Closed", c.strftime("%m/%d/%Y %I:%M %p")])
    stem.with_suffix(".csv").write_bytes(_csv_bytes(header, rows, "utf-8-sig"))


def _w_csv_vendor(stem: Path, rs: list[dict], sim) -> None:
    header = ["case_number", "created_utc", "host", "slot", "board_sn", "failed_component", "failure_mode",
              "corrective_action"]
    rows = [[r["ticket_id"], r["opened_at"].strftime("%Y-%m-%dT%H:%M:%SZ"), r["host_text"], _slot(r), r["serial_text"],
             r["part_text"], r["symptom_text"], r["action_text"]] for r in rs]
    stem.with_suffix(".csv").write_bytes(_csv_bytes(header, rows, "utf-8"))


def _w_json(stem: Path, rs: list[dict], sim) -> None:
    recs = []
    for r in rs:
        o, c = _local(r["opened_at"], _tz(r)), _local(r["closed_at"], _tz(r))
        recs.append({"id": r["ticket_id"], "created": o.strftime("%d.%m.%Y %H:%M"), "closed": c.strftime("%d.%m.%Y %H:%M"),
                     "system": r["host_text"], "position": f"GPU {r['slot']}" if r["slot"] is not None else None,
                     "sn": r["serial_text"] or None, "component": r["part_text"], "fault": r["symptom_text"],
                     "measure": r["action_text"], "state": "closed"})
    stem.with_suffix(".json").write_text(json.dumps(recs, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def _w_xlsx(stem: Path, rs: list[dict], sim) -> None:
    header = ["Ticket No.", "Report Date", "Server", "Slot", "SN", "Component", "Issue", "Resolution", "Engineer"]
    rows = [[r["ticket_id"], _local(r["opened_at"], _tz(r)).replace(microsecond=0), r["host_text"],
             r["slot"], r["serial_text"] or None, r["part_text"], r["symptom_text"], r["action_text"],
             ("Wang", "Li", "Zhang", "Chen", "Liu")[hash_int(r["ticket_id"]) % 5]] for r in rs]
    _save_xlsx(stem.with_suffix(".xlsx"), "Tickets", header, rows, date_cols={1})


def _w_xlsx_noc(stem: Path, rs: list[dict], sim) -> None:
    header = ["Case #", "Opened (ET)", "Status", "Server", "Location", "GPU", "Serial", "Category", "Summary",
              "Resolution Notes"]
    rows = []
    for r in rs:
        h = next(x for x in sim.hosts if x.name == r["host"])
        is_open = r.get("_open", False)
        rows.append([r["ticket_id"], _local(r["opened_at"], _tz(r)).strftime("%Y-%m-%d %H:%M:%S"),
                     "Open" if is_open else "Closed", r["host_text"], f"{h.rack} U{h.unit}", _slot(r),
                     r["serial_text"], r["part_text"], r["symptom_text"], "" if is_open else r["action_text"]])
    _save_xlsx(stem.with_suffix(".xlsx"), "cases", header, rows, date_cols=set())


def hash_int(s: str) -> int:
    return sum((i + 1) * ord(c) for i, c in enumerate(s))


_FIXED_ZIP_DATE = (2020, 1, 1, 0, 0, 0)


def _save_xlsx(path: Path, title: str, header: list[str], rows: list[list], date_cols: set[int]) -> None:
    """An XLSX whose bytes depend on the content only (fixed document dates and zip entry times)."""
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = title
    ws.append(header)
    for row in rows:
        ws.append(row)
    for col in date_cols:
        for cell in ws.iter_rows(min_row=2, min_col=col + 1, max_col=col + 1):
            cell[0].number_format = "yyyy-mm-dd hh:mm"
    fixed = datetime(2020, 1, 1)
    wb.properties.created = fixed
    wb.properties.modified = fixed
    wb.properties.creator = "fleetfault simulate"
    buf = io.BytesIO()
    wb.save(buf)
    # openpyxl stamps zip entries with the current time: rewrite them with a fixed one.
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "docProps/core.xml":
                data = _fix_core_dates(data)
            zi = zipfile.ZipInfo(info.filename, date_time=_FIXED_ZIP_DATE)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = info.external_attr
            dst.writestr(zi, data)
    path.write_bytes(out.getvalue())


def _fix_core_dates(data: bytes) -> bytes:
    import re

    return re.sub(rb"(<dcterms:(?:created|modified)[^>]*>)[^<]*(<)", rb"\g<1>2020-01-01T00:00:00Z\g<2>", data)


_WRITERS = {"csv_gbk": _w_csv_gbk, "csv_bom": _w_csv_bom, "csv_vendor": _w_csv_vendor, "json": _w_json,
            "xlsx": _w_xlsx, "xlsx_noc": _w_xlsx_noc}
