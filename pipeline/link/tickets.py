"""Stage ``link``: each ticket to the inventory GPU it is about.

Reads: ``tickets_coded`` (serial as written, host, slot, opened_at, codes), ``inventory``,
``smi_hourly`` (through :mod:`pipeline.link.observed`). Writes: ``tickets`` (those rows with
``serial`` and ``link_method``), ``inventory_observed`` and ``inventory_stale``. Failure rates count only linked
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

The ticket is read as the field writes it first: the serial taken out in an export's
part-swap list (``removed_serial``) before the serial cell, and where neither is given a
serial written in its free text that is an inventory serial and not the one fitted
(``serial_in_text``); hosts as short names, FQDNs, in any case or as the address the
inventory's ``ip`` column gives (:func:`pipeline.vocab.hosts.host_key`); slots in words
or numbers of either language, from the slot cell or else the text
(:mod:`pipeline.link.slots`), shifted by the point's slot base (``link.slot_base``, else
detected from the point's serial-linked tickets). Where telemetry saw GPUs the registry
missed (:mod:`pipeline.link.observed`), slots are looked up in the reconciled inventory,
and a slot link found only through it is ``host_slot_observed``.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from datetime import datetime, timedelta

import polars as pl
from rapidfuzz.distance import OSA

from pipeline.vocab.hosts import host_key
from pipeline.ingest.tickets.columns import clean_serial, rounded_serial
from pipeline.link import observed
from pipeline.link.slots import detect_base, slot_in_text

log = logging.getLogger(__name__)

_CONFUSABLE = str.maketrans({"O": "0", "I": "1"})


def _fold(serial: str) -> str:
    return serial.upper().translate(_CONFUSABLE)


class HostNames:
    """A ticket's host as the inventory's host key: short name, FQDN, any case, or the
    address the inventory's ``ip`` column gives the host."""

    def __init__(self, inventory: pl.DataFrame):
        self._by_ip: dict[str, str] = {}
        if "ip" in inventory.columns:
            for host, ip in inventory.select("host", "ip").iter_rows():
                if host and ip:
                    self._by_ip[host_key(ip)] = host_key(host)

    def key(self, host: str | None) -> str | None:
        k = host_key(host) if host else None
        return self._by_ip.get(k, k) if k else None


#: Parts that have numbers of their own (fan 3, DIMM B2, drive #5): a number in their
#: ticket's text is not a GPU slot.
_NUMBERED_PARTS = {"FAN", "PSU", "DIMM", "STORAGE", "NIC", "CPU", "CABLE"}

_TEXTS = ("part_text", "symptom_text", "action_text")


def written_slot(slot: int | None, part: str | None, texts: list[str | None]) -> tuple[int | None, bool]:
    """The slot a ticket names as written (the point's own base), and whether it came from
    prose: its slot cell, else the one its symptom or action text names, unless the part
    has numbers of its own. The part text is not read for it: ``GPU #4`` or ``module3``
    there is as often a part's own number as a slot."""
    if slot is None and part not in _NUMBERED_PARTS:
        found = slot_in_text(" ".join(t for t in texts[1:] if t))
        return found, found is not None
    return slot, False


_SERIAL_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{5,}")
#: Words before a serial that make it the part fitted, not the one at fault.
_FITTED_BEFORE = re.compile(r"(?:\bnew|replacement|spare|fitted|installed|->|→|\bto\b|新|换上|更换为|替换为)"
                            r"[^0-9]{0,12}$", re.I)


def serials_in_text(texts: list[str | None], known: set[str]) -> set[str]:
    """Inventory serials written in free text, except those written as the part fitted
    (``new SN 1650...``, ``新SN 1650...``)."""
    out: set[str] = set()
    for text in texts:
        for m in _SERIAL_TOKEN.finditer(text or ""):
            tok = clean_serial(m.group(0))
            if tok in known and not _FITTED_BEFORE.search(text[max(0, m.start() - 24):m.start()]):
                out.add(tok)
    return out


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
    """Which GPU sat in a host's slot when: inventory rows by (host key, slot); the
    methods take the host key (:class:`HostNames`)."""

    def __init__(self, inventory: pl.DataFrame):
        self._by_slot: dict[tuple[str, int], list[tuple[datetime | None, datetime | None, str]]] = defaultdict(list)
        self._starts: dict[str, list[datetime | None]] = defaultdict(list)
        self._slots_of: dict[str, set[int]] = defaultdict(set)
        for serial, host, slot, start, end in inventory.select(
            "serial", "host", "slot", "installed_at", "removed_at"
        ).iter_rows():
            if host and slot is not None:
                self._by_slot[(host_key(host), int(slot))].append((start, end, serial))
                self._slots_of[host_key(host)].add(int(slot))
            self._starts[serial].append(start)

    def around(self, host: str | None, slot: int | None, when: datetime | None, window: timedelta) -> set[str]:
        """Every GPU in ``host``/``slot`` at ``when`` or taken out within ``window`` before it
        (any time if ``when`` is None). A GPU installed after the ticket was opened cannot be
        what it is about, even when its serial is one typo from the one written."""
        rows = self._by_slot.get((host, slot)) if host and slot is not None else None
        if not rows:
            return set()
        if when is None:
            return {s for _, _, s in rows}
        return {s for start, end, s in rows if (start is None or start <= when) and (end is None or end >= when - window)}

    def removed_near(self, host: str | None, when: datetime | None, window: timedelta) -> set[int]:
        """The slots of ``host`` whose GPU was taken out within ``window`` of ``when``."""
        if not host or when is None:
            return set()
        return {slot for slot in self._slots_of.get(host, ()) for _, end, _ in self._by_slot[(host, slot)]
                if end is not None and abs(end - when) <= window}

    def installed_after(self, serial: str, when: datetime | None) -> bool:
        """True when every listed install of ``serial`` is after ``when``: a ticket opened
        before a GPU was fitted is not about it."""
        starts = self._starts.get(serial)
        return bool(when is not None and starts and all(s is not None and s > when for s in starts))

    def at(self, host: str | None, slot: int | None, when: datetime | None, replaced: bool,
           window: timedelta, ambiguity: timedelta) -> str | None:
        """The GPU in ``host``/``slot`` at ``when``; for a replacement, the one removed
        within ``window`` of ``when`` (nearest), if any. None when unknown or not unique."""
        rows = self._by_slot.get((host, slot)) if host and slot is not None else None
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


def _choose(written: str | None, cands: set[str], in_slot: set[str], by_slot: str | None,
            slot_sure: bool = True) -> tuple[str | None, str | None]:
    """The GPU a ticket is about, and how it was found, from its serial's candidates, the GPUs
    that sat in its slot around its time, and the slot's GPU at its time (``slot_sure``:
    the point's slot base is known, not assumed)."""
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
        if slot_sure and s != written and in_slot and by_slot and s not in in_slot:
            # A serial one typo from a GPU that was never in the ticket's slot: the slot,
            # written exactly, outweighs a serial that was not.
            return by_slot, "host_slot"
        return s, "serial_exact" if s == written else "serial_fuzzy"
    if by_slot and (not cands or by_slot in cands):
        return by_slot, "host_slot"
    return None, None


def slot_bases(tickets: pl.DataFrame, inventory: pl.DataFrame, index: SerialIndex, hosts: HostNames,
               configured: dict[str, int] | None = None, slots: SlotHistory | None = None,
               window: timedelta = timedelta(days=7), unsure: set[str] | None = None) -> dict[str, int]:
    """Each service point's slot base: configured, else detected (:func:`detect_base`)
    from its tickets whose serial names exactly one GPU listed in the ticket's host, and
    its GPU replacements near which exactly one slot of the host had its GPU taken out;
    else 0, and the point is added to ``unsure``."""
    configured = configured or {}
    place: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for serial, host, slot in inventory.select("serial", "host", "slot").iter_rows():
        if serial and host and slot is not None:
            place[serial].add((host_key(host), int(slot)))
    pairs: dict[str, list[tuple[int, int]]] = defaultdict(list)
    written: dict[str, list[int]] = defaultdict(list)
    for point, text, removed, host, slot, when, part, action, *texts in tickets.select(
            "service_point", "serial_text", "removed_serial", "host", "slot", "opened_at", "part_code",
            "action_code", *_TEXTS).iter_rows():
        slot, _ = written_slot(slot, part, texts)
        if slot is None:
            continue
        written[point].append(slot)
        hk = hosts.key(host)
        cands = index.candidates(clean_serial(removed) or clean_serial(text) or "") if (removed or text) else set()
        if len(cands) == 1:
            (s,) = cands
            listed = {sl for h, sl in place.get(s, ()) if h == hk}
            if len(listed) == 1:
                pairs[point].append((slot, listed.pop()))
                continue
        if slots is not None and action == "REPLACE" and part in (None, "GPU"):
            near = slots.removed_near(hk, when, window)
            if len(near) == 1:
                pairs[point].append((slot, near.pop()))
    inv_slots = inventory["slot"].drop_nulls()
    top = int(inv_slots.max()) if inv_slots.len() else None
    out = {}
    for point in set(written) | set(configured):
        base = configured.get(point)
        if base is None:
            base = detect_base(pairs.get(point, []), written.get(point, []), top)
            if base is None:
                base = 0
                if unsure is not None:
                    unsure.add(point)
            log.info("link: service point %s counts slots from %d (%d serial-linked tickets compared)",
                     point, base, len(pairs.get(point, [])))
        out[point] = base
    return out


def link_frame(tickets: pl.DataFrame, inventory: pl.DataFrame, *, max_edits: int = 1,
               replace_window_days: float = 7.0, swap_ambiguity_days: float = 3.0,
               slot_base: dict[str, int] | None = None, unsure: set[str] | None = None) -> pl.DataFrame:
    """``tickets`` with ``serial`` and ``link_method`` filled in (see the module doc).

    ``inventory`` may be the reconciled inventory (:mod:`pipeline.link.observed`): rows whose
    ``source`` is not ``inventory`` come from telemetry, and a slot link through one of
    them is ``host_slot_observed``. Points whose slot base was taken as 0 for want of
    evidence are added to ``unsure``.
    """
    for c in ("service_point", "removed_serial", "installed_serial", "part_text", "symptom_text", "action_text"):
        if c not in tickets.columns:  # optional: a bare frame of serials and slots links too
            tickets = tickets.with_columns(pl.lit(None, pl.Utf8).alias(c))
    known = [s for s in inventory["serial"].to_list() if s]
    index = SerialIndex(known, max_edits)
    hosts = HostNames(inventory)
    slots = SlotHistory(inventory)
    seen_only = set()
    if "source" in inventory.columns:
        seen_only = set(inventory.filter(pl.col("source") != "inventory")["serial"].to_list())
    window = timedelta(days=replace_window_days)
    guessed: set[str] = set()
    bases = slot_bases(tickets, inventory, index, hosts, slot_base, slots, window, guessed)
    if unsure is not None:
        unsure |= guessed
    ambiguity = timedelta(days=swap_ambiguity_days)
    serials, methods = [], []
    cols = ["service_point", "serial_text", "removed_serial", "installed_serial", "host", "slot", "opened_at",
            "part_code", "action_code", *_TEXTS]
    for point, text, removed, fitted, host, slot, when, part, action, *texts in tickets.select(cols).iter_rows():
        written = clean_serial(removed) or clean_serial(text)
        fitted = clean_serial(fitted)
        in_text = False
        if written is None:
            found = serials_in_text(texts, index.serials) - {fitted}
            if len(found) == 1:
                (written,) = found
                in_text = True
        cands = (index.candidates(written) - {fitted}) if written else set()
        if in_text:  # a serial met in prose: not one fitted after the ticket was opened
            cands = {c for c in cands if not slots.installed_after(c, when)}
            written = written if cands else None
        slot, in_prose = written_slot(slot, part, texts)
        if slot is not None:
            slot -= bases.get(point, 0)
        hk = hosts.key(host)
        replaced = action == "REPLACE" and part in (None, "GPU")
        by_slot = slots.at(hk, slot, when, replaced, window, ambiguity)
        # A slot met in prose links a ticket that has no serial, but never outweighs one.
        in_slot = set() if in_prose else slots.around(hk, slot, when, window)
        serial, method = _choose(written, cands, in_slot, by_slot, slot_sure=point not in guessed and not in_prose)
        if method == "serial_exact" and in_text:
            method = "serial_in_text"
        elif method == "host_slot" and serial in seen_only:
            method = "host_slot_observed"
        serials.append(serial)
        methods.append(method)
    return tickets.with_columns(pl.Series("serial", serials, pl.Utf8), pl.Series("link_method", methods, pl.Utf8))


def relink(wh, cfg, unsure: set[str] | None = None) -> tuple[int, int, int]:
    """Link every coded ticket (``tickets_coded``) and write ``tickets``; returns (tickets,
    linked, unlinked that name a GPU). Points linked by slot whose slot base their tickets
    did not show are added to ``unsure``."""
    tickets = wh.engine.pl("SELECT * FROM tickets_coded ORDER BY service_point, ticket_id", step="read coded tickets")
    if tickets.height == 0:
        with wh.transaction():
            wh.clear("tickets")
        return 0, 0, 0
    guessed: set[str] = set()
    if observed.observed_exists(wh):
        inventory = wh.engine.pl(f"SELECT r.*, i.ip FROM ({observed.reconciled_inventory_sql()}) r "
                                 "LEFT JOIN (SELECT host, any_value(ip) AS ip FROM inventory GROUP BY host) i USING (host)",
                                 step="read reconciled inventory")
    else:
        inventory = wh.engine.pl("SELECT serial, host, slot, installed_at, removed_at, ip FROM inventory",
                                 step="read inventory")
    linked = link_frame(tickets, inventory, max_edits=cfg.link.serial_max_edits,
                        replace_window_days=cfg.link.replace_window_days,
                        swap_ambiguity_days=cfg.link.swap_ambiguity_days, slot_base=cfg.link.slot_base,
                        unsure=guessed)
    if unsure is not None:
        by_slot = set(linked.filter(pl.col("link_method").str.starts_with("host_slot"))["service_point"].to_list())
        unsure |= guessed & by_slot
    with wh.transaction():
        wh.replace("tickets", linked)
    unlinked = linked.filter(pl.col("link_method").is_null())
    naming = unlinked.filter(pl.col("serial_text").is_not_null() | pl.col("slot").is_not_null()).height
    return linked.height, linked.height - unlinked.height, naming


def run(ctx) -> None:
    """Stage ``link``: reconcile the inventory with the telemetry, then fill in each
    ticket's inventory serial and how it was found."""
    observed.run(ctx)
    unsure: set[str] = set()
    n, linked, flagged = relink(ctx.wh, ctx.cfg, unsure)
    if unsure:
        ctx.note("link", f"slots of {', '.join(sorted(unsure))} read as counted from 0 (nvidia-smi's index): "
                         "none of their tickets showed it; set link.slot_base.<point> = 1 where people count from 1")
    ctx.report("link").rows_out = linked
    if n - linked:
        text = f"{linked} of {n} tickets linked to an inventory GPU; {n - linked - flagged} name no GPU (no serial, no slot)"
        if flagged:
            text += (f"; {flagged} name one that could not be told for sure (unknown or ambiguous serial, "
                     "no host+slot match): unlinked, in no failure rate")
        ctx.note("link", text)
