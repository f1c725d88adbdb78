"""Fuzz campaign on every parser: nvidia-smi logs, kernel logs, ticket exports, inventory.

Each input is generated from a seed corpus (the bundled sample's own files) by stacking
random mutations (bit flips, cut lines, spliced files, duplicated headers, NUL bytes, stray
quotes, CRs and BOMs, huge fields, impossible dates, other encodings, gzip cut short, a
workbook written from mangled rows) or is random bytes outright; it is written to a file
and handed to the loader the nightly run uses. Per input the campaign checks:

- no exception escapes (a deliberate ``UsageError`` is counted apart: an inventory that is
  wholly unreadable stops the night by design; a ticket export whose columns are not
  recognised does too, until the layout work quarantines it as ``unrecognised_layout``);
- rows read = rows loaded + rows quarantined, and (telemetry) the hourly facts hold
  exactly the loaded samples.

Input ``i`` of parser ``p`` comes from ``random.Random(f"{seed}:{p}:{i}")``, so a failure is
replayed with ``--replay p:i`` (``--keep DIR`` also saves each failing input there).

Usage::

    python bench/fuzz_parsers.py --n 100000 --jobs 16          # the full campaign
    python bench/fuzz_parsers.py --n 2000 --parsers smi,kernel  # a short one
    python bench/fuzz_parsers.py --replay tickets:1234
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SAMPLE = ROOT / "data" / "sample"
PARSERS = ("smi", "kernel", "tickets", "inventory")

#: Byte strings that break parsers: separators, line ends, BOMs, markers, odd numbers and dates.
TOKENS = [
    b"\x00", b"\r", b"\r\n", b"\n\n", b"\xef\xbb\xbf", b"\xff\xfe", b'"', b'""', b",", b", ", b";", b"\t", b"|",
    b"[N/A]", b"[GPU is lost]", b"[Not Supported]", b"N/A", b"", b"\xc3", b"\xe4\xb8", b"9" * 400, b"1e309", b"-0",
    b"NaN", b"inf", b"0x", b"0xFFFFFFFFFFFFFFFFFF", b"2025-02-30 25:61:61", b"1900/01/01 00:00:00.000",
    b"9999/12/31 23:59:59.999", b"00000000:ZZ:00.0", b"NVRM: Xid (PCI:0000:18:00): ", b"NVRM: Xid (PCI:", b"SXid",
    b"kernel: ", b"[ 12345.678901] ", b"<4>", b"sep=;\n", b"{", b"}", b"[", b"]", b"null", b'"ticket_id":',
    "显卡掉卡".encode(), "显卡掉卡".encode("gbk"), b"\x1b[31m", b"=cmd|' /C calc'!A0", b"timestamp, index\n",
    b"\\", b"\x85", "\u2028".encode(), "合计".encode(), b"Total: 3", b"x" * 140_000,
]


# -- the seed corpus ---------------------------------------------------------------------

def _head_lines(data: bytes, n: int) -> bytes:
    return b"".join(data.splitlines(keepends=True)[:n])


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def seeds(parser: str) -> list[tuple[str, bytes]]:
    """(suffix, bytes) of real files of the sample: a few hundred lines each at most."""
    out: list[tuple[str, bytes]] = []
    if parser == "smi":
        for host in sorted((SAMPLE / "telemetry").iterdir())[:6]:
            for f in sorted(host.iterdir())[:2]:
                out.append((".csv", _head_lines(_read(f), 60)))
    elif parser == "kernel":
        for host in sorted((SAMPLE / "kernel").iterdir()):
            for f in sorted(host.iterdir())[:2]:
                data = _read(f)
                lines = data.splitlines(keepends=True)
                hits = [i for i, ln in enumerate(lines) if b"Xid" in ln] or [0]
                mid = hits[len(hits) // 2]
                out.append((".log", b"".join(lines[max(mid - 40, 0):mid + 40])))
    elif parser == "tickets":
        for point in sorted((SAMPLE / "tickets").iterdir()):
            for f in sorted(point.iterdir())[:1]:
                data = f.read_bytes()
                out.append((f.suffix.lower(), data if f.suffix.lower() == ".xlsx" else _head_lines(data, 40)))
    elif parser == "inventory":
        out.append((".csv", _head_lines((SAMPLE / "inventory.csv").read_bytes(), 40)))
        out.append((".csv", b"sep=;\nSerial Number;GPU Model;Hostname;GPU Index;Installed\n"
                            b"1650523300349.0;H100;node-1;GPU3;05.03.2024\n1.65052E+12;H100;node-1;4;45000\n"))
    return out


# -- mutations ---------------------------------------------------------------------------

def _pos(data: bytes, rng: random.Random) -> int:
    return rng.randint(0, len(data)) if data else 0


def m_flip(data, rng, corpus):
    if not data:
        return data
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def m_token(data, rng, corpus):
    i = _pos(data, rng)
    return data[:i] + rng.choice(TOKENS) + data[i:]


def m_random(data, rng, corpus):
    i = _pos(data, rng)
    return data[:i] + rng.randbytes(rng.randint(1, 64)) + data[i:]


def m_delete(data, rng, corpus):
    i = _pos(data, rng)
    return data[:i] + data[i + rng.randint(1, 200):]


def m_duplicate(data, rng, corpus):
    i, j = sorted((_pos(data, rng), _pos(data, rng)))
    return data[:j] + data[i:j] * rng.randint(1, 4) + data[j:]


def m_truncate(data, rng, corpus):
    return data[:_pos(data, rng)]


def m_splice(data, rng, corpus):
    other = rng.choice(corpus)[1]
    return data[:_pos(data, rng)] + other[_pos(other, rng):]


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def m_lines(data, rng, corpus):
    """Line-level: drop, repeat, swap, or repeat the first (the header) somewhere."""
    lines = _lines(data)
    if len(lines) < 2:
        return data
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    op = rng.randrange(4)
    if op == 0:
        del lines[i]
    elif op == 1:
        lines.insert(i, lines[j])
    elif op == 2:
        lines[i], lines[j] = lines[j], lines[i]
    else:
        lines.insert(i, lines[0])
    return b"\n".join(lines)


def m_cell(data, rng, corpus):
    """Replace one comma-separated cell of one line with a token."""
    lines = _lines(data)
    i = rng.randrange(len(lines))
    cells = lines[i].split(b",")
    cells[rng.randrange(len(cells))] = rng.choice(TOKENS)
    lines[i] = b",".join(cells)
    return b"\n".join(lines)


def m_line_ends(data, rng, corpus):
    return data.replace(b"\n", rng.choice([b"\r\n", b"\r", b"\n\n", b"\n\r"]))


MUTATORS = [m_flip, m_token, m_random, m_delete, m_duplicate, m_truncate, m_splice, m_lines, m_cell, m_line_ends]


def _reencode(data: bytes, rng: random.Random) -> bytes:
    text = data.decode("utf-8", errors="replace")
    enc = rng.choice(["utf-16", "utf-16-le", "gb18030", "big5", "cp1252", "utf-8-sig"])
    return text.encode(enc, errors="replace")


def _workbook(data: bytes, rng: random.Random, kind: str) -> bytes:
    """The (mangled) text's rows as an XLSX or XLS workbook: cells as text, numbers, dates."""
    text = data.decode("utf-8", errors="replace").replace("\x00", "")
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))[:200]
    except csv.Error:  # a field past the csv module's limit: split plainly
        rows = [line.split(",") for line in text.splitlines()[:200]]
    buf = io.BytesIO()
    if kind == "xlsx":
        import openpyxl

        book = openpyxl.Workbook()
        ws = book.active
        for row in rows:
            ws.append([_cell(c, rng) for c in row[:60]])
        if rng.random() < 0.2:
            book.create_sheet("hidden").sheet_state = "hidden"
        book.save(buf)
    else:
        import xlwt

        book = xlwt.Workbook()
        ws = book.add_sheet("s")
        for r, row in enumerate(rows[:200]):
            for c, v in enumerate(row[:60]):
                ws.write(r, c, _cell(v, rng))
        book.save(buf)
    return buf.getvalue()


def _cell(text: str, rng: random.Random):
    import datetime as dt

    text = "".join(ch for ch in text if ch.isprintable())[:32000]
    roll = rng.random()
    if roll < 0.05:
        return rng.choice([45000.5, -1, 1e300, 0])
    if roll < 0.08:
        return dt.datetime(rng.randint(1900, 2100), rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23))
    return text


def generate(parser: str, corpus: list[tuple[str, bytes]], rng: random.Random) -> tuple[str, bytes]:
    """One input for ``parser``: (file suffix, bytes)."""
    if rng.random() < 0.04:  # random bytes outright
        return rng.choice(corpus)[0], rng.randbytes(rng.choice([0, 1, 2, 16, 300, 4096]))
    suffix, data = rng.choice(corpus)
    if suffix == ".xlsx":
        if rng.random() < 0.5:  # a damaged workbook
            return suffix, rng.choice(MUTATORS[:6])(data, rng, corpus)
        suffix, data = ".csv", _head_lines(next((d for s, d in corpus if s != ".xlsx"), b""), 40)
    for _ in range(rng.choice([1, 1, 2, 3, 5, 8])):
        data = rng.choice(MUTATORS)(data, rng, corpus)
    roll = rng.random()
    if parser == "tickets" and roll < 0.12:
        kind = "xlsx" if roll < 0.09 else "xls"
        data = _workbook(data, rng, kind)
        suffix = "." + kind
        if rng.random() < 0.2:
            data = rng.choice(MUTATORS[:6])(data, rng, corpus)
    elif roll < 0.18:
        data = _reencode(data, rng)
    elif parser in ("smi", "kernel") and roll < 0.3:
        data = gzip.compress(data)
        if rng.random() < 0.3:
            data = data[:_pos(data, rng)]
        suffix += ".gz"
    if rng.random() < 0.03:  # a name that lies about the content
        suffix = rng.choice([".csv", ".xlsx", ".json", ".xls", ".log"])
    return suffix, data


# -- running one input -------------------------------------------------------------------

class Violation(AssertionError):
    """An invariant does not hold: counts that do not reconcile."""


def _reconcile(loaded, what: str) -> None:
    if loaded.rows_read != loaded.rows_loaded + len(loaded.rejects):
        raise Violation(f"{what}: read {loaded.rows_read} != loaded {loaded.rows_loaded} + quarantined {len(loaded.rejects)}")


def run_smi(path: Path, rng: random.Random, ctx: dict) -> list[str]:
    from pipeline.ingest.telemetry import load_file, parse_smi_files
    from pipeline.ingest.telemetry.batch import load_files
    from pipeline.ingest.telemetry.fields import parse_fields

    fields = rng.choice([None, parse_fields("timestamp,index,temperature.gpu,power.draw"), ctx.get("smi_fields")])

    def single(p, fid, flds):
        return load_file(p, fid, host="h", tz="Europe/Berlin", fields=flds)

    (loaded, _), = load_files([(path, 7)], host="h", tz="Europe/Berlin", fields=fields, single=single)
    _reconcile(loaded, "smi load_files")
    hourly = loaded.tables["smi_hourly"]
    samples = int(hourly["samples"].sum() or 0) if hourly.height else 0
    if samples != loaded.rows_loaded:
        raise Violation(f"smi: hourly facts hold {samples} samples, {loaded.rows_loaded} loaded")
    df, rejects = parse_smi_files([path], host="h", tz="Europe/Berlin",
                                  fields=",".join(f.name for f in fields) if fields else None)
    if df.height + len(rejects) != loaded.rows_read:
        raise Violation(f"smi: parse smi read {df.height} + {len(rejects)}, the loader {loaded.rows_read}")
    return [r.reason for r in loaded.rejects]


def run_kernel(path: Path, rng: random.Random, ctx: dict) -> list[str]:
    from pipeline.ingest.kernel.stage import KernelFile, loader

    loaded = loader({path: KernelFile(path, "h", rng.choice(["UTC", "Asia/Shanghai"]))})([(path, 7)])[0]
    _reconcile(loaded, "kernel")
    return [r.reason for r in loaded.rejects]


def run_tickets(path: Path, rng: random.Random, ctx: dict) -> list[str]:
    from pipeline.ingest.tickets import load_tickets

    point = rng.choice(sorted(ctx["cfg"].tickets.points) + ["sha-sp1", "anywhere"])
    loaded = load_tickets(path, 7, point, ctx["cfg"])
    _reconcile(loaded, "tickets")
    return [r.reason for r in loaded.rejects]


def run_inventory(path: Path, rng: random.Random, ctx: dict) -> list[str]:
    from pipeline.ingest.inventory import read_inventory

    loaded = read_inventory(path, 7, rng.choice(["UTC", "America/New_York"]))
    _reconcile(loaded, "inventory")
    return [r.reason for r in loaded.rejects]


RUNNERS = {"smi": run_smi, "kernel": run_kernel, "tickets": run_tickets, "inventory": run_inventory}


def _context() -> dict:
    from pipeline.config import load_config
    from pipeline.ingest.telemetry.fields import parse_fields

    return {"cfg": load_config(ROOT / "fleetfault.toml"),
            "smi_fields": parse_fields("timestamp,name,pci.bus_id,serial,uuid,index,temperature.gpu")}


def one(parser: str, seed: int, i: int, corpus, ctx, folder: Path) -> dict:
    """Generate, write and parse input ``i``; its outcome."""
    from pipeline.errors import UsageError

    rng = random.Random(f"{seed}:{parser}:{i}")
    suffix, data = generate(parser, corpus, rng)
    path = folder / f"in{suffix}"
    path.write_bytes(data)
    try:
        reasons = RUNNERS[parser](path, rng, ctx)
        return {"outcome": "ok", "reasons": reasons}
    except UsageError as exc:  # deliberate: the whole file stops the night (exit 2)
        return {"outcome": "usage_error", "reasons": [], "what": str(exc).split(":")[-1].strip()[:60]}
    except Violation as exc:
        return {"outcome": "violation", "what": str(exc), "data": data, "suffix": suffix}
    except Exception as exc:  # noqa: BLE001 - what the campaign looks for
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        sig = f"{type(exc).__name__} at {Path(tb.filename).name}:{tb.lineno}"
        return {"outcome": "crash", "what": f"{sig}: {str(exc)[:200]}", "sig": sig, "data": data, "suffix": suffix}


def _worker(job: tuple[str, int, int, int, str | None]) -> dict:
    parser, seed, start, stop, keep = job
    corpus, ctx = seeds(parser), _context()
    stats = {"n": 0, "outcomes": Counter(), "reasons": Counter(), "usage": Counter(), "failures": []}
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="fuzz-", dir=base) as tmp:
        for i in range(start, stop):
            res = one(parser, seed, i, corpus, ctx, Path(tmp))
            stats["n"] += 1
            stats["outcomes"][res["outcome"]] += 1
            stats["reasons"].update(set(res.get("reasons", [])))
            if res["outcome"] == "usage_error":
                stats["usage"][res["what"]] += 1
            if res["outcome"] in ("crash", "violation"):
                stats["failures"].append((i, res["what"]))
                if keep:
                    Path(keep).mkdir(parents=True, exist_ok=True)
                    (Path(keep) / f"{parser}-{i}{res['suffix']}").write_bytes(res["data"])
            for f in Path(tmp).iterdir():
                f.unlink()
    return stats


def campaign(parsers, n: int, seed: int, jobs: int, keep: str | None) -> dict:
    chunk = max(50, n // (jobs * 4) or 1)
    report = {}
    for parser in parsers:
        t0 = time.perf_counter()
        work = [(parser, seed, s, min(s + chunk, n), keep) for s in range(0, n, chunk)]
        total = {"n": 0, "outcomes": Counter(), "reasons": Counter(), "usage": Counter(), "failures": []}
        with Pool(jobs) as pool:
            for part in pool.imap_unordered(_worker, work):
                total["n"] += part["n"]
                for k in ("outcomes", "reasons", "usage"):
                    total[k].update(part[k])
                total["failures"] += part["failures"]
        secs = time.perf_counter() - t0
        fails = sorted(total["failures"])
        report[parser] = {
            "inputs": total["n"], "seconds": round(secs, 1), "inputs_per_s": round(total["n"] / secs, 1),
            "outcomes": dict(total["outcomes"]), "files_with_reason": dict(total["reasons"].most_common()),
            "usage_errors": dict(total["usage"].most_common(8)),
            "failures": len(fails), "distinct_failures": sorted({w.split(":")[0] for _, w in fails})[:20],
            "first_failures": fails[:10],
        }
        print(f"{parser}: {json.dumps(report[parser], default=str)}", flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="inputs per parser (default 100,000)")
    ap.add_argument("--parsers", default=",".join(PARSERS), help="comma-separated: " + ", ".join(PARSERS))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", help="folder for failing inputs")
    ap.add_argument("--json", help="write the summary here")
    ap.add_argument("--replay", help="PARSER:INDEX: run one input in this process and show the traceback")
    args = ap.parse_args(argv)
    if args.replay:
        parser, i = args.replay.split(":")
        rng = random.Random(f"{args.seed}:{parser}:{int(i)}")
        suffix, data = generate(parser, seeds(parser), rng)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"in{suffix}"
            path.write_bytes(data)
            print(f"{parser}:{i}: {len(data)} bytes, {suffix}: {data[:200]!r}")
            print(RUNNERS[parser](path, rng, _context()))
        return 0
    parsers = [p.strip() for p in args.parsers.split(",") if p.strip()]
    unknown = [p for p in parsers if p not in PARSERS]
    if unknown:
        ap.error(f"unknown parser(s) {unknown}; choose from {', '.join(PARSERS)}")
    report = campaign(parsers, args.n, args.seed, max(args.jobs, 1), args.keep)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str) + "\n")
    return 1 if any(r["failures"] for r in report.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
