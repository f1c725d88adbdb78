"""Stage ``link``: each ticket to the inventory GPU it is about.

Reads: ``tickets`` (serial as written, host, slot, opened_at, codes), ``inventory``.
Writes: ``tickets.serial`` and ``tickets.link_method``. Failure rates count only linked
tickets, so a wrong link is worse than none. A ticket is linked

1. by its serial compared with the GPUs in its host and slot at its time or taken out
   within ``link.replace_window_days`` before: the one equal to it or one typo from it,
   even when the typo spells another real serial (``serial_exact``/``serial_fuzzy``);
2. ``serial_exact``: its cleaned serial is an inventory serial;
3. ``serial_fuzzy``: one edit away (substitution, insertion, deletion, adjacent
   transposition, with O/0 and I/1 read alike) from exactly one inventory serial, or a
   spreadsheet-rounded serial (``1.65462E+12``) that rounds from exactly one;
4. ``host_slot``: the GPU in the ticket's host and slot at the ticket's time (for a
   replacement, the GPU taken out of that slot nearest the ticket's time, since tickets
   are often written after the swap; for another ticket opened within
   ``link.swap_ambiguity_days`` after a swap, no one: it may be about either GPU). A serial that matches several GPUs is linked this
   way only when the slot's GPU is one of them;

else it stays unlinked (``serial`` and ``link_method`` null) and is counted in a note.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime, timedelta

import polars as pl
from rapidfuzz.distance import OSA

from pipeline.ingest.ticket_columns import clean_serial, rounded_serial

log = logging.getLogger(__name__)

_CONFUSABLE = str.maketrans({"O": "0", "I": "1"})


def _fold(serial: str) -> str:
    return serial.upper().translate(_CONFUSABLE)


def _short_host(host: str | None) -> str | None:
    if not host:
        return None
    return host.strip().lower().split(".")[0] or None


class SerialIndex:
    """Inventory serials, searchable exactly and within one edit (symmetric deletions)."""

    def __init__(self, serials: list[str], max_edits: int = 1):
        self.serials = set(serials)
        self.max_edits = max_edits
        self._folded: dict[str, set[str]] = defaultdict(set)
        self._deletions: dict[str, set[str]] = defaultdict(set)
        self._numeric: dict[int, list[str]] = defaultdict(list)
        # Digit serials with leading zeros, by the number a spreadsheet cell turns them into.
        self._unpadded: dict[str, set[str]] = defaultdict(set)
        for s in self.serials:
            if s.isdigit() and s.startswith("0"):
                self._unpadded[s.lstrip("0")].add(s)
            f = _fold(s)
            self._folded[f].add(s)
            if max_edits >= 1:
                for d in self._variants(f):
                    self._deletions[d].add(s)
            if s.isdigit():
                self._numeric[len(s)].append(s)

    @staticmethod
    def _variants(s: str) -> set[str]:
        return {s} | {s[:i] + s[i + 1:] for i in range(len(s))}

    def candidates(self, serial: str) -> set[str]:
        """Inventory serials this one may be: itself, else those within the allowed edits."""
        if serial in self.serials:
            return {serial}
        if serial.isdigit() and serial in self._unpadded:  # 0012345678 read as the number 12345678
            return set(self._unpadded[serial])
        if rs := rounded_serial(serial):
            value, sig, ndigits = rs
            return {s for s in self._numeric.get(ndigits, ()) if _round(int(s), sig) == value}
        f = _fold(serial)
        if self.max_edits < 1:
            return set(self._folded.get(f, ()))
        out: set[str] = set()
        for d in self._variants(f):
            for s in self._deletions.get(d, ()):
                if OSA.distance(f, _fold(s)) <= 1:
                    out.add(s)
        return out


def _round(value: int, sig: int):
    from decimal import Decimal

    d = Decimal(value)
    return Decimal(f"{d:.{sig - 1}E}")


class SlotHistory:
    """Which GPU sat in a host's slot when: inventory rows by (host, slot)."""

    def __init__(self, inventory: pl.DataFrame):
        self._by_slot: dict[tuple[str, int], list[tuple[datetime | None, datetime | None, str]]] = defaultdict(list)
        for serial, host, slot, start, end in inventory.select(
            "serial", "host", "slot", "installed_at", "removed_at"
        ).iter_rows():
            if host and slot is not None:
                self._by_slot[(_short_host(host), int(slot))].append((start, end, serial))

    def around(self, host: str | None, slot: int | None, when: datetime | None, window: timedelta) -> set[str]:
        """Every GPU in ``host``/``slot`` at ``when`` or taken out within ``window`` before it
        (any time if ``when`` is None). A GPU installed after the ticket was opened cannot be
        what it is about, even when its serial is one typo from the one written."""
        rows = self._by_slot.get((_short_host(host), slot)) if host and slot is not None else None
        if not rows:
            return set()
        if when is None:
            return {s for _, _, s in rows}
        return {s for start, end, s in rows if (start is None or start <= when) and (end is None or end >= when - window)}

    def at(self, host: str | None, slot: int | None, when: datetime | None, replaced: bool,
           window: timedelta, ambiguity: timedelta) -> str | None:
        """The GPU in ``host``/``slot`` at ``when``; for a replacement, the one removed
        within ``window`` of ``when`` (nearest), if any. None when unknown or not unique."""
        rows = self._by_slot.get((_short_host(host), slot)) if host and slot is not None else None
        if not rows:
            return None
        if when is None:
            return rows[0][2] if len(rows) == 1 else None
        if replaced:
            near = [(abs(end - when), s) for start, end, s in rows if end is not None and abs(end - when) <= window]
            near.sort()
            if near and (len(near) == 1 or near[0][0] < near[1][0]):
                return near[0][1]
        elif any(end is not None and when - ambiguity <= end <= when for _, end, _ in rows):
            # The slot's GPU was swapped just before this ticket: it may be about either.
            return None
        live = [s for start, end, s in rows if (start is None or start <= when) and (end is None or end > when)]
        return live[0] if len(live) == 1 else None


def _choose(written: str | None, cands: set[str], in_slot: set[str], by_slot: str | None) -> tuple[str | None, str | None]:
    """The GPU a ticket is about, and how it was found, from its serial's candidates, the GPUs
    that sat in its slot around its time, and the slot's GPU at its time."""
    if written and in_slot:
        if len(cands) == 1 and cands <= in_slot:
            (s,) = cands
            return s, "serial_exact" if s == written else "serial_fuzzy"
        # A typo confirmed by the slot, even one that spells another real serial.
        near = cands & in_slot if rounded_serial(written) else {
            s for s in in_slot if OSA.distance(_fold(written), _fold(s)) <= 1}
        if len(near) == 1:
            (s,) = near
            return s, "serial_exact" if s == written else "serial_fuzzy"
    if len(cands) == 1:
        (s,) = cands
        return s, "serial_exact" if s == written else "serial_fuzzy"
    if by_slot and (not cands or by_slot in cands):
        return by_slot, "host_slot"
    return None, None


def link_frame(tickets: pl.DataFrame, inventory: pl.DataFrame, *, max_edits: int = 1,
               replace_window_days: float = 7.0, swap_ambiguity_days: float = 3.0) -> pl.DataFrame:
    """``tickets`` with ``serial`` and ``link_method`` filled in (see the module doc)."""
    index = SerialIndex([s for s in inventory["serial"].to_list() if s], max_edits)
    slots = SlotHistory(inventory)
    window = timedelta(days=replace_window_days)
    ambiguity = timedelta(days=swap_ambiguity_days)
    serials, methods = [], []
    cols = ["serial_text", "host", "slot", "opened_at", "part_code", "action_code"]
    for text, host, slot, when, part, action in tickets.select(cols).iter_rows():
        written = clean_serial(text)
        cands = index.candidates(written) if written else set()
        replaced = action == "REPLACE" and part in (None, "GPU")
        by_slot = slots.at(host, slot, when, replaced, window, ambiguity)
        serial, method = _choose(written, cands, slots.around(host, slot, when, window), by_slot)
        serials.append(serial)
        methods.append(method)
    return tickets.with_columns(pl.Series("serial", serials, pl.Utf8), pl.Series("link_method", methods, pl.Utf8))


def relink(wh, cfg) -> tuple[int, int, int]:
    """Link every ticket in the warehouse; returns (tickets, linked, unlinked that name a GPU)."""
    tickets = wh.pl('SELECT * FROM tickets ORDER BY service_point, ticket_id', step="read tickets")
    if tickets.height == 0:
        return 0, 0, 0
    inventory = wh.pl("SELECT serial, host, slot, installed_at, removed_at FROM inventory", step="read inventory")
    linked = link_frame(tickets, inventory, max_edits=cfg.link.serial_max_edits,
                        replace_window_days=cfg.link.replace_window_days,
                        swap_ambiguity_days=cfg.link.swap_ambiguity_days)
    with wh.transaction():
        wh.replace("tickets", linked)
    unlinked = linked.filter(pl.col("link_method").is_null())
    naming = unlinked.filter(pl.col("serial_text").is_not_null() | pl.col("slot").is_not_null()).height
    return linked.height, linked.height - unlinked.height, naming


def run(ctx) -> None:
    """Stage ``link``: fill in each ticket's inventory serial and how it was found."""
    n, linked, flagged = relink(ctx.wh, ctx.cfg)
    ctx.report("link").rows_out = linked
    if n - linked:
        text = f"{linked} of {n} tickets linked to an inventory GPU; {n - linked - flagged} name no GPU (no serial, no slot)"
        if flagged:
            text += (f"; {flagged} name one that could not be told for sure (unknown or ambiguous serial, "
                     "no host+slot match): unlinked, in no failure rate")
        ctx.note("link", text)
