"""A tiny synthetic fleet written straight into the warehouse tables, for tests and examples.

Reads nothing. Writes ``inventory``, ``gpu_days``, ``xid_events`` and ``tickets`` as the
ingest stages would (no files), and ``failures`` from them as the statistics stage would: GPUs on 8-GPU hosts with daily telemetry, some of which
fail. About half of the failures show a precursor for a few days (a rising corrected-ECC
rate, a temperature creep, critical Xids); healthy GPUs log application Xids and the odd
stray critical one, so the rule baseline has false alarms. The full simulator
(``fleetfault simulate``) is the realistic source; this one needs no parsing and runs in
well under a second, which is what the predictor's unit tests want.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import numpy as np
import polars as pl

from pipeline.config import Stats
from pipeline.stats.failures import build_failures
from pipeline.warehouse import Warehouse


def write_toy_fleet(wh: Warehouse, *, gpus: int = 64, days: int = 120, seed: int = 0,
                    start: date = date(2025, 1, 1), daily_hazard: float = 0.002) -> pl.DataFrame:
    """Fill the input tables with a toy fleet; returns the failures (``serial, failed_at, precursor``).

    A failed GPU is replaced the same day by a new serial in the same host and slot.
    """
    rng = np.random.default_rng(seed)
    models = ["H100 80GB HBM3", "A100-SXM4-80GB"]
    inv, tele, xids, tickets, truth = [], [], [], [], []
    n_hosts = max(1, gpus // 8)
    counter = 0
    for h in range(n_hosts):
        host = f"gpu-{h:03d}"
        model = models[h % 2]
        site = ["sha", "sjc"][h % 2]
        for slot in range(8):
            installed = datetime.combine(start, datetime.min.time()) - timedelta(days=int(rng.integers(30, 700)))
            day0 = 0
            while day0 < days:
                counter += 1
                serial = f"T{seed:02d}{counter:06d}"
                batch = f"B{int(rng.integers(1, 4))}"
                weak = 3.0 if batch == "B3" else 1.0
                life = int(rng.geometric(min(1.0, daily_hazard * weak))) if daily_hazard > 0 else days + 1
                fail_day = day0 + life if day0 + life < days else None
                end = fail_day if fail_day is not None else days
                inst = installed if day0 == 0 else datetime.combine(start + timedelta(days=day0), datetime.min.time())
                removed = None if fail_day is None else datetime.combine(start + timedelta(days=fail_day), datetime.min.time()) + timedelta(hours=15)
                inv.append((serial, model, "OEM-A", host, slot, site, batch, inst, removed))
                precursor = rng.choice(["none", "ecc", "temp", "xid"]) if fail_day is not None else "none"
                lead = int(rng.integers(3, 10))
                temp_base = 58 + 6 * rng.standard_normal() ** 2
                for d in range(day0, end):
                    to_fail = None if fail_day is None else fail_day - d
                    ramp = to_fail is not None and to_fail <= lead
                    k = 0 if not ramp else lead - to_fail + 1
                    temp = temp_base + rng.normal(0, 1.5) + (1.8 * k if ramp and precursor == "temp" else 0)
                    ecc = rng.poisson(2) + (rng.poisson(60 * k) if ramp and precursor == "ecc" else 0)
                    dday = start + timedelta(days=d)
                    tele.append((serial, host, f"0000:{0x18 + slot * 0x10:02x}:00.0", slot, model, dday, 1440,
                                 temp, temp + 6, 60 + rng.normal(0, 5), 400 + rng.normal(0, 20), float(ecc)))
                    ts = datetime.combine(dday, datetime.min.time()) + timedelta(seconds=int(rng.integers(0, 86400)))
                    if rng.random() < 0.03:
                        xids.append((serial, host, ts, int(rng.choice([13, 31, 43])), "app"))
                    if rng.random() < 0.002:
                        xids.append((serial, host, ts, int(rng.choice([79, 48, 63])), "critical"))
                    if ramp and precursor == "xid" and rng.random() < 0.5:
                        xids.append((serial, host, ts, int(rng.choice([79, 48, 63])), "critical"))
                    if rng.random() < 0.001:
                        tickets.append((serial, host, slot, ts, "GPU", "RESEAT"))
                if fail_day is not None:
                    failed_at = datetime.combine(start + timedelta(days=fail_day), datetime.min.time()) + timedelta(hours=9)
                    tickets.append((serial, host, slot, failed_at, "GPU", "REPLACE"))
                    truth.append((serial, failed_at, str(precursor)))
                    day0 = fail_day
                else:
                    break
    _insert(wh, inv, tele, xids, tickets)
    return pl.DataFrame(truth, schema={"serial": pl.Utf8, "failed_at": pl.Datetime("us"), "precursor": pl.Utf8}, orient="row")


def _insert(wh: Warehouse, inv, tele, xids, tickets) -> None:
    wh.insert("inventory", pl.DataFrame(inv, orient="row", schema={
        "serial": pl.Utf8, "model": pl.Utf8, "vendor": pl.Utf8, "host": pl.Utf8, "slot": pl.Int32,
        "site": pl.Utf8, "batch": pl.Utf8, "installed_at": pl.Datetime("us"), "removed_at": pl.Datetime("us"),
    }).with_columns(file_id=pl.lit(0, pl.Int64)))
    t = pl.DataFrame(tele, orient="row", schema={
        "serial": pl.Utf8, "host": pl.Utf8, "pci_bus_id": pl.Utf8, "gpu_index": pl.Int32, "name": pl.Utf8,
        "day": pl.Date, "samples": pl.Int64, "temp_mean": pl.Float64, "temp_max": pl.Float64,
        "util_mean": pl.Float64, "power_mean": pl.Float64, "ecc_corrected_delta": pl.Float64,
    })
    wh.insert("gpu_days", t.with_columns(gpu_key=pl.col("serial"), coverage=pl.lit(1.0)))
    x = pl.DataFrame(xids, orient="row", schema={
        "serial": pl.Utf8, "host": pl.Utf8, "ts": pl.Datetime("us"), "xid": pl.Int32, "severity": pl.Utf8})
    wh.insert("xid_events", x.with_row_index("line_no").with_columns(
        event_id=pl.format("e{}", pl.col("line_no")), kind=pl.lit("Xid"), source_file=pl.lit("toy"),
        line_no=pl.col("line_no").cast(pl.Int64) + 1))
    tk = pl.DataFrame(tickets, orient="row", schema={
        "serial": pl.Utf8, "host": pl.Utf8, "slot": pl.Int32, "opened_at": pl.Datetime("us"),
        "part_code": pl.Utf8, "action_code": pl.Utf8})
    # Closed four hours after the open: the features count a ticket from its close, when its outcome is known.
    wh.insert("tickets", tk.with_columns(closed_at=pl.col("opened_at") + pl.duration(hours=4)).with_row_index("n").with_columns(
        ticket_id=pl.format("TK{}", pl.col("n")), service_point=pl.lit("toy"), review=pl.lit(False)).drop("n"))
    build_failures(wh, Stats())
