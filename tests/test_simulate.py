"""The fleet simulator: determinism, ground truth matching the records, realistic formats."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.simulate import simulate, simulate_fleet
from pipeline.simulate.fleet import BATCHES
from pipeline.simulate.styles import KERNEL_FORMATS, TELEMETRY_FORMATS

# The contract's taxonomy (../shared/CONTRACT.md).
PARTS = {"GPU", "GPU_BASEBOARD", "NVSWITCH", "NVLINK_BRIDGE", "PCIE_RISER", "FAN", "PSU", "COOLING", "MOTHERBOARD",
         "CPU", "DIMM", "STORAGE", "NIC", "CABLE", "BMC", "SOFTWARE", "NONE"}
SYMPTOMS = {"FELL_OFF_BUS", "MEMORY_UNCORRECTABLE", "MEMORY_CORRECTABLE", "ROW_REMAP", "OVERHEAT", "FAN_FAULT",
            "POWER_FAULT", "NVLINK_ERROR", "PCIE_ERROR", "GSP_ERROR", "HANG", "PERFORMANCE", "APP_FAULT",
            "DRIVER_ISSUE", "PHYSICAL_DAMAGE", "BOOT_FAILURE", "OTHER"}
ACTIONS = {"REPLACE", "RESEAT", "REBOOT", "REFLASH", "CLEAN", "MONITOR", "NONE"}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    """A small written fleet (accelerated so that it has failures of several kinds)."""
    out = tmp_path_factory.mktemp("fleet")
    simulate(40, 30, seed=11, out=out, interval=3600, accel=20)
    return out


def read_truth(root: Path, name: str) -> list[dict]:
    with open(root / "truth" / name, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def test_simulate_fleet_is_deterministic_and_seed_dependent():
    a, b = simulate_fleet(300, 120, seed=4), simulate_fleet(300, 120, seed=4)
    assert a.inventory.equals(b.inventory) and a.failures.equals(b.failures) and a.groups.equals(b.groups)
    c = simulate_fleet(300, 120, seed=5)
    assert not a.inventory.equals(c.inventory)


def test_groups_carry_the_designed_hazards():
    g = simulate_fleet(400, 60, seed=2).groups
    shapes = {r["batch"]: r["weibull_shape"] for r in g.iter_rows(named=True)}
    assert shapes["H200-2025Q1"] < 1 < shapes["V100-2019Q4"]  # infant mortality vs wear-out
    afr = {r["batch"]: r["true_afr_pct"] for r in g.iter_rows(named=True)}
    assert afr["H100-2024Q2"] == pytest.approx(3 * afr["H100-2023Q4"], rel=1e-4)  # the bad batch
    for r in g.filter(pl.col("expected_failures") >= 0.1).iter_rows(named=True):
        assert r["true_afr_pct"] == pytest.approx(100 * r["expected_failures"] / (r["gpu_days"] / 365.25), rel=1e-2)


def test_failure_counts_match_the_true_rates_over_seeds():
    observed = expected = 0.0
    for seed in range(8):
        g = simulate_fleet(300, 365, seed=seed).groups
        observed += g["failures"].sum()
        expected += g["expected_failures"].sum()
    # Poisson: the count must lie within 4 standard deviations of its mean.
    assert abs(observed - expected) < 4 * np.sqrt(expected) + 1, (observed, expected)


@settings(max_examples=12, deadline=None)
@given(gpus=st.integers(1, 60), days=st.integers(1, 90), seed=st.integers(0, 10_000),
       accel=st.sampled_from([1.0, 5.0, 40.0]))
def test_history_invariants(gpus, days, seed, accel):
    sim = simulate_fleet(gpus, days, seed, accel=accel)
    inv = sim.inventory
    first = inv.filter(pl.col("batch").str.ends_with("-RMA").not_())
    assert first.height == gpus
    assert inv["serial"].n_unique() == inv.height
    for f in sim.failure_rows:
        assert sim.start <= f["failed_at"] < sim.end
        assert f["failed_at"] < f["replaced_at"]
        old = inv.filter(pl.col("serial") == f["serial"]).row(0, named=True)
        new = inv.filter(pl.col("serial") == f["new_serial"]).row(0, named=True)
        assert old["removed_at"] == f["replaced_at"] == new["installed_at"]
        assert (old["host"], old["slot"]) == (new["host"], new["slot"])
    for r in sim.service_rows:
        assert r["part_code"] in PARTS and r["symptom_code"] in SYMPTOMS and r["action_code"] in ACTIONS
        assert r["event_at"] <= r["opened_at"] <= r["closed_at"]


def test_written_fleet_is_byte_identical_for_a_seed(fleet, tmp_path):
    again = tmp_path / "again"
    simulate(40, 30, seed=11, out=again, interval=3600, accel=20)
    files = sorted(p.relative_to(fleet) for p in fleet.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    for rel in files:
        assert (fleet / rel).read_bytes() == (again / rel).read_bytes(), rel
    other = simulate_fleet(40, 30, seed=12, accel=20).inventory["serial"].to_list()
    assert other != [r["serial"] for r in csv.DictReader(open(fleet / "inventory.csv", encoding="utf-8"))]


def test_every_failure_has_its_replacement_ticket(fleet):
    failures, tickets = read_truth(fleet, "failures.csv"), read_truth(fleet, "tickets.csv")
    assert failures, "the accelerated fleet should have failures"
    by_id = {(t["service_point"], t["ticket_id"]): t for t in tickets}
    for f in failures:
        t = by_id[(f["service_point"], f["ticket_id"])]
        assert t["serial"] == f["serial"] and t["is_replacement"] == "1"
        assert (t["part_code"], t["action_code"]) == ("GPU", "REPLACE")
        opened, failed = datetime.fromisoformat(t["opened_at"]), datetime.fromisoformat(f["failed_at"])
        assert timedelta(0) < opened - failed <= timedelta(days=3)
    assert sum(t["is_replacement"] == "1" for t in tickets) == len(failures)
    for t in tickets:
        assert t["part_code"] in PARTS and t["symptom_code"] in SYMPTOMS and t["action_code"] in ACTIONS
    kinds = {f["precursor"] for f in failures}
    assert "none" in kinds and len(kinds) > 1


def _ticket_records(path: Path) -> list[dict]:
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))
    if path.suffix == ".xlsx":
        from openpyxl import load_workbook

        rows = list(load_workbook(path).active.iter_rows(values_only=True))
        return [dict(zip(rows[0], r)) for r in rows[1:]]
    raw = path.read_bytes()
    text = raw.decode("gbk") if path.parent.name == "sha-sp1" else raw.decode("utf-8-sig")
    return list(csv.DictReader(io.StringIO(text)))


def test_ticket_exports_hold_every_truth_ticket_in_their_own_format(fleet):
    tickets = read_truth(fleet, "tickets.csv")
    seen: dict[str, set] = {}
    headers = {}
    for path in sorted((fleet / "tickets").rglob("*.*")):
        recs = _ticket_records(path)
        headers[path.parent.name] = tuple(recs[0].keys())
        id_col = next(iter(recs[0]))
        seen.setdefault(path.parent.name, set()).update(str(r[id_col]) for r in recs)
    for t in tickets:
        assert t["ticket_id"] in seen[t["service_point"]]
    assert len(set(headers.values())) == len(headers), "each service point has its own columns"
    if "sha-sp1" in headers:
        assert headers["sha-sp1"][0] == "工单编号"


def test_telemetry_looks_like_nvidia_smi(fleet):
    hosts = read_truth(fleet, "hosts.csv")
    assert {h["telemetry_format"] for h in hosts} == set(TELEMETRY_FORMATS)
    assert {h["kernel_format"] for h in hosts} == set(KERNEL_FORMATS)
    stamp = re.compile(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}\.\d{3}$")
    for h in hosts:
        files = sorted((fleet / "telemetry" / h["host"]).iterdir())
        assert files
        fields = h["fields"].split(",")
        header_seen = False
        for i, path in enumerate(files):
            data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
            lines = data.decode("utf-8").split("\n")
            complete = lines[:-1] if data.endswith(b"\n") else lines[:-1]  # the last may be cut short
            for line in complete:
                cells = line.split(", ")
                if cells[0] == "timestamp":
                    header_seen = True
                    assert [c.split(" [")[0] for c in cells] == fields
                    continue
                if len(cells) != len(fields):
                    continue  # a line cut short by a power loss
                assert stamp.match(cells[0]), line
                if "[GPU is lost]" not in line and "[GPU requires reset]" not in line:
                    units = h["telemetry_format"] in ("csv", "csv_copytruncate")
                    power = [c for f, c in zip(fields, cells) if f == "power.draw"]
                    if power:
                        assert power[0].endswith(" W") == units
        assert header_seen == (h["telemetry_format"] != "noheader_nounits")


def test_telemetry_fields_are_real_nvidia_smi_fields(external):
    known = set(re.findall(r'^"([a-z_.\d]+)"', (external / "nvidia_gpu_exporter/samples/fields.txt").read_text(), re.M))
    for path in (external / "nvidia_gpu_exporter/query_gpu_csv").glob("*.csv"):  # newer drivers' fields
        header = path.read_text(encoding="utf-8").splitlines()[0]
        known |= {c.strip().split(" [")[0] for c in header.split(",")}
    from pipeline.simulate.styles import BASIC_FIELDS, FULL_FIELDS

    for f in FULL_FIELDS + BASIC_FIELDS:
        q = f.split(" [")[0]
        assert q in known or q.replace("clocks.current.", "clocks.") in known, q


KERNEL_LINE = {
    "dmesg_raw": re.compile(r"^\[ *\d+\.\d{6}\] "),
    "dmesg_T": re.compile(r"^\[\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\] "),
    "syslog": re.compile(r"^\w{3} [ \d]\d \d\d:\d\d:\d\d \S+ kernel: "),
    "journal_short_iso": re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} \S+ kernel: |-- Boot [0-9a-f]{32} --$)"),
    "rsyslog_rfc3339": re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}[+-]\d\d:\d\d \S+ kernel: \[ *\d+\.\d{6}\] "),
    "kern_log": re.compile(r"^\w{3} [ \d]\d \d\d:\d\d:\d\d \S+ kernel: \[ *\d+\.\d{6}\] "),
}


def test_kernel_logs_follow_their_host_format_and_name_failed_gpus(fleet):
    hosts = {h["host"]: h for h in read_truth(fleet, "hosts.csv")}
    inv = {r["serial"]: r for r in csv.DictReader(open(fleet / "inventory.csv", encoding="utf-8"))}
    xid_hosts = set()
    for host, h in hosts.items():
        for path in (fleet / "kernel" / host).iterdir():
            data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
            for line in data.decode("utf-8").splitlines():
                assert KERNEL_LINE[h["kernel_format"]].match(line), (h["kernel_format"], line)
                if "NVRM: Xid (PCI:" in line:
                    xid_hosts.add(host)
                m = re.search(r"GPU Board Serial Number: (\d+)", line)
                if m:
                    assert inv[m.group(1)]["host"] == host
    for f in read_truth(fleet, "failures.csv"):
        if f["precursor"] in ("xid_memory", "xid79_burst", "row_remap", "nvlink_xid"):
            assert f["host"] in xid_hosts


def test_generated_config_loads(fleet):
    from pipeline.config import load_config

    cfg = load_config(fleet / "truth" / "fleetfault.toml")
    assert cfg.site_tz("sha") == "Asia/Shanghai"
    noheader = [h["host"] for h in read_truth(fleet, "hosts.csv") if h["telemetry_format"] == "noheader_nounits"]
    assert set(cfg.telemetry.host_fields) == set(noheader)


def test_batches_are_documented():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "simulator.md").read_text(encoding="utf-8")
    for b in BATCHES:
        assert b.batch in doc


def test_cli_simulate_and_usage_errors(cli, tmp_path):
    code = cli("simulate", "--gpus", "8", "--days", "2", "--seed", "1", "--interval", "3600", "--out", tmp_path / "f", "-q")
    assert code == 0
    assert (tmp_path / "f" / "inventory.csv").exists() and (tmp_path / "f" / "truth" / "failures.csv").exists()
    assert cli("simulate", "--gpus", "0", "--out", tmp_path / "g") == 2
    assert cli("simulate", "--start", "yesterday", "--out", tmp_path / "g") == 2
    assert cli("simulate", "--kernel-rotation", "hourly", "--out", tmp_path / "g") == 2


def test_daily_kernel_rotation_writes_one_file_per_host_and_day(cli, tmp_path):
    out = tmp_path / "f"
    assert cli("simulate", "--gpus", "64", "--days", "3", "--seed", "3", "--interval", "3600",
               "--kernel-rotation", "daily", "--out", out, "-q") == 0
    assert json.loads((out / "truth" / "params.json").read_text())["kernel_rotation"] == "daily"
    formats = {r["host"]: r["kernel_format"] for r in csv.DictReader(open(out / "truth" / "hosts.csv"))}
    seen = set()
    for folder in (out / "kernel").iterdir():
        files = sorted(p.name for p in folder.iterdir())
        if not files:
            continue  # a host installed after the window
        seen.add(formats[folder.name])
        days = [re.search(r"(\d{8})\.log", f)[1] for f in files]
        assert len(days) == len(set(days)) and len(days) >= 3, (folder.name, files)  # one file per local day
        for p in folder.iterdir():
            raw = p.read_bytes()
            assert (gzip.decompress(raw) if p.name.endswith(".gz") else raw).endswith(b"\n")
    assert len(seen) >= 4  # the hosts' own formats, each rotated daily


@settings(max_examples=60, deadline=None)
@given(part=st.sampled_from(sorted(PARTS - {"NVLINK_BRIDGE"})), symptom=st.sampled_from(sorted(SYMPTOMS - {"PHYSICAL_DAMAGE"})),
       action=st.sampled_from(sorted(ACTIONS)), slot=st.one_of(st.none(), st.integers(0, 7)),
       lang=st.sampled_from(["en", "zh", "mixed"]), seed=st.integers(0, 2**32 - 1))
def test_ticket_text_is_never_empty_and_always_gbk(part, symptom, action, slot, lang, seed):
    from pipeline.simulate.tickets import ticket_text, vocabulary

    row = {"part_code": part, "symptom_code": symptom, "action_code": action, "slot": slot,
           "host": "sha-gpu007", "model": "H100 80GB HBM3"}
    texts = ticket_text(np.random.default_rng(seed), row, lang, "1650523000001", vocabulary(seed % 7))
    assert all(t.strip() for t in texts)
    for t in texts:
        t.encode("gbk")  # the sha-sp1 export is GBK: every generated character must fit


def test_each_fleet_speaks_its_own_subset_of_the_vocabulary():
    from pipeline.simulate import vocab
    from pipeline.simulate.tickets import vocabulary

    a, b = vocabulary(1), vocabulary(2)
    assert a != b
    for table, full in (("part", vocab.PART), ("symptom", vocab.SYMPTOM), ("action", vocab.ACTION)):
        for code, phrases in full.items():
            assert a[table][code] and set(a[table][code]) <= set(phrases)


def _host_rows(root: Path, host: dict) -> list[dict]:
    """A host's telemetry as dicts keyed by query field (complete rows only), times as written."""
    fields = host["fields"].split(",")
    rows = []
    for path in sorted((root / "telemetry" / host["host"]).iterdir()):
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        for line in data.decode("utf-8").split("\n"):
            cells = line.split(", ")
            if len(cells) == len(fields) and cells[0] != "timestamp":
                rows.append(dict(zip(fields, cells)))
    return rows


def _value(cell: str) -> float | None:
    head = cell.split(" ")[0]
    try:
        return float(head)
    except ValueError:
        return None


def test_telemetry_precursors_show_before_the_failure(fleet):
    """A failure whose truth says `ecc_rising` / `pcie_width` shows that in its GPU's telemetry
    before it fails, and not in the same measure on the host's other GPUs."""
    from zoneinfo import ZoneInfo

    hosts = {h["host"]: h for h in read_truth(fleet, "hosts.csv")}
    checked = 0
    for f in read_truth(fleet, "failures.csv"):
        signal = {"ecc_rising": "ecc.errors.corrected.volatile.total", "pcie_width": "pcie.link.width.current"}.get(f["precursor"])
        if signal is None:
            continue
        h = hosts[f["host"]]
        zone = ZoneInfo(h["tz"])
        failed = datetime.fromisoformat(f["failed_at"]).replace(tzinfo=ZoneInfo("UTC")).astimezone(zone).replace(tzinfo=None)
        before = [r for r in _host_rows(fleet, h)
                  if failed - timedelta(days=float(f["lead_days"])) < datetime.strptime(r["timestamp"], "%Y/%m/%d %H:%M:%S.%f") < failed]
        mine = [_value(r[signal]) for r in before if r["index"] == f["slot"]]
        others = [_value(r[signal]) for r in before if r["index"] != f["slot"]]
        mine = [v for v in mine if v is not None]
        assert mine, f
        if signal.startswith("ecc"):
            assert max(mine) > 0
        else:
            assert min(mine) < 16 and min(v for v in others if v is not None) == 16
        checked += 1
    assert checked >= 2
