"""nvidia-smi telemetry from fleets shaped unlike ours: the minimal query (no index, serial,
uuid or bus id), host names spelled differently from the inventory, and stable column
types in ``parse smi`` whatever the values (issue 4)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.vocab.hosts import host_key, host_key_sql
from pipeline.ingest.inventory import run as inventory_run
from pipeline.ingest.telemetry import parse_smi_files
from tests.test_smi import run_smi

MINIMAL = "timestamp, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB]"
SERIALS = ["SN-A0", "SN-A1", "SN-A2"]


def _ctx(tmp_path, wh, data):
    from pipeline.config import config_from_dict
    from pipeline.run import RunContext

    cfg = config_from_dict({"sites": {"sha": {"tz": "Asia/Shanghai"}}})
    return RunContext(cfg, wh, data, tmp_path / "out")


def _inventory(data: Path, host: str) -> None:
    data.mkdir(parents=True, exist_ok=True)
    rows = [f"{s},A100,OEM,{host},{slot},sha,B1,2024-01-01," for slot, s in enumerate(SERIALS)]
    (data / "inventory.csv").write_text("serial,model,vendor,host,slot,site,batch,installed_at,removed_at\n"
                                        + "\n".join(rows) + "\n")


def _minimal_rounds(bad: tuple[int, int] | None = None) -> list[str]:
    """Two rounds of three GPUs each, lines a few ms apart (as ``-l 60`` prints them)."""
    out = []
    for minute in (0, 1):
        for i in range(3):
            util = "x%" if (minute, i) == bad else f"{10 * i + minute} %"
            out.append(f"2026/07/03 10:{minute:02d}:00.{100 + 7 * i:03d}, NVIDIA A100-SXM4-80GB, {util}, "
                       f"{1000 * i} MiB, 81920 MiB")
    return out


def test_minimal_query_numbers_gpus_by_round_and_links_serials(tmp_path, wh):
    data = tmp_path / "data"
    _inventory(data, "Node-1.cluster.local")
    folder = data / "telemetry" / "node-1"
    folder.mkdir(parents=True)
    # GPU 1's first sample is unreadable: quarantined, yet GPU 2 keeps its index.
    (folder / "gpu.csv").write_text(MINIMAL + "\n" + "\n".join(_minimal_rounds(bad=(0, 1))) + "\n")
    ctx = _ctx(tmp_path, wh, data)
    inventory_run(ctx)
    run_smi(ctx)
    rep = ctx.report("smi")
    assert (rep.rows_read, rep.rows_loaded, rep.rows_quarantined) == (6, 5, 1)
    days = wh.engine.pl("SELECT gpu_key, gpu_index, host, samples, mem_used_max FROM gpu_days ORDER BY gpu_index", step="test")
    assert days["gpu_key"].to_list() == SERIALS  # linked by host + slot, host spelled otherwise
    assert days["gpu_index"].to_list() == [0, 1, 2] and days["samples"].to_list() == [2, 1, 2]
    assert days["mem_used_max"].to_list() == [0, 1000, 2000]  # each GPU's own values, not a mix
    assert set(days["host"]) == {"node-1"}  # the stored host is the folder's, unchanged
    # The site (so the zone) is found through the host key too: Shanghai 10:00 -> 02:00 UTC.
    assert wh.con.execute("SELECT min(hour) FROM smi_hourly").fetchall()[0][0] == datetime(2026, 7, 3, 2)


def test_minimal_query_without_inventory_keys_by_host_and_index(tmp_path, wh):
    data = tmp_path / "data"
    folder = data / "telemetry" / "stray"
    folder.mkdir(parents=True)
    (folder / "gpu.csv").write_text(MINIMAL + "\n" + "\n".join(_minimal_rounds()) + "\n")
    ctx = _ctx(tmp_path, wh, data)
    run_smi(ctx)
    keys = [r[0] for r in wh.con.execute("SELECT gpu_key FROM gpu_days ORDER BY gpu_key").fetchall()]
    assert keys == ["bus:stray/index0", "bus:stray/index1", "bus:stray/index2"]


def test_a_file_without_a_timestamp_field_is_quarantined(tmp_path, wh):
    data = tmp_path / "data"
    folder = data / "telemetry" / "h1"
    folder.mkdir(parents=True)
    (folder / "gpu.csv").write_text("name, utilization.gpu [%]\nNVIDIA A100-SXM4-80GB, 5 %\nNVIDIA A100-SXM4-80GB, 7 %\n")
    ctx = _ctx(tmp_path, wh, data)
    run_smi(ctx)
    assert ctx.report("smi").rows_quarantined == 2
    reasons = wh.con.execute("SELECT DISTINCT reason FROM quarantine").fetchall()
    assert reasons == [("no_timestamp",)]
    assert wh.con.execute("SELECT count(*) FROM gpu_days").fetchall()[0][0] == 0


def test_index_only_telemetry_links_to_an_upper_case_inventory_host(tmp_path, wh):
    data = tmp_path / "data"
    _inventory(data, "DGX-A-12")
    folder = data / "telemetry" / "dgx-a-12"
    folder.mkdir(parents=True)
    rows = [f"2026/07/03 10:00:00.000, {i}, {50 + i}" for i in range(3)]
    (folder / "smi.csv").write_text("timestamp, index, temperature.gpu\n" + "\n".join(rows) + "\n")
    ctx = _ctx(tmp_path, wh, data)
    inventory_run(ctx)
    run_smi(ctx)
    assert [r[0] for r in wh.con.execute("SELECT serial FROM gpu_days ORDER BY gpu_index").fetchall()] == SERIALS


_label = st.text("abcXYZ019-", min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(_label, st.lists(_label, max_size=3), st.booleans())
def test_host_key_sql_agrees_with_python(short, domain, upper):
    name = ".".join([short, *domain])
    name = name.upper() if upper else name
    got = duckdb.execute(f"SELECT {host_key_sql('$1')}", [name]).fetchall()[0][0]
    assert got == host_key(name)
    if any(c.isalpha() for c in name):  # not an IPv4 address: the domain goes, the case too
        assert got == short.lower()


def test_host_key_keeps_an_ip_address():
    assert host_key("10.1.2.3") == "10.1.2.3"
    assert host_key("Node-017.Cluster.Local") == host_key("node-017") == "node-017"


FIELDS = ("temperature.gpu, ecc.errors.corrected.volatile.total, retired_pages.sbe, clocks.sm [MHz], "
          "pcie.link.gen.current, power.draw [W], clocks_event_reasons.sw_power_cap, "
          "clocks_event_reasons.active, utilization.gpu [%], fan.speed [%]")


def _schema(tmp_path: Path, name: str, values: str) -> dict:
    f = tmp_path / "h" / name
    f.parent.mkdir(exist_ok=True)
    f.write_text(f"timestamp, index, {FIELDS}\n2026/07/03 10:00:00.000, 0, {values}\n")
    df, bad = parse_smi_files([f])
    assert not bad
    return dict(df.schema)


def test_a_field_has_one_dtype_whether_null_or_not(tmp_path):
    full = _schema(tmp_path, "a.csv", "40, 3, 0, 1410 MHz, 4, 300.00 W, Active, 0x0000000000000004, 5 %, 30 %")
    empty = _schema(tmp_path, "b.csv", ", ".join(["[Not Supported]"] * 3 + ["[N/A]"] * 7))
    assert full == empty
    assert full["temperature_gpu"] == full["clocks_sm"] == full["power_draw"] == full["fan_speed"] == pl.Float64
    assert full["utilization_gpu"] == pl.Float64
    for col in ("ecc_errors_corrected_volatile_total", "retired_pages_sbe", "pcie_link_gen_current",
                "clocks_event_reasons_sw_power_cap", "clocks_event_reasons_active"):
        assert full[col] == pl.Int64, col


def test_an_unknown_field_keeps_the_data_rule(tmp_path):
    f = tmp_path / "h" / "a.csv"
    f.parent.mkdir()
    f.write_text("timestamp, index, vendor.thing\n2026/07/03 10:00:00.000, 0, 5\n")
    assert parse_smi_files([f])[0].schema["vendor_thing"] == pl.Int64


def test_parse_smi_numbers_minimal_query_gpus_by_round(tmp_path):
    # `fleetfault parse smi` gives the minimal query's lines the index the facts use: the
    # line's place in its sampling round, per file; an unreadable line keeps no one's place.
    a, b = tmp_path / "n1" / "a.csv", tmp_path / "n1" / "b.csv"
    a.parent.mkdir()
    a.write_text(MINIMAL + "\n" + "\n".join(_minimal_rounds(bad=(0, 1))) + "\n")
    b.write_text("\n".join(_minimal_rounds()[:2]) + "\n")  # headerless: continues a's header
    df, rejects = parse_smi_files([a, b], tz="UTC")
    assert [r.reason for r in rejects] == ["bad_value"] and rejects[0].line_no == 3
    assert df["gpu_index"].to_list() == [0, 2, 0, 1, 2] + [0, 1]
    assert df["memory_used"].to_list() == [0, 2000, 0, 1000, 2000] + [0, 1000]
