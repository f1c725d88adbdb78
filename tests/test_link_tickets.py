"""Linking tickets to inventory GPUs: exact, one typo (unique only), rounded serials,
host + slot at the ticket's time across a replacement, and unlinked when in doubt."""

from __future__ import annotations

import random
from datetime import datetime

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.link.tickets import SerialIndex, link_frame

INV = pl.DataFrame(
    [
        # serial,         host,         slot, installed,              removed
        ("1654620012345", "gpu-sha-a01", 3, datetime(2024, 1, 1), datetime(2025, 3, 10, 6)),
        ("1654620099001", "gpu-sha-a01", 3, datetime(2025, 3, 10, 6), None),  # the replacement
        ("1654620012346", "gpu-sha-a01", 4, datetime(2024, 1, 1), None),
        ("1654620012348", "gpu-sha-a01", 5, datetime(2024, 1, 1), None),
        ("PQ1O0I7", "gpu-sjc-b07", 0, datetime(2024, 1, 1), None),
        ("1320021000007", "gpu-fra-01", 1, datetime(2024, 1, 1), None),
    ],
    schema={"serial": pl.Utf8, "host": pl.Utf8, "slot": pl.Int32, "installed_at": pl.Datetime("us"),
            "removed_at": pl.Datetime("us")},
    orient="row",
)


def tickets(*rows) -> pl.DataFrame:
    return pl.DataFrame(
        list(rows),
        schema={"ticket_id": pl.Utf8, "serial_text": pl.Utf8, "host": pl.Utf8, "slot": pl.Int32,
                "opened_at": pl.Datetime("us"), "part_code": pl.Utf8, "action_code": pl.Utf8},
        orient="row",
    )


def linked(*rows, **kw) -> list[tuple]:
    out = link_frame(tickets(*rows), INV, **kw)
    return list(zip(out["serial"].to_list(), out["link_method"].to_list()))


T = datetime(2025, 3, 1)


def test_exact_and_cleaned_serials():
    assert linked(("a", "SN: 1654620012346", None, None, T, "GPU", "REPLACE"),
                  ("b", "1320021000007.0", None, None, T, None, None)) == [
        ("1654620012346", "serial_exact"), ("1320021000007", "serial_exact")]


@pytest.mark.parametrize("typo", [
    "1320021000070",   # adjacent transposition
    "132002100007",    # a digit lost
    "13200210000077",  # a digit doubled
    "1320O21000007",   # O for 0
    "PQ10OI7",         # I/1 and O/0 swapped back (both confusable)
    "pq1o0i7x",        # case, plus one extra character
])
def test_one_typo_links_when_unique(typo):
    (serial, method), = linked(("t", typo, None, None, T, None, None))
    assert method == "serial_fuzzy" and serial in {"1320021000007", "PQ1O0I7"}


def test_ambiguous_typo_is_not_linked():
    # ...347 is one substitution from ...345, ...346 and ...348.
    assert linked(("t", "1654620012347", None, None, T, "GPU", "REPLACE")) == [(None, None)]
    # Two edits away from everything: unknown.
    assert linked(("t", "1654620012399", None, None, T, None, None)) == [(None, None)]


def test_ambiguous_typo_resolved_by_host_and_slot_only_among_its_candidates():
    assert linked(("t", "1654620012347", "gpu-sha-a01", 5, T, None, None)) == [("1654620012348", "serial_fuzzy")]
    # The slot's GPU is not one of the candidates: conflicting evidence, not linked.
    assert linked(("t", "1654620012347", "gpu-fra-01", 1, T, None, None)) == [(None, None)]


def test_rounded_serial_links_when_it_rounds_from_one_gpu():
    assert linked(("t", "1.32002E+12", None, None, T, None, None)) == [("1320021000007", "serial_fuzzy")]
    # 1.65462E+12 rounds from four GPUs: the slot tells which.
    assert linked(("t", "1.65462E+12", "GPU-SHA-A01.example.com", 4, T, None, None)) == [("1654620012346", "serial_fuzzy")]
    # ...and with no host, it is not linked.
    assert linked(("t", "1.65462E+12", None, None, T, None, None)) == [(None, None)]


def test_host_slot_at_the_tickets_time_across_a_replacement():
    before, after = datetime(2025, 3, 9), datetime(2025, 3, 20)
    assert linked(("old", None, "gpu-sha-a01", 3, before, "FAN", "CLEAN"),
                  ("new", None, "gpu-sha-a01", 3, after, "GPU", "RESEAT")) == [
        ("1654620012345", "host_slot"), ("1654620099001", "host_slot")]


def test_replacement_ticket_written_after_the_swap_names_the_removed_gpu():
    two_days_later = datetime(2025, 3, 12)
    assert linked(("t", None, "gpu-sha-a01", 3, two_days_later, "GPU", "REPLACE")) == [("1654620012345", "host_slot")]
    # Outside the window it is the GPU in the slot at the time.
    assert linked(("t", None, "gpu-sha-a01", 3, two_days_later, "GPU", "REPLACE"), replace_window_days=1) == [
        ("1654620099001", "host_slot")]


def test_unknown_host_or_missing_slot_stays_unlinked():
    assert linked(("t", None, "gpu-nowhere", 3, T, None, None), ("u", None, "gpu-sha-a01", None, T, None, None)) == [
        (None, None), (None, None)]


def test_max_edits_zero_links_only_exact_and_confusable():
    assert linked(("t", "1320021000070", None, None, T, None, None), max_edits=0) == [(None, None)]
    assert linked(("t", "PQIO0I7", None, None, T, None, None), max_edits=0) == [("PQ1O0I7", "serial_fuzzy")]


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="0123456789ABCIO", min_size=6, max_size=12), st.data())
def test_a_single_edit_finds_the_serial_among_candidates(serial, data):
    pos = data.draw(st.integers(0, len(serial) - 1))
    kind = data.draw(st.sampled_from(["sub", "del", "ins", "swap"]))
    ch = data.draw(st.sampled_from("0123456789"))
    s = list(serial)
    if kind == "sub":
        s[pos] = ch
    elif kind == "del":
        del s[pos]
    elif kind == "ins":
        s.insert(pos, ch)
    elif pos + 1 < len(s):
        s[pos], s[pos + 1] = s[pos + 1], s[pos]
    others = [f"{random.Random(i).randrange(10**11, 10**12)}" for i in range(50)]
    index = SerialIndex([serial, *others])
    assert serial in index.candidates("".join(s))


def test_typo_that_spells_another_real_serial_is_caught_by_the_slot():
    # ...346 is a real GPU in slot 4, but the ticket is about slot 5, whose GPU ...348 is one typo away.
    assert linked(("t", "1654620012346", "gpu-sha-a01", 5, T, "GPU", "REPLACE")) == [("1654620012348", "serial_fuzzy")]
    # A slot GPU far from the written serial: the serial wins (the host may be the typo).
    assert linked(("t", "1320021000007", "gpu-sha-a01", 5, T, None, None)) == [("1320021000007", "serial_exact")]


def test_other_ticket_just_after_a_swap_is_not_guessed():
    # A reseat ticket two days after slot 3's swap may be about the old GPU or the new one.
    assert linked(("t", None, "gpu-sha-a01", 3, datetime(2025, 3, 12), "GPU", "RESEAT")) == [(None, None)]
    # Four days on, it is about the GPU in the slot.
    assert linked(("t", None, "gpu-sha-a01", 3, datetime(2025, 3, 14, 7), "GPU", "RESEAT")) == [
        ("1654620099001", "host_slot")]
    assert linked(("t", "1654620099001", "gpu-sha-a01", 3, datetime(2025, 3, 12), "GPU", "RESEAT")) == [
        ("1654620099001", "serial_exact")]


def test_typo_confirmed_by_a_gpu_that_left_the_slot_around_the_tickets_time():
    # Written ...345 with a typo (...355) that spells nothing; the slot's GPU at the time is the
    # replacement ...9001, but ...345 sat there until two days before: the serial says which.
    assert linked(("t", "1654620012355", "gpu-sha-a01", 3, datetime(2025, 3, 12), "GPU", "RESEAT")) == [
        ("1654620012345", "serial_fuzzy")]



def test_typo_that_spells_the_replacement_installed_after_the_ticket():
    inv = pl.DataFrame(
        [("0323918185363", "h", 7, datetime(2019, 11, 17), datetime(2025, 3, 9, 22)),
         ("0323918185366", "h", 7, datetime(2025, 3, 9, 22), None)],
        schema=INV.schema, orient="row")
    # Opened before the swap, the written serial is one typo from the failed GPU and spells
    # its replacement exactly; a GPU installed after the ticket cannot be what it is about.
    out = link_frame(tickets(("t", "0323918185366", "h", 7, datetime(2025, 3, 8, 20), "GPU", "REPLACE")), inv)
    assert out.select("serial", "link_method").row(0) == ("0323918185363", "serial_fuzzy")
