"""Linking tickets as the field writes them: slots in words, per-point slot bases, hosts by
FQDN or address, the removed serial of a part swap, serials only in the text; and the
inventory reconciled with what telemetry saw (inventory_observed, inventory_stale)."""

from __future__ import annotations

from datetime import datetime, timedelta

import duckdb
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.vocab.hosts import host_key, host_key_sql
from pipeline.link.observed import OBSERVED_SQL, reconciled_inventory_sql, stale_sql
from pipeline.link.slots import detect_base, slot_in_text, slot_number
from pipeline.link.tickets import link_frame, serials_in_text

T0 = datetime(2025, 3, 1)


@pytest.mark.parametrize("cell, slot", [
    ("3", 3), (3.0, 3), ("GPU 6", 6), ("card #7", 7), ("slot3", 3), ("第5卡", 5), ("五号卡", 5), ("第十二张卡", 12),
    ("槽位3", 3), ("卡5", 5), ("6号GPU", 6), ("gpu three", 3), ("3rd GPU", 3), ("GPU idx 4", 4), ("#3", 3),
    ("", None), ("-", None), ("n/a", None), (None, None), ("H100 80GB", None),
])
def test_slot_cells_in_words_and_numbers_of_both_languages(cell, slot):
    assert slot_number(cell) == slot


@pytest.mark.parametrize("text, slot", [
    ("Xid 79 on GPU 3, fell off the bus", 3), ("H100 80GB GPU5 fell off bus", 5), ("第5卡掉卡，已更换", 5),
    ("node gpu-017 drained: ECC errors", None), ("gpu017 GPU 2 hot", 2), ("GPU 3 and GPU 4 both hot", None),
    ("replaced 2 GPUs", None),
])
def test_slot_named_in_free_text(text, slot):
    assert slot_in_text(text) == slot


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_slot_reading_never_raises_and_stays_small(text):
    for got in (slot_number(text), slot_in_text(text)):
        assert got is None or 0 <= got < 100


def test_slot_base_from_serial_linked_tickets_else_from_the_values():
    assert detect_base([(4, 3), (1, 0), (8, 7), (2, 1)], [4, 1, 8, 2], 7) == 1
    assert detect_base([(4, 4), (1, 1), (7, 7)], [4, 1, 7], 7) == 0
    assert detect_base([(4, 3), (2, 1)], [4, 2], 7) == 1  # two tickets, nothing against them
    assert detect_base([(4, 3)], [4], 7) is None  # one may be a mistyped slot or serial
    assert detect_base([(4, 3), (4, 4)], [4], 7) is None  # too few to tell
    assert detect_base([(4, 3), (2, 1), (6, 5), (3, 3)], [4, 2, 6, 3], 7) == 1  # a mistyped slot now and then
    assert detect_base([], [0, 3], 7) == 0  # a written 0
    assert detect_base([], [8, 3], 7) == 1  # one past the inventory's last slot


_label = st.text("abcXYZ019-", min_size=1, max_size=8)
_octet = st.integers(0, 255).map(str)


@settings(max_examples=120, deadline=None)
@given(st.one_of(
    st.builds(lambda s, d: ".".join([s, *d]), _label, st.lists(_label, max_size=3)),
    st.builds(lambda *o: ".".join(o), _octet, _octet, _octet, _octet),
), st.booleans(), st.sampled_from(["", " ", "  "]))
def test_host_key_python_and_sql_agree_on_names_fqdns_and_addresses(name, upper, pad):
    name = pad + (name.upper() if upper else name) + pad
    assert duckdb.execute(f"SELECT {host_key_sql('$1')}", [name]).fetchall()[0][0] == host_key(name)


def test_host_key_keeps_an_address_whole_and_drops_a_domain():
    assert host_key("10.0.0.5") == "10.0.0.5"
    assert host_key("GPU-017.rack3.dc.example.net") == "gpu-017"


INV = pl.DataFrame(
    [
        ("1650523300101", "gpu-017", 0, T0 - timedelta(days=300), None, "10.0.0.5"),
        ("1650523300102", "gpu-017", 1, T0 - timedelta(days=300), T0 + timedelta(days=10), "10.0.0.5"),
        ("1650523300999", "gpu-017", 1, T0 + timedelta(days=10), None, "10.0.0.5"),
        ("1650523300103", "gpu-017", 2, T0 - timedelta(days=300), None, "10.0.0.5"),
        ("1650523300201", "gpu-018", 0, T0 - timedelta(days=300), None, "10.0.0.6"),
        ("1650523300202", "gpu-018", 1, T0 - timedelta(days=300), None, "10.0.0.6"),
    ],
    schema={"serial": pl.Utf8, "host": pl.Utf8, "slot": pl.Int32, "installed_at": pl.Datetime("us"),
            "removed_at": pl.Datetime("us"), "ip": pl.Utf8},
    orient="row",
)
_TICKET = {"service_point": pl.Utf8, "ticket_id": pl.Utf8, "serial_text": pl.Utf8, "removed_serial": pl.Utf8,
           "installed_serial": pl.Utf8, "host": pl.Utf8, "slot": pl.Int32, "opened_at": pl.Datetime("us"),
           "part_code": pl.Utf8, "action_code": pl.Utf8, "part_text": pl.Utf8, "symptom_text": pl.Utf8,
           "action_text": pl.Utf8}


def _tickets(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame([{c: r.get(c) for c in _TICKET} for r in rows], schema=_TICKET)


def _linked(rows, **kw) -> list[tuple[str | None, str | None]]:
    out = link_frame(_tickets(rows), INV, **kw)
    return list(zip(out["serial"], out["link_method"]))


def test_a_one_based_point_links_by_host_and_slot_after_its_serial_tickets_show_the_base():
    at = T0 + timedelta(days=40)
    rows = [  # a 1-based point: its serial-linked tickets say slot+1
        {"service_point": "p1", "ticket_id": "a", "serial_text": "1650523300101", "host": "gpu-017", "slot": 1,
         "opened_at": at},
        {"service_point": "p1", "ticket_id": "b", "serial_text": "1650523300103", "host": "gpu-017", "slot": 3,
         "opened_at": at},
        {"service_point": "p1", "ticket_id": "c", "serial_text": "1650523300202", "host": "GPU-018", "slot": 2,
         "opened_at": at},
        {"service_point": "p1", "ticket_id": "d", "host": "gpu-018.rack3.dc.example.net", "slot": 1, "opened_at": at},
        {"service_point": "p0", "ticket_id": "e", "host": "gpu-018.rack3.dc.example.net", "slot": 1, "opened_at": at},
    ]
    unsure: set[str] = set()
    got = _linked(rows, unsure=unsure)
    assert unsure == {"p0"}  # p0 has no ticket showing its base
    assert got[3] == ("1650523300201", "host_slot")  # slot 1 of a 1-based point is inventory slot 0
    assert got[4] == ("1650523300202", "host_slot")  # another point, 0-based by default
    assert _linked(rows, slot_base={"p1": 0})[3] == ("1650523300202", "host_slot")  # config overrides


def test_a_host_by_address_and_a_slot_only_in_the_text():
    at = T0 + timedelta(days=40)
    got = _linked([{"service_point": "p", "ticket_id": "x", "host": "10.0.0.6", "opened_at": at,
                    "symptom_text": "Xid 79 on GPU 1, fell off the bus"}])
    assert got == [("1650523300202", "host_slot")]


def test_the_removed_serial_of_a_part_swap_is_the_failed_unit():
    at = T0 + timedelta(days=10, hours=3)
    got = _linked([{"service_point": "p", "ticket_id": "x", "host": "gpu-017", "slot": 1, "opened_at": at,
                    "part_code": "GPU", "action_code": "REPLACE", "removed_serial": "1650523300102",
                    "installed_serial": "1650523300999", "serial_text": "1650523300999"}])
    assert got == [("1650523300102", "serial_exact")]


def test_a_serial_only_in_the_free_text_not_the_one_fitted():
    assert serials_in_text(["swapped GPU, old SN 1650523300102, new SN 1650523300999"],
                           {"1650523300102", "1650523300999"}) == {"1650523300102"}
    assert serials_in_text(["换卡，新SN 1650523300999"], {"1650523300999"}) == set()
    at = T0 + timedelta(days=50)
    got = _linked([{"service_point": "p", "ticket_id": "x", "host": "gpu-018", "opened_at": at,
                    "symptom_text": "ECC errors (board SN 1650523300201)"}])
    assert got == [("1650523300201", "serial_in_text")]


# -- what telemetry saw -------------------------------------------------------------

def _hour(serial, host, bus, idx, t):
    return {"serial": serial, "host": host, "pci_bus_id": bus, "gpu_index": idx, "ts_first": t,
            "ts_last": t + timedelta(minutes=55)}


def _observed_con(inventory: pl.DataFrame, hours: list[dict]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.register("inventory", inventory.with_columns(
        pl.lit("H100 80GB HBM3").alias("model"), pl.lit("Dell").alias("vendor"), pl.lit("sha").alias("site"),
        pl.lit("H100-2024Q2").alias("batch")))
    con.register("smi_hourly", pl.DataFrame(hours))
    con.execute(f"CREATE TABLE inventory_observed AS SELECT serial, host, pci_bus_id, gpu_index, first_seen, "
                f"last_seen, next_serial FROM ({OBSERVED_SQL})")
    return con


def _telemetry():
    """gpu-017 slot 1: 102 reports until day 10, then 777 (not in the inventory); slot 0: 101 all along."""
    hours = []
    for d in range(0, 60):
        t = T0 + timedelta(days=d)
        hours.append(_hour("1650523300101", "gpu-017", "0000:18:00.0", 0, t))
        hours.append(_hour("1650523300102" if d < 10 else "1650523300777", "GPU-017", "0000:2a:00.0", 1, t))
    return hours


def test_observed_swap_fills_a_missing_removal_and_lists_the_unregistered_gpu():
    inv = INV.filter(pl.col("serial") != "1650523300999").with_columns(
        pl.when(pl.col("serial") == "1650523300102").then(None).otherwise(pl.col("removed_at")).alias("removed_at"))
    con = _observed_con(inv, _telemetry())
    obs = con.execute("SELECT serial, next_serial FROM inventory_observed ORDER BY first_seen, serial").fetchall()
    assert ("1650523300102", "1650523300777") in obs and ("1650523300101", None) in obs
    rec = {r[0]: r for r in con.execute(
        f"SELECT serial, slot, removed_at, source, model FROM ({reconciled_inventory_sql()})").fetchall()}
    assert rec["1650523300102"][2] == T0 + timedelta(days=9, minutes=55)
    assert rec["1650523300102"][3] == "observed_removal"
    assert rec["1650523300777"][1:4] == (1, None, "observed_only")
    assert rec["1650523300101"][2:4] == (None, "inventory")  # still reporting: still installed


def test_replacement_ticket_without_serial_takes_the_gpu_seen_leaving_its_slot():
    # The registry lists the replacement but never closed the failed GPU's row: two GPUs
    # "in" slot 1, so the registry alone cannot tell which one a slot-only ticket is about.
    inv = INV.with_columns(
        pl.when(pl.col("serial") == "1650523300102").then(None).otherwise(pl.col("removed_at")).alias("removed_at"))
    ticket = {"service_point": "p", "ticket_id": "x", "host": "gpu-017.rack3", "slot": 1, "part_code": "GPU",
              "action_code": "REPLACE", "opened_at": T0 + timedelta(days=11)}
    assert link_frame(_tickets([ticket]), inv)["serial"].to_list() == [None]
    con = _observed_con(inv, _telemetry())
    rec = con.sql(f"SELECT r.*, '10.0.0.5' AS ip FROM ({reconciled_inventory_sql()}) r").pl()
    out = link_frame(_tickets([ticket]), rec)
    assert list(zip(out["serial"], out["link_method"])) == [("1650523300102", "host_slot_observed")]


def test_stale_rows_are_the_open_ones_silent_for_longer_than_the_limit():
    inv = INV.with_columns(pl.lit(None, pl.Datetime("us")).alias("removed_at"))
    con = _observed_con(inv, _telemetry())
    stale = con.execute(stale_sql(30)).fetchall()
    assert [(r[0], r[6]) for r in stale] == [("1650523300102", "1650523300777")]
    assert round(stale[0][7]) == 50
    assert con.execute(stale_sql(60)).fetchall() == []


def test_a_typo_serial_of_a_gpu_never_in_the_tickets_slot_gives_way_to_the_slot():
    at = T0 + timedelta(days=40)
    # 1650523300212 is one typo from 202 (slot 1); the ticket says slot 0, where 201 sits.
    got = _linked([{"service_point": "p", "ticket_id": "x", "serial_text": "1650523300212", "host": "gpu-018",
                    "slot": 0, "opened_at": at}])
    assert got == [("1650523300201", "host_slot")]
    # Without a slot the typo is all there is.
    got = _linked([{"service_point": "p", "ticket_id": "x", "serial_text": "1650523300212", "host": "gpu-018",
                    "opened_at": at}])
    assert got == [("1650523300202", "serial_fuzzy")]


def _raw(rows):
    cols = {"service_point": pl.Utf8, "ticket_id": pl.Utf8, "opened_at": pl.Datetime("us"),
            "closed_at": pl.Datetime("us"), "updated_at": pl.Datetime("us"), "status": pl.Utf8,
            "action_text": pl.Utf8, "source_file": pl.Utf8, "file_id": pl.Int64, "line_no": pl.Int64}
    return pl.DataFrame([dict(zip(cols, r)) for r in rows], schema=cols)


def test_evolving_ticket_latest_by_updated_else_the_newest_dump():
    from pipeline.normalize.stage import latest

    o = T0
    # With an updated field, the latest update wins even from a dump named earlier.
    got = latest(_raw([
        ("p", "T1", o, None, o + timedelta(days=1), "处理中", None, "tickets/p/b.csv", 2, 1),
        ("p", "T1", o, o + timedelta(days=2), o + timedelta(days=3), "已完成", "更换GPU", "tickets/p/a.csv", 1, 1),
    ]))
    assert got.select("status", "action_text").row(0) == ("已完成", "更换GPU")
    # Without one, the newer dump (the one holding the newer dates) wins.
    got = latest(_raw([
        ("p", "T2", o, None, None, "Open", None, "tickets/p/x.csv", 3, 1),
        ("p", "T9", o + timedelta(days=9), None, None, "Open", None, "tickets/p/x2.csv", 4, 1),
        ("p", "T2", o, o + timedelta(days=1), None, "Closed", "RMA", "tickets/p/x2.csv", 4, 2),
    ]))
    assert got.filter(pl.col("ticket_id") == "T2").select("status", "action_text").row(0) == ("Closed", "RMA")


def test_slot_base_read_from_slots_named_only_in_the_text():
    at = T0 + timedelta(days=40)
    rows = [  # no slot column: the text counts from 1
        {"service_point": "p1", "ticket_id": "a", "serial_text": "1650523300101", "host": "gpu-017", "opened_at": at,
         "symptom_text": "card 1 hot"},
        {"service_point": "p1", "ticket_id": "b", "serial_text": "1650523300103", "host": "gpu-017", "opened_at": at,
         "symptom_text": "Xid 48 on GPU 3"},
        {"service_point": "p1", "ticket_id": "c", "host": "gpu-018", "opened_at": at, "symptom_text": "GPU 2 fell off"},
    ]
    assert _linked(rows)[2] == ("1650523300202", "host_slot")


def test_a_slot_met_in_prose_never_outweighs_a_written_serial():
    at = T0 + timedelta(days=40)
    # 1650523300202 sits in slot 1; the text's "GPU 0" points at 201, one typo away from it.
    got = _linked([{"service_point": "p", "ticket_id": "x", "serial_text": "SN: 1650523300202", "host": "gpu-018",
                    "opened_at": at, "symptom_text": "GPU 0 hang", "part_text": "GPU #0"}])
    assert got == [("1650523300202", "serial_exact")]
    # The part text's number is not read as a slot at all.
    got = _linked([{"service_point": "p", "ticket_id": "x", "host": "gpu-018", "opened_at": at,
                    "part_text": "OAM module1", "symptom_text": "PCIe link degraded"}])
    assert got == [(None, None)]


def test_a_gpu_in_the_swap_list_is_the_part_where_the_text_left_it_open():
    from pipeline.normalize.stage import swapped_gpu

    tickets = pl.DataFrame({"part_code": [None, None, "PSU"], "part_score": [40.0, 40.0, 95.0],
                            "symptom_code": ["HANG", "HANG", "POWER_FAULT"], "action_code": ["REPLACE", None, "REPLACE"],
                            "review": [True, True, False]})
    rows = pl.DataFrame({"swap_part_text": ["H100 SXM5 module", "GPU riser", "GPU Module"]})
    got = swapped_gpu(tickets, rows)
    assert got["part_code"].to_list() == ["GPU", None, "PSU"]  # a riser is not the GPU; a confident code stays
    assert got["review"].to_list() == [False, True, False]
