"""The NVML collector against a fake NVML: its files must ingest through the real parsers."""

from __future__ import annotations

import re
import signal
from datetime import datetime, timedelta, timezone

import pytest

from pipeline.collect.fields import header_line, query_fields
from pipeline.collect.sampler import Collector, CollectorError
from tests.fake_nvml import FakeGPU, FakeNVML

TZ = timezone(timedelta(hours=8))


def _gpus():
    return [
        FakeGPU(0, bus="00000000:18:00.0", serial="1654921000011", uuid="GPU-1a2b3c4d-0000-1111-2222-333344445555", ecc=(12, 0)),
        FakeGPU(1, bus="00000000:3B:00.0", serial="1654921000012", uuid="GPU-9f8e7d6c-0000-1111-2222-333344445555",
                unsupported={"fan", "replay"}, temp=90),
        FakeGPU(2, bus="00000000:B3:00.0", serial="1654921000013", uuid="GPU-00aa11bb-0000-1111-2222-333344445555"),
    ]


class Clock:
    """Fake clock: each call advances by ``step``."""

    def __init__(self, start, step):
        self.t, self.step = start, step

    def __call__(self):
        t = self.t
        self.t += self.step
        return t


def _collector(tmp_path, nv, start=datetime(2026, 3, 8, 23, 58, 0, tzinfo=TZ), step=timedelta(minutes=1)):
    return Collector(nv, tmp_path, host="gpu-node-07", interval=0.0, clock=Clock(start, step), sleep=lambda s: None)


def test_rows_per_gpu_with_nvidia_smi_spelling(tmp_path):
    nv = FakeNVML(_gpus())
    col = _collector(tmp_path, nv)
    assert col.run(max_samples=1, install_signals=False) == 1
    lines = (tmp_path / "telemetry/gpu-node-07/2026-03-08.csv").read_text().splitlines()
    assert lines[0] == header_line()
    assert len(lines) == 4
    gpu1 = dict(zip(header_line().split(", "), lines[2].split(", ")))
    assert gpu1["fan.speed [%]"] == "[Not Supported]"
    assert gpu1["power.draw [W]"] == "627.40 W"
    assert gpu1["pci.bus_id"] == "00000000:3B:00.0"
    assert gpu1["clocks_event_reasons.active"] == "0x0000000000000020"
    assert re.fullmatch(r"2026/03/08 23:5\d:00\.000", gpu1["timestamp"])
    assert nv.shut


def test_rotation_at_midnight_and_identity_lines(tmp_path):
    col = _collector(tmp_path, FakeNVML(_gpus()))
    col.run(max_samples=4, install_signals=False)
    days = sorted(p.name for p in (tmp_path / "telemetry/gpu-node-07").iterdir())
    assert days == ["2026-03-08.csv", "2026-03-09.csv"]
    for d in days:  # each rotated file starts with its own header
        assert (tmp_path / "telemetry/gpu-node-07" / d).read_text().startswith("timestamp, index, name")
    kern = "".join(p.read_text() for p in (tmp_path / "kernel/gpu-node-07").iterdir())
    assert "NVRM: GPU at PCI:0000:3b:00: GPU-9f8e7d6c" in kern
    assert "NVRM: GPU Board Serial Number: 1654921000013" in kern


def test_lost_gpu_is_recorded_and_others_keep_sampling(tmp_path):
    gpus = _gpus()
    nv = FakeNVML(gpus)
    col = _collector(tmp_path, nv, start=datetime(2026, 3, 8, 10, 0, tzinfo=TZ))
    col.open()
    now = datetime(2026, 3, 8, 10, 0, tzinfo=TZ)
    col.write_samples(now, col.sample(now))
    gpus[2].lost = True
    for k in range(2):
        t = now + timedelta(minutes=k + 1)
        col.write_samples(t, col.sample(t))
    lines = (tmp_path / "telemetry/gpu-node-07/2026-03-08.csv").read_text().splitlines()
    assert len(lines) == 1 + 9
    assert lines[-1].count("[GPU is lost]") >= 20 and "00000000:B3:00.0" in lines[-1]
    assert "[GPU is lost]" not in lines[-2]  # GPU 1 still sampled
    kern = (tmp_path / "kernel/gpu-node-07/2026-03-08.log").read_text()
    assert kern.count("Xid (PCI:0000:b3:00): 79") == 1  # once, not every round


def test_xid_events_are_written_as_kernel_lines(tmp_path):
    nv = FakeNVML(_gpus(), events=[(1, 48), (0, 13)])
    col = _collector(tmp_path, nv, start=datetime(2026, 3, 8, 10, 0, tzinfo=TZ))
    col.open()
    assert col.poll_events(0.5, now=datetime(2026, 3, 8, 10, 0, 30, tzinfo=TZ)) == 2
    kern = (tmp_path / "kernel/gpu-node-07/2026-03-08.log").read_text()
    assert "2026-03-08T10:00:30.000000+08:00 gpu-node-07 kernel: NVRM: Xid (PCI:0000:3b:00): 48," in kern
    assert "Xid (PCI:0000:18:00): 13," in kern


def test_sigterm_flushes_and_stops(tmp_path):
    nv = FakeNVML(_gpus())
    col = _collector(tmp_path, nv, start=datetime(2026, 3, 8, 10, 0, tzinfo=TZ))
    calls = {"n": 0}

    def sleep(_s):
        calls["n"] += 1
        if calls["n"] == 2:
            signal.raise_signal(signal.SIGTERM)

    col.sleep = sleep
    col._register_events = lambda: None  # poll_events then sleeps
    old = signal.getsignal(signal.SIGTERM)
    try:
        rounds = col.run()
    finally:
        signal.signal(signal.SIGTERM, old)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    assert rounds == 2 and nv.shut
    assert len((tmp_path / "telemetry/gpu-node-07/2026-03-08.csv").read_text().splitlines()) == 1 + 6


def test_disk_full_is_reported(tmp_path, monkeypatch):
    import builtins
    import errno

    col = _collector(tmp_path, FakeNVML(_gpus()))
    col.open()
    real_open = builtins.open

    def full(path, *a, **k):
        if str(path).endswith(".csv"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, *a, **k)

    monkeypatch.setattr(builtins, "open", full)
    now = datetime(2026, 3, 8, 10, 0, tzinfo=TZ)
    with pytest.raises(CollectorError, match="disk full"):
        col.write_samples(now, col.sample(now))


def test_no_bindings_or_driver_is_one_clear_line(monkeypatch, capsys):
    import sys

    from pipeline.cli import main

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails as if not installed
    assert main(["collect", "-o", "/tmp/never", "--count", "1"]) == 2
    err = capsys.readouterr().err
    assert "fleetfault[nvml]" in err and "Traceback" not in err


def test_collector_output_ingests_like_nvidia_smi(tmp_path):
    """The files it writes go through the real ingest parsers and give the expected rows."""
    from pipeline.ingest.kernel.stage import parse_xid_files
    from pipeline.ingest.telemetry import parse_smi_files

    nv = FakeNVML(_gpus(), events=[(1, 48)])
    col = Collector(nv, tmp_path, host="gpu-node-07", interval=0.0,
                    clock=Clock(datetime(2026, 3, 8, 10, 0, tzinfo=TZ), timedelta(minutes=1)), sleep=lambda s: None)
    col.run(max_samples=3, install_signals=False)
    files = sorted((tmp_path / "telemetry/gpu-node-07").iterdir())
    df, rejects = parse_smi_files(files, host="gpu-node-07", tz="Asia/Shanghai")
    assert not rejects and df.height == 9
    row = df.filter(df["gpu_index"] == 1).row(0, named=True)
    assert row["pci_bus_id"] == "0000:3b:00.0" and row["serial"] == "1654921000012"
    assert row["power_draw"] == pytest.approx(627.4) and row["fan_speed"] is None
    first_local = files[0].read_text().splitlines()[1].split(", ")[0]  # as the collector wrote it, +08:00
    assert row["ts"] == datetime.strptime(first_local, "%Y/%m/%d %H:%M:%S.%f") - timedelta(hours=8)
    assert row["clocks_event_reasons_active"] == 0x20

    # The same fields as nvidia-smi itself prints them ingest into identical columns.
    smi = tmp_path / "smi.csv"
    smi.write_text(
        header_line() + "\n" +
        f"{first_local}, 1, NVIDIA H100 80GB HBM3, 1654921000012, GPU-9f8e7d6c-0000-1111-2222-333344445555, "
        "00000000:3B:00.0, 90, 87 %, 35 %, 81559 MiB, 40000 MiB, 627.40 W, 700.00 W, 1980 MHz, 2619 MHz, "
        "0x0000000000000020, 0, 0, 0, 0, 0, 0, 2, 0, No, No, 5, 16, 16, [Not Supported], [Not Supported]\n"
    )
    ref, rej2 = parse_smi_files([smi], host="gpu-node-07", tz="Asia/Shanghai")
    assert not rej2
    assert ref.columns == df.columns
    # Types are inferred from the values: a column null in one file may be typed otherwise.
    for name, a, b in zip(df.columns, ref.dtypes, df.dtypes):
        if ref[name].null_count() < ref.height and df[name].null_count() < df.height:
            assert a == b, name
    assert ref.row(0) == df.filter(df["gpu_index"] == 1).row(0)

    events, bad = parse_xid_files(sorted((tmp_path / "kernel/gpu-node-07").iterdir()), host="gpu-node-07", tz="Asia/Shanghai")
    assert not bad
    assert events.filter(events["xid"] == 48)["pci_bus_id"].to_list() == ["0000:3b:00.0"]


def test_query_fields_round_trip():
    assert query_fields()[:6] == ["timestamp", "index", "name", "serial", "uuid", "pci.bus_id"]
