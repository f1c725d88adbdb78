"""``gpu_days`` against a plain-Python reading of its definition, on generated hourly facts.

The derivation's SQL is written for speed over a year of history (two passes, a window, a
grouped median); this reference walks each GPU's hours in order instead. The generated
fleet has what makes the SQL hard: GPUs without a serial linked through the inventory (a
board replaced mid-run, host names in another case and fully qualified), GPUs known only by
UUID or by bus, counter resets, hours missing, files that overlap (the same hour twice),
counters not reported, and hourly next to frequent sampling, over several days.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from itertools import pairwise
from statistics import median

import polars as pl
import pytest

from pipeline.ingest.telemetry import derive_gpu_days
from pipeline.vocab.hosts import host_key

T0 = datetime(2026, 3, 1)
DAYS = 4
COUNTERS = ("ecc_corrected", "ecc_uncorrected", "pcie_replay")


def _fleet(seed: int):
    """(inventory rows, smi_hourly rows) of a small random fleet."""
    rnd = random.Random(seed)
    swap = T0 + timedelta(days=1, hours=rnd.randrange(4, 20))
    inventory = [
        {"serial": "SN-B1", "host": "node-7", "slot": 1, "installed_at": None, "removed_at": swap, "file_id": 1},
        {"serial": "SN-B2", "host": "node-7", "slot": 1, "installed_at": swap, "removed_at": None, "file_id": 1},
        # a second registry row for the same slot and time: the least serial wins
        {"serial": "SN-C0", "host": "node-9", "slot": 0, "installed_at": None, "removed_at": None, "file_id": 1},
        {"serial": "SN-C1", "host": "NODE-9", "slot": 0, "installed_at": T0, "removed_at": None, "file_id": 1},
    ]
    gpus = [  # (host as the log writes it, index, serial, uuid, bus, seconds between samples)
        ("node-1", 0, "SN-A", "GPU-a", "00:18", 3600),
        ("node-1", 1, "SN-F", "GPU-f", "00:19", 10),
        ("Node-7.example.com", 1, None, "GPU-b", "00:19", 3600),
        ("node-9", 0, None, None, "00:18", 1200),
        ("node-2", 2, None, "GPU-u", "00:1a", 3600),
        ("node-3", 3, None, None, None, 3600),
    ]
    rows = []
    for host, index, serial, uuid, bus, every in gpus:
        values = {c: float(rnd.randrange(0, 50)) for c in COUNTERS}
        for h in range(DAYS * 24):
            if rnd.random() < 0.15:  # no log that hour
                continue
            hour = T0 + timedelta(hours=h)
            start = rnd.randrange(0, min(every, 3600))
            times = [hour + timedelta(seconds=s) for s in range(start, 3600, every)] or [hour]
            row = {"file_id": 10 + h // 24, "host": host, "gpu_index": index, "name": "H100", "serial": serial,
                   "uuid": uuid, "pci_bus_id": bus, "hour": hour, "ts_first": times[0], "ts_last": times[-1],
                   "samples": len(times), "temp_n": len(times), "temp_sum": 40.0 * len(times)}
            for c in COUNTERS:
                if rnd.random() < 0.05:  # the counter not reported that hour
                    row |= {f"{c}_first": None, f"{c}_last": None, f"{c}_delta": None}
                    continue
                if rnd.random() < 0.08:  # a reboot reset it
                    values[c] = float(rnd.randrange(0, 3))
                first = values[c]
                values[c] += rnd.randrange(0, 4) * (len(times) > 1)
                row |= {f"{c}_first": first, f"{c}_last": values[c], f"{c}_delta": values[c] - first}
            rows.append(row)
            if rnd.random() < 0.1:  # an overlapping file holds the same hour again
                rows.append(row | {"file_id": 99})
    return inventory, rows


def _reference(inventory, rows):
    """{(gpu_key, day): facts} by the definition, one GPU's hours at a time."""
    def linked(r):
        if r["serial"] is not None:
            return r["serial"]
        found = [i["serial"] for i in inventory
                 if host_key(i["host"]) == host_key(r["host"]) and i["slot"] == r["gpu_index"]
                 and (i["installed_at"] is None or i["installed_at"] <= r["ts_last"])
                 and (i["removed_at"] is None or i["removed_at"] > r["ts_first"])]
        return min(found) if found else None

    by_gpu: dict[str, list[dict]] = {}
    for r in rows:
        serial = linked(r)
        key = serial or (f"uuid:{r['uuid']}" if r["uuid"] else
                         f"bus:{r['host']}/{r['pci_bus_id'] or 'index' + str(r['gpu_index'])}")
        by_gpu.setdefault(key, []).append(r | {"serial_linked": serial})
    out = {}
    for key, hours in by_gpu.items():
        hours.sort(key=lambda r: (r["ts_first"], r["ts_last"]))
        gaps = [(b["ts_first"] - a["ts_last"]).total_seconds() for a, b in pairwise(hours)
                if b["ts_first"] > a["ts_last"]]
        gap = median(gaps) if gaps else None
        days: dict = {}
        for prev, r in zip([None, *hours], hours):
            d = days.setdefault(r["hour"].date(), {"rows": [], "steps": {c: [] for c in COUNTERS}})
            d["rows"].append(r)
            for c in COUNTERS:
                if r[f"{c}_delta"] is None:
                    continue
                p, first = None if prev is None else prev[f"{c}_last"], r[f"{c}_first"]
                d["steps"][c].append(0 if p is None or first is None else first - p if first >= p else first)
        for day, d in days.items():
            rs = d["rows"]
            samples, nrows = sum(r["samples"] for r in rs), len(rs)
            span = sum((r["ts_last"] - r["ts_first"]).total_seconds() for r in rs)
            if samples >= 2 * nrows:
                coverage = min(1.0, samples * (span / (samples - nrows)) / 86400)
            else:
                coverage = min(1.0, samples * gap / 86400) if gap else None
            facts = {"samples": samples, "coverage": coverage,
                     "serial": max(rs, key=lambda r: r["ts_last"])["serial_linked"]}
            for c in COUNTERS:
                within = [r[f"{c}_delta"] for r in rs if r[f"{c}_delta"] is not None]
                steps = d["steps"][c]
                facts[f"{c}_delta"] = sum(within) + sum(steps) if within and steps else None
            out[(key, day)] = facts
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_gpu_days_match_the_reference(wh, seed):
    inventory, rows = _fleet(seed)
    wh.insert("inventory", pl.DataFrame(inventory))
    wh.insert("smi_hourly", pl.DataFrame(rows, infer_schema_length=None))
    derive_gpu_days(wh)
    want = _reference(inventory, rows)
    cols = ["gpu_key", "day", "serial", "samples", "coverage", *(f"{c}_delta" for c in COUNTERS)]
    got = {(r["gpu_key"], r["day"]): r for r in wh.engine.pl(f"SELECT {', '.join(cols)} FROM gpu_days",
                                                                step="test").iter_rows(named=True)}
    assert set(got) == set(want)
    keys = {k for k, _ in want}
    assert {"SN-A", "SN-B1", "SN-B2", "SN-C0", "uuid:GPU-u", "bus:node-3/index3"} <= keys
    assert not any(k.startswith("SN-C1") for k in keys)
    for k, facts in want.items():
        for col, value in facts.items():
            assert got[k][col] == (value if value is None or isinstance(value, str) else pytest.approx(value, rel=1e-12)), (k, col)
