"""Issue 17's acceptance on a tiny simulated fleet: copytruncate hosts whose header is only
where the collector restarted, and raw dmesg written per local day, read as well as the
usual styles."""

from __future__ import annotations

import csv
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from pipeline.ingest.telemetry.fields import header_fields
from pipeline.simulate.fleet import Host
from pipeline.simulate.styles import DAILY_DMESG, RESTART_HEADER, host_style
from pipeline.simulate.writer import simulate


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("unseen_logs")
    print("seed 10")
    simulate(32, 6, 10, out, interval=900, accel=40, copytruncate_share=0.5, daily_dmesg_share=0.5)
    return out


def _hosts(root: Path) -> dict[str, dict]:
    return {r["host"]: r for r in csv.DictReader(open(root / "truth" / "hosts.csv"))}


def _host(i: int) -> Host:
    return Host(index=i, name=f"h{i}", site="sha", service_point="sp", model="H100", batch="b", vendor="Dell",
                gpus=8, installed_at=datetime(2024, 1, 1), rack="r", unit=1, buses=("18",))


def test_default_styles_are_unchanged():
    from pipeline.simulate.styles import KERNEL_FORMATS, TELEMETRY_FORMATS

    for i in range(40):
        st = host_style(_host(i))
        assert (st.telemetry, st.kernel) == (TELEMETRY_FORMATS[i % 4], KERNEL_FORMATS[(5 * i) % 6])
    styles = [host_style(_host(i), copytruncate_share=0.3, daily_dmesg_share=0.2) for i in range(100)]
    assert sum(s.telemetry == RESTART_HEADER for s in styles) == 30
    assert sum(s.kernel == DAILY_DMESG for s in styles) == 20


def test_the_styles_are_written_as_described(fleet):
    from pipeline.ingest.telemetry.read import first_line
    from pipeline.vocab.files import read_bytes

    hosts = _hosts(fleet)
    restart = [h for h, r in hosts.items() if r["telemetry_format"] == RESTART_HEADER]
    daily = [h for h, r in hosts.items() if r["kernel_format"] == DAILY_DMESG]
    assert restart and daily
    for h in restart:
        files = sorted((fleet / "telemetry" / h).iterdir()) if (fleet / "telemetry" / h).is_dir() else []
        if not files:
            continue
        assert header_fields(first_line(files[0])) is None  # the collector ran before the data
        text = b"".join(read_bytes(p)[0] for p in files).decode()
        assert any(header_fields(x) for x in text.splitlines())  # ...and restarted inside it
    for h in daily:
        files = sorted((fleet / "kernel" / h).iterdir()) if (fleet / "kernel" / h).is_dir() else []
        if not files:
            continue  # (a host installed after the last day)
        assert all(p.name.startswith("dmesg-20") for p in files)
        first = read_bytes(files[0])[0].decode().splitlines()[0]
        assert first.startswith("[") and "kernel:" not in first


def test_rows_and_xid_times_meet_the_acceptance(fleet, tmp_path):
    from pipeline.config import load_config
    from pipeline.ingest import inventory, kernel
    from pipeline.ingest.kernel.boots import day_window
    from pipeline.ingest.telemetry import stage as smi
    from pipeline.link.xid import derive
    from pipeline.run import RunContext
    from pipeline.warehouse import Warehouse

    cfg = load_config(fleet / "truth" / "fleetfault.toml")
    hosts = _hosts(fleet)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        ctx = RunContext(cfg, wh, fleet, tmp_path / "out")
        inventory.run(ctx)
        smi.run(ctx)
        kernel.run(ctx)
        derive(ctx)  # (as pipeline.run does after the stage)
        loaded = dict(wh.con.execute("SELECT split_part(path, '/', 2), sum(rows_loaded) FROM files WHERE stage = 'smi' GROUP BY 1").fetchall())
        events = wh.con.execute("SELECT host, uptime_s, ts, source_file, ts_quality, ts_error_s FROM xid_events "
                        "WHERE host IN (SELECT unnest(?::VARCHAR[]))",
                        [[h for h, r in hosts.items() if r["kernel_format"] == DAILY_DMESG]]).fetchall()
    from pipeline.vocab.files import read_bytes

    for h in hosts:
        folder = fleet / "telemetry" / h
        if not folder.is_dir():
            continue
        written = sum(1 for p in folder.iterdir() for x in read_bytes(p)[0].decode().splitlines()
                      if x.strip() and header_fields(x) is None)
        assert loaded[h] >= 0.99 * written, h
    boots: dict[str, list[datetime]] = {}
    for r in csv.DictReader(open(fleet / "truth" / "boots.csv")):
        boots.setdefault(r["host"], []).append(datetime.fromisoformat(r["booted_at"]))
    seen = set()
    for host, up, ts, src, quality, err in events:
        lo, hi = day_window(Path(src), hosts[host]["tz"])
        bs = sorted(boots[host])
        truth = [b + timedelta(seconds=up) for k, b in enumerate(bs)
                 if (k + 1 == len(bs) or b + timedelta(seconds=up) < bs[k + 1])
                 and lo - timedelta(minutes=5) <= b + timedelta(seconds=up) < hi + timedelta(minutes=5)]
        off = abs((ts - truth[0]).total_seconds())
        seen.add(quality)
        if quality == "exact":
            assert off <= 1, (host, src, up)
        else:
            assert quality == "estimated" and off <= 86400 and off <= err + 120, (host, src, up)
    assert seen == {"exact", "estimated"}
