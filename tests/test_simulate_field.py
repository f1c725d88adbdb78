"""``fleetfault simulate --ticket-layouts field --stale-inventory``: the exports other tools
write, a registry that missed removals, and the tickets linked right end to end."""

from __future__ import annotations

import csv
import json

import duckdb
import pytest

from pipeline.simulate.field_layouts import COLUMN_MAP
from pipeline.simulate.writer import simulate

# One fleet and its run, shared by the module's tests: one worker.
pytestmark = pytest.mark.xdist_group("simulate_field")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    out = tmp_path_factory.mktemp("field")
    sim = simulate(48, 45, 5, out / "data", interval=3600, accel=30, ticket_layouts="field", stale_inventory=0.5)
    return out, sim


def test_field_layouts_and_a_stale_inventory_are_written(fleet):
    out, sim = fleet
    data = out / "data"
    inv = list(csv.DictReader((data / "inventory.csv").open(encoding="utf-8")))
    assert all(r["ip"].startswith("10.") for r in inv)
    stale = [r["serial"] for r in csv.DictReader((data / "truth" / "stale_removals.csv").open())]
    assert stale, "a share of 0.5 leaves some removals out"
    listed = {r["serial"]: r for r in inv}
    assert all(listed[s]["removed_at"] == "" for s in stale)
    assert {f.suffix for f in (data / "tickets" / "sha-sp2").iterdir()} == {".json"}
    doc = json.loads(next((data / "tickets" / "sha-sp2").iterdir()).read_text(encoding="utf-8"))
    assert {"rma", "device", "fault", "resolution"} <= set(doc["items"][0])
    # Overlapping dumps: some sha-sp1 ticket is in several files, first in progress, then done.
    states: dict[str, list[str]] = {}
    for f in sorted((data / "tickets" / "sha-sp1").iterdir()):
        for r in csv.DictReader(f.open(encoding="utf-8")):
            states.setdefault(r["故障单号"], []).append(r["工单状态"])
    assert any(s[0] == "处理中" and s[-1] == "已完成" for s in states.values())


@pytest.fixture(scope="module")
def linked(fleet):
    """The fleet through the stages up to stats, once: its warehouse."""
    from pipeline.config import load_config
    from pipeline.run import run_pipeline

    out, _ = fleet
    data = out / "data"
    text = (data / "truth" / "fleetfault.toml").read_text(encoding="utf-8")
    for point, cols in COLUMN_MAP.items():  # linking measured apart from layout recognition
        text += f"\n[tickets.points.{point}.columns]\n" + "".join(f'{k} = "{v}"\n' for k, v in cols.items())
    (out / "ff.toml").write_text(text, encoding="utf-8")
    cfg = load_config(out / "ff.toml")
    _, code = run_pipeline(cfg, data, out / "wh.duckdb", out / "out",
                           stages=["inventory", "smi", "tickets", "normalize", "link", "stats"])
    assert code in (0, 1)
    return out / "wh.duckdb"


def test_field_tickets_link_to_the_right_gpu_end_to_end(fleet, linked):
    out, _ = fleet
    data = out / "data"
    con = duckdb.connect(str(linked), read_only=True)
    right, wrong, n = con.execute(f"""
        SELECT count(*) FILTER (WHERE w.serial = t.serial), count(*) FILTER (WHERE w.serial <> t.serial), count(*)
        FROM read_csv('{data}/truth/tickets.csv', all_varchar=true) t
        LEFT JOIN tickets w USING (service_point, ticket_id) WHERE coalesce(t.serial, '') <> ''""").fetchone()
    assert wrong == 0 and right >= 0.95 * n, (right, wrong, n)
    # The latest version of an evolving ticket: no sha-sp1 ticket is left in progress once closed.
    open_left = con.execute("""SELECT count(*) FROM tickets WHERE service_point = 'sha-sp1' AND status = '处理中'
                               AND closed_at IS NOT NULL""").fetchone()[0]
    assert open_left == 0
    assert con.execute("SELECT count(*) FROM inventory_observed").fetchone()[0] > 0


def test_stale_inventory_rows_are_listed_and_exported(fleet, linked, tmp_path):
    from pipeline.cli import main

    out, _ = fleet
    wh = linked
    data = out / "data"
    stale = {r["serial"] for r in csv.DictReader((data / "truth" / "stale_removals.csv").open())}
    assert main(["export", "inventory_stale", "--warehouse", str(wh), "-o", str(tmp_path / "s.csv")]) == 0
    listed = {r["serial"] for r in csv.DictReader((tmp_path / "s.csv").open(encoding="utf-8"))}
    # Every row listed is a removal the registry missed (those silent long enough to tell).
    assert listed and listed <= stale
    # ... and the report's data-quality section shows them to the asset team.
    assert main(["report", "--warehouse", str(wh), "-o", str(tmp_path / "r.html")]) in (0, 1)
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Inventory rows the telemetry contradicts" in page
    assert all(s in page for s in listed)
